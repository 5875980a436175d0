//! The classic group state machine (Kafka `ClassicGroup` + the classic half of
//! `GroupMetadataManager`).
//!
//! Split by concern: this file holds the state, bookkeeping and output helpers; `join.rs`,
//! `sync.rs`, `membership.rs` (Heartbeat, LeaveGroup, expiry) and `offsets.rs` hold the API
//! handlers; `rebalance.rs` the transitions shared by all of them (prepare a rebalance, complete
//! the join phase, propagate assignments) and the timers and write completions that drive them.

pub mod codec;
mod join;
mod membership;
mod offsets;
mod rebalance;
mod sync;
mod watch;

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};

use super::member::{Member, ParkedJoin};
use super::output::{
    AddReason, GroupEvent, GroupRecord, JoinReply, Output, RemoveReason, SyncReply,
};
use super::timers::{TimerChange, TimerKey, TimerTable};
use super::types::{GroupState, RequestToken, WriteId};
use super::GroupConfig;
use crate::vocab::{
    Generation, GroupId, GroupMetadataRecord, InstanceId, MemberId, MemberRecord, Protocol,
    Timestamp,
};
use crate::vocab::{GroupError, IdHasher, IdMap};
use watch::Watch;

/// The parameters of the running initial-rebalance delay (spec §1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InitialDelay {
    /// The delay that is currently running.
    delay_ms: u64,
    /// What remains of the rebalance timeout after it.
    remaining_ms: u64,
}

/// What to do when a persisted record is acknowledged.
#[derive(Debug, Clone)]
enum WriteContinuation {
    /// Nothing depends on it (group created, group became Empty).
    None,
    /// The assignment for `generation` (the leader's or the server's): install and propagate
    /// it, or fail the syncs.
    Assignment {
        generation: Generation,
        assignment: HashMap<MemberId, Bytes>,
        /// The server assignor's state and follow-up, installed with it.
        assignor: Option<AssignorUpdate>,
    },
    /// A static member replaced while Stable: answer its JoinGroup, or revert on failure.
    StaticReplacement(Box<StaticReplacement>),
    /// The tombstone of a DeleteGroups: on failure the group is Empty again, as if the delete
    /// had not happened (Kafka reverts the coordinator's state when its write fails).
    Delete,
}

/// A server assignor's state for the group as of a generation, and when it wants the next
/// rebalance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct AssignorUpdate {
    state: Bytes,
    follow_up: Option<Timestamp>,
}

/// Everything needed to answer, or undo, a static member replacement while Stable.
#[derive(Debug, Clone)]
struct StaticReplacement {
    instance_id: InstanceId,
    old_member_id: MemberId,
    new_member_id: MemberId,
    token: RequestToken,
    supports_skip_assignment: bool,
    /// The leader before the replacement: a pre-v9 replaced leader is told this (old) id, so it
    /// does not believe it must compute an assignment.
    leader_before: Option<MemberId>,
    old_protocols: Vec<Protocol>,
    old_rebalance_timeout_ms: u64,
    old_session_timeout_ms: u64,
}

/// One classic consumer group. See the module docs of [`crate::group`] for the I/O contract.
#[derive(Debug)]
pub struct ClassicGroup {
    id: GroupId,
    config: GroupConfig,
    state: GroupState,
    previous_state: GroupState,
    /// When the group entered `state` (Kafka `currentStateTimestamp`; offset retention of an
    /// Empty group counts from it).
    state_timestamp: Timestamp,
    generation: Generation,
    /// None until the first member joins; None forever for a simple (offsets-only) group.
    protocol_type: Option<String>,
    /// The protocol selected for the current generation.
    protocol_name: Option<String>,
    leader: Option<MemberId>,
    /// In join order: the first member becomes leader when the leader goes away.
    members: IndexMap<MemberId, Member, IdHasher>,
    /// How many members have a parked JoinGroup (Kafka `numMembersAwaitingJoinResponse`), kept
    /// in step by [`ClassicGroup::park_join`] / [`ClassicGroup::take_parked_join`] so that join
    /// accounting is O(1) per request in large groups.
    awaiting_join_count: usize,
    /// How many members offer each protocol name (Kafka `supportedProtocols`).
    protocol_counts: HashMap<String, usize>,
    static_members: IdMap<InstanceId, MemberId>,
    /// KIP-394: ids handed out with MEMBER_ID_REQUIRED, not yet joined with.
    pending_members: IndexSet<MemberId, IdHasher>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pending_sync: IndexSet<MemberId, IdHasher>,
    /// The generation the PendingSync timer was armed for.
    pending_sync_generation: Generation,
    /// A member joined during the initial delay, which extends it.
    new_member_added: bool,
    initial_delay: Option<InitialDelay>,
    /// The generation whose assignment koord computed (being written, or installed): its
    /// leader is told to skip assigning and what it sends in SyncGroup is ignored.
    server_assigned: Option<Generation>,
    /// The server assignor's state as of the installed generation (persisted with the group).
    assignor_state: Bytes,
    /// When the server assignor wants the next rebalance (the FollowUp timer), persisted.
    follow_up: Option<Timestamp>,
    /// The FollowUp timer fired while members of the generation had not synced yet: the
    /// rebalance starts once they have.
    follow_up_due: bool,
    /// The fallback guard and the rebalance-storm report.
    watch: Watch,
    timers: TimerTable,
    outputs: VecDeque<Output>,
    next_write: u64,
    pending_writes: HashMap<WriteId, WriteContinuation>,
}

impl ClassicGroup {
    /// A new group in Empty, generation 0, as a JoinGroup without member id creates it. Emits
    /// the creation record (Kafka writes an empty GroupMetadata record for a new group).
    pub fn new(id: GroupId, config: GroupConfig, now: Timestamp) -> ClassicGroup {
        let mut group = ClassicGroup {
            id,
            config,
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_timestamp: now,
            generation: Generation(0),
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: IndexMap::default(),
            awaiting_join_count: 0,
            protocol_counts: HashMap::new(),
            static_members: IdMap::default(),
            pending_members: IndexSet::default(),
            pending_sync: IndexSet::default(),
            pending_sync_generation: Generation(0),
            new_member_added: false,
            initial_delay: None,
            server_assigned: None,
            assignor_state: Bytes::new(),
            follow_up: None,
            follow_up_due: false,
            watch: Watch::default(),
            timers: TimerTable::default(),
            outputs: VecDeque::new(),
            next_write: 0,
            pending_writes: HashMap::new(),
        };
        group.persist(WriteContinuation::None);
        group
    }

    /// A simple group: created by an offset commit outside group management (generation < 0).
    /// It is an Empty classic group without protocol type.
    pub fn new_simple(id: GroupId, config: GroupConfig, now: Timestamp) -> ClassicGroup {
        ClassicGroup::new(id, config, now)
    }

    /// Rebuilds a group from its last persisted record (Kafka `replay` + `onLoaded`): Stable if
    /// it has members, else Empty; every member gets a fresh session, and a group above
    /// `group.max.size` (the setting may have shrunk) rebalances at once.
    pub fn from_record(
        id: GroupId,
        config: GroupConfig,
        record: &GroupMetadataRecord,
        now: Timestamp,
    ) -> ClassicGroup {
        let mut group = ClassicGroup::new(id, config, now);
        group.outputs.clear();
        group.pending_writes.clear();
        group.generation = record.generation;
        group.protocol_type = record.protocol_type.clone().filter(|t| !t.is_empty());
        group.protocol_name = record.protocol_name.clone();
        group.state_timestamp = record.state_timestamp;
        group.assignor_state = record.assignor_state.clone();
        for m in &record.members {
            let protocols = match &record.protocol_name {
                Some(name) => vec![Protocol::new(name.clone(), m.subscription.clone())],
                None => Vec::new(),
            };
            let member = Member {
                id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocols,
                assignment: m.assignment.clone(),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
            };
            group.insert_member(member, AddReason::Loaded);
        }
        if let Some(leader) = &record.leader {
            if group.members.contains_key(leader) {
                group.leader = Some(leader.clone());
            }
        }
        if !group.members.is_empty() {
            group.state = GroupState::Stable;
            group.previous_state = GroupState::CompletingRebalance;
            let sessions: Vec<_> = group
                .members
                .values()
                .map(|m| (m.id.clone(), m.session_timeout_ms))
                .collect();
            for (id, timeout) in sessions {
                group.reschedule_heartbeat(&id, timeout, now);
            }
            if group.members.len() > group.config.max_size {
                group.prepare_rebalance(super::output::RebalanceReason::LoadedOverCapacity, now);
            } else if let Some(at) = record.follow_up {
                // A warm-up or deadline that was running before the restart (possibly already
                // past: then the rebalance starts at once).
                group.set_follow_up(Some(at));
            }
        }
        group
    }

    /// The classic group a consumer group becomes when its last consumer-protocol member
    /// leaves (Kafka's `fromConsumerGroup` and the rebalance that follows it): Stable at
    /// `generation` with `members` (their protocols and assignments), the protocol they vote
    /// for, the first as leader, and a rebalance started at once, so that every member joins
    /// the classic way. Nothing is persisted: the caller stores [`Self::metadata_record`] in
    /// place of the consumer group's records.
    pub fn from_consumer_group(
        id: GroupId,
        config: GroupConfig,
        generation: Generation,
        members: Vec<Member>,
        now: Timestamp,
    ) -> ClassicGroup {
        let mut group = ClassicGroup::new(id, config, now);
        group.outputs.clear();
        group.pending_writes.clear();
        group.generation = generation;
        group.protocol_type = Some("consumer".to_owned());
        for m in members {
            let (id, timeout) = (m.id.clone(), m.session_timeout_ms);
            group.insert_member(m, AddReason::Downgraded);
            group.reschedule_heartbeat(&id, timeout, now);
        }
        group.protocol_name = group.select_protocol();
        group.state = GroupState::Stable;
        group.previous_state = GroupState::CompletingRebalance;
        if !group.members.is_empty() {
            group.prepare_rebalance(super::output::RebalanceReason::Downgraded, now);
        }
        group
    }

    // ----- getters -----

    /// The group's settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn id(&self) -> &GroupId {
        &self.id
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn previous_state(&self) -> GroupState {
        self.previous_state
    }

    pub fn state_timestamp(&self) -> Timestamp {
        self.state_timestamp
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    pub fn leader(&self) -> Option<&MemberId> {
        self.leader.as_ref()
    }

    /// The server assignor's state, as its last plan left it (opaque to the core).
    pub fn assignor_state(&self) -> &[u8] {
        &self.assignor_state
    }

    pub fn is_leader(&self, member: &MemberId) -> bool {
        self.leader.as_ref() == Some(member)
    }

    /// Members in join order (DescribeGroups).
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    pub fn member(&self, id: &MemberId) -> Option<&Member> {
        self.members.get(id)
    }

    pub fn has_member(&self, id: &MemberId) -> bool {
        self.members.contains_key(id)
    }

    pub fn num_members(&self) -> usize {
        self.members.len()
    }

    pub fn is_pending_member(&self, id: &MemberId) -> bool {
        self.pending_members.contains(id)
    }

    pub fn static_member_id(&self, instance: &InstanceId) -> Option<&MemberId> {
        self.static_members.get(instance)
    }

    /// The armed deadline of `key`, if any.
    pub fn timer_deadline(&self, key: &TimerKey) -> Option<Timestamp> {
        self.timers.deadline(key)
    }

    /// The earliest armed deadline: a single-sleep shell sleeps until then and calls
    /// [`ClassicGroup::handle_timeout`].
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next_deadline()
    }

    /// Every armed timer key.
    pub fn armed_timers(&self) -> Vec<TimerKey> {
        self.timers.keys()
    }

    /// The next output, in order. Drain until `None` after every input.
    ///
    /// Once drained, the group gives back room it no longer uses (see
    /// `ClassicGroup::release_spare_capacity`).
    pub fn poll_output(&mut self) -> Option<Output> {
        let out = self.outputs.pop_front();
        if out.is_none() {
            self.release_spare_capacity();
        }
        out
    }

    /// Frees what the last burst left allocated but unused: a join phase queues a reply and a
    /// timer change per member, a write continuation per record and a pending-sync entry per
    /// member, and then the group idles for hours. Idle groups are the common case (the memory
    /// per idle member is a goal of the project), so their queues and maps hold nothing. Cheap
    /// when there is nothing to give back: a few capacity checks per input. Members are
    /// trimmed only outside a join phase, which would grow them again member by member.
    fn release_spare_capacity(&mut self) {
        if self.outputs.capacity() > 0 {
            self.outputs = VecDeque::new();
        }
        if self.pending_writes.is_empty() && self.pending_writes.capacity() > 0 {
            self.pending_writes = HashMap::new();
        }
        if self.pending_sync.is_empty() && self.pending_sync.capacity() > 0 {
            self.pending_sync = IndexSet::default();
        }
        if self.pending_members.is_empty() && self.pending_members.capacity() > 0 {
            self.pending_members = IndexSet::default();
        }
        if matches!(self.state, GroupState::Stable | GroupState::Empty)
            && self.members.capacity() > self.members.len()
        {
            self.members.shrink_to_fit();
        }
    }

    /// Every pending output, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.outputs.drain(..).collect()
    }

    /// The group's current metadata as it would be persisted.
    pub fn metadata_record(&self) -> GroupMetadataRecord {
        self.record_with(None, None)
    }

    // ----- output helpers -----

    fn event(&mut self, event: GroupEvent) {
        self.outputs.push_back(Output::Event(event));
    }

    fn reply_join(&mut self, token: RequestToken, reply: JoinReply) {
        self.outputs.push_back(Output::JoinReply { token, reply });
    }

    fn reply_sync(&mut self, token: RequestToken, reply: SyncReply) {
        self.outputs.push_back(Output::SyncReply { token, reply });
    }

    fn set_timer(&mut self, key: TimerKey, deadline: Timestamp) {
        if !self.timers.reset(&key, deadline) {
            self.timers.set(key.clone(), deadline);
        }
        if self.config.timer_outputs {
            self.outputs
                .push_back(Output::Timer(TimerChange::Set { key, deadline }));
        }
    }

    fn cancel_timer(&mut self, key: TimerKey) {
        if self.timers.cancel(&key) && self.config.timer_outputs {
            self.outputs
                .push_back(Output::Timer(TimerChange::Cancel { key }));
        }
    }

    /// Restarts `member`'s session: its Heartbeat timer now fires `timeout_ms` from `now`.
    fn reschedule_heartbeat(&mut self, member: &MemberId, timeout_ms: u64, now: Timestamp) {
        self.set_timer(TimerKey::Heartbeat(member.clone()), now.plus_ms(timeout_ms));
    }

    /// Restarts a member's session with its own session timeout.
    fn reset_session(&mut self, member: &MemberId, now: Timestamp) {
        if let Some(timeout) = self.members.get(member).map(|m| m.session_timeout_ms) {
            self.reschedule_heartbeat(member, timeout, now);
        }
    }

    /// Persists the group's current metadata with `continuation`.
    fn persist(&mut self, continuation: WriteContinuation) -> WriteId {
        let record = match &continuation {
            WriteContinuation::Assignment {
                assignment,
                assignor,
                ..
            } => self.record_with(Some(assignment), assignor.as_ref()),
            _ => self.record_with(None, None),
        };
        let record = GroupRecord::Metadata(record);
        let write = WriteId(self.next_write);
        self.next_write += 1;
        self.pending_writes.insert(write, continuation);
        self.outputs.push_back(Output::Persist { write, record });
        write
    }

    /// The record as it will be once `assignment` and `assignor` (if given) are installed.
    fn record_with(
        &self,
        assignment: Option<&HashMap<MemberId, Bytes>>,
        assignor: Option<&AssignorUpdate>,
    ) -> GroupMetadataRecord {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        let (assignor_state, follow_up) = match assignor {
            Some(update) => (update.state.clone(), update.follow_up),
            None => (self.assignor_state.clone(), self.follow_up),
        };
        GroupMetadataRecord {
            assignor_state,
            follow_up,
            protocol_type: self.protocol_type.clone(),
            generation: self.generation,
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_timestamp,
            members: self
                .members
                .values()
                .map(|m| MemberRecord {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(protocol),
                    assignment: assignment
                        .and_then(|a| a.get(&m.id).cloned())
                        .unwrap_or_else(|| m.assignment.clone()),
                })
                .collect(),
        }
    }

    fn transition_to(&mut self, to: GroupState, now: Timestamp) {
        debug_assert!(
            self.state.can_transition_to(to),
            "invalid transition {} -> {}",
            self.state,
            to
        );
        self.set_state(to, now);
    }

    /// Enters `to` whether or not Kafka's state graph has that edge ([`Self::transition_to`]
    /// checks it; undoing a failed delete does not).
    fn set_state(&mut self, to: GroupState, now: Timestamp) {
        let from = self.state;
        self.previous_state = from;
        self.state = to;
        self.state_timestamp = now;
        self.event(GroupEvent::StateChanged { from, to });
    }

    // ----- member bookkeeping -----

    /// Adds a member (Kafka `ClassicGroup.add`); it becomes leader if there is none. The caller
    /// sets the protocol type when the first member joins.
    fn insert_member(&mut self, member: Member, reason: AddReason) {
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        self.pending_members.shift_remove(&member.id);
        self.event(GroupEvent::MemberAdded {
            member: member.id.clone(),
            instance_id: member.instance_id.clone(),
            reason,
        });
        self.count_member(&member, true);
        self.members.insert(member.id.clone(), member);
    }

    /// Adds (or, with `add == false`, withdraws) a member's contribution to the counters.
    fn count_member(&mut self, member: &Member, add: bool) {
        if member.awaiting_join.is_some() {
            if add {
                self.awaiting_join_count += 1;
            } else {
                self.awaiting_join_count -= 1;
            }
        }
        self.count_protocols(&member.protocols, add);
    }

    fn count_protocols(&mut self, protocols: &[Protocol], add: bool) {
        // A name offered twice by one member counts once: the counts say how many *members*
        // support a protocol.
        let mut seen: Vec<&str> = Vec::with_capacity(protocols.len());
        for p in protocols {
            if seen.contains(&p.name.as_str()) {
                continue;
            }
            seen.push(&p.name);
            if add {
                *self.protocol_counts.entry(p.name.clone()).or_default() += 1;
            } else if let Some(count) = self.protocol_counts.get_mut(&p.name) {
                *count -= 1;
                if *count == 0 {
                    self.protocol_counts.remove(&p.name);
                }
            }
        }
    }

    /// Replaces a member's protocols, keeping the counts in step.
    fn set_protocols(&mut self, id: &MemberId, protocols: Vec<Protocol>) {
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        let old = std::mem::replace(&mut m.protocols, protocols);
        let new = m.protocols.clone();
        self.count_protocols(&old, false);
        self.count_protocols(&new, true);
    }

    /// Parks a JoinGroup for `id`; returns the one it supersedes, if any.
    fn park_join(&mut self, id: &MemberId, parked: ParkedJoin) -> Option<ParkedJoin> {
        let m = self.members.get_mut(id)?;
        let old = m.awaiting_join.replace(parked);
        if old.is_none() {
            self.awaiting_join_count += 1;
        }
        old
    }

    /// Takes `id`'s parked JoinGroup (to answer it).
    fn take_parked_join(&mut self, id: &MemberId) -> Option<ParkedJoin> {
        let parked = self.members.get_mut(id)?.awaiting_join.take();
        if parked.is_some() {
            self.awaiting_join_count -= 1;
        }
        parked
    }

    /// Detaches a member from the map and the counters (the caller answers what it had parked).
    fn detach_member(&mut self, id: &MemberId) -> Option<(usize, Member)> {
        let (index, _, member) = self.members.shift_remove_full(id)?;
        self.count_member(&member, false);
        Some((index, member))
    }

    /// Recomputes the counters from scratch and compares (tests call this after every input).
    #[cfg(test)]
    pub(crate) fn check_counters(&self) {
        let awaiting = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count();
        assert_eq!(
            self.awaiting_join_count, awaiting,
            "awaiting-join count drifted"
        );
        let mut counts: HashMap<String, usize> = HashMap::new();
        for m in self.members.values() {
            let mut names: Vec<&str> = m.protocols.iter().map(|p| p.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            for n in names {
                *counts.entry(n.to_owned()).or_default() += 1;
            }
        }
        assert_eq!(self.protocol_counts, counts, "protocol counts drifted");
    }

    /// Removes a member for good (Kafka `ClassicGroup.remove` plus the completions its callers
    /// make): a parked JoinGroup gets UNKNOWN_MEMBER_ID with member id "" (so a live client
    /// rejoins), a parked SyncGroup gets UNKNOWN_MEMBER_ID too (Kafka would leave it
    /// unanswered), the session timer is cancelled and a new leader is the first member left.
    fn remove_member(&mut self, id: &MemberId, reason: RemoveReason) -> Option<Member> {
        let (_, member) = self.detach_member(id)?;
        if let Some(parked) = member.awaiting_join {
            self.reply_join(
                parked.token,
                JoinReply::error(GroupError::UnknownMemberId, MemberId::unknown()),
            );
        }
        if let Some(token) = member.awaiting_sync {
            self.reply_sync(token, SyncReply::error(GroupError::UnknownMemberId));
        }
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance) == Some(id) {
                self.static_members.remove(instance);
            }
        }
        self.pending_members.shift_remove(id);
        self.pending_sync.shift_remove(id);
        self.cancel_timer(TimerKey::Heartbeat(id.clone()));
        self.event(GroupEvent::MemberRemoved {
            member: id.clone(),
            instance_id: member.instance_id.clone(),
            reason,
        });
        if self.is_leader(id) {
            let new = self.members.keys().next().cloned();
            self.event(GroupEvent::LeaderChanged {
                old: self.leader.clone(),
                new: new.clone(),
            });
            self.leader = new;
        }
        Some(member)
    }

    /// Kafka `validateMember`: an instance id must map to this member id (else
    /// FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID if unknown), and the member must exist.
    /// The static-membership half of [`Self::validate_member`]: a given instance id must be
    /// known and held by `member`.
    fn validate_instance(
        &self,
        member: &MemberId,
        instance: Option<&InstanceId>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = instance {
            match self.static_members.get(instance) {
                None => return Err(GroupError::UnknownMemberId),
                Some(existing) if existing != member => return Err(GroupError::FencedInstanceId),
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn validate_member(
        &self,
        member: &MemberId,
        instance: Option<&InstanceId>,
    ) -> Result<(), GroupError> {
        self.validate_instance(member, instance)?;
        if self.members.contains_key(member) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    // ----- protocols -----

    /// How many members offer protocol `name`.
    fn protocol_support(&self, name: &str) -> usize {
        self.protocol_counts.get(name).copied().unwrap_or(0)
    }

    /// Kafka `supportsProtocols`: an Empty group takes any non-empty type and protocol list;
    /// otherwise the type must match and one offered protocol must be supported by every
    /// current member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols
                    .iter()
                    .any(|p| self.protocol_support(&p.name) == self.members.len())
        }
    }

    /// Kafka `selectProtocol`: among the protocols every member supports, each member votes
    /// for its most preferred one; most votes wins. Ties go to the protocol first voted for in
    /// join order (Kafka leaves ties to HashMap order; we make them deterministic).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.protocol_support(name) == self.members.len())
            .collect();
        let mut votes: IndexMap<&str, usize> = IndexMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (name, count) in votes {
            if best.is_none_or(|(_, c)| count > c) {
                best = Some((name, count));
            }
        }
        best.map(|(name, _)| name.to_owned())
    }

    // ----- join-phase accounting -----

    fn num_awaiting_join(&self) -> usize {
        self.awaiting_join_count
    }

    /// Kafka `hasAllMembersJoined`: every member is parked in JoinGroup and no KIP-394 pending
    /// member is still expected.
    fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join() && self.pending_members.is_empty()
    }

    /// The group's rebalance timeout: the max over its members.
    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Kafka `canRebalance`: PreparingRebalance is reachable from here.
    fn can_rebalance(&self) -> bool {
        self.state.can_transition_to(GroupState::PreparingRebalance)
    }
}

impl super::core::Kind for ClassicGroup {
    const KIND: crate::vocab::stored::GroupKind = codec::KIND;
}

impl super::core::GroupCore for ClassicGroup {
    fn id(&self) -> &GroupId {
        &self.id
    }

    fn kind(&self) -> crate::vocab::stored::GroupKind {
        codec::KIND
    }

    fn state_name(&self) -> &'static str {
        self.state.as_str()
    }

    fn is_dead(&self) -> bool {
        self.state == GroupState::Dead
    }

    fn is_empty(&self) -> bool {
        self.state == GroupState::Empty
    }

    fn num_members(&self) -> usize {
        self.members.len()
    }

    fn protocol_type(&self) -> &str {
        self.protocol_type.as_deref().unwrap_or_default()
    }

    fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next_deadline()
    }

    fn handle_timeout(&mut self, _image: &dyn super::consumer::TopicImage, now: Timestamp) {
        ClassicGroup::handle_timeout(self, now);
    }

    /// A classic group deletes itself through its outputs.
    fn delete(&mut self) -> Option<Result<(), GroupError>> {
        None
    }

    fn check_offset_commit(
        &mut self,
        auth: &super::OffsetCommitAuth,
        _api_version: i16,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        self.validate_offset_commit(auth, now)
    }

    /// A classic group checks nothing of a fetch.
    fn check_offset_fetch(&self, _member: &Option<(MemberId, i32)>) -> Result<(), GroupError> {
        Ok(())
    }

    fn serves_offset_fetch(&self) -> bool {
        ClassicGroup::serves_offset_fetch(self)
    }

    fn check_offset_delete(&self) -> Result<(), GroupError> {
        self.validate_offset_delete()
    }

    fn subscribes_to(&self, topic: &str, _image: &dyn super::consumer::TopicImage) -> bool {
        self.is_subscribed_to_topic(topic)
    }

    fn offset_expiration_base(&self) -> Option<crate::vocab::ExpirationBase> {
        ClassicGroup::offset_expiration_base(self)
    }

    fn take_stored(&mut self) -> Vec<crate::vocab::stored::RecordChange> {
        Vec::new()
    }

    /// Its writes complete through `handle_write_complete`.
    fn handle_write_failed(&mut self) {}

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
