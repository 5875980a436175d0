//! The consumer group of KIP-848 (ConsumerGroupHeartbeat): the coordinator assigns, and every
//! member reconciles towards its target one heartbeat at a time. A pure state machine in the
//! same discipline as [`crate::group::ClassicGroup`]: inputs take `now` (and a read-only
//! [`TopicImage`]), answers are returned, records to persist and events to log are drained
//! with [`ConsumerGroup::take_records`] and [`ConsumerGroup::take_events`], and timers are
//! re-checked when they fire.
//!
//! Followed check by check from Apache Kafka's `GroupMetadataManager.consumerGroupHeartbeat`,
//! `ConsumerGroup` and `CurrentAssignmentBuilder` ([`reconcile`]):
//! 1. the member is created or updated; a changed subscription, or a change in the subscribed
//!    topics (created, deleted, more partitions), bumps the group epoch;
//! 2. when the group epoch is ahead of the target assignment's, the group's assignor computes a
//!    new target for every member (the [`Assignor`] seam the classic groups use: `uniform`,
//!    `range`, `learner`, ...);
//! 3. the member moves towards its target: what it must give up is revoked first (it stays at
//!    its epoch until its heartbeat no longer reports it), and a partition is granted only when
//!    no other member holds it.
//!
//! Timers: each member's session (`group.consumer.session.timeout.ms`, renewed by its
//! heartbeats), the rebalance timeout of a member that must revoke, and the assignor's follow-up
//! (a learner is ready): the first two fence the member, the last bumps the group epoch.
//!
//! Where this differs from Kafka, on purpose: the target assignment is computed in the
//! heartbeat that needs it (Kafka 4.x may defer it by `group.consumer.assignment.interval.ms`);
//! regular expressions are resolved when the topic image changes, within the heartbeat
//! (Kafka resolves them in the background), with Rust's `regex` syntax, which accepts what
//! RE2/J accepts for topic patterns (no look-around or back-references in either).

pub mod classic;
pub mod codec;
pub mod reconcile;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;

pub use self::classic::{Downgrade, MigrationPolicy};
use self::reconcile::{reconcile, Holders};
use crate::assignor::{Assignor, GroupSpec, MemberSpec, Partition, PlanInput, TopicSpec};
pub use crate::group::modern::Refusal;
use crate::group::modern::{Modern, ModernMember};
use crate::group::timers::TimerTable;
use crate::vocab::{
    ConsumerGroupRecord, ConsumerMember, ConsumerMemberState, GroupError, GroupId, InstanceId,
    MemberId, Partitions, Timestamp, TopicId,
};

/// `ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH`.
pub const LEAVE_EPOCH: i32 = -1;
/// `ConsumerGroupHeartbeatRequest.LEAVE_GROUP_STATIC_MEMBER_EPOCH`: a static member leaves for
/// now and keeps its partitions until its session expires.
pub const LEAVE_STATIC_EPOCH: i32 = -2;

// The topics a group can see, defined with what the shell asks of any group.
pub use super::core::TopicImage;

/// The settings of consumer groups (Kafka's `group.consumer.*`).
#[derive(Debug, Clone)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.heartbeat.interval.ms` (5000).
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms` (45000).
    pub session_timeout_ms: u64,
    /// `group.consumer.max.size` (unlimited).
    pub max_size: usize,
    /// `group.consumer.assignors`: the first is used unless members name another.
    pub assignors: Vec<Arc<dyn Assignor>>,
    /// `group.consumer.migration.policy` (bidirectional).
    pub migration: MigrationPolicy,
    /// `group.max.size`: a downgraded group must fit a classic group.
    pub classic_max_size: usize,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        let registry = crate::assignor::Registry::builtin();
        ConsumerGroupConfig {
            heartbeat_interval_ms: 5000,
            session_timeout_ms: 45_000,
            max_size: i32::MAX as usize,
            assignors: ["uniform", "range"]
                .iter()
                .filter_map(|n| registry.get(n))
                .collect(),
            migration: MigrationPolicy::default(),
            classic_max_size: i32::MAX as usize,
        }
    }
}

impl ConsumerGroupConfig {
    fn assignor(&self, name: &str) -> Option<&Arc<dyn Assignor>> {
        self.assignors.iter().find(|a| a.name() == name)
    }
}

/// A ConsumerGroupHeartbeat (API key 68) in domain terms; `None` fields were null (unchanged).
#[derive(Debug, Clone, Default)]
pub struct ConsumerHeartbeat {
    /// Never empty: the shell draws one for a v0 member that sent none.
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub instance_id: Option<InstanceId>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member holds; `None` when unchanged.
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
    /// The topics the member's principal may DESCRIBE, when an authorizer is on (`None`: every
    /// topic). A regular expression resolved at this heartbeat matches only those.
    pub describable: Option<TopicFilter>,
}

/// Which topic names a principal may DESCRIBE: the shell's question to its authorizer, asked
/// when the group resolves its regular expressions. Kafka 4.x resolves them with the ACLs of the
/// member whose heartbeat triggered the resolution and leaves out the topics it may not
/// describe (KAFKA-18813); so does koord, whenever the subscriptions or the topics change.
#[derive(Clone)]
pub struct TopicFilter(pub Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for TopicFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TopicFilter")
    }
}

/// The answer to a heartbeat that was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatReply {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment, when it changed or the request was a full one.
    pub assignment: Option<Partitions>,
}

/// A change to persist, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    Group(ConsumerGroupRecord),
    Member(Box<ConsumerMember>),
    RemoveMember(MemberId),
}

/// Kafka's `ConsumerGroupState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerGroupState {
    Empty,
    /// The group epoch is ahead of the target assignment's.
    Assigning,
    /// Some member has not reached the target yet.
    Reconciling,
    Stable,
    /// Deleted.
    Dead,
}

impl ConsumerGroupState {
    /// Kafka's spelling (ListGroups, DescribeGroups); ConsumerGroupDescribe uses the lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
            ConsumerGroupState::Dead => "Dead",
        }
    }
}

/// What a consumer group's timer is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConsumerTimer {
    Session(MemberId),
    /// The member must have revoked by then, or it is fenced (if still at this epoch).
    Revocation(MemberId, i32),
    /// The assignor asked for a new target assignment.
    FollowUp,
    /// A classic-protocol member told to join again must have sent JoinGroup by then.
    ClassicJoin(MemberId),
    /// A classic-protocol member must have sent SyncGroup by then after its JoinGroup.
    ClassicSync(MemberId),
}

/// What happened, for the shell to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerEvent {
    Joined {
        member: MemberId,
        instance: Option<InstanceId>,
    },
    Left {
        member: MemberId,
        why: &'static str,
    },
    EpochBumped {
        epoch: i32,
        why: &'static str,
    },
    TargetComputed {
        epoch: i32,
        assignor: &'static str,
        summary: Option<String>,
    },
}

/// A consumer group.
#[derive(Debug)]
pub struct ConsumerGroup {
    /// The id, epochs, members, timers, records and events, as every modern kind has them.
    base: Modern<ConsumerMember, ConsumerRecord, ConsumerEvent, ConsumerTimer>,
    config: Arc<ConsumerGroupConfig>,
    holders: Holders,
    metadata_hash: u64,
    /// The topic image version the hash was last checked against (none after a load).
    image_version: Option<u64>,
    /// The DESCRIBE filter of the heartbeat that last resolved the regular expressions
    /// (`None`: every topic, no authorizer or none since a load).
    regex_filter: Option<TopicFilter>,
    assignor_state: Bytes,
    /// The assignor that computed the last target.
    assignor_name: Option<&'static str>,
    /// Set when the last consumer-protocol member left a group of classic members: the group
    /// is classic from now on (see [`classic`]).
    downgrade: Option<Downgrade>,
}

impl ConsumerGroup {
    pub fn new(id: GroupId, config: Arc<ConsumerGroupConfig>) -> ConsumerGroup {
        ConsumerGroup {
            base: Modern::new(id),
            config,
            holders: Holders::new(),
            metadata_hash: 0,
            image_version: None,
            regex_filter: None,
            assignor_state: Bytes::new(),
            assignor_name: None,
            downgrade: None,
        }
    }

    /// Records to persist, in order, since the last call.
    pub fn take_records(&mut self) -> Vec<ConsumerRecord> {
        self.base.take_records()
    }

    /// Events since the last call, in order.
    pub fn take_events(&mut self) -> Vec<ConsumerEvent> {
        self.base.take_events()
    }

    /// A group as stored. Every member's session starts `now`, and a member that was revoking
    /// gets its rebalance timeout again.
    pub fn from_records(
        id: GroupId,
        config: Arc<ConsumerGroupConfig>,
        record: ConsumerGroupRecord,
        members: Vec<ConsumerMember>,
        now: Timestamp,
    ) -> ConsumerGroup {
        let mut group = ConsumerGroup::new(id, config);
        group.base.group_epoch = record.group_epoch;
        group.base.assignment_epoch = record.assignment_epoch;
        group.metadata_hash = record.metadata_hash;
        group.assignor_state = record.assignor_state;
        for member in members {
            let session = now.plus_ms(group.session_timeout_ms(&member));
            group
                .base
                .timers
                .set(ConsumerTimer::Session(member.member_id.clone()), session);
            group.arm_revocation(&member, now);
            group.put_member(member);
        }
        group
    }

    /// The assignor the next target assignment would use (Kafka: the one most members name,
    /// else the first configured).
    pub fn assignor_name(&self) -> &'static str {
        self.preferred_assignor().name()
    }

    /// Kafka's `ConsumerGroup.state`.
    pub fn state(&self) -> ConsumerGroupState {
        if self.base.dead {
            ConsumerGroupState::Dead
        } else if self.base.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.base.group_epoch > self.base.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self.base.members.values().any(|m| !self.is_reconciled(m)) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    fn is_reconciled(&self, m: &ConsumerMember) -> bool {
        m.state == ConsumerMemberState::Stable && m.member_epoch == self.base.assignment_epoch
    }

    /// After a write failed, the next write carries the whole group, so the store catches up
    /// with what this group already answered from.
    pub fn handle_write_failed(&mut self) {
        self.base
            .records
            .push(ConsumerRecord::Group(self.group_record()));
        for m in self.base.members.values() {
            self.base
                .records
                .push(ConsumerRecord::Member(Box::new(m.clone())));
        }
    }

    /// Every record that rebuilds this group (a conversion or a full rewrite).
    pub fn snapshot(&self) -> Vec<ConsumerRecord> {
        let mut out = vec![ConsumerRecord::Group(self.group_record())];
        out.extend(
            self.base
                .members
                .values()
                .map(|m| ConsumerRecord::Member(Box::new(m.clone()))),
        );
        out
    }

    fn group_record(&self) -> ConsumerGroupRecord {
        ConsumerGroupRecord {
            group_epoch: self.base.group_epoch,
            assignment_epoch: self.base.assignment_epoch,
            metadata_hash: self.metadata_hash,
            assignor_state: self.assignor_state.clone(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // ConsumerGroupHeartbeat
    // -----------------------------------------------------------------------------------------

    /// A heartbeat: joins, updates, reconciles or leaves a member (Kafka's
    /// `consumerGroupHeartbeat` and `consumerGroupLeave`). Request checks that need no group
    /// ([`validate`]) come first.
    ///
    /// # Errors
    /// Kafka's codes: GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
    /// FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID.
    pub fn handle_heartbeat(
        &mut self,
        req: ConsumerHeartbeat,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> Result<ConsumerHeartbeatReply, Refusal> {
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == LEAVE_STATIC_EPOCH {
            return self.handle_leave(&req, image);
        }
        let joining = req.member_epoch == 0;
        if self.base.members.len() >= self.config.max_size
            && !self.base.members.contains_key(&req.member_id)
        {
            return Err(Refusal::new(
                GroupError::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    self.config.max_size
                ),
            ));
        }
        // A steady heartbeat: a known dynamic member sending none of its fields, from the same
        // client. Its stored member stays as it is (no copy, no comparison); only its epoch and
        // owned partitions are checked, as below.
        let steady = !joining
            && req.instance_id.is_none()
            && req.rack_id.is_none()
            && req.rebalance_timeout_ms == -1
            && req.server_assignor.is_none()
            && req.subscribed_topic_names.is_none()
            && req.subscribed_topic_regex.is_none()
            && self.base.members.get(&req.member_id).is_some_and(|m| {
                m.instance_id.is_none()
                    && m.client_id == req.client_id
                    && m.client_host == req.client_host
            });
        let subscription_changed = if steady {
            check_epoch(
                &self.base.members[&req.member_id],
                req.member_epoch,
                req.owned.as_ref(),
            )?;
            false
        } else {
            let mut replaced = None;
            let member = match &req.instance_id {
                None => match self.base.members.get(&req.member_id) {
                    // A known member joining again (it was fenced, or restarted with its id): it
                    // gets its assignment again (Kafka 4.4).
                    Some(m) if joining => m.clone(),
                    Some(m) => {
                        check_epoch(m, req.member_epoch, req.owned.as_ref())?;
                        m.clone()
                    }
                    None if joining => ConsumerMember::new(req.member_id.clone()),
                    None => return Err(self.base.unknown_member(&req.member_id)),
                },
                Some(instance) => {
                    let existing = self
                        .base
                        .static_members
                        .get(instance)
                        .and_then(|id| self.base.members.get(id));
                    match existing {
                        None if joining => match self.base.members.get(&req.member_id) {
                            Some(m) => m.clone(),
                            None => ConsumerMember::new(req.member_id.clone()),
                        },
                        None => return Err(unknown_instance(instance)),
                        Some(old) if joining && old.member_id == req.member_id => old.clone(),
                        Some(old) if joining => {
                            if old.member_epoch != LEAVE_STATIC_EPOCH {
                                return Err(Refusal::new(
                                    GroupError::UnreleasedInstanceId,
                                    format!(
                                        "Static member {} with instance id {instance} cannot join \
                                         the group because the instance id is owned by {} member.",
                                        req.member_id, old.member_id
                                    ),
                                ));
                            }
                            replaced = Some(old.member_id.clone());
                            taken_over(old, &req.member_id)
                        }
                        Some(old) => {
                            if old.member_id != req.member_id {
                                return Err(fenced_instance(
                                    &req.member_id,
                                    instance,
                                    &old.member_id,
                                ));
                            }
                            check_epoch(old, req.member_epoch, req.owned.as_ref())?;
                            old.clone()
                        }
                    }
                }
            };
            let is_new = !self.base.members.contains_key(&member.member_id);
            if let Some(old) = replaced {
                self.remove_member(&old);
                self.base.records.push(ConsumerRecord::RemoveMember(old));
            }
            if is_new {
                self.base.events.push(ConsumerEvent::Joined {
                    member: member.member_id.clone(),
                    instance: req.instance_id.clone(),
                });
            }

            // 1. The member, updated from the request.
            let mut updated = member.clone();
            if req.instance_id.is_some() {
                updated.instance_id = req.instance_id.clone();
            }
            if req.rack_id.is_some() {
                updated.rack_id = req.rack_id.clone();
            }
            if req.rebalance_timeout_ms != -1 {
                updated.rebalance_timeout_ms = req.rebalance_timeout_ms;
            }
            if req.server_assignor.is_some() {
                updated.server_assignor = req.server_assignor.clone();
            }
            if let Some(names) = &req.subscribed_topic_names {
                let mut names = names.clone();
                names.sort();
                names.dedup();
                updated.subscribed_topic_names = names;
            }
            if req.subscribed_topic_regex.is_some() {
                updated.subscribed_topic_regex = req.subscribed_topic_regex.clone();
            }
            updated.client_id = req.client_id.clone();
            updated.client_host = req.client_host.clone();
            let subscription_changed = updated.subscribed_topic_names
                != member.subscribed_topic_names
                || updated.subscribed_topic_regex != member.subscribed_topic_regex;
            // An unchanged member (a steady heartbeat) is already stored as it is.
            if is_new || updated != member {
                self.put_member(updated);
                self.persist_member(&req.member_id);
            }
            subscription_changed
        };
        if subscription_changed
            || self.image_version != Some(image.version())
            || self.regex_filter.is_none()
        {
            // The regular expressions are resolved again: with this member's ACLs (Kafka's
            // "the consumer that triggered the refresh"); none yet (a new or reloaded group):
            // with the first heartbeat's.
            self.regex_filter = req.describable.clone();
        }
        self.bump_if_changed(&req.member_id, subscription_changed, image);

        // 2. A new target assignment when the group epoch is ahead of it.
        if self.base.group_epoch > self.base.assignment_epoch {
            self.compute_target(image, now);
        }

        // 3. The member towards its target.
        let reassigned = self.reconcile_member(&req.member_id, req.owned.as_ref(), now);
        let session = now.plus_ms(self.config.session_timeout_ms);
        self.base
            .timers
            .set(ConsumerTimer::Session(req.member_id.clone()), session);

        let m = &self.base.members[&req.member_id];
        let full = joining
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        Ok(ConsumerHeartbeatReply {
            member_id: m.member_id.clone(),
            member_epoch: m.member_epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment: (full || reassigned).then(|| m.assigned.clone()),
        })
    }

    /// Epoch -1 (the member leaves) or -2 (a static member leaves for now).
    fn handle_leave(
        &mut self,
        req: &ConsumerHeartbeat,
        image: &dyn TopicImage,
    ) -> Result<ConsumerHeartbeatReply, Refusal> {
        let member_id = match &req.instance_id {
            None => {
                if !self.base.members.contains_key(&req.member_id) {
                    return Err(self.base.unknown_member(&req.member_id));
                }
                req.member_id.clone()
            }
            Some(instance) => {
                let id = self
                    .base
                    .static_members
                    .get(instance)
                    .cloned()
                    .ok_or_else(|| unknown_instance(instance))?;
                if id != req.member_id {
                    return Err(fenced_instance(&req.member_id, instance, &id));
                }
                id
            }
        };
        if req.member_epoch == LEAVE_STATIC_EPOCH && req.instance_id.is_some() {
            // Its partitions stay with it (epoch -2) until it is back or its session ends.
            let mut m = self.base.members[&member_id].clone();
            self.base.timers.cancel(&ConsumerTimer::Revocation(
                member_id.clone(),
                m.member_epoch,
            ));
            m.member_epoch = LEAVE_STATIC_EPOCH;
            m.pending_revocation = Partitions::new();
            self.put_member(m);
            self.persist_member(&member_id);
        } else {
            self.fence(&member_id, "it left the group", image);
        }
        Ok(ConsumerHeartbeatReply {
            member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// LeaveGroup (the classic API) naming consumer-protocol members: each one named (by member
    /// id, or by instance id) leaves as with a heartbeat at epoch -1 (Kafka 4.4 does this).
    pub fn handle_classic_leave(
        &mut self,
        members: &[crate::group::LeavingMember],
        image: &dyn TopicImage,
    ) -> Vec<(MemberId, Option<InstanceId>, Option<GroupError>)> {
        members
            .iter()
            .map(|l| {
                let found = match &l.instance_id {
                    Some(instance) => match self.base.static_members.get(instance) {
                        Some(id) if l.member_id.as_str().is_empty() || *id == l.member_id => {
                            Ok(id.clone())
                        }
                        Some(_) => Err(GroupError::FencedInstanceId),
                        None => Err(GroupError::UnknownMemberId),
                    },
                    None if self.base.members.contains_key(&l.member_id) => Ok(l.member_id.clone()),
                    None => Err(GroupError::UnknownMemberId),
                };
                let error = match found {
                    Ok(id) => {
                        self.fence(&id, "it left the group (LeaveGroup)", image);
                        None
                    }
                    Err(e) => Some(e),
                };
                (l.member_id.clone(), l.instance_id.clone(), error)
            })
            .collect()
    }

    /// Removes a member and bumps the group epoch (Kafka's `consumerGroupFenceMember`).
    fn fence(&mut self, id: &MemberId, why: &'static str, image: &dyn TopicImage) {
        if self.downgrade.is_some() {
            return;
        }
        if self.can_downgrade_without(id) {
            self.base.events.push(ConsumerEvent::Left {
                member: id.clone(),
                why,
            });
            self.downgrade = Some(Downgrade {
                generation: crate::vocab::Generation(self.base.group_epoch),
                members: self.classic_members(id, image),
            });
            return;
        }
        if self.remove_member(id).is_none() {
            return;
        }
        self.base
            .records
            .push(ConsumerRecord::RemoveMember(id.clone()));
        self.base.events.push(ConsumerEvent::Left {
            member: id.clone(),
            why,
        });
        self.metadata_hash = self.subscription_hash(image);
        self.image_version = Some(image.version());
        // The new target is computed by the next heartbeat (as Kafka does); an Empty group has
        // nothing to compute: its (empty) target is at the new epoch at once (Kafka 4.4).
        self.bump_epoch(why);
        if self.base.members.is_empty() {
            self.base.assignment_epoch = self.base.group_epoch;
            self.base.timers.cancel(&ConsumerTimer::FollowUp);
            if let Some(ConsumerRecord::Group(record)) = self.base.records.last_mut() {
                record.assignment_epoch = self.base.assignment_epoch;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Timers
    // -----------------------------------------------------------------------------------------

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        while let Some((key, deadline)) = self.base.timers.next() {
            if deadline > now || self.downgrade.is_some() {
                break;
            }
            self.base.timers.cancel(&key);
            match key {
                ConsumerTimer::Session(id) => {
                    self.fence(&id, "its session expired", image);
                }
                ConsumerTimer::Revocation(id, epoch) => {
                    if self.base.members.get(&id).is_some_and(|m| {
                        m.member_epoch == epoch
                            && m.state == ConsumerMemberState::UnrevokedPartitions
                    }) {
                        self.fence(
                            &id,
                            "it did not revoke its partitions within its rebalance timeout",
                            image,
                        );
                    }
                }
                ConsumerTimer::FollowUp => {
                    if !self.base.members.is_empty() {
                        self.bump_epoch("the assignor asked for a new assignment");
                        self.compute_target(image, now);
                    }
                }
                ConsumerTimer::ClassicJoin(id) => {
                    self.fence(
                        &id,
                        "it did not join again within its rebalance timeout",
                        image,
                    );
                }
                ConsumerTimer::ClassicSync(id) => {
                    self.fence(
                        &id,
                        "it did not sync within its rebalance timeout after joining",
                        image,
                    );
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Offsets and administration
    // -----------------------------------------------------------------------------------------

    /// Kafka's `ConsumerGroup.validateOffsetCommit` for a non-transactional commit at
    /// `api_version`.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (a consumer-protocol member below v9),
    /// STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic-protocol member).
    pub fn validate_offset_commit(
        &self,
        member_id: &MemberId,
        member_epoch: i32,
        transactional: bool,
        api_version: i16,
    ) -> Result<(), GroupError> {
        if member_epoch < 0 && self.base.members.is_empty() {
            return Ok(());
        }
        let member = self
            .base
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if member.uses_classic_protocol() {
            // A classic member commits with its generation (its member epoch), at any version.
            if member_epoch != member.member_epoch {
                return Err(GroupError::IllegalGeneration);
            }
            return Ok(());
        }
        if !transactional && api_version < 9 {
            return Err(GroupError::UnsupportedVersion);
        }
        if member_epoch != member.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`: `member_id` `None` with a negative epoch is
    /// an admin fetch.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&MemberId>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let Some(id) = member_id else {
            if member_epoch < 0 {
                return Ok(());
            }
            return Err(GroupError::UnknownMemberId);
        };
        let member = self
            .base
            .members
            .get(id)
            .ok_or(GroupError::UnknownMemberId)?;
        if member_epoch != member.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Whether any member subscribes to `topic` (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC).
    pub fn is_subscribed_to(&self, topic: &str, image: &dyn TopicImage) -> bool {
        self.subscribed_topics(image).contains(topic)
    }

    /// DeleteGroups: only an Empty group can go; it then is Dead.
    ///
    /// # Errors
    /// NON_EMPTY_GROUP.
    pub fn delete(&mut self) -> Result<(), GroupError> {
        if !self.base.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        self.base.dead = true;
        self.base.timers = TimerTable::default();
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Internals
    // -----------------------------------------------------------------------------------------

    /// Bumps the group epoch when `member_id` changed its subscription or the subscribed
    /// topics changed (created, deleted, grown) since the epoch was last bumped.
    fn bump_if_changed(
        &mut self,
        member_id: &MemberId,
        subscription_changed: bool,
        image: &dyn TopicImage,
    ) {
        let mut bump =
            subscription_changed.then_some("a member joined or changed its subscription");
        if bump.is_some() || self.image_version != Some(image.version()) {
            let hash = self.subscription_hash(image);
            self.image_version = Some(image.version());
            if hash != self.metadata_hash {
                self.metadata_hash = hash;
                bump = bump.or(Some("the subscribed topics changed"));
            }
        }
        if let Some(why) = bump {
            // Kafka 4.4 bumps a brand-new group twice for its first member subscribing to
            // something (measured: the member answers epoch 2); koord keeps its epochs.
            if self.base.group_epoch == 0 && self.subscribes_to_anything(member_id) {
                self.base.group_epoch += 1;
            }
            self.bump_epoch(why);
        }
    }

    /// A member's session: its own for a classic-protocol member, the group's otherwise.
    fn session_timeout_ms(&self, member: &ConsumerMember) -> u64 {
        member
            .classic
            .as_ref()
            .map_or(self.config.session_timeout_ms, |c| c.session_timeout_ms)
    }

    fn bump_epoch(&mut self, why: &'static str) {
        self.base.group_epoch += 1;
        self.base
            .records
            .push(ConsumerRecord::Group(self.group_record()));
        self.base.events.push(ConsumerEvent::EpochBumped {
            epoch: self.base.group_epoch,
            why,
        });
    }

    fn persist_member(&mut self, id: &MemberId) {
        if let Some(m) = self.base.members.get(id) {
            self.base
                .records
                .push(ConsumerRecord::Member(Box::new(m.clone())));
        }
    }

    /// Inserts or replaces a member, keeping the static index and the partition holders;
    /// returns the member it replaced.
    fn put_member(&mut self, member: ConsumerMember) -> Option<ConsumerMember> {
        let old = self.base.members.remove(&member.member_id);
        if let Some(old) = &old {
            self.release(old);
        }
        for (topic, parts) in member.assigned.iter().chain(&member.pending_revocation) {
            for &p in parts {
                self.holders.insert((*topic, p), member.member_epoch);
            }
        }
        self.base.insert_member(member);
        old
    }

    fn release(&mut self, member: &ConsumerMember) {
        for (topic, parts) in member.assigned.iter().chain(&member.pending_revocation) {
            for &p in parts {
                self.holders.remove(&(*topic, p));
            }
        }
    }

    fn remove_member(&mut self, id: &MemberId) -> Option<ConsumerMember> {
        let member = self.base.remove_member(id)?;
        self.release(&member);
        self.base.timers.cancel(&ConsumerTimer::Session(id.clone()));
        self.base
            .timers
            .cancel(&ConsumerTimer::Revocation(id.clone(), member.member_epoch));
        self.base
            .timers
            .cancel(&ConsumerTimer::ClassicJoin(id.clone()));
        self.base
            .timers
            .cancel(&ConsumerTimer::ClassicSync(id.clone()));
        Some(member)
    }

    /// Moves the member towards its target; true when its assignment changed.
    fn reconcile_member(
        &mut self,
        id: &MemberId,
        owned: Option<&Partitions>,
        now: Timestamp,
    ) -> bool {
        let member = &self.base.members[id];
        let Some(next) = reconcile(
            member,
            self.base.assignment_epoch,
            &member.target,
            &self.holders,
            owned,
        ) else {
            return false;
        };
        let old_epoch = member.member_epoch;
        self.base
            .timers
            .cancel(&ConsumerTimer::Revocation(id.clone(), old_epoch));
        self.arm_revocation(&next, now);
        let old = self.put_member(next);
        self.persist_member(id);
        old.is_none_or(|old| old.assigned != self.base.members[id].assigned)
    }

    fn arm_revocation(&mut self, member: &ConsumerMember, now: Timestamp) {
        if member.state == ConsumerMemberState::UnrevokedPartitions {
            let timeout = u64::try_from(member.rebalance_timeout_ms.max(0)).unwrap_or(0);
            self.base.timers.set(
                ConsumerTimer::Revocation(member.member_id.clone(), member.member_epoch),
                now.plus_ms(timeout),
            );
        }
    }

    /// The assignor most members name (ties: the first configured among them), else the first
    /// configured one.
    fn preferred_assignor(&self) -> &Arc<dyn Assignor> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.base.members.values() {
            if let Some(name) = &m.server_assignor {
                *counts.entry(name.as_str()).or_default() += 1;
            }
        }
        let best = self
            .config
            .assignors
            .iter()
            .filter_map(|a| counts.get(a.name()).map(|&n| (n, a)))
            .fold(
                None::<(usize, &Arc<dyn Assignor>)>,
                |best, (n, a)| match best {
                    Some((m, _)) if m >= n => best,
                    _ => Some((n, a)),
                },
            );
        match best {
            Some((_, a)) => a,
            None => &self.config.assignors[0],
        }
    }

    /// Whether the member subscribes to any topic name or to a regular expression.
    fn subscribes_to_anything(&self, id: &MemberId) -> bool {
        self.base.members.get(id).is_some_and(|m| {
            !m.subscribed_topic_names.is_empty()
                || m.subscribed_topic_regex
                    .as_deref()
                    .is_some_and(|r| !r.is_empty())
        })
    }

    /// The topics some member subscribes to (by name or by regular expression) that exist.
    fn subscribed_topics(&self, image: &dyn TopicImage) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = BTreeSet::new();
        let mut regexes: BTreeSet<&str> = BTreeSet::new();
        for m in self.base.members.values() {
            names.extend(m.subscribed_topic_names.iter().cloned());
            if let Some(r) = m
                .subscribed_topic_regex
                .as_deref()
                .filter(|r| !r.is_empty())
            {
                regexes.insert(r);
            }
        }
        if !regexes.is_empty() {
            let all = image.names();
            for r in regexes {
                names.extend(self.regex_topics(r, &all));
            }
        }
        names.retain(|n| image.topic(n).is_some());
        names
    }

    /// The topics of `names` the regular expression `pattern` matches that the group's
    /// [`TopicFilter`] lets it see.
    fn regex_topics(&self, pattern: &str, names: &[String]) -> Vec<String> {
        let mut matched = regex_matches(pattern, names);
        if let Some(TopicFilter(describable)) = &self.regex_filter {
            matched.retain(|n| describable(n));
        }
        matched
    }

    fn subscription_hash(&self, image: &dyn TopicImage) -> u64 {
        let mut h = DefaultHasher::new();
        for name in self.subscribed_topics(image) {
            name.hash(&mut h);
            image.topic(&name).hash(&mut h);
        }
        h.finish()
    }

    /// A new target assignment for every member at the group epoch.
    fn compute_target(&mut self, image: &dyn TopicImage, now: Timestamp) {
        let assignor = self.preferred_assignor().clone();
        let subscribed = self.subscribed_topics(image);
        let topics: Vec<(String, TopicId, u32)> = subscribed
            .into_iter()
            .filter_map(|n| image.topic(&n).map(|(id, p)| (n, id, p)))
            .collect();
        let index: HashMap<&str, u32> = topics
            .iter()
            .enumerate()
            .map(|(i, (n, _, _))| (n.as_str(), i as u32))
            .collect();
        let by_id: HashMap<TopicId, u32> = topics
            .iter()
            .enumerate()
            .map(|(i, (_, id, _))| (*id, i as u32))
            .collect();
        let all_names = image.names();
        let to_spec = |parts: &Partitions| -> Vec<Partition> {
            let mut out: Vec<Partition> = parts
                .iter()
                .filter_map(|(id, ps)| by_id.get(id).map(|&t| (t, ps)))
                .flat_map(|(t, ps)| {
                    let limit = topics[t as usize].2;
                    ps.iter()
                        .filter_map(move |&p| u32::try_from(p).ok().filter(|&p| p < limit))
                        .map(move |p| Partition::new(t, p))
                })
                .collect();
            out.sort_unstable();
            out
        };
        let mut members = Vec::with_capacity(self.base.members.len());
        let mut declared = Vec::with_capacity(self.base.members.len());
        for m in self.base.members.values() {
            let mut sub: BTreeSet<u32> = m
                .subscribed_topic_names
                .iter()
                .filter_map(|n| index.get(n.as_str()).copied())
                .collect();
            if let Some(r) = m
                .subscribed_topic_regex
                .as_deref()
                .filter(|r| !r.is_empty())
            {
                sub.extend(
                    self.regex_topics(r, &all_names)
                        .iter()
                        .filter_map(|n| index.get(n.as_str()).copied()),
                );
            }
            let sub: Vec<u32> = sub.into_iter().collect();
            let mut owned = to_spec(&m.target);
            owned.retain(|p| sub.binary_search(&p.topic).is_ok());
            members.push(MemberSpec {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                rack: m.rack_id.clone(),
                subscription: sub.into(),
                owned,
                user_data: None,
            });
            // Nothing is declared held: reconciliation already grants a partition only once its
            // holder has revoked it, so an assignor that withheld held partitions itself would
            // wait for a target computation that never comes (targets are computed on epoch
            // bumps, not on revocations).
            declared.push(Vec::new());
        }
        let spec = GroupSpec {
            topics: topics
                .iter()
                .map(|(n, _, p)| TopicSpec {
                    name: n.as_str().into(),
                    partitions: *p,
                })
                .collect(),
            members,
        };
        let plan = assignor.plan(&PlanInput {
            spec: &spec,
            declared: &declared,
            capable: false,
            state: &self.assignor_state,
            now,
        });
        let plan = match plan {
            Ok(plan) => plan,
            // Only user data can be refused, and consumer-protocol members send none: keep
            // the last target rather than fail the heartbeat.
            Err(_) => return,
        };
        let ids: Vec<MemberId> = self.base.members.keys().cloned().collect();
        for (i, id) in ids.iter().enumerate() {
            let mut target = Partitions::new();
            for p in plan.assignment.member(i) {
                target
                    .entry(topics[p.topic as usize].1)
                    .or_default()
                    .push(p.partition as i32);
            }
            for list in target.values_mut() {
                list.sort_unstable();
            }
            let m = self.base.members.get_mut(id).expect("member of this group");
            if m.target != target {
                m.target = target;
                self.base
                    .records
                    .push(ConsumerRecord::Member(Box::new(m.clone())));
            }
        }
        self.base.assignment_epoch = self.base.group_epoch;
        self.assignor_state = plan.state;
        self.assignor_name = Some(assignor.name());
        match plan.follow_up {
            Some(at) => self.base.timers.set(ConsumerTimer::FollowUp, at),
            None => {
                self.base.timers.cancel(&ConsumerTimer::FollowUp);
            }
        }
        self.base
            .records
            .push(ConsumerRecord::Group(self.group_record()));
        self.base.events.push(ConsumerEvent::TargetComputed {
            epoch: self.base.assignment_epoch,
            assignor: assignor.name(),
            summary: plan.summary,
        });
    }
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: an epoch ahead is fenced; one behind is
/// accepted only as the previous epoch with a subset of the assignment (a lost response).
fn check_epoch(
    member: &ConsumerMember,
    epoch: i32,
    owned: Option<&Partitions>,
) -> Result<(), Refusal> {
    let fenced = |which: &str| {
        Refusal::new(
            GroupError::FencedMemberEpoch,
            format!(
                "The consumer group member has a {which} member epoch ({epoch}) than the one \
                 known by the group coordinator ({}). The member must abandon all its \
                 partitions and rejoin.",
                member.member_epoch
            ),
        )
    };
    if epoch > member.member_epoch {
        return Err(fenced("greater"));
    }
    if epoch < member.member_epoch
        && (epoch != member.previous_member_epoch || !is_subset(owned, &member.assigned))
    {
        return Err(fenced("smaller"));
    }
    Ok(())
}

/// A static member's place taken by a new instance under `id`: the old member's partitions and
/// target, at epoch 0.
fn taken_over(old: &ConsumerMember, id: &MemberId) -> ConsumerMember {
    ConsumerMember {
        member_id: id.clone(),
        member_epoch: 0,
        previous_member_epoch: 0,
        ..old.clone()
    }
}

fn unknown_instance(instance: &InstanceId) -> Refusal {
    Refusal::new(
        GroupError::UnknownMemberId,
        format!("Instance id {instance} is unknown."),
    )
}

fn fenced_instance(member: &MemberId, instance: &InstanceId, owner: &MemberId) -> Refusal {
    Refusal::new(
        GroupError::FencedInstanceId,
        format!("Static member {member} with instance id {instance} is fenced by member {owner}."),
    )
}

fn is_subset(owned: Option<&Partitions>, of: &Partitions) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(topic, parts)| {
        of.get(topic)
            .is_some_and(|have| parts.iter().all(|p| have.binary_search(p).is_ok()))
    })
}

/// The topics of `names` a subscription regex matches as a whole (Kafka matches the whole
/// name). An invalid one matches nothing (it was refused when sent).
fn regex_matches(pattern: &str, names: &[String]) -> Vec<String> {
    match regex::Regex::new(&format!("^(?:{pattern})$")) {
        Ok(re) => names.iter().filter(|n| re.is_match(n)).cloned().collect(),
        Err(_) => Vec::new(),
    }
}

/// The checks of a heartbeat that need no group (Kafka's
/// `throwIfConsumerGroupHeartbeatRequestIsInvalid`). `group_id` is the request's.
///
/// # Errors
/// INVALID_REQUEST, INVALID_REGULAR_EXPRESSION, UNSUPPORTED_ASSIGNOR.
pub fn validate(
    group_id: &str,
    req: &ConsumerHeartbeat,
    config: &ConsumerGroupConfig,
) -> Result<(), Refusal> {
    let empty = |s: &Option<String>| s.as_deref().is_some_and(str::is_empty);
    if group_id.is_empty() {
        return Err(Refusal::invalid("GroupId can't be empty."));
    }
    if req
        .instance_id
        .as_ref()
        .is_some_and(|i| i.as_str().is_empty())
    {
        return Err(Refusal::invalid("InstanceId can't be empty."));
    }
    if empty(&req.rack_id) {
        return Err(Refusal::invalid("RackId can't be empty."));
    }
    if req.member_id.as_str().is_empty() {
        return Err(Refusal::invalid("MemberId can't be empty."));
    }
    if req.member_epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return Err(Refusal::invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
            return Err(Refusal::invalid(
                "TopicPartitions must be empty when (re-)joining.",
            ));
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return Err(Refusal::invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when \
                 (re-)joining.",
            ));
        }
    } else if req.member_epoch == LEAVE_STATIC_EPOCH {
        if req.instance_id.is_none() {
            return Err(Refusal::invalid("InstanceId can't be null."));
        }
    } else if req.member_epoch < LEAVE_STATIC_EPOCH {
        return Err(Refusal::invalid("MemberEpoch is invalid."));
    }
    if let Some(r) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = regex::Regex::new(r) {
            let reason = match e {
                regex::Error::Syntax(s) => s.lines().last().unwrap_or_default().to_string(),
                other => other.to_string(),
            };
            return Err(Refusal::new(
                GroupError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{r}` is not a valid regular expression: {reason}."),
            ));
        }
    }
    if let Some(name) = &req.server_assignor {
        if config.assignor(name).is_none() {
            let names: Vec<&str> = config.assignors.iter().map(|a| a.name()).collect();
            return Err(Refusal::new(
                GroupError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {name} is not supported. Supported assignors: {}.",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

impl std::ops::Deref for ConsumerGroup {
    type Target = Modern<ConsumerMember, ConsumerRecord, ConsumerEvent, ConsumerTimer>;

    /// The shared part's accessors (id, epochs, members, records, events, timers).
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl ModernMember for ConsumerMember {
    fn member_id(&self) -> &MemberId {
        &self.member_id
    }

    fn instance_id(&self) -> Option<&InstanceId> {
        self.instance_id.as_ref()
    }
}

impl super::core::Kind for ConsumerGroup {
    const KIND: crate::vocab::stored::GroupKind = codec::KIND;
}

impl super::core::GroupCore for ConsumerGroup {
    fn id(&self) -> &GroupId {
        self.base.id()
    }

    fn kind(&self) -> crate::vocab::stored::GroupKind {
        codec::KIND
    }

    fn state_name(&self) -> &'static str {
        self.state().as_str()
    }

    fn is_dead(&self) -> bool {
        self.state() == ConsumerGroupState::Dead
    }

    fn is_empty(&self) -> bool {
        self.state() == ConsumerGroupState::Empty
    }

    fn num_members(&self) -> usize {
        self.base.members.len()
    }

    fn protocol_type(&self) -> &str {
        "consumer"
    }

    fn next_deadline(&self) -> Option<Timestamp> {
        self.base.next_deadline()
    }

    fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        ConsumerGroup::handle_timeout(self, image, now);
    }

    fn delete(&mut self) -> Option<Result<(), GroupError>> {
        Some(ConsumerGroup::delete(self))
    }

    fn check_offset_commit(
        &mut self,
        auth: &super::OffsetCommitAuth,
        api_version: i16,
        _now: Timestamp,
    ) -> Result<(), GroupError> {
        if auth.is_anonymous_transactional() {
            return Ok(());
        }
        self.validate_offset_commit(
            &auth.member_id,
            auth.generation.0,
            auth.transactional,
            api_version,
        )
    }

    fn check_offset_fetch(&self, member: &Option<(MemberId, i32)>) -> Result<(), GroupError> {
        match member {
            Some((id, epoch)) => self.validate_offset_fetch(Some(id), *epoch),
            None => Ok(()),
        }
    }

    fn serves_offset_fetch(&self) -> bool {
        self.state() != ConsumerGroupState::Dead
    }

    fn check_offset_delete(&self) -> Result<(), GroupError> {
        if self.state() == ConsumerGroupState::Dead {
            return Err(GroupError::GroupIdNotFound);
        }
        Ok(())
    }

    fn subscribes_to(&self, topic: &str, image: &dyn TopicImage) -> bool {
        self.is_subscribed_to(topic, image)
    }

    /// Offsets age from their commit.
    fn offset_expiration_base(&self) -> Option<crate::vocab::ExpirationBase> {
        Some(crate::vocab::ExpirationBase::CommitTimestamp)
    }

    fn take_stored(&mut self) -> Vec<crate::vocab::stored::RecordChange> {
        self.take_records().into_iter().map(codec::change).collect()
    }

    fn handle_write_failed(&mut self) {
        ConsumerGroup::handle_write_failed(self);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
