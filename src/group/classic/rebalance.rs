//! Transitions shared by every API: starting a rebalance, ending the join phase, delivering
//! (or failing) assignments; and the inputs that only drive them: timer expiries, write
//! completions, unload and delete.

use std::collections::HashMap;

use bytes::Bytes;

use super::{AssignorUpdate, ClassicGroup, InitialDelay, StaticReplacement, WriteContinuation};
use crate::assignor::server::{AssignmentInput, AssignmentMember, AssignmentMode, ServerAssignor};
use crate::group::output::{
    GroupEvent, GroupRecord, JoinMember, JoinReply, Output, RebalanceReason, RemoveReason,
    SyncReply,
};
use crate::group::timers::TimerKey;
use crate::group::types::{GroupState, WriteId};
use crate::vocab::GroupError;
use crate::vocab::{MemberId, Timestamp};

/// Metadata of a member that does not offer the selected protocol (cannot happen: the
/// selected protocol is one every member supports).
static NO_BYTES: Bytes = Bytes::new();

impl ClassicGroup {
    // ----- inputs: timers -----

    /// Fires every timer whose deadline is at or before `now`, earliest first. The single-sleep
    /// shell calls this when [`ClassicGroup::next_deadline`] has passed; calling it early or
    /// twice is harmless.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        while let Some((key, deadline)) = self.timers.next() {
            if deadline > now {
                break;
            }
            self.handle_timer(key, now);
        }
    }

    /// One keyed timer fired (the keyed-timer shell). Re-checked against the table: a timer
    /// that was re-armed later, cancelled, or already fired does nothing.
    pub fn handle_timer(&mut self, key: TimerKey, now: Timestamp) {
        if !self.timers.take_if_expired(&key, now) {
            return;
        }
        match key {
            TimerKey::Heartbeat(member) => self.on_heartbeat_timeout(&member, now),
            TimerKey::InitialDelay => self.on_initial_delay_timeout(now),
            TimerKey::Join => self.on_join_timeout(now),
            TimerKey::PendingSync => self.on_pending_sync_timeout(now),
            TimerKey::FollowUp => {
                if self.state == GroupState::Stable && self.pending_sync.is_empty() {
                    self.prepare_rebalance(RebalanceReason::AssignorFollowUp, now);
                } else if matches!(
                    self.state,
                    GroupState::Stable | GroupState::CompletingRebalance
                ) {
                    // Members of this generation still wait for their assignment: starting now
                    // would fail their SyncGroups. The last SyncGroup re-arms it.
                    self.follow_up_due = true;
                }
            }
        }
    }

    /// Arms (or cancels) the server assignor's follow-up.
    pub(super) fn set_follow_up(&mut self, at: Option<Timestamp>) {
        self.follow_up = at;
        self.follow_up_due = false;
        match at {
            Some(at) => self.set_timer(TimerKey::FollowUp, at),
            None => self.cancel_timer(TimerKey::FollowUp),
        }
    }

    /// A follow-up that came due while members were syncing fires once the last has synced,
    /// as a timer of its own (after that member's reply).
    pub(super) fn maybe_rearm_follow_up(&mut self, now: Timestamp) {
        if self.follow_up_due && self.state == GroupState::Stable && self.pending_sync.is_empty() {
            self.follow_up_due = false;
            self.set_timer(TimerKey::FollowUp, now);
        }
    }

    /// The initial-rebalance delay ran out (Kafka `tryCompleteInitialRebalanceElseSchedule`):
    /// if members joined meanwhile and rebalance time remains, wait again
    /// (min(delay, remaining), remaining -= the delay that just ran); else end the join phase.
    fn on_initial_delay_timeout(&mut self, now: Timestamp) {
        let Some(running) = self.initial_delay.take() else {
            return;
        };
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.new_member_added && running.remaining_ms != 0 {
            self.new_member_added = false;
            let next = InitialDelay {
                delay_ms: self
                    .config
                    .initial_rebalance_delay_ms
                    .min(running.remaining_ms),
                remaining_ms: running.remaining_ms.saturating_sub(running.delay_ms),
            };
            self.initial_delay = Some(next);
            self.set_timer(TimerKey::InitialDelay, now.plus_ms(next.delay_ms));
        } else {
            self.complete_join(now);
        }
    }

    /// The rebalance timeout of the join phase ran out: end it with whoever rejoined.
    fn on_join_timeout(&mut self, now: Timestamp) {
        if self.state == GroupState::PreparingRebalance {
            self.complete_join(now);
        }
    }

    /// Members of the generation that never sent SyncGroup within the rebalance timeout are
    /// removed and the group rebalances (Kafka `expirePendingSync`).
    fn on_pending_sync_timeout(&mut self, now: Timestamp) {
        if self.pending_sync_generation != self.generation
            || !matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
            || self.pending_sync.is_empty()
        {
            return;
        }
        let laggards: Vec<MemberId> = self.pending_sync.iter().cloned().collect();
        for id in &laggards {
            self.remove_member(id, RemoveReason::NotSynced);
        }
        self.prepare_rebalance(RebalanceReason::PendingSyncExpired(laggards), now);
    }

    // ----- inputs: writes, unload, delete -----

    /// The shell persisted (or failed to persist) the record of `write`. `result` carries the
    /// storage error already mapped to a group error (Kafka's append-error remap, spec §0).
    /// Unknown or repeated ids are ignored.
    pub fn handle_write_complete(
        &mut self,
        write: WriteId,
        result: Result<(), GroupError>,
        now: Timestamp,
    ) {
        let Some(continuation) = self.pending_writes.remove(&write) else {
            return;
        };
        match continuation {
            WriteContinuation::None => {}
            WriteContinuation::Assignment {
                generation,
                assignment,
                assignor,
            } => {
                // Another member may have joined while the write ran: only install an
                // assignment for the generation that is still waiting for it.
                if self.state != GroupState::CompletingRebalance || generation != self.generation {
                    return;
                }
                match result {
                    Err(error) => {
                        // SyncGroup never answers COORDINATOR_LOAD_IN_PROGRESS (clients do not
                        // expect it there, Kafka's GroupCoordinator): the group rebalances, so
                        // its members rejoin.
                        let answered = match error {
                            GroupError::CoordinatorLoadInProgress => {
                                GroupError::RebalanceInProgress
                            }
                            e => e,
                        };
                        self.reset_and_propagate_assignment_with_error(answered, now);
                        self.maybe_prepare_rebalance_or_complete_join(
                            RebalanceReason::AssignmentWriteFailed(error),
                            now,
                        );
                    }
                    Ok(()) => {
                        for m in self.members.values_mut() {
                            m.assignment = assignment.get(&m.id).cloned().unwrap_or_default();
                        }
                        self.propagate_assignment(None, now);
                        self.transition_to(GroupState::Stable, now);
                        let assigned_by = if self.has_server_assignment() {
                            self.server_assignor_name().map(str::to_owned)
                        } else {
                            None
                        };
                        self.event(GroupEvent::AssignmentInstalled {
                            generation,
                            assigned_by,
                        });
                        if let Some(update) = assignor {
                            self.assignor_state = update.state;
                            self.set_follow_up(update.follow_up);
                        }
                    }
                }
            }
            WriteContinuation::StaticReplacement(r) => {
                self.finish_static_replacement(*r, result, now)
            }
            WriteContinuation::Delete => {
                if result.is_err() && self.state == GroupState::Dead {
                    self.set_state(GroupState::Empty, now);
                }
            }
        }
    }

    /// The partition of this group moved away or the node shuts down (Kafka `onUnloaded`):
    /// Dead, every parked request answered NOT_COORDINATOR, every timer cancelled.
    pub fn handle_unload(&mut self, now: Timestamp) {
        self.answer_all_parked(GroupError::NotCoordinator);
        // Unloaded, it stays Dead even should a pending tombstone fail.
        for continuation in self.pending_writes.values_mut() {
            if matches!(continuation, WriteContinuation::Delete) {
                *continuation = WriteContinuation::None;
            }
        }
        for key in self.timers.keys() {
            self.cancel_timer(key);
        }
        self.transition_to(GroupState::Dead, now);
    }

    /// DeleteGroups for this group: only an Empty group can be deleted; it becomes Dead and a
    /// tombstone is persisted (should that write fail, it is Empty again).
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND if already Dead, NON_EMPTY_GROUP if it has members.
    pub fn handle_delete(&mut self, now: Timestamp) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => Err(GroupError::GroupIdNotFound),
            GroupState::Empty => {
                for key in self.timers.keys() {
                    self.cancel_timer(key);
                }
                self.transition_to(GroupState::Dead, now);
                let write = WriteId(self.next_write);
                self.next_write += 1;
                self.pending_writes.insert(write, WriteContinuation::Delete);
                self.outputs.push_back(Output::Persist {
                    write,
                    record: GroupRecord::Tombstone,
                });
                Ok(())
            }
            _ => Err(GroupError::NonEmptyGroup),
        }
    }

    fn answer_all_parked(&mut self, error: GroupError) {
        let ids: Vec<MemberId> = self.members.keys().cloned().collect();
        for id in ids {
            let join = self.take_parked_join(&id);
            let sync = self
                .members
                .get_mut(&id)
                .and_then(|m| m.awaiting_sync.take());
            if let Some(parked) = join {
                self.reply_join(parked.token, JoinReply::error(error, id.clone()));
            }
            if let Some(token) = sync {
                self.reply_sync(token, SyncReply::error(error));
            }
        }
    }

    // ----- shared transitions -----

    /// Rebalance if the state allows it, otherwise try to end the join phase (Kafka
    /// `maybePrepareRebalanceOrCompleteJoin`).
    pub(super) fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        reason: RebalanceReason,
        now: Timestamp,
    ) {
        if self.can_rebalance() {
            self.prepare_rebalance(reason, now);
        } else {
            self.maybe_complete_join_phase(now);
        }
    }

    /// Starts a rebalance (Kafka `prepareRebalance`). Parked SyncGroups of the generation being
    /// abandoned get REBALANCE_IN_PROGRESS; a rebalance out of Empty waits the initial delay and
    /// never ends early; any other ends as soon as every member has rejoined.
    pub(super) fn prepare_rebalance(&mut self, reason: RebalanceReason, now: Timestamp) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_and_propagate_assignment_with_error(GroupError::RebalanceInProgress, now);
        }
        self.pending_sync.clear();
        self.cancel_timer(TimerKey::PendingSync);
        self.server_assigned = None;
        // The next assignment decides whether another follow-up is needed.
        if self.follow_up.is_some() {
            self.set_follow_up(None);
        }

        let initial = self.state == GroupState::Empty;
        if initial {
            let delay_ms = self.config.initial_rebalance_delay_ms;
            let remaining_ms = self.rebalance_timeout_ms().saturating_sub(delay_ms);
            self.initial_delay = Some(InitialDelay {
                delay_ms,
                remaining_ms,
            });
            self.new_member_added = false;
            self.set_timer(TimerKey::InitialDelay, now.plus_ms(delay_ms));
        }
        self.transition_to(GroupState::PreparingRebalance, now);
        self.event(GroupEvent::RebalanceStarted {
            generation: self.generation,
            reason,
        });
        self.watch_rebalance_start(now);
        if !initial {
            self.maybe_complete_join_else_schedule(now);
        }
    }

    /// Ends the join phase if every member has rejoined, except during an initial rebalance
    /// (Kafka `maybeCompleteJoinPhase`).
    pub(super) fn maybe_complete_join_phase(&mut self, now: Timestamp) {
        if self.state == GroupState::PreparingRebalance
            && self.previous_state != GroupState::Empty
            && self.has_all_members_joined()
        {
            self.complete_join(now);
        }
    }

    fn maybe_complete_join_else_schedule(&mut self, now: Timestamp) {
        if self.has_all_members_joined() {
            self.complete_join(now);
        } else {
            let deadline = now.plus_ms(self.rebalance_timeout_ms());
            self.set_timer(TimerKey::Join, deadline);
        }
    }

    /// Ends the join phase (Kafka `completeClassicGroupJoin`): dynamic members that did not
    /// rejoin are removed (static ones are kept), the leader is kept if it rejoined (else the
    /// first rejoined member leads), and the next generation starts: CompletingRebalance with a
    /// reply to every parked JoinGroup, or Empty if nobody is left. If members remain but none
    /// rejoined, the join phase is extended by another rebalance timeout.
    pub(super) fn complete_join(&mut self, now: Timestamp) {
        self.cancel_timer(TimerKey::Join);
        self.cancel_timer(TimerKey::InitialDelay);
        self.initial_delay = None;

        let not_rejoined: Vec<MemberId> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && !m.is_static())
            .map(|m| m.id.clone())
            .collect();
        for id in &not_rejoined {
            self.remove_member(id, RemoveReason::NotRejoined);
        }

        if self.state == GroupState::Dead {
            return;
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that did not rejoin are left: wait for them (or for their
            // sessions to expire) for another rebalance timeout.
            let deadline = now.plus_ms(self.rebalance_timeout_ms());
            self.set_timer(TimerKey::Join, deadline);
            return;
        }

        self.generation = self.generation.next();
        self.pending_sync.clear();
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition_to(GroupState::Empty, now);
            self.log_generation();
            self.persist(WriteContinuation::None);
            return;
        }
        self.protocol_name = self.select_protocol();
        self.transition_to(GroupState::CompletingRebalance, now);
        self.log_generation();

        let server_assignment = self.compute_server_assignment(now);
        let members = self.join_members();
        let ids: Vec<MemberId> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = self.is_leader(&id);
            let parked = self.take_parked_join(&id);
            let session = match self.members.get_mut(&id) {
                Some(m) => {
                    m.is_new = false;
                    m.session_timeout_ms
                }
                None => continue,
            };
            if let Some(parked) = parked {
                let reply = JoinReply {
                    error: None,
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    leader: self.leader.clone().unwrap_or_default(),
                    // Kafka sets SkipAssignment only for a replaced static leader (KIP-814):
                    // clients read it so, and some then compare plans. The leader of a
                    // server-assigned generation computes one anyway, and koord ignores it.
                    skip_assignment: false,
                    member_id: id.clone(),
                    members: if is_leader {
                        members.clone()
                    } else {
                        Vec::new()
                    },
                };
                self.reply_join(parked.token, reply);
            }
            // Every member's session restarts with the new generation, the replied ones
            // because the reply is their proof of life, the others (static members that did
            // not rejoin) so that they get a full session to come back.
            self.reschedule_heartbeat(&id, session, now);
            self.pending_sync.insert(id);
        }
        self.pending_sync_generation = self.generation;
        let deadline = now.plus_ms(self.rebalance_timeout_ms());
        self.set_timer(TimerKey::PendingSync, deadline);
        if let Some((assignment, update)) = server_assignment {
            // Written now, installed once durable: the members' SyncGroups wait for the write,
            // not for the leader.
            self.persist(WriteContinuation::Assignment {
                generation: self.generation,
                assignment,
                assignor: Some(update),
            });
        }
    }

    /// Kafka `maybeElectNewJoinedLeader`: keep the leader if it rejoined, else hand leadership
    /// to the first member that did. False if there is no leader or nobody rejoined.
    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        let Some(new) = self
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .map(|m| m.id.clone())
        else {
            return false;
        };
        self.event(GroupEvent::LeaderChanged {
            old: Some(leader),
            new: Some(new.clone()),
        });
        self.leader = Some(new);
        true
    }

    fn log_generation(&mut self) {
        self.event(GroupEvent::GenerationStarted {
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            members: self.members.keys().cloned().collect(),
        });
    }

    /// The members as the leader's JoinGroup reply lists them, with their metadata for the
    /// selected protocol.
    pub(super) fn join_members(&self) -> Vec<JoinMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        self.members
            .values()
            .map(|m| JoinMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    /// The server assignor of a group of this protocol type, if the server assigns it.
    pub(super) fn server_assignor(&self, protocol_type: &str) -> Option<&dyn ServerAssignor> {
        match &self.config.assignment {
            AssignmentMode::Server(assignor)
                if assignor.serves(protocol_type) && !self.watch.leader_assigns =>
            {
                Some(assignor.as_ref())
            }
            _ => None,
        }
    }

    /// The name of the assignor that assigns this group's generation, if the server does.
    pub fn server_assignor_name(&self) -> Option<&str> {
        self.server_assignor(self.protocol_type.as_deref()?)?
            .assignor_for(self.protocol_name.as_deref()?)
    }

    /// The server-assignment seam at the end of the join phase: this generation's assignment
    /// of every member, if the server computes it (the leader is then told to skip assigning).
    fn compute_server_assignment(
        &mut self,
        now: Timestamp,
    ) -> Option<(HashMap<MemberId, Bytes>, AssignorUpdate)> {
        self.server_assigned = None;
        let (Some(protocol_type), Some(protocol_name)) = (&self.protocol_type, &self.protocol_name)
        else {
            return None;
        };
        let assignor = self.server_assignor(protocol_type)?;
        let name = assignor.assignor_for(protocol_name)?.to_owned();
        let input = AssignmentInput {
            now,
            state: &self.assignor_state,
            group_id: &self.id,
            generation: self.generation,
            protocol_type,
            protocol_name,
            members: self
                .members
                .values()
                .map(|m| AssignmentMember {
                    member_id: &m.id,
                    instance_id: m.instance_id.as_ref(),
                    metadata: m
                        .protocols
                        .iter()
                        .find(|p| &p.name == protocol_name)
                        .map(|p| &p.metadata)
                        .unwrap_or(&NO_BYTES),
                    current_assignment: &m.assignment,
                })
                .collect(),
        };
        let outcome = assignor.assign(&input).ok()?;
        if let Some(warning) = outcome.warning {
            self.event(GroupEvent::AssignorWarning {
                generation: self.generation,
                assignor: name.clone(),
                warning,
            });
        }
        if let Some(summary) = outcome.summary {
            self.event(GroupEvent::AssignmentPlanned {
                generation: self.generation,
                assignor: name,
                summary,
            });
        }
        let mut map: HashMap<MemberId, Bytes> = outcome.assignments.into_iter().collect();
        // Every member gets an entry; entries for non-members are dropped.
        let assignment = self
            .members
            .keys()
            .map(|id| (id.clone(), map.remove(id).unwrap_or_default()))
            .collect();
        self.server_assigned = Some(self.generation);
        let update = AssignorUpdate {
            state: outcome.state,
            follow_up: outcome.follow_up,
        };
        Some((assignment, update))
    }

    /// Clears every assignment and fails every parked SyncGroup with `error` (Kafka
    /// `resetAndPropagateAssignmentWithError`).
    pub(super) fn reset_and_propagate_assignment_with_error(
        &mut self,
        error: GroupError,
        now: Timestamp,
    ) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate_assignment(Some(error), now);
    }

    /// Answers every parked SyncGroup with its member's assignment (or `error`), restarting
    /// the session of each member answered: a session that ran out while it waited for the
    /// leader was ignored, so it must start afresh now.
    fn propagate_assignment(&mut self, error: Option<GroupError>, now: Timestamp) {
        let ids: Vec<MemberId> = self.members.keys().cloned().collect();
        for id in ids {
            let Some(m) = self.members.get_mut(&id) else {
                continue;
            };
            let Some(token) = m.awaiting_sync.take() else {
                continue;
            };
            let session = m.session_timeout_ms;
            let reply = match error {
                Some(error) => SyncReply::error(error),
                None => SyncReply {
                    error: None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                },
            };
            self.reply_sync(token, reply);
            self.reschedule_heartbeat(&id, session, now);
        }
    }

    /// Answers (or reverts) a static member replacement once its record is written.
    fn finish_static_replacement(
        &mut self,
        r: StaticReplacement,
        result: Result<(), GroupError>,
        now: Timestamp,
    ) {
        let still_parked = self
            .members
            .get(&r.new_member_id)
            .and_then(|m| m.awaiting_join)
            .is_some_and(|p| p.token == r.token);
        if !still_parked {
            // Answered meanwhile (a rebalance started and ended, or the member left).
            return;
        }
        match result {
            Ok(()) => {
                self.take_parked_join(&r.new_member_id);
                let reply = if r.supports_skip_assignment {
                    // KIP-814: a replaced leader gets the members and skips assigning; it
                    // only needs SyncGroup to fetch its (unchanged) assignment.
                    let is_leader = self.is_leader(&r.new_member_id);
                    JoinReply {
                        error: None,
                        generation: self.generation,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        leader: self.leader.clone().unwrap_or_default(),
                        skip_assignment: is_leader,
                        member_id: r.new_member_id.clone(),
                        members: if is_leader {
                            self.join_members()
                        } else {
                            Vec::new()
                        },
                    }
                } else {
                    // Before v9 the replaced leader is told the old leader id, so it acts as a
                    // follower and does not recompute an assignment.
                    JoinReply {
                        error: None,
                        generation: self.generation,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        leader: r.leader_before.clone().unwrap_or_default(),
                        skip_assignment: false,
                        member_id: r.new_member_id.clone(),
                        members: Vec::new(),
                    }
                };
                self.reply_join(r.token, reply);
                // Its session may have lapsed while the write ran (a parked member's expiry
                // is ignored); the reply is proof of life.
                self.reset_session(&r.new_member_id, now);
            }
            Err(error) => {
                self.take_parked_join(&r.new_member_id);
                self.set_protocols(&r.new_member_id, r.old_protocols.clone());
                if let Some(m) = self.members.get_mut(&r.new_member_id) {
                    m.rebalance_timeout_ms = r.old_rebalance_timeout_ms;
                    m.session_timeout_ms = r.old_session_timeout_ms;
                }
                self.replace_static_member(&r.instance_id, &r.new_member_id, &r.old_member_id);
                self.reset_session(&r.old_member_id, now);
                let reply = JoinReply {
                    error: Some(error),
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    leader: r.leader_before.clone().unwrap_or_default(),
                    skip_assignment: false,
                    member_id: MemberId::unknown(),
                    members: Vec::new(),
                };
                self.reply_join(r.token, reply);
            }
        }
    }
}
