//! Classic-protocol members in a consumer group, and the online migration between the two group
//! kinds (KIP-848's `group.consumer.migration.policy`), as Apache Kafka 4.4 does them:
//! - **Upgrade:** a ConsumerGroupHeartbeat joining a classic group whose members use the
//!   embedded consumer protocol turns it into a consumer group ([`ConsumerGroup::from_classic`]):
//!   the classic generation becomes the group epoch, and every member keeps what it was assigned,
//!   as its current and target assignment, at that epoch.
//! - **Classic members** of a consumer group speak JoinGroup, SyncGroup and Heartbeat
//!   ([`ConsumerGroup::handle_classic_join`] and the two after it). Their generation is their
//!   member epoch; a JoinGroup is their heartbeat with a subscription (what they own travels in
//!   it, KIP-429's owned partitions), and reconciles them towards their target exactly as a
//!   consumer-protocol heartbeat does; SyncGroup hands out what they hold; Heartbeat tells them
//!   to join again (REBALANCE_IN_PROGRESS) whenever a JoinGroup would move them on.
//! - **Downgrade:** when the last consumer-protocol member leaves and only classic members remain,
//!   the group becomes a classic group again ([`ConsumerGroup::take_downgrade`]): the group
//!   epoch as its generation, their target assignments as their assignments, and a rebalance
//!   starts at once.

use std::collections::BTreeMap;

#[cfg(test)]
#[path = "classic_tests.rs"]
mod tests;

use super::{ConsumerGroup, ConsumerGroupConfig, ConsumerTimer, Refusal, TopicImage};
use crate::assignor::protocol::{decode_assignment, decode_subscription, encode_assignment};
use crate::group::{ClassicGroup, Heartbeat, JoinGroup, JoinReply, Member, SyncGroup, SyncReply};
use crate::vocab::{
    ClassicMemberMetadata, ConsumerMember, ConsumerMemberState, Generation, GroupError, InstanceId,
    MemberId, Partitions, Protocol, Timestamp,
};

/// The protocol type of the embedded consumer protocol.
const CONSUMER_PROTOCOL: &str = "consumer";

/// A consumer group turned classic: its group epoch and the members that remain.
#[derive(Debug, Clone)]
pub struct Downgrade {
    pub generation: Generation,
    pub members: Vec<Member>,
}

/// `group.consumer.migration.policy`: which online conversions between classic and consumer
/// groups are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// Kafka's names, case-insensitive.
    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MigrationPolicy::Bidirectional => "bidirectional",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Disabled => "disabled",
        }
    }

    fn upgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    fn downgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

impl ConsumerGroup {
    // -----------------------------------------------------------------------------------------
    // Upgrade
    // -----------------------------------------------------------------------------------------

    /// Kafka's `validateOnlineUpgrade`: a non-empty classic group may become a consumer group if
    /// the policy allows it, its members use the embedded consumer protocol and they fit.
    pub fn can_upgrade(classic: &ClassicGroup, config: &ConsumerGroupConfig) -> bool {
        config.migration.upgrades()
            && classic.protocol_type() == Some(CONSUMER_PROTOCOL)
            && classic.num_members() <= config.max_size
    }

    /// A consumer group made of a classic group's members (Kafka's `fromClassicGroup`): the
    /// generation is the group and assignment epoch, and every member is Stable at it with what
    /// it was assigned (nothing, if it never synced) as its current and target assignment.
    /// Every record of the new group is queued, after which the caller goes on with the
    /// heartbeat that triggered the upgrade.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND when a member's subscription or assignment does not parse;
    /// UNSUPPORTED_VERSION when an assignment carries user data (a custom assignor's, which
    /// would be lost).
    pub fn from_classic(
        classic: &ClassicGroup,
        config: std::sync::Arc<ConsumerGroupConfig>,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> Result<ConsumerGroup, Refusal> {
        let malformed = || {
            Refusal::new(
                GroupError::GroupIdNotFound,
                format!(
                    "Cannot upgrade the classic group {} to consumer group because the embedded \
                     consumer protocol is malformed.",
                    classic.id()
                ),
            )
        };
        let generation = classic.generation().0;
        let mut group = ConsumerGroup::new(classic.id().clone(), config);
        group.base.group_epoch = generation;
        group.base.assignment_epoch = generation;
        for m in classic.members() {
            let metadata = match classic.protocol_name() {
                Some(name) => m.metadata(name),
                None => m
                    .protocols
                    .first()
                    .map(|p| p.metadata.clone())
                    .unwrap_or_default(),
            };
            let subscription = decode_subscription(&metadata).map_err(|_| malformed())?;
            let assigned = if m.assignment.is_empty() {
                Partitions::new()
            } else {
                let (partitions, user_data) =
                    decode_assignment(&m.assignment).map_err(|_| malformed())?;
                if user_data.is_some_and(|u| !u.is_empty()) {
                    return Err(Refusal::new(
                        GroupError::UnsupportedVersion,
                        "userData from a custom assignor would be lost",
                    ));
                }
                by_id(&partitions, image)
            };
            let mut names = subscription.topics;
            names.sort();
            names.dedup();
            let member = ConsumerMember {
                instance_id: m.instance_id.clone(),
                rack_id: subscription.rack,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: i32::try_from(m.rebalance_timeout_ms).unwrap_or(i32::MAX),
                subscribed_topic_names: names,
                member_epoch: generation,
                previous_member_epoch: generation,
                state: ConsumerMemberState::Stable,
                target: assigned.clone(),
                assigned,
                classic: Some(ClassicMemberMetadata {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.clone(),
                }),
                ..ConsumerMember::new(m.id.clone())
            };
            group.base.timers.set(
                ConsumerTimer::Session(member.member_id.clone()),
                now.plus_ms(m.session_timeout_ms),
            );
            group.put_member(member);
        }
        group.base.records = group.snapshot();
        Ok(group)
    }

    // -----------------------------------------------------------------------------------------
    // JoinGroup, SyncGroup, Heartbeat
    // -----------------------------------------------------------------------------------------

    /// A JoinGroup (Kafka's `classicGroupJoinToConsumerGroup`): creates or updates the classic
    /// member from its subscription, computes a new target if the group epoch moved, and
    /// reconciles the member with what its subscription says it owns. The reply carries its
    /// member epoch as the generation and no leader: the member syncs as a follower.
    ///
    /// Errors (and MEMBER_ID_REQUIRED) are replies too, with the member id Kafka gives them.
    pub fn handle_classic_join(
        &mut self,
        req: &JoinGroup,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> JoinReply {
        match self.classic_join(req, image, now) {
            Ok(reply) => reply,
            Err(error) => JoinReply::error(error, MemberId::unknown()),
        }
    }

    fn classic_join(
        &mut self,
        req: &JoinGroup,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> Result<JoinReply, GroupError> {
        let unknown = req.member_id.as_str().is_empty();
        let member_id = if unknown {
            MemberId::new(req.member_id_nonce.clone())
        } else {
            req.member_id.clone()
        };
        if self.base.members.len() >= self.config.max_size
            && !self.base.members.contains_key(&member_id)
        {
            return Err(GroupError::GroupMaxSizeReached);
        }
        if !self.supports_classic_protocols(&req.protocol_type, &req.protocols) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        // KIP-394 (v4+): a dynamic member without an id is given one to join with.
        if unknown && req.instance_id.is_none() && req.require_known_member_id {
            return Ok(JoinReply::error(GroupError::MemberIdRequired, member_id));
        }
        // Every protocol of a consumer member carries the same subscription; the first is read.
        let subscription = decode_subscription(&req.protocols[0].metadata)
            .map_err(|_| GroupError::InconsistentGroupProtocol)?;

        let mut replaced = None;
        let member = match &req.instance_id {
            None => self
                .base
                .members
                .get(&member_id)
                .cloned()
                .unwrap_or_else(|| ConsumerMember::new(member_id.clone())),
            Some(instance) => {
                let existing = self
                    .base
                    .static_members
                    .get(instance)
                    .and_then(|id| self.base.members.get(id));
                match existing {
                    None if unknown => ConsumerMember::new(member_id.clone()),
                    None => return Err(GroupError::UnknownMemberId),
                    // A new instance takes the old one's place (no release needed in classic).
                    Some(old) if unknown => {
                        replaced = Some(old.member_id.clone());
                        super::taken_over(old, &member_id)
                    }
                    Some(old) if old.member_id != member_id => {
                        return Err(GroupError::FencedInstanceId)
                    }
                    Some(old) => old.clone(),
                }
            }
        };
        if let Some(old) = replaced {
            self.remove_member(&old);
            self.base
                .records
                .push(super::ConsumerRecord::RemoveMember(old));
        }
        let is_new = !self.base.members.contains_key(&member_id);
        if is_new {
            self.base.events.push(super::ConsumerEvent::Joined {
                member: member_id.clone(),
                instance: req.instance_id.clone(),
            });
        }

        // 1. The member, updated from the request.
        let mut names = subscription.topics.clone();
        names.sort();
        names.dedup();
        let mut updated = member.clone();
        if req.instance_id.is_some() {
            updated.instance_id = req.instance_id.clone();
        }
        if subscription.rack.is_some() {
            updated.rack_id = subscription.rack.clone();
        }
        updated.rebalance_timeout_ms = i32::try_from(req.rebalance_timeout_ms).unwrap_or(i32::MAX);
        updated.subscribed_topic_names = names;
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        updated.classic = Some(ClassicMemberMetadata {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
        });
        let subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
            || updated.subscribed_topic_regex != member.subscribed_topic_regex;
        if is_new || updated != member {
            self.put_member(updated);
            self.persist_member(&member_id);
        }
        self.bump_if_changed(&member_id, subscription_changed, image);

        // 2. A new target assignment when the group epoch is ahead of it.
        if self.base.group_epoch > self.base.assignment_epoch {
            self.compute_target(image, now);
        }

        // 3. The member towards its target, with what it says it owns.
        let owned = by_id(&subscription.owned_partitions, image);
        self.reconcile_member(&member_id, Some(&owned), now);
        self.base
            .timers
            .cancel(&ConsumerTimer::ClassicJoin(member_id.clone()));
        self.base.timers.set(
            ConsumerTimer::Session(member_id.clone()),
            now.plus_ms(req.session_timeout_ms),
        );
        self.base.timers.set(
            ConsumerTimer::ClassicSync(member_id.clone()),
            now.plus_ms(req.rebalance_timeout_ms),
        );
        let m = &self.base.members[&member_id];
        Ok(JoinReply {
            error: None,
            generation: Generation(m.member_epoch),
            protocol_type: Some(CONSUMER_PROTOCOL.to_string()),
            protocol_name: Some(req.protocols[0].name.clone()),
            leader: MemberId::unknown(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        })
    }

    /// A SyncGroup (Kafka's `classicGroupSyncToConsumerGroup`): the member's assignment as it
    /// holds it now, encoded at the version of its subscription.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID (also for a consumer-protocol member), FENCED_INSTANCE_ID,
    /// ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS (the group moved
    /// on since its JoinGroup: it must join again).
    pub fn handle_classic_sync(
        &mut self,
        req: &SyncGroup,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> Result<SyncReply, GroupError> {
        let m = self.classic_member(&req.member_id, req.instance_id.as_ref())?;
        if req.generation.0 != m.member_epoch {
            return Err(GroupError::IllegalGeneration);
        }
        let classic = m.classic.as_ref().expect("a classic member");
        let first = &classic.protocols[0];
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL)
            || req
                .protocol_name
                .as_deref()
                .is_some_and(|n| n != first.name)
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let session = classic.session_timeout_ms;
        let version = decode_subscription(&first.metadata)
            .map(|s| s.assignment_version())
            .unwrap_or(0);
        let assignment = encode_assignment(&by_name(&m.assigned, image), None, version);
        self.must_rejoin_unless_revoking(&req.member_id, now)?;
        self.base
            .timers
            .cancel(&ConsumerTimer::ClassicSync(req.member_id.clone()));
        self.base.timers.set(
            ConsumerTimer::Session(req.member_id.clone()),
            now.plus_ms(session),
        );
        Ok(SyncReply {
            error: None,
            protocol_type: req.protocol_type.clone(),
            protocol_name: req.protocol_name.clone(),
            assignment,
        })
    }

    /// A Heartbeat (Kafka's `classicGroupHeartbeatToConsumerGroup`): renews the session, and
    /// answers REBALANCE_IN_PROGRESS when a JoinGroup would move the member on: the group epoch
    /// moved, it has partitions to revoke, or the partitions it waits for are free.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS.
    pub fn handle_classic_heartbeat(
        &mut self,
        req: &Heartbeat,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        let m = self.classic_member(&req.member_id, req.instance_id.as_ref())?;
        if req.generation.0 != m.member_epoch {
            return Err(GroupError::IllegalGeneration);
        }
        let session = m.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
        let rejoin = m.member_epoch < self.base.group_epoch
            || m.state == ConsumerMemberState::UnrevokedPartitions
            || (m.state == ConsumerMemberState::UnreleasedPartitions
                && !self.waits_on_unreleased(m));
        let rebalance_timeout = m.rebalance_timeout_ms;
        self.base.timers.set(
            ConsumerTimer::Session(req.member_id.clone()),
            now.plus_ms(session),
        );
        if rejoin {
            self.arm_join_timeout(&req.member_id, rebalance_timeout, now);
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Kafka's `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`.
    fn classic_member(
        &self,
        member_id: &MemberId,
        instance: Option<&InstanceId>,
    ) -> Result<&ConsumerMember, GroupError> {
        let m = match instance {
            None => self.base.members.get(member_id),
            Some(instance) => {
                let id = self
                    .base
                    .static_members
                    .get(instance)
                    .ok_or(GroupError::UnknownMemberId)?;
                if id != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                self.base.members.get(id)
            }
        }
        .ok_or(GroupError::UnknownMemberId)?;
        if m.classic.is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(m)
    }

    /// Kafka's `throwIfRebalanceInProgress`: a member behind the group epoch must join again,
    /// unless it is revoking (its epoch moves once it has).
    fn must_rejoin_unless_revoking(
        &mut self,
        member_id: &MemberId,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        let m = &self.base.members[member_id];
        if self.base.group_epoch > m.member_epoch
            && m.state != ConsumerMemberState::UnrevokedPartitions
        {
            let timeout = m.rebalance_timeout_ms;
            self.arm_join_timeout(member_id, timeout, now);
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// The member must send JoinGroup within its rebalance timeout, or it is fenced (armed once
    /// per request to rejoin, as Kafka's `scheduleConsumerGroupJoinTimeoutIfAbsent`).
    fn arm_join_timeout(
        &mut self,
        member_id: &MemberId,
        rebalance_timeout_ms: i32,
        now: Timestamp,
    ) {
        let key = ConsumerTimer::ClassicJoin(member_id.clone());
        if self.base.timers.deadline(&key).is_none() {
            let timeout = u64::try_from(rebalance_timeout_ms).unwrap_or(0);
            self.base.timers.set(key, now.plus_ms(timeout));
        }
    }

    /// Kafka's `waitingOnUnreleasedPartition`: some partition of its target is still held by
    /// another member.
    fn waits_on_unreleased(&self, m: &ConsumerMember) -> bool {
        m.target.iter().any(|(topic, parts)| {
            parts.iter().any(|p| {
                m.assigned
                    .get(topic)
                    .is_none_or(|a| a.binary_search(p).is_err())
                    && self.holders.contains_key(&(*topic, *p))
            })
        })
    }

    /// Kafka's `supportsClassicProtocols`: the consumer protocol type, and a protocol every
    /// classic member offers (any protocol at all when there is none).
    fn supports_classic_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if protocol_type != CONSUMER_PROTOCOL || protocols.is_empty() {
            return false;
        }
        let classic: Vec<&ClassicMemberMetadata> = self
            .base
            .members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .collect();
        protocols.iter().any(|p| {
            classic
                .iter()
                .all(|c| c.protocols.iter().any(|q| q.name == p.name))
        })
    }

    // -----------------------------------------------------------------------------------------
    // Downgrade
    // -----------------------------------------------------------------------------------------

    /// Kafka's `validateOnlineDowngradeWithFencedMember`: `leaving` is the last member on the
    /// consumer protocol, others remain, the policy allows it and they fit a classic group.
    pub(super) fn can_downgrade_without(&self, leaving: &MemberId) -> bool {
        let Some(m) = self.base.members.get(leaving) else {
            return false;
        };
        !m.uses_classic_protocol()
            && self.base.members.len() > 1
            && self
                .base
                .members
                .values()
                .filter(|o| o.member_id != *leaving)
                .all(|o| o.uses_classic_protocol())
            && self.config.migration.downgrades()
            && self.base.members.len() - 1 <= self.config.classic_max_size
    }

    /// The members other than `leaving` as members of a classic group (Kafka's
    /// `fromConsumerGroup`): each with the protocols it offered and its target assignment,
    /// encoded at the version of its first protocol's subscription.
    pub(super) fn classic_members(
        &self,
        leaving: &MemberId,
        image: &dyn TopicImage,
    ) -> Vec<Member> {
        self.base
            .members
            .values()
            .filter(|m| m.member_id != *leaving)
            .map(|m| {
                let (session_timeout_ms, protocols) = m
                    .classic
                    .as_ref()
                    .map(|c| (c.session_timeout_ms, c.protocols.clone()))
                    .unwrap_or_default();
                let version = protocols
                    .first()
                    .and_then(|p| decode_subscription(&p.metadata).ok())
                    .map_or(0, |s| s.assignment_version());
                Member {
                    id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: u64::try_from(m.rebalance_timeout_ms).unwrap_or(0),
                    session_timeout_ms,
                    protocols,
                    assignment: encode_assignment(&by_name(&m.target, image), None, version),
                    awaiting_join: None,
                    awaiting_sync: None,
                    is_new: false,
                }
            })
            .collect()
    }

    /// The classic group this group became, once: the caller replaces this group with
    /// [`ClassicGroup::from_consumer_group`] of it (this group's queued records are moot).
    pub fn take_downgrade(&mut self) -> Option<Downgrade> {
        self.downgrade.take()
    }
}

/// Partitions by topic name as partitions by topic id; topics that do not exist are left out.
fn by_id(partitions: &[(String, Vec<i32>)], image: &dyn TopicImage) -> Partitions {
    let mut out = Partitions::new();
    for (name, parts) in partitions {
        if let Some((id, _)) = image.topic(name) {
            let list = out.entry(id).or_default();
            list.extend(parts.iter().copied());
            list.sort_unstable();
            list.dedup();
        }
    }
    out
}

/// Partitions by topic id as partitions by name, sorted by name; deleted topics are left out.
fn by_name(partitions: &Partitions, image: &dyn TopicImage) -> Vec<(String, Vec<i32>)> {
    let named: BTreeMap<String, Vec<i32>> = partitions
        .iter()
        .filter_map(|(id, parts)| image.name_of(*id).map(|n| (n, parts.clone())))
        .collect();
    named.into_iter().collect()
}
