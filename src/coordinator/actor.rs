//! The group actors: each group's state has one owner, a *shard* task, which serves the queue
//! shared by its groups one command at a time, sleeps until the earliest deadline of any of
//! them, and turns each core's outputs into replies, log lines and writes.
//!
//! A group belongs to the shard its id hashes to, for its whole life, so its commands are
//! served in the order they were sent and no lock guards group state. Sharing a task and a
//! queue among many groups is what keeps an idle group small: a task of its own and a channel
//! of its own cost several KB per group (their futures, timer entries and queue blocks), more
//! than a group of ten members holds.
//!
//! Every write goes to the storage task with a completion that comes back through the shard's
//! queue. A reply that depends on a write (OffsetCommit, OffsetDelete, DeleteGroups, and through
//! the core the SyncGroup that completes a generation) is sent only in that completion, and
//! in-memory offsets change only then, so a failed write changes nothing and the reply carries
//! the mapped error. The group keeps serving its commands meanwhile, so commits pipeline;
//! completions arrive in submission order (one FIFO storage task).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::{
    Clock, GroupDescription, GroupListing, Handle, MemberDescription, OffsetCommit,
    PartitionResults, Settings,
};
use crate::group::{
    ClassicGroup, GroupError, GroupEvent, GroupId, GroupRecord, GroupState, Heartbeat, JoinGroup,
    JoinReply, LeaveGroup, LeaveOutcome, Output, RequestToken, SyncGroup, SyncReply, Timestamp,
    WriteId,
};
use crate::observe::metrics;
use crate::observe::status::{
    GroupSnapshot, History, LearnerSnapshot, MemberSnapshot, PartitionRef,
};
use crate::offsets::{
    self, FetchedOffset, MemoryOffsetStore, OffsetAndMetadata, OffsetStore, TopicPartition,
};
use crate::storage::{Mutation, Storage, StoreError};

/// A command for one group, as its shard's queue carries it.
pub(super) struct Envelope {
    pub group: GroupId,
    pub cmd: Command,
}

/// A request for a group, with where its answer goes.
///
/// Large requests are boxed: queues allocate their slots in blocks of 32 commands.
pub(super) enum Command {
    /// A new group (created, or loaded at start-up). Sent while the directory entry is being
    /// inserted, so it precedes every other command for the group.
    Create(Box<NewGroup>),
    /// The group retired as number `.0` of its shard no longer answers: every command sent
    /// while it was in the directory is ahead of this one in the queue.
    Forget(u64),
    Join(Box<JoinGroup>, oneshot::Sender<JoinReply>),
    Sync(Box<SyncGroup>, oneshot::Sender<SyncReply>),
    Heartbeat(Heartbeat, oneshot::Sender<Result<(), GroupError>>),
    Leave(LeaveGroup, oneshot::Sender<LeaveOutcome>),
    Commit(
        Box<OffsetCommit>,
        oneshot::Sender<Result<PartitionResults, GroupError>>,
    ),
    Fetch(
        Option<Vec<TopicPartition>>,
        oneshot::Sender<Vec<FetchedOffset>>,
    ),
    DeleteOffsets(
        Vec<TopicPartition>,
        oneshot::Sender<Result<PartitionResults, GroupError>>,
    ),
    Describe(oneshot::Sender<Option<GroupDescription>>),
    /// The status page's view of the group.
    Snapshot(oneshot::Sender<Option<GroupSnapshot>>),
    /// A write this group submitted is durable (or failed). Completions come through the same
    /// queue as requests.
    WriteDone(u64, Result<(), StoreError>),
    Delete(oneshot::Sender<Result<(), GroupError>>),
    ExpireOffsets,
}

/// A submitted write and what to do once it is durable (or failed).
enum Pending {
    /// A record of the core; `delete_reply` for the tombstone of a DeleteGroups.
    Group {
        write: WriteId,
        delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    },
    Commit {
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
        results: PartitionResults,
        writes: Vec<(TopicPartition, OffsetAndMetadata)>,
    },
    DeleteOffsets {
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
        results: PartitionResults,
        removed: Vec<TopicPartition>,
    },
    Expired(Vec<TopicPartition>),
}

/// Commands served back to back from the queue before timers are looked at again.
const BATCH: usize = 64;

/// What every group of a shard shares.
pub(super) struct Ctx {
    pub settings: Arc<Settings>,
    pub clock: Clock,
    pub storage: Storage,
    pub directory: Arc<DashMap<GroupId, Handle>>,
    /// The shard's own queue, for write completions. Weak, so that the shard ends once the
    /// directory is dropped (shutdown).
    pub tx: mpsc::WeakUnboundedSender<Envelope>,
}

/// A group a shard is to own from now on.
pub(super) struct NewGroup {
    pub group: ClassicGroup,
    pub offsets: MemoryOffsetStore,
    pub listing: Arc<Mutex<GroupListing>>,
}

/// One group's state in its shard: the core, its offsets and the replies it has parked.
pub(super) struct GroupActor {
    group: ClassicGroup,
    offsets: MemoryOffsetStore,
    listing: Arc<Mutex<GroupListing>>,
    parked_joins: HashMap<RequestToken, oneshot::Sender<JoinReply>>,
    parked_syncs: HashMap<RequestToken, oneshot::Sender<SyncReply>>,
    next_token: u64,
    /// Submitted writes, by submission id, until their [`Command::WriteDone`].
    pending: HashMap<u64, Pending>,
    next_submission: u64,
    /// The reply of a DeleteGroups whose tombstone the core is about to emit.
    delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    /// The deadline this group has in its shard's timer set.
    armed: Option<Timestamp>,
    /// Its last rebalances and learners, for the status page and metrics.
    history: History,
    /// How long the last core call that can run an assignor took (join, leave, timeout).
    core_call: Duration,
}

/// A task that owns many groups (see the module docs).
pub(super) struct Shard {
    rx: mpsc::UnboundedReceiver<Envelope>,
    ctx: Ctx,
    /// Where each live group of this shard is in `slots`.
    index: HashMap<GroupId, u32>,
    slots: Vec<Option<Box<GroupActor>>>,
    free: Vec<u32>,
    /// Each live group's earliest deadline, by slot.
    timers: BTreeSet<(Timestamp, u32)>,
    /// Groups that left the directory, until their [`Command::Forget`]: commands already queued
    /// for them get a Dead group's answers.
    retired: HashMap<GroupId, (u64, Box<GroupActor>)>,
    retirements: u64,
}

impl Shard {
    pub(super) fn new(rx: mpsc::UnboundedReceiver<Envelope>, ctx: Ctx) -> Shard {
        Shard {
            rx,
            ctx,
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            timers: BTreeSet::new(),
            retired: HashMap::new(),
            retirements: 0,
        }
    }

    pub(super) async fn run(mut self) {
        // One sleep for the whole shard, moved only when the earliest deadline moves (most
        // commands, such as a heartbeat, push one member's deadline out and leave the
        // earliest in place).
        let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(sleep);
        let mut armed: Option<Timestamp> = None;
        loop {
            let next = self.timers.first().map(|&(at, _)| at);
            if next != armed {
                if let Some(at) = next {
                    sleep.as_mut().reset(self.ctx.clock.instant_at(at));
                }
                armed = next;
            }
            tokio::select! {
                env = self.rx.recv() => match env {
                    Some(env) => {
                        self.dispatch(env);
                        // Whatever else is queued is served before the deadlines are looked
                        // at again (bounded, so timers are never starved).
                        for _ in 0..BATCH {
                            let Ok(env) = self.rx.try_recv() else { break };
                            self.dispatch(env);
                        }
                    }
                    // Every sender is gone: the directory was dropped (shutdown).
                    None => break,
                },
                _ = &mut sleep, if armed.is_some() => {
                    armed = None;
                    self.fire_timers();
                }
            }
        }
    }

    fn dispatch(&mut self, Envelope { group, cmd }: Envelope) {
        match cmd {
            Command::Create(new) => self.insert(group, *new),
            Command::Forget(n) => {
                if self.retired.get(&group).is_some_and(|(m, _)| *m == n) {
                    self.retired.remove(&group);
                }
            }
            cmd => {
                if let Some(&slot) = self.index.get(&group) {
                    if let Some(actor) = self.slots[slot as usize].as_mut() {
                        actor.handle(&self.ctx, cmd);
                    }
                    self.after(slot);
                } else if let Some((_, actor)) = self.retired.get_mut(&group) {
                    actor.handle(&self.ctx, cmd);
                    actor.drain(&self.ctx);
                }
                // Otherwise nothing owns the group (cannot happen: a command is sent only while
                // the group is in the directory); dropping the command drops its reply sender,
                // which the caller answers as COORDINATOR_NOT_AVAILABLE.
            }
        }
    }

    fn insert(&mut self, id: GroupId, new: NewGroup) {
        let actor = Box::new(GroupActor::new(new));
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(actor);
                slot
            }
            None => {
                self.slots.push(Some(actor));
                (self.slots.len() - 1) as u32
            }
        };
        if let Some(old) = self.index.insert(id, slot) {
            // Cannot happen (a group is created only when missing from the directory); the
            // newer group wins, as the directory says.
            self.retire_slot(old);
        }
        self.after(slot);
    }

    /// Every group whose deadline has come gets its timeout input.
    fn fire_timers(&mut self) {
        let now = self.ctx.clock.now();
        let due: Vec<u32> = self
            .timers
            .range(..=(now, u32::MAX))
            .map(|&(_, slot)| slot)
            .collect();
        for slot in due {
            if let Some(actor) = self.slots[slot as usize].as_mut() {
                let started = Instant::now();
                actor.group.handle_timeout(now);
                actor.core_call = started.elapsed();
                self.after(slot);
            }
        }
    }

    /// After any input to the group in `slot`: deliver its outputs, move its deadline, and
    /// retire it once it is Dead.
    fn after(&mut self, slot: u32) {
        let Some(actor) = self.slots[slot as usize].as_mut() else {
            return;
        };
        actor.drain(&self.ctx);
        let next = actor.group.next_deadline();
        if next != actor.armed {
            if let Some(at) = actor.armed {
                self.timers.remove(&(at, slot));
            }
            if let Some(at) = next {
                self.timers.insert((at, slot));
            }
            actor.armed = next;
        }
        // A Dead group waits for its tombstone (and any other write) to be durable before it
        // leaves the directory, so a group created after it under the same id writes after it.
        if actor.group.state() == GroupState::Dead && actor.pending.is_empty() {
            self.retire_slot(slot);
        }
    }

    /// Takes the group in `slot` out of the directory and of the live groups; what is already
    /// queued for it is answered as a Dead group does, until its [`Command::Forget`].
    fn retire_slot(&mut self, slot: u32) {
        let Some(actor) = self.slots[slot as usize].take() else {
            return;
        };
        self.free.push(slot);
        // Its learners are no longer in flight.
        metrics().learners_changed(actor.history.learners().len(), 0);
        if let Some(at) = actor.armed {
            self.timers.remove(&(at, slot));
        }
        let id = actor.group.id().clone();
        if self.index.get(&id) == Some(&slot) {
            self.index.remove(&id);
        }
        self.ctx
            .directory
            .remove_if(&id, |_, h| Arc::ptr_eq(&h.listing, &actor.listing));
        {
            let _span = actor.log_span();
            debug!("group retired");
        }
        self.retirements += 1;
        let n = self.retirements;
        if let Some(tx) = self.ctx.tx.upgrade() {
            let _ = tx.send(Envelope {
                group: id.clone(),
                cmd: Command::Forget(n),
            });
        }
        self.retired.insert(id, (n, actor));
    }
}

impl GroupActor {
    fn new(new: NewGroup) -> GroupActor {
        GroupActor {
            group: new.group,
            offsets: new.offsets,
            listing: new.listing,
            parked_joins: HashMap::new(),
            parked_syncs: HashMap::new(),
            next_token: 0,
            pending: HashMap::new(),
            next_submission: 0,
            delete_reply: None,
            armed: None,
            history: History::default(),
            core_call: Duration::ZERO,
        }
    }

    /// Sends `batch` to the storage task; `then` runs in [`GroupActor::complete`].
    fn submit(&mut self, ctx: &Ctx, batch: Vec<Mutation>, then: Pending) {
        let id = self.next_submission;
        self.next_submission += 1;
        self.pending.insert(id, then);
        let done = ctx.tx.clone();
        let group = self.group.id().clone();
        ctx.storage.submit(
            batch,
            Box::new(move |result| {
                if let Some(tx) = done.upgrade() {
                    let _ = tx.send(Envelope {
                        group,
                        cmd: Command::WriteDone(id, result),
                    });
                }
            }),
        );
    }

    /// A submitted write is durable (or failed): apply it to memory and answer.
    fn complete(&mut self, ctx: &Ctx, id: u64, result: Result<(), StoreError>) {
        let Some(pending) = self.pending.remove(&id) else {
            return;
        };
        let error = result.as_ref().err().map(StoreError::group_error);
        match pending {
            Pending::Group {
                write,
                delete_reply,
            } => {
                let now = ctx.clock.now();
                self.group
                    .handle_write_complete(write, error.map_or(Ok(()), Err), now);
                if let Some(reply) = delete_reply {
                    if error.is_none() {
                        let removed = self.offsets.remove_group(self.group.id());
                        let _span = self.log_span();
                        info!(offsets = removed, "group deleted");
                    }
                    let _ = reply.send(error.map_or(Ok(()), Err));
                }
            }
            Pending::Commit {
                reply,
                results,
                writes,
            } => {
                if let Some(e) = error {
                    let _ = reply.send(Err(e));
                    return;
                }
                let id = self.group.id().clone();
                metrics().offsets_committed(writes.len());
                for (tp, offset) in writes {
                    self.offsets.put(&id, tp, offset);
                }
                let _ = reply.send(Ok(results));
            }
            Pending::DeleteOffsets {
                reply,
                results,
                removed,
            } => {
                if let Some(e) = error {
                    let _ = reply.send(Err(e));
                    return;
                }
                let id = self.group.id().clone();
                for tp in &removed {
                    self.offsets.remove(&id, tp);
                }
                let _ = reply.send(Ok(results));
            }
            Pending::Expired(expired) => {
                if error.is_none() {
                    let id = self.group.id().clone();
                    metrics().offsets_expired(expired.len());
                    for tp in &expired {
                        self.offsets.remove(&id, tp);
                    }
                    let _span = self.log_span();
                    info!(count = expired.len(), "expired offsets removed");
                }
            }
        }
    }

    /// The `group` span a log line of this group is written in. Entered around each line
    /// rather than held for the actor's life: a live span costs every group its registry entry
    /// and formatted fields, and the lines are rare (generations, membership, expiry), never
    /// per heartbeat.
    fn log_span(&self) -> tracing::span::EnteredSpan {
        tracing::info_span!("group", group = %self.group.id()).entered()
    }

    fn token(&mut self) -> RequestToken {
        self.next_token += 1;
        RequestToken(self.next_token)
    }

    fn handle(&mut self, ctx: &Ctx, cmd: Command) {
        let now = ctx.clock.now();
        match cmd {
            Command::Join(mut req, reply) => {
                let token = self.token();
                req.token = token;
                self.parked_joins.insert(token, reply);
                let started = Instant::now();
                self.group.handle_join(*req, now);
                self.core_call = started.elapsed();
            }
            Command::Sync(mut req, reply) => {
                let token = self.token();
                req.token = token;
                self.parked_syncs.insert(token, reply);
                self.group.handle_sync(*req, now);
            }
            Command::Heartbeat(req, reply) => {
                let _ = reply.send(self.group.handle_heartbeat(&req, now));
            }
            Command::Leave(req, reply) => {
                let started = Instant::now();
                let _ = reply.send(self.group.handle_leave(&req, now));
                self.core_call = started.elapsed();
            }
            Command::Commit(commit, reply) => self.commit(ctx, *commit, reply),
            Command::WriteDone(id, result) => self.complete(ctx, id, result),
            Command::Fetch(partitions, reply) => {
                let readable = self.group.serves_offset_fetch();
                let _ = reply.send(offsets::fetch(
                    &self.offsets,
                    self.group.id(),
                    readable,
                    partitions.as_deref(),
                ));
            }
            Command::DeleteOffsets(partitions, reply) => {
                self.delete_offsets(ctx, partitions, reply)
            }
            Command::Describe(reply) => {
                let _ = reply.send(self.describe());
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot(ctx));
            }
            Command::Delete(reply) => {
                let result = if self.group.state() == GroupState::Dead {
                    Err(GroupError::GroupIdNotFound)
                } else {
                    self.group.handle_delete(now)
                };
                match result {
                    // Answered once the tombstone the core just emitted is durable.
                    Ok(()) => self.delete_reply = Some(reply),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::ExpireOffsets => self.expire_offsets(ctx),
            // Served by the shard.
            Command::Create(_) | Command::Forget(_) => {}
        }
    }

    fn commit(
        &mut self,
        ctx: &Ctx,
        commit: OffsetCommit,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        let now = ctx.clock.now();
        if let Err(e) = self.group.validate_offset_commit(&commit.auth, now) {
            let _ = reply.send(Err(e));
            return;
        }
        let prepared = offsets::prepare_commit(
            &ctx.settings.offsets,
            commit.partitions,
            commit.retention_time_ms,
            now,
        );
        if prepared.writes.is_empty() {
            let _ = reply.send(Ok(prepared.results));
            return;
        }
        let group = self.group.id().clone();
        let batch = prepared
            .writes
            .iter()
            .map(|(tp, offset)| Mutation::PutOffset {
                group: group.clone(),
                tp: tp.clone(),
                offset: offset.clone(),
            })
            .collect();
        self.submit(
            ctx,
            batch,
            Pending::Commit {
                reply,
                results: prepared.results,
                writes: prepared.writes,
            },
        );
    }

    fn delete_offsets(
        &mut self,
        ctx: &Ctx,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        if let Err(e) = self.group.validate_offset_delete() {
            let _ = reply.send(Err(e));
            return;
        }
        let mut removed = Vec::new();
        let results: PartitionResults = partitions
            .into_iter()
            .map(|tp| {
                if self.group.is_subscribed_to_topic(&tp.topic) {
                    (tp, Some(GroupError::GroupSubscribedToTopic))
                } else {
                    removed.push(tp.clone());
                    (tp, None)
                }
            })
            .collect();
        if removed.is_empty() {
            let _ = reply.send(Ok(results));
            return;
        }
        let group = self.group.id().clone();
        let batch = removed
            .iter()
            .map(|tp| Mutation::DeleteOffset {
                group: group.clone(),
                tp: tp.clone(),
            })
            .collect();
        self.submit(
            ctx,
            batch,
            Pending::DeleteOffsets {
                reply,
                results,
                removed,
            },
        );
    }

    fn describe(&self) -> Option<GroupDescription> {
        let state = self.group.state();
        if state == GroupState::Dead {
            return None;
        }
        let stable_protocol = (state == GroupState::Stable)
            .then(|| self.group.protocol_name())
            .flatten();
        let members = self
            .group
            .members()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: stable_protocol.map(|p| m.metadata(p)).unwrap_or_default(),
                // Outside Stable Kafka still shows the assignment the member last received
                // (`ClassicGroupMember.describeNoMetadata`).
                assignment: m.assignment.clone(),
            })
            .collect();
        // A server-assigned group shows the assignor that really assigned it, so that
        // `kafka-consumer-groups --describe` tells the truth.
        let protocol = stable_protocol
            .map(|p| self.group.server_assignor_name().unwrap_or(p))
            .unwrap_or_default();
        Some(GroupDescription {
            state,
            protocol_type: self.group.protocol_type().unwrap_or_default().to_string(),
            protocol: protocol.to_string(),
            members,
        })
    }

    /// Follows one of the core's events for the status page's history and the metrics.
    fn observe(&mut self, ctx: &Ctx, event: &GroupEvent) {
        let now = ctx.clock.now();
        self.history.on_event(event, now);
        match event {
            GroupEvent::AssignmentPlanned { assignor, .. } => {
                metrics().assignor_ran(assignor, self.core_call);
            }
            GroupEvent::AssignmentInstalled { generation, .. } => {
                let members = self
                    .group
                    .members()
                    .map(|m| (m.id.as_str().to_owned(), self.partitions(&m.assignment)))
                    .collect();
                if let Some(done) = self.history.on_installed(generation.0, members, now) {
                    metrics().rebalance_completed("classic", done.took);
                }
                let learners = self
                    .group
                    .server_assignor_name()
                    .and_then(|name| ctx.settings.assignment.assignor(name))
                    .map(|a| a.learners(self.group.assignor_state()))
                    .unwrap_or_default();
                let after = learners.len();
                let (before, ended) = self.history.set_learners(learners, now);
                metrics().learners_changed(before, after);
                for took in ended {
                    metrics().learner_finished(took);
                }
            }
            GroupEvent::StateChanged {
                to: GroupState::Empty,
                ..
            } => {
                self.history.on_emptied(self.group.generation().0, now);
                let (before, ended) = self.history.set_learners(Vec::new(), now);
                metrics().learners_changed(before, 0);
                for took in ended {
                    metrics().learner_finished(took);
                }
            }
            _ => {}
        }
    }

    /// The partitions in a member's assignment, when the group speaks the consumer protocol.
    fn partitions(&self, assignment: &bytes::Bytes) -> Vec<PartitionRef> {
        if self.group.protocol_type() != Some("consumer") || assignment.is_empty() {
            return Vec::new();
        }
        let Ok((topics, _)) = crate::assignor::protocol::decode_assignment(assignment) else {
            return Vec::new();
        };
        let mut out: Vec<PartitionRef> = topics
            .into_iter()
            .flat_map(|(topic, ps)| {
                ps.into_iter().map(move |partition| PartitionRef {
                    topic: topic.clone(),
                    partition,
                })
            })
            .collect();
        out.sort();
        out
    }

    fn snapshot(&self, ctx: &Ctx) -> Option<GroupSnapshot> {
        let state = self.group.state();
        if state == GroupState::Dead {
            return None;
        }
        let now = ctx.clock.now();
        Some(GroupSnapshot {
            group_id: self.group.id().as_str().to_owned(),
            kind: "classic",
            state: state.to_string(),
            epoch: self.group.generation().0,
            protocol_type: self.group.protocol_type().unwrap_or_default().to_owned(),
            protocol: self.group.protocol_name().unwrap_or_default().to_owned(),
            assignor: self.group.server_assignor_name().map(str::to_owned),
            leader: self.group.leader().map(|l| l.as_str().to_owned()),
            members: self
                .group
                .members()
                .map(|m| MemberSnapshot {
                    member_id: m.id.as_str().to_owned(),
                    instance_id: m.instance_id.as_ref().map(|i| i.as_str().to_owned()),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    partitions: self.partitions(&m.assignment),
                })
                .collect(),
            learners: self
                .history
                .learners()
                .iter()
                .map(|l| LearnerSnapshot::new(l, now))
                .collect(),
            offsets: self.offsets.count(self.group.id()),
            rebalances: self.history.rebalances(),
        })
    }

    fn expire_offsets(&mut self, ctx: &Ctx) {
        let now = ctx.clock.now();
        let id = self.group.id().clone();
        let current = self.offsets.group_offsets(&id);
        // An offset with a commit still on its way to disk is not expired under it.
        let in_flight: std::collections::HashSet<&TopicPartition> = self
            .pending
            .values()
            .filter_map(|p| match p {
                Pending::Commit { writes, .. } => Some(writes.iter().map(|(tp, _)| tp)),
                _ => None,
            })
            .flatten()
            .collect();
        let current: Vec<_> = current
            .into_iter()
            .filter(|(tp, _)| !in_flight.contains(tp))
            .collect();
        let expired = offsets::expired_offsets(
            &current,
            self.group.offset_expiration_base(),
            |topic| self.group.is_subscribed_to_topic(topic),
            |_| false,
            now,
            ctx.settings.offsets.retention_ms,
        );
        if !expired.expired.is_empty() {
            let batch = expired
                .expired
                .iter()
                .map(|tp| Mutation::DeleteOffset {
                    group: id.clone(),
                    tp: tp.clone(),
                })
                .collect();
            self.submit(ctx, batch, Pending::Expired(expired.expired));
        }
        if expired.all_expired
            && self.group.state() == GroupState::Empty
            && self.group.handle_delete(now).is_ok()
        {
            let _span = self.log_span();
            info!("empty group with no offsets left deleted");
        }
    }

    /// Delivers every output of the core; records go to the storage task, and their
    /// completions come back through [`GroupActor::complete`].
    fn drain(&mut self, ctx: &Ctx) {
        while let Some(out) = self.group.poll_output() {
            match out {
                Output::JoinReply { token, reply } => {
                    if let Some(tx) = self.parked_joins.remove(&token) {
                        let _ = tx.send(reply);
                    }
                }
                Output::SyncReply { token, reply } => {
                    if let Some(tx) = self.parked_syncs.remove(&token) {
                        let _ = tx.send(reply);
                    }
                }
                // This shell sleeps until `next_deadline`; keyed changes need no mirror.
                Output::Timer(_) => {}
                Output::Persist { write, record } => {
                    let group = self.group.id().clone();
                    let (mutation, delete_reply) = match record {
                        GroupRecord::Metadata(record) => {
                            (Mutation::PutGroup { group, record }, None)
                        }
                        GroupRecord::Tombstone => {
                            (Mutation::DeleteGroup { group }, self.delete_reply.take())
                        }
                    };
                    self.submit(
                        ctx,
                        vec![mutation],
                        Pending::Group {
                            write,
                            delete_reply,
                        },
                    );
                }
                Output::Event(event) => {
                    self.observe(ctx, &event);
                    let _span = self.log_span();
                    log_event(&event);
                }
            }
        }
        // Parked requests come in bursts (a rebalance) and then nothing for a long time: an
        // idle group gives the room back.
        shrink_if_empty(&mut self.parked_joins);
        shrink_if_empty(&mut self.parked_syncs);
        shrink_if_empty(&mut self.pending);
        let mut listing = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        listing.state = self.group.state();
        listing.members = self.group.num_members();
        let protocol_type = self.group.protocol_type().unwrap_or_default();
        if listing.protocol_type != protocol_type {
            listing.protocol_type = protocol_type.to_string();
        }
    }
}

fn shrink_if_empty<K, V>(map: &mut HashMap<K, V>) {
    if map.is_empty() && map.capacity() > 0 {
        *map = HashMap::new();
    }
}

fn log_event(event: &GroupEvent) {
    match event {
        GroupEvent::GenerationStarted {
            generation,
            protocol_type,
            protocol_name,
            leader,
            members,
        } => info!(
            generation = generation.0,
            protocol_type = protocol_type.as_deref().unwrap_or(""),
            protocol = protocol_name.as_deref().unwrap_or(""),
            leader = leader.as_ref().map(|l| l.as_str()).unwrap_or(""),
            members = ?members.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            "new generation"
        ),
        GroupEvent::MemberAdded {
            member,
            instance_id,
            reason,
        } => info!(
            member = %member,
            instance_id = instance_id.as_ref().map(|i| i.as_str()).unwrap_or(""),
            reason = ?reason,
            "member added"
        ),
        GroupEvent::MemberRemoved {
            member,
            instance_id,
            reason,
        } => info!(
            member = %member,
            instance_id = instance_id.as_ref().map(|i| i.as_str()).unwrap_or(""),
            reason = %reason,
            "member removed"
        ),
        GroupEvent::RebalanceStarted { generation, reason } => {
            info!(generation = generation.0, reason = ?reason, "rebalance started")
        }
        GroupEvent::StateChanged { from, to } => debug!(%from, %to, "state changed"),
        GroupEvent::LeaderChanged { old, new } => debug!(?old, ?new, "leader changed"),
        GroupEvent::PendingMemberAdded { member } => debug!(member = %member, "pending member"),
        GroupEvent::AssignmentInstalled {
            generation,
            assigned_by,
        } => info!(
            generation = generation.0,
            assigned_by = assigned_by.as_deref().unwrap_or("leader"),
            "assignment installed"
        ),
        GroupEvent::LeaderAssignmentIgnored {
            generation,
            entries,
        } => debug!(
            generation = generation.0,
            entries, "leader's assignment ignored: the server assigns this group"
        ),
        GroupEvent::AssignorWarning {
            generation,
            assignor,
            warning,
        } => warn!(generation = generation.0, assignor = %assignor, "{warning}"),
        GroupEvent::AssignmentFallback {
            generation,
            rejoins,
        } => warn!(
            generation = generation.0,
            rejoins,
            "the leader rejoined unchanged after each of the last {rejoins} server assignments: \
             its plan is installed from now on (group.assignment.fallback.rejoins)"
        ),
        GroupEvent::RebalanceStorm {
            generation,
            rebalances,
            limit,
        } => info!(
            generation = generation.0,
            rebalances,
            limit,
            "rebalance storm: {rebalances} rebalances started within a minute (group.rebalance.storm.per.minute)"
        ),
        GroupEvent::AssignmentPlanned {
            generation,
            assignor,
            summary,
        } => info!(
            generation = generation.0,
            assignor = %assignor,
            "assignment: {summary}"
        ),
    }
}
