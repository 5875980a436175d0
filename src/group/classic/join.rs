//! JoinGroup (spec §1.2; Kafka `classicGroupJoinToClassicGroup` and the helpers it calls).

use bytes::Bytes;

use super::{ClassicGroup, StaticReplacement, WriteContinuation};
use crate::group::commands::JoinGroup;
use crate::group::member::{Member, ParkedJoin};
use crate::group::output::{AddReason, GroupEvent, JoinReply, RebalanceReason, RemoveReason};
use crate::group::timers::TimerKey;
use crate::group::types::{GroupState, RequestToken};
use crate::vocab::GroupError;
use crate::vocab::{InstanceId, MemberId, Timestamp};

impl ClassicGroup {
    /// A JoinGroup. The reply comes out of [`ClassicGroup::poll_output`] as
    /// [`crate::group::Output::JoinReply`] for `req.token`: at once (errors,
    /// MEMBER_ID_REQUIRED, a known member of a settled generation) or when the join phase ends.
    ///
    /// Checks in Kafka's order: `group.max.size`, then new member (protocols; static
    /// replacement; KIP-394 pending id) or known member (protocols; pending id rejoining;
    /// `validateMember`; then by state).
    pub fn handle_join(&mut self, req: JoinGroup, now: Timestamp) {
        if !self.accept_joining_member(&req.member_id) {
            // Kafka also drops the member (or pending id) that was refused, so that a group
            // above a lowered max size shrinks as its members rejoin.
            if self.members.contains_key(&req.member_id) {
                self.remove_member(&req.member_id, RemoveReason::GroupMaxSizeReached);
            }
            self.remove_pending_member(&req.member_id, RemoveReason::GroupMaxSizeReached);
            self.reply_join(
                req.token,
                JoinReply::error(GroupError::GroupMaxSizeReached, MemberId::unknown()),
            );
        } else if req.member_id.is_unknown() {
            self.join_new_member(req, now);
        } else {
            self.join_existing_member(req, now);
        }
    }

    /// Kafka `acceptJoiningMember`. While rebalancing the number of members already rejoined
    /// is what counts (the member count may exceed a lowered max size); otherwise the member
    /// count.
    fn accept_joining_member(&self, member: &MemberId) -> bool {
        let max = self.config.max_size;
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                self.members
                    .get(member)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || self.num_awaiting_join() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members.contains_key(member) || self.members.len() < max
            }
        }
    }

    fn join_new_member(&mut self, req: JoinGroup, now: Timestamp) {
        if self.state == GroupState::Dead {
            let reply = JoinReply::error(GroupError::CoordinatorNotAvailable, MemberId::unknown());
            return self.reply_join(req.token, reply);
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            let reply =
                JoinReply::error(GroupError::InconsistentGroupProtocol, MemberId::unknown());
            return self.reply_join(req.token, reply);
        }
        if let Err(error) = self.validate_server_metadata(&req) {
            let reply = JoinReply::error(error, MemberId::unknown());
            return self.reply_join(req.token, reply);
        }
        let prefix = match &req.instance_id {
            Some(instance) => instance.as_str(),
            None => req.client_id.as_str(),
        };
        let new_id = MemberId::from(format!("{prefix}-{}", req.member_id_nonce));
        debug_assert!(
            !self.members.contains_key(&new_id) && !self.pending_members.contains(&new_id),
            "member id nonce reused"
        );

        if let Some(instance) = req.instance_id.clone() {
            match self.static_members.get(&instance).cloned() {
                Some(existing) => self.replace_static_member_then_rebalance_or_complete_join(
                    req, instance, existing, new_id, now,
                ),
                None => self.add_member_then_rebalance_or_complete_join(req, new_id, now),
            }
        } else if req.require_known_member_id {
            // KIP-394: hand out an id and wait for the member to come back with it; the id
            // is forgotten if it does not within its session timeout.
            self.pending_members.insert(new_id.clone());
            self.reschedule_heartbeat(&new_id, req.session_timeout_ms, now);
            self.event(GroupEvent::PendingMemberAdded {
                member: new_id.clone(),
            });
            self.reply_join(
                req.token,
                JoinReply::error(GroupError::MemberIdRequired, new_id),
            );
        } else {
            self.add_member_then_rebalance_or_complete_join(req, new_id, now);
        }
    }

    fn join_existing_member(&mut self, req: JoinGroup, now: Timestamp) {
        let id = req.member_id.clone();
        if self.state == GroupState::Dead {
            let reply = JoinReply::error(GroupError::CoordinatorNotAvailable, id);
            return self.reply_join(req.token, reply);
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            let reply = JoinReply::error(GroupError::InconsistentGroupProtocol, id);
            return self.reply_join(req.token, reply);
        }
        if let Err(error) = self.validate_server_metadata(&req) {
            return self.reply_join(req.token, JoinReply::error(error, id));
        }
        if self.pending_members.contains(&id) && req.instance_id.is_none() {
            // The KIP-394 rejoin with the id we handed out. (Pending ids are only ever given
            // to dynamic members; a pending id with an instance id falls through to
            // validate_member, which answers UNKNOWN_MEMBER_ID where Kafka throws.)
            self.cancel_timer(TimerKey::Heartbeat(id.clone()));
            return self.add_member_then_rebalance_or_complete_join(req, id, now);
        }
        if let Err(error) = self.validate_member(&id, req.instance_id.as_ref()) {
            return self.reply_join(req.token, JoinReply::error(error, id));
        }

        let matches = self
            .members
            .get(&id)
            .is_some_and(|m| m.matches(&req.protocols));
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member_then_rebalance_or_complete_join(
                    req,
                    RebalanceReason::MemberUpdated(id),
                    now,
                );
            }
            GroupState::CompletingRebalance if matches => {
                // Same metadata (the member probably lost our reply): answer with the current
                // generation again; the leader gets the members again.
                let leader = self.is_leader(&id);
                self.reply_current_generation(req.token, &id, leader, now);
            }
            GroupState::Stable if matches && !self.is_leader(&id) => {
                // A follower with nothing new: the current generation, so it can SyncGroup.
                self.reply_current_generation(req.token, &id, false, now);
            }
            GroupState::Stable if matches => {
                // The leader rejoining with nothing new: how it asks for a rebalance (topic
                // metadata changed), or a client that rejected koord's plan.
                self.note_unchanged_leader_rejoin();
                self.update_member_then_rebalance_or_complete_join(
                    req,
                    RebalanceReason::MemberUpdated(id),
                    now,
                );
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // Changed metadata.
                self.update_member_then_rebalance_or_complete_join(
                    req,
                    RebalanceReason::MemberUpdated(id),
                    now,
                );
            }
            GroupState::Empty | GroupState::Dead => {
                // validate_member fails first in practice; kept for Kafka parity.
                self.reply_join(req.token, JoinReply::error(GroupError::UnknownMemberId, id));
            }
        }
    }

    /// The current generation's JoinGroup reply, sent at once; also restarts the session, as
    /// every successful JoinGroup reply does.
    fn reply_current_generation(
        &mut self,
        token: RequestToken,
        id: &MemberId,
        with_members: bool,
        now: Timestamp,
    ) {
        let reply = JoinReply {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: id.clone(),
            members: if with_members {
                self.join_members()
            } else {
                Vec::new()
            },
        };
        self.reply_join(token, reply);
        self.reset_session(id, now);
    }

    /// Whether koord computed this generation's assignment (the leader need not).
    pub(super) fn has_server_assignment(&self) -> bool {
        self.server_assigned == Some(self.generation)
    }

    /// For a server-assigned group, the server's assignor must be able to read what the member
    /// offers (a consumer subscription that does not decode gets INCONSISTENT_GROUP_PROTOCOL;
    /// the group is untouched).
    fn validate_server_metadata(&self, req: &JoinGroup) -> Result<(), GroupError> {
        match self.server_assignor(&req.protocol_type) {
            Some(assignor) => assignor.validate(&req.protocols),
            None => Ok(()),
        }
    }

    /// Kafka `addMemberThenRebalanceOrCompleteJoin`. A new member's session timer is the
    /// new-member join timeout: it cannot heartbeat without an id, and a client that gave up on
    /// its parked JoinGroup must not stay a member forever.
    fn add_member_then_rebalance_or_complete_join(
        &mut self,
        req: JoinGroup,
        id: MemberId,
        now: Timestamp,
    ) {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if self.state == GroupState::PreparingRebalance && self.previous_state == GroupState::Empty
        {
            // Extends the initial delay.
            self.new_member_added = true;
        }
        let member = Member {
            id: id.clone(),
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(ParkedJoin {
                token: req.token,
                supports_skip_assignment: req.supports_skip_assignment,
            }),
            awaiting_sync: None,
            is_new: true,
        };
        self.insert_member(member, AddReason::Joined);
        self.reschedule_heartbeat(&id, self.config.new_member_join_timeout_ms, now);
        self.maybe_prepare_rebalance_or_complete_join(RebalanceReason::MemberJoined(id), now);
    }

    /// Kafka `updateMemberThenRebalanceOrCompleteJoin`: new protocols and timeouts, JoinGroup
    /// parked.
    fn update_member_then_rebalance_or_complete_join(
        &mut self,
        req: JoinGroup,
        reason: RebalanceReason,
        now: Timestamp,
    ) {
        self.update_member(&req);
        self.maybe_prepare_rebalance_or_complete_join(reason, now);
    }

    fn update_member(&mut self, req: &JoinGroup) {
        let Some(m) = self.members.get_mut(&req.member_id) else {
            return;
        };
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_timeout_ms = req.session_timeout_ms;
        self.set_protocols(&req.member_id, req.protocols.clone());
        let parked = ParkedJoin {
            token: req.token,
            supports_skip_assignment: req.supports_skip_assignment,
        };
        let superseded = self.park_join(&req.member_id, parked);
        if let Some(old) = superseded {
            // A retried JoinGroup (the client gave up on the first one, on another
            // connection). Kafka drops the old future unanswered; we answer it so that every
            // parked request is answered exactly once.
            let id = req.member_id.clone();
            self.reply_join(
                old.token,
                JoinReply::error(GroupError::RebalanceInProgress, id),
            );
        }
    }

    /// Kafka `updateStaticMemberThenRebalanceOrCompleteJoin`: a static member rejoined without
    /// its member id (it restarted). The old id is fenced and replaced; while Stable and if the
    /// selected protocol would not change, no rebalance: the record is rewritten and the member
    /// answered once it is durable.
    fn replace_static_member_then_rebalance_or_complete_join(
        &mut self,
        req: JoinGroup,
        instance: InstanceId,
        old_id: MemberId,
        new_id: MemberId,
        now: Timestamp,
    ) {
        let leader_before = self.leader.clone();
        self.replace_static_member(&instance, &old_id, &new_id);
        self.reset_session(&new_id, now);
        let Some(m) = self.members.get(&new_id) else {
            return;
        };
        let old_protocols = m.protocols.clone();
        let old_rebalance_timeout_ms = m.rebalance_timeout_ms;
        let old_session_timeout_ms = m.session_timeout_ms;
        let mut req = req;
        req.member_id = new_id.clone();
        self.update_member(&req);

        let reason = RebalanceReason::StaticMemberReplaced(new_id.clone());
        match self.state {
            GroupState::Stable => {
                if self.protocol_name == self.select_protocol() {
                    let replacement = StaticReplacement {
                        instance_id: instance,
                        old_member_id: old_id,
                        new_member_id: new_id,
                        token: req.token,
                        supports_skip_assignment: req.supports_skip_assignment,
                        leader_before,
                        old_protocols,
                        old_rebalance_timeout_ms,
                        old_session_timeout_ms,
                    };
                    self.persist(WriteContinuation::StaticReplacement(Box::new(replacement)));
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(reason, now);
                }
            }
            // The leader may already be assigning with the old id: rebalance so that the new
            // id gets an assignment.
            GroupState::CompletingRebalance => self.prepare_rebalance(reason, now),
            _ => self.maybe_complete_join_phase(now),
        }
    }

    /// Kafka `ClassicGroup.replaceStaticMember`: the member keeps its place, fields and
    /// assignment under the new id; whatever the old id had parked is answered
    /// FENCED_INSTANCE_ID (the old process, if alive, must not continue). Leadership and a
    /// pending SyncGroup obligation move to the new id.
    pub(super) fn replace_static_member(
        &mut self,
        instance: &InstanceId,
        old_id: &MemberId,
        new_id: &MemberId,
    ) {
        let Some((index, mut member)) = self.detach_member(old_id) else {
            return;
        };
        if let Some(parked) = member.awaiting_join.take() {
            let reply = JoinReply::error(GroupError::FencedInstanceId, old_id.clone());
            self.reply_join(parked.token, reply);
        }
        if let Some(token) = member.awaiting_sync.take() {
            self.reply_sync(
                token,
                crate::group::output::SyncReply::error(GroupError::FencedInstanceId),
            );
        }
        self.cancel_timer(TimerKey::Heartbeat(old_id.clone()));
        self.event(GroupEvent::MemberRemoved {
            member: old_id.clone(),
            instance_id: Some(instance.clone()),
            reason: RemoveReason::FencedByStaticReplacement {
                new: new_id.clone(),
            },
        });
        member.id = new_id.clone();
        member.is_new = false;
        self.count_member(&member, true);
        self.members.shift_insert(index, new_id.clone(), member);
        self.static_members.insert(instance.clone(), new_id.clone());
        if let Some(pos) = self.pending_sync.get_index_of(old_id) {
            self.pending_sync.shift_remove_index(pos);
            self.pending_sync.insert(new_id.clone());
        }
        self.event(GroupEvent::MemberAdded {
            member: new_id.clone(),
            instance_id: Some(instance.clone()),
            reason: AddReason::ReplacedStatic {
                old: old_id.clone(),
            },
        });
        if self.is_leader(old_id) {
            self.leader = Some(new_id.clone());
            self.event(GroupEvent::LeaderChanged {
                old: Some(old_id.clone()),
                new: Some(new_id.clone()),
            });
        }
    }

    /// Forgets a KIP-394 pending id. Returns whether it was pending.
    pub(super) fn remove_pending_member(&mut self, id: &MemberId, reason: RemoveReason) -> bool {
        if !self.pending_members.shift_remove(id) {
            return false;
        }
        self.cancel_timer(TimerKey::Heartbeat(id.clone()));
        self.event(GroupEvent::MemberRemoved {
            member: id.clone(),
            instance_id: None,
            reason,
        });
        true
    }
}
