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

use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::core::Core;
use super::{
    Clock, Directory, GroupDescription, GroupListing, MemberDescription, OffsetCommit,
    PartitionResults, Settings, TxnMarker, TxnOffsetCommit,
};
use super::{ConsumerGroupView, StreamsGroupView};
use crate::coordinator::status::{
    GroupSnapshot, History, LearnerSnapshot, MemberSnapshot, PartitionRef,
};
use crate::group::consumer::{
    ConsumerEvent, ConsumerGroup, ConsumerGroupState, ConsumerHeartbeat, ConsumerHeartbeatReply,
    ConsumerRecord, Refusal,
};
use crate::group::streams::{
    StreamsEvent, StreamsGroup, StreamsHeartbeat, StreamsHeartbeatReply, StreamsRecord,
};
use crate::group::{
    ClassicGroup, GroupError, GroupEvent, GroupId, GroupRecord, GroupState, Heartbeat, JoinGroup,
    JoinReply, LeaveGroup, LeaveMemberResult, LeaveOutcome, MemberId, Output, RequestToken,
    SyncGroup, SyncReply, Timestamp, WriteId,
};
use crate::metrics::metrics;
use crate::offsets::{
    self, FetchedOffset, MemoryOffsetStore, OffsetAndMetadata, OffsetStore, PendingOffsets,
    TopicPartition,
};
use crate::storage::{Mutation, Storage, StoreError};
use crate::vocab::{IdMap, PendingOffset};

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
    /// OffsetFetch: the member (v9+), the partitions (`None`: all) and `require_stable`.
    Fetch(
        Option<(MemberId, i32)>,
        Option<Vec<TopicPartition>>,
        bool,
        oneshot::Sender<Result<Vec<FetchedOffset>, GroupError>>,
    ),
    TxnCommit(
        Box<TxnOffsetCommit>,
        oneshot::Sender<Result<PartitionResults, GroupError>>,
    ),
    /// A transaction that wrote offsets to this group ended.
    TxnMarker(TxnMarker, oneshot::Sender<Result<(), GroupError>>),
    ConsumerHeartbeat(
        Box<ConsumerHeartbeat>,
        oneshot::Sender<Result<ConsumerHeartbeatReply, Refusal>>,
    ),
    /// `None`: the group is not a consumer group.
    ConsumerDescribe(oneshot::Sender<Option<ConsumerGroupView>>),
    StreamsHeartbeat(
        Box<StreamsHeartbeat>,
        oneshot::Sender<Result<StreamsHeartbeatReply, Refusal>>,
    ),
    /// `None`: the group is not a streams group.
    StreamsDescribe(oneshot::Sender<Option<StreamsGroupView>>),
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
    /// Cluster mode: the group's shard is no longer this node's. It has left the directory,
    /// so this is the last command it gets.
    Unload,
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
    /// Pending transactional offsets (TxnOffsetCommit, or superseded by a plain commit).
    TxnCommit {
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
        results: PartitionResults,
    },
    /// A transaction's marker: `taken` left the pending offsets when it was submitted; a
    /// commit applies `committed` once durable. A failed write puts `taken` back.
    TxnMarker {
        reply: oneshot::Sender<Result<(), GroupError>>,
        taken: Vec<PendingOffset>,
        committed: Vec<(TopicPartition, OffsetAndMetadata)>,
    },
    /// Records of a consumer group, and the answers that depend on them.
    Consumer {
        replies: Vec<Deferred>,
        delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    },
}

/// An answer of a consumer group (to a heartbeat, or a classic member's JoinGroup or
/// SyncGroup) held until the writes before it are durable; it is sent with the error of the
/// write, if the write failed.
type Deferred = Box<dyn FnOnce(Option<GroupError>) + Send>;

/// The store writes of offsets that become committed.
fn put_offsets(group: &GroupId, offsets: &[(TopicPartition, OffsetAndMetadata)]) -> Vec<Mutation> {
    offsets
        .iter()
        .map(|(tp, offset)| Mutation::PutOffset {
            group: group.clone(),
            tp: tp.clone(),
            offset: offset.clone(),
        })
        .collect()
}

/// Commands served back to back from the queue before timers are looked at again.
const BATCH: usize = 64;

/// What every group of a shard shares.
pub(super) struct Ctx {
    pub settings: Arc<Settings>,
    pub clock: Clock,
    pub storage: Storage,
    pub directory: Arc<Directory>,
    /// The shard's own queue, for write completions. Weak, so that the shard ends once the
    /// directory is dropped (shutdown).
    pub tx: mpsc::WeakUnboundedSender<Envelope>,
}

/// A group a shard is to own from now on.
pub(super) struct NewGroup {
    pub group: Core,
    pub offsets: MemoryOffsetStore,
    pub pending_offsets: PendingOffsets,
    pub listing: Arc<Mutex<GroupListing>>,
}

/// One group's state in its shard: the core, its offsets and the replies it has parked.
pub(super) struct GroupActor {
    group: Core,
    offsets: MemoryOffsetStore,
    /// Transactional offsets waiting for their markers. Changed when a write is submitted
    /// (they are only ever reported as "unstable", never as committed values); committed
    /// offsets change once durable.
    pending_offsets: PendingOffsets,
    listing: Arc<Mutex<GroupListing>>,
    parked_joins: HashMap<RequestToken, oneshot::Sender<JoinReply>>,
    parked_syncs: HashMap<RequestToken, oneshot::Sender<SyncReply>>,
    next_token: u64,
    /// Submitted writes, by submission id, until their [`Command::WriteDone`].
    pending: HashMap<u64, Pending>,
    next_submission: u64,
    /// The reply of a DeleteGroups whose tombstone the core is about to emit.
    delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    /// Gateway mode: since when retention has seen the group Empty.
    empty_since: Option<Timestamp>,
    /// Gateway mode: the group is being forgotten (its tombstone clears its records only;
    /// its offsets stay upstream).
    forgetting: bool,
    /// The deadline this group has in its shard's timer set.
    armed: Option<Timestamp>,
    /// The last consumer-group write still in flight: heartbeats answered while it is wait
    /// for it, so no answer gets ahead of what it depends on.
    last_consumer_write: Option<u64>,
    /// Its last rebalances and learners, for the status page and metrics.
    history: History,
    /// How long the last core call that can run an assignor took (join, leave, timeout).
    core_call: Duration,
    /// The last command cannot have changed what ListGroups shows (a classic group's
    /// heartbeat): [`GroupActor::drain`] leaves the listing, and its lock, alone.
    listing_unchanged: bool,
}

/// A task that owns many groups (see the module docs).
pub(super) struct Shard {
    rx: mpsc::UnboundedReceiver<Envelope>,
    ctx: Ctx,
    /// Where each live group of this shard is in `slots`.
    index: IdMap<GroupId, u32>,
    slots: Vec<Option<Box<GroupActor>>>,
    free: Vec<u32>,
    /// Each live group's earliest deadline, by slot.
    timers: BTreeSet<(Timestamp, u32)>,
    /// Groups that left the directory, until their [`Command::Forget`]: commands already queued
    /// for them get a Dead group's answers.
    retired: IdMap<GroupId, (u64, Box<GroupActor>)>,
    retirements: u64,
}

impl Shard {
    pub(super) fn new(rx: mpsc::UnboundedReceiver<Envelope>, ctx: Ctx) -> Shard {
        Shard {
            rx,
            ctx,
            index: IdMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            timers: BTreeSet::new(),
            retired: IdMap::default(),
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
            Command::Unload => {
                if let Some(slot) = self.index.remove(&group) {
                    self.unload_slot(slot);
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
                actor.group.handle_timeout(&*self.ctx.settings.image, now);
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
        if actor.group.is_dead() && actor.pending.is_empty() {
            self.retire_slot(slot);
        }
    }

    /// Takes the group in `slot` out of the live groups and their timers.
    fn take_slot(&mut self, slot: u32) -> Option<Box<GroupActor>> {
        let actor = self.slots[slot as usize].take()?;
        self.free.push(slot);
        // Its learners are no longer in flight.
        metrics().learners_changed(actor.history.learners().len(), 0);
        if let Some(at) = actor.armed {
            self.timers.remove(&(at, slot));
        }
        Some(actor)
    }

    /// Drops the group in `slot` (its shard went to another node): what it had parked is told
    /// NOT_COORDINATOR, so those members find the new coordinator; the replies of writes still
    /// in flight are dropped (COORDINATOR_NOT_AVAILABLE: the client retries with the new one).
    fn unload_slot(&mut self, slot: u32) {
        let Some(mut actor) = self.take_slot(slot) else {
            return;
        };
        actor.answer_parked(GroupError::NotCoordinator);
        let _span = actor.log_span();
        debug!("group unloaded (its shard moved)");
    }

    /// Takes the group in `slot` out of the directory and of the live groups; what is already
    /// queued for it is answered as a Dead group does, until its [`Command::Forget`].
    fn retire_slot(&mut self, slot: u32) {
        let Some(actor) = self.take_slot(slot) else {
            return;
        };
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
            pending_offsets: new.pending_offsets,
            listing: new.listing,
            parked_joins: HashMap::new(),
            parked_syncs: HashMap::new(),
            next_token: 0,
            pending: HashMap::new(),
            next_submission: 0,
            delete_reply: None,
            empty_since: None,
            forgetting: false,
            armed: None,
            last_consumer_write: None,
            history: History::default(),
            core_call: Duration::ZERO,
            listing_unchanged: false,
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
                if let Core::Classic(group) = &mut self.group {
                    group.handle_write_complete(write, error.map_or(Ok(()), Err), now);
                }
                if let Some(reply) = delete_reply {
                    self.finish_delete(reply, error);
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
            Pending::Consumer {
                replies,
                delete_reply,
            } => {
                if self.last_consumer_write == Some(id) {
                    self.last_consumer_write = None;
                }
                for reply in replies {
                    reply(error);
                }
                if error.is_some() {
                    match &mut self.group {
                        Core::Consumer(group) => group.handle_write_failed(),
                        Core::Streams(group) => group.handle_write_failed(),
                        Core::Classic(_) => {}
                    }
                }
                if let Some(reply) = delete_reply {
                    self.finish_delete(reply, error);
                }
            }
            Pending::TxnCommit { reply, results } => {
                let _ = reply.send(error.map_or(Ok(results), Err));
            }
            Pending::TxnMarker {
                reply,
                taken,
                committed,
            } => {
                if let Some(e) = error {
                    self.pending_offsets.restore(taken);
                    let _ = reply.send(Err(e));
                    return;
                }
                let id = self.group.id().clone();
                metrics().offsets_committed(committed.len());
                for (tp, offset) in committed {
                    self.offsets.put(&id, tp, offset);
                }
                let _ = reply.send(Ok(()));
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

    /// A DeleteGroups whose tombstone is durable (or failed): the offsets go with it, and the
    /// request is answered.
    fn finish_delete(
        &mut self,
        reply: oneshot::Sender<Result<(), GroupError>>,
        error: Option<GroupError>,
    ) {
        if error.is_none() {
            let removed = self.offsets.remove_group(self.group.id());
            let _span = self.log_span();
            info!(offsets = removed, "group deleted");
        }
        let _ = reply.send(error.map_or(Ok(()), Err));
    }

    /// The `group` span a log line of this group is written in. Entered around each line
    /// rather than held for the actor's life: a live span costs every group its registry entry
    /// and formatted fields, and the lines are rare (generations, membership, expiry), never
    /// per heartbeat.
    fn log_span(&self) -> tracing::span::EnteredSpan {
        tracing::info_span!("group", group = %self.group.id()).entered()
    }

    fn handle(&mut self, ctx: &Ctx, cmd: Command) {
        let now = ctx.clock.now();
        let image = &*ctx.settings.image;
        match cmd {
            Command::Join(mut req, reply) => {
                self.become_classic(ctx, now);
                let group = match &mut self.group {
                    Core::Classic(group) => group,
                    Core::Streams(_) => {
                        let _ = reply.send(JoinReply::error(
                            GroupError::InconsistentGroupProtocol,
                            MemberId::unknown(),
                        ));
                        return;
                    }
                    // A classic member of a consumer group with members.
                    Core::Consumer(group) => {
                        let answer = group.handle_classic_join(&req, image, now);
                        self.flush_consumer(
                            ctx,
                            Vec::new(),
                            Some(Box::new(move |error| {
                                let _ =
                                    reply.send(error.map_or(answer, |e| {
                                        JoinReply::error(e, MemberId::unknown())
                                    }));
                            })),
                        );
                        return;
                    }
                };
                let token = RequestToken(self.next_token + 1);
                self.next_token += 1;
                req.token = token;
                self.parked_joins.insert(token, reply);
                let started = Instant::now();
                group.handle_join(*req, now);
                self.core_call = started.elapsed();
            }
            Command::Sync(mut req, reply) => match &mut self.group {
                Core::Classic(group) => {
                    let token = RequestToken(self.next_token + 1);
                    self.next_token += 1;
                    req.token = token;
                    self.parked_syncs.insert(token, reply);
                    group.handle_sync(*req, now);
                }
                Core::Streams(_) => {
                    let _ = reply.send(SyncReply::error(GroupError::UnknownMemberId));
                }
                Core::Consumer(group) => match group.handle_classic_sync(&req, image, now) {
                    Ok(answer) => self.flush_consumer(
                        ctx,
                        Vec::new(),
                        Some(Box::new(move |error| {
                            let _ = reply.send(error.map_or(answer, SyncReply::error));
                        })),
                    ),
                    Err(e) => {
                        let _ = reply.send(SyncReply::error(e));
                    }
                },
            },
            Command::Heartbeat(req, reply) => {
                let _ = reply.send(match &mut self.group {
                    Core::Classic(group) => {
                        // A heartbeat moves a session deadline and nothing ListGroups shows.
                        self.listing_unchanged = true;
                        group.handle_heartbeat(&req, now)
                    }
                    Core::Consumer(group) => group.handle_classic_heartbeat(&req, now),
                    Core::Streams(_) => Err(GroupError::UnknownMemberId),
                });
            }
            Command::Leave(req, reply) => {
                let started = Instant::now();
                let outcome = match &mut self.group {
                    Core::Classic(group) => group.handle_leave(&req, now),
                    Core::Streams(_) => LeaveOutcome {
                        error: None,
                        members: req
                            .members
                            .iter()
                            .map(|l| LeaveMemberResult {
                                member_id: l.member_id.clone(),
                                instance_id: l.instance_id.clone(),
                                error: Some(GroupError::UnknownMemberId),
                            })
                            .collect(),
                    },
                    Core::Consumer(group) => LeaveOutcome {
                        error: None,
                        members: group
                            .handle_classic_leave(&req.members, image)
                            .into_iter()
                            .map(|(member_id, instance_id, error)| LeaveMemberResult {
                                member_id,
                                instance_id,
                                error,
                            })
                            .collect(),
                    },
                };
                self.core_call = started.elapsed();
                let _ = reply.send(outcome);
            }
            Command::ConsumerHeartbeat(req, reply) => {
                if req.member_epoch == 0 {
                    self.become_consumer(ctx);
                }
                // A member joining a classic group with members upgrades it, if it can.
                let mut upgraded = match &self.group {
                    Core::Classic(classic)
                        if req.member_epoch == 0
                            && ConsumerGroup::can_upgrade(classic, &ctx.settings.consumer) =>
                    {
                        match ConsumerGroup::from_classic(
                            classic,
                            ctx.settings.consumer.clone(),
                            image,
                            now,
                        ) {
                            Ok(group) => Some(Box::new(group)),
                            Err(refusal) => {
                                let _ = reply.send(Err(refusal));
                                return;
                            }
                        }
                    }
                    _ => None,
                };
                let group = match (&mut self.group, &mut upgraded) {
                    (_, Some(group)) => group,
                    (Core::Consumer(group), None) => group,
                    (Core::Classic(_) | Core::Streams(_), None) => {
                        // A classic or streams group with members (or a Dead one).
                        // Kafka 4.4's words (no full stop, unlike ConsumerGroupDescribe's).
                        let message = format!("Group {} is not a consumer group", self.group.id());
                        let _ = reply.send(Err(Refusal::new(GroupError::GroupIdNotFound, message)));
                        return;
                    }
                };
                let started = Instant::now();
                let result = group.handle_heartbeat(*req, image, now);
                self.core_call = started.elapsed();
                let answer = match result {
                    Ok(answer) => answer,
                    Err(e) => {
                        // An upgrade the heartbeat was refused in is dropped.
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                let mut first = Vec::new();
                if let Some(group) = upgraded {
                    first.push(self.upgrade(group));
                }
                self.flush_consumer(
                    ctx,
                    first,
                    Some(Box::new(move |error| {
                        let _ = reply.send(error.map_or(Ok(answer), |e| Err(e.into())));
                    })),
                );
            }
            Command::ConsumerDescribe(reply) => {
                let _ = reply.send(match &self.group {
                    Core::Consumer(g) if !self.group.is_dead() => Some(ConsumerGroupView {
                        state: g.state(),
                        group_epoch: g.group_epoch(),
                        assignment_epoch: g.assignment_epoch(),
                        assignor_name: g.assignor_name().to_string(),
                        members: g.members().cloned().collect(),
                    }),
                    _ => None,
                });
            }
            Command::StreamsHeartbeat(req, reply) => {
                if req.member_epoch == 0 {
                    self.become_streams(ctx);
                }
                let Core::Streams(group) = &mut self.group else {
                    let message = format!("Group {} is not a streams group.", self.group.id());
                    let _ = reply.send(Err(Refusal::new(GroupError::GroupIdNotFound, message)));
                    return;
                };
                let started = Instant::now();
                let result = group.handle_heartbeat(*req, image, now);
                self.core_call = started.elapsed();
                match result {
                    Ok(answer) => self.flush_consumer(
                        ctx,
                        Vec::new(),
                        Some(Box::new(move |error| {
                            let _ = reply.send(error.map_or(Ok(answer), |e| Err(e.into())));
                        })),
                    ),
                    Err(e) => {
                        // What the refused heartbeat changed (nothing, or a timer's records)
                        // is stored with the next write.
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::StreamsDescribe(reply) => {
                let _ = reply.send(match &self.group {
                    Core::Streams(g) if !g.is_dead() => Some(streams_view(g)),
                    _ => None,
                });
            }
            Command::Commit(commit, reply) => self.commit(ctx, *commit, reply),
            Command::WriteDone(id, result) => self.complete(ctx, id, result),
            Command::Fetch(member, partitions, require_stable, reply) => {
                if let Err(e) = self.group.validate_offset_fetch(&member) {
                    let _ = reply.send(Err(e));
                    return;
                }
                let readable = self.group.serves_offset_fetch();
                let mut fetched = offsets::fetch(
                    &self.offsets,
                    self.group.id(),
                    readable,
                    partitions.as_deref(),
                );
                if require_stable && readable {
                    for f in &mut fetched {
                        if self.pending_offsets.is_pending(&f.tp) {
                            f.mark_unstable();
                        }
                    }
                }
                let _ = reply.send(Ok(fetched));
            }
            Command::TxnCommit(commit, reply) => self.commit_transactional(ctx, *commit, reply),
            Command::TxnMarker(marker, reply) => self.end_transaction(ctx, marker, reply),
            Command::DeleteOffsets(partitions, reply) => {
                self.delete_offsets(ctx, partitions, reply)
            }
            Command::Describe(reply) => {
                let _ = reply.send(self.describe());
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot(ctx));
            }
            Command::Delete(reply) => self.delete(ctx, reply, now),
            Command::ExpireOffsets => self.expire_offsets(ctx),
            // Served by the shard.
            Command::Create(_) | Command::Forget(_) | Command::Unload => {}
        }
    }

    /// DeleteGroups: only an Empty group goes; answered once its tombstone is durable.
    fn delete(
        &mut self,
        ctx: &Ctx,
        reply: oneshot::Sender<Result<(), GroupError>>,
        now: Timestamp,
    ) {
        if self.group.is_dead() {
            let _ = reply.send(Err(GroupError::GroupIdNotFound));
            return;
        }
        let id = self.group.id().clone();
        match self.group.delete_unless_classic() {
            Some(Ok(())) => {
                let batch = vec![Mutation::DeleteGroup { group: id }];
                self.submit_consumer(ctx, batch, Vec::new(), Some(reply));
            }
            Some(Err(e)) => {
                let _ = reply.send(Err(e));
            }
            None => {
                let Core::Classic(group) = &mut self.group else {
                    return;
                };
                match group.handle_delete(now) {
                    // Answered once the tombstone the core just emitted is durable.
                    Ok(()) => self.delete_reply = Some(reply),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
        }
    }

    /// An Empty classic or consumer group that a streams member joins becomes a streams group,
    /// keeping its offsets.
    fn become_streams(&mut self, ctx: &Ctx) {
        if !matches!(self.group, Core::Streams(_)) {
            let id = self.group.id().clone();
            let group = StreamsGroup::new(id, ctx.settings.streams.clone());
            self.change_kind(ctx, Core::Streams(Box::new(group)), "streams");
        }
    }

    /// An Empty consumer or streams group that a classic member joins becomes a classic group
    /// (Kafka's conversion of an empty group), keeping its offsets.
    fn become_classic(&mut self, ctx: &Ctx, now: Timestamp) {
        if !matches!(self.group, Core::Classic(_)) {
            let id = self.group.id().clone();
            let config = ctx.settings.group_config(&id);
            let group = ClassicGroup::new(id, config, now);
            self.change_kind(ctx, Core::Classic(group), "classic");
        }
    }

    /// An Empty classic or streams group that a consumer-protocol member joins becomes a
    /// consumer group, keeping its offsets.
    fn become_consumer(&mut self, ctx: &Ctx) {
        if !matches!(self.group, Core::Consumer(_)) {
            let id = self.group.id().clone();
            let group = ConsumerGroup::new(id, ctx.settings.consumer.clone());
            self.change_kind(ctx, Core::Consumer(Box::new(group)), "consumer");
        }
    }

    /// Replaces an Empty group by `group` of another kind; its stored records go (not its
    /// offsets). A group with members keeps its kind.
    fn change_kind(&mut self, ctx: &Ctx, group: Core, kind: &'static str) {
        if !self.group.is_empty() {
            return;
        }
        let id = self.group.id().clone();
        self.group = group;
        let _span = self.log_span();
        info!(kind, "empty group changes kind");
        self.submit_consumer(
            ctx,
            vec![Mutation::ClearGroupRecords { group: id }],
            Vec::new(),
            None,
        );
    }

    /// Answers every parked JoinGroup and SyncGroup with `error`.
    fn answer_parked(&mut self, error: GroupError) {
        for (_, tx) in self.parked_joins.drain() {
            let _ = tx.send(JoinReply::error(error, MemberId::unknown()));
        }
        for (_, tx) in self.parked_syncs.drain() {
            let _ = tx.send(SyncReply::error(error));
        }
    }

    /// A classic group upgraded to `group` (a heartbeat joined it): what the classic group
    /// had parked is told to join again, and the mutation that clears its stored records is
    /// returned, to go before the consumer group's.
    fn upgrade(&mut self, group: Box<ConsumerGroup>) -> Mutation {
        self.answer_parked(GroupError::RebalanceInProgress);
        let id = group.id().clone();
        self.group = Core::Consumer(group);
        let _span = self.log_span();
        info!("classic group upgraded to a consumer group");
        Mutation::ClearGroupRecords { group: id }
    }

    /// A consumer group whose last consumer-protocol member left becomes the classic group of
    /// its classic members; the mutations that store it in place of the consumer group.
    fn downgrade(&mut self, ctx: &Ctx, now: Timestamp) -> Option<Vec<Mutation>> {
        let Core::Consumer(group) = &mut self.group else {
            return None;
        };
        let downgrade = group.take_downgrade()?;
        let id = group.id().clone();
        let classic = ClassicGroup::from_consumer_group(
            id.clone(),
            ctx.settings.group_config(&id),
            downgrade.generation,
            downgrade.members,
            now,
        );
        let record = classic.metadata_record();
        self.group = Core::Classic(classic);
        let _span = self.log_span();
        info!(
            "consumer group downgraded to a classic group: its last consumer-protocol member left"
        );
        Some(vec![
            Mutation::ClearGroupRecords { group: id.clone() },
            Mutation::PutGroup { group: id, record },
        ])
    }

    /// Sends `first` and the consumer group's queued records to the store (the classic
    /// group's record in their place if it just turned classic); `reply` goes out once they,
    /// and every consumer-group write before them, are durable.
    fn flush_consumer(&mut self, ctx: &Ctx, mut first: Vec<Mutation>, reply: Option<Deferred>) {
        match self.downgrade(ctx, ctx.clock.now()) {
            Some(batch) => first.extend(batch),
            None => first.extend(self.consumer_mutations()),
        }
        let replies: Vec<Deferred> = reply.into_iter().collect();
        if !first.is_empty() {
            self.submit_consumer(ctx, first, replies, None);
            return;
        }
        if let Some(Pending::Consumer {
            replies: waiting, ..
        }) = self
            .last_consumer_write
            .and_then(|id| self.pending.get_mut(&id))
        {
            waiting.extend(replies);
            return;
        }
        for reply in replies {
            reply(None);
        }
    }

    /// The consumer group's records as mutations (empty for a classic group).
    fn consumer_mutations(&mut self) -> Vec<Mutation> {
        if let Core::Streams(group) = &mut self.group {
            let id = group.id().clone();
            return group
                .take_records()
                .into_iter()
                .map(|r| match r {
                    StreamsRecord::Group(record) => Mutation::PutStreamsGroup {
                        group: id.clone(),
                        record,
                    },
                    StreamsRecord::Member(member) => Mutation::PutStreamsMember {
                        group: id.clone(),
                        member,
                    },
                    StreamsRecord::RemoveMember(member) => Mutation::DeleteStreamsMember {
                        group: id.clone(),
                        member,
                    },
                })
                .collect();
        }
        let Core::Consumer(group) = &mut self.group else {
            return Vec::new();
        };
        let id = group.id().clone();
        group
            .take_records()
            .into_iter()
            .map(|r| match r {
                ConsumerRecord::Group(record) => Mutation::PutConsumerGroup {
                    group: id.clone(),
                    record,
                },
                ConsumerRecord::Member(member) => Mutation::PutConsumerMember {
                    group: id.clone(),
                    member,
                },
                ConsumerRecord::RemoveMember(member) => Mutation::DeleteConsumerMember {
                    group: id.clone(),
                    member,
                },
            })
            .collect()
    }

    fn submit_consumer(
        &mut self,
        ctx: &Ctx,
        batch: Vec<Mutation>,
        replies: Vec<Deferred>,
        delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    ) {
        let id = self.next_submission;
        self.submit(
            ctx,
            batch,
            Pending::Consumer {
                replies,
                delete_reply,
            },
        );
        self.last_consumer_write = Some(id);
    }

    fn commit(
        &mut self,
        ctx: &Ctx,
        commit: OffsetCommit,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        let now = ctx.clock.now();
        if let Err(e) = self.group.validate_offset_commit(&commit, now) {
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
        let mut batch = put_offsets(&group, &prepared.writes);
        if !self.pending_offsets.is_empty() {
            for (tp, _) in &prepared.writes {
                batch.extend(
                    self.pending_offsets
                        .supersede(tp)
                        .into_iter()
                        .map(|pending| Mutation::PutPendingOffset {
                            group: group.clone(),
                            pending: Box::new(pending),
                        }),
                );
            }
        }
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

    /// TxnOffsetCommit: the group checks of a transactional commit, then the offsets are
    /// pending under the producer until its transaction's marker; answered once durable.
    fn commit_transactional(
        &mut self,
        ctx: &Ctx,
        commit: TxnOffsetCommit,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        let now = ctx.clock.now();
        if let Err(e) = self.group.validate_txn_offset_commit(&commit, now) {
            let _ = reply.send(Err(e));
            return;
        }
        if self
            .pending_offsets
            .is_fenced(commit.producer_id, commit.producer_epoch)
        {
            // Its transaction was aborted with a newer epoch while the request was on its way.
            let _ = reply.send(Err(GroupError::InvalidProducerEpoch));
            return;
        }
        let prepared = offsets::prepare_commit(&ctx.settings.offsets, commit.partitions, -1, now);
        if prepared.writes.is_empty() || commit.validate_only {
            let _ = reply.send(Ok(prepared.results));
            return;
        }
        let group = self.group.id().clone();
        let batch = prepared
            .writes
            .into_iter()
            .map(|(tp, offset)| Mutation::PutPendingOffset {
                group: group.clone(),
                pending: Box::new(self.pending_offsets.put(commit.producer_id, tp, offset)),
            })
            .collect();
        self.submit(
            ctx,
            batch,
            Pending::TxnCommit {
                reply,
                results: prepared.results,
            },
        );
    }

    /// A transaction that wrote offsets here ended: a commit makes the producer's pending
    /// offsets committed ones, an abort drops them; answered once durable.
    fn end_transaction(
        &mut self,
        ctx: &Ctx,
        marker: TxnMarker,
        reply: oneshot::Sender<Result<(), GroupError>>,
    ) {
        let taken = self
            .pending_offsets
            .take(marker.producer_id, marker.producer_epoch);
        if taken.is_empty() {
            let _ = reply.send(Ok(()));
            return;
        }
        let committed = if marker.commit {
            offsets::committed(&taken)
        } else {
            Vec::new()
        };
        let group = self.group.id().clone();
        let mut batch = put_offsets(&group, &committed);
        batch.push(Mutation::DeletePendingOffsets {
            group,
            producer_id: marker.producer_id,
            tp: None,
        });
        {
            let _span = self.log_span();
            debug!(
                producer_id = marker.producer_id,
                commit = marker.commit,
                offsets = committed.len(),
                "transaction marker"
            );
        }
        self.submit(
            ctx,
            batch,
            Pending::TxnMarker {
                reply,
                taken,
                committed,
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
                if self
                    .group
                    .is_subscribed_to_topic(&tp.topic, &*ctx.settings.image)
                {
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
        let mut batch = Vec::new();
        for tp in &removed {
            batch.push(Mutation::DeleteOffset {
                group: group.clone(),
                tp: tp.clone(),
            });
            for producer_id in self.pending_offsets.remove_partition(tp) {
                batch.push(Mutation::DeletePendingOffsets {
                    group: group.clone(),
                    producer_id,
                    tp: Some(tp.clone()),
                });
            }
        }
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
        let group = match &self.group {
            Core::Classic(group) => group,
            // DescribeGroups describes classic groups only (Kafka 4.x).
            Core::Consumer(_) | Core::Streams(_) => return None,
        };
        let state = group.state();
        if state == GroupState::Dead {
            return None;
        }
        let stable_protocol = (state == GroupState::Stable)
            .then(|| group.protocol_name())
            .flatten();
        let members = group
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
            .map(|p| group.server_assignor_name().unwrap_or(p))
            .unwrap_or_default();
        Some(GroupDescription {
            state,
            protocol_type: group.protocol_type().unwrap_or_default().to_string(),
            protocol: protocol.to_string(),
            members,
        })
    }

    /// Follows one of the core's events for the status page's history and the metrics.
    fn observe(&mut self, ctx: &Ctx, event: &GroupEvent) {
        let Core::Classic(group) = &self.group else {
            return;
        };
        let now = ctx.clock.now();
        self.history.on_event(event, now);
        match event {
            GroupEvent::AssignmentPlanned { assignor, .. } => {
                metrics().assignor_ran(assignor, self.core_call);
            }
            GroupEvent::AssignmentInstalled { generation, .. } => {
                let members = group
                    .members()
                    .map(|m| (m.id.as_str().to_owned(), self.partitions(&m.assignment)))
                    .collect();
                if let Some(done) = self.history.on_installed(generation.0, members, now) {
                    metrics().rebalance_completed("classic", done.took);
                }
                let learners = group
                    .server_assignor_name()
                    .and_then(|name| ctx.settings.assignment.assignor(name))
                    .map(|a| a.learners(group.assignor_state()))
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
                self.history.on_emptied(group.generation().0, now);
                let (before, ended) = self.history.set_learners(Vec::new(), now);
                metrics().learners_changed(before, 0);
                for took in ended {
                    metrics().learner_finished(took);
                }
            }
            _ => {}
        }
    }

    /// A consumer group's rounds for the status page and metrics: one ends when the group is
    /// Stable at a new target epoch (every member reconciled), or when it empties.
    fn observe_consumer(&mut self, ctx: &Ctx) {
        let Core::Consumer(group) = &self.group else {
            return;
        };
        let now = ctx.clock.now();
        match group.state() {
            ConsumerGroupState::Stable
                if self.history.installed() != Some(group.assignment_epoch()) =>
            {
                let image = &*ctx.settings.image;
                let members = group
                    .members()
                    .map(|m| {
                        (
                            m.member_id.as_str().to_owned(),
                            partition_refs(&m.assigned, image),
                        )
                    })
                    .collect();
                if let Some(done) =
                    self.history
                        .on_installed(group.assignment_epoch(), members, now)
                {
                    metrics().rebalance_completed("consumer", done.took);
                }
            }
            ConsumerGroupState::Empty if self.history.installed().is_some() => {
                self.history.on_emptied(group.group_epoch(), now);
            }
            _ => {}
        }
    }

    /// The partitions in a member's assignment, when the group speaks the consumer protocol.
    fn partitions(&self, assignment: &bytes::Bytes) -> Vec<PartitionRef> {
        if self.group.protocol_type() != "consumer" || assignment.is_empty() {
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
        if self.group.is_dead() {
            return None;
        }
        let group = match &self.group {
            Core::Classic(group) => group,
            Core::Consumer(group) => return Some(self.consumer_snapshot(ctx, group)),
            Core::Streams(group) => return Some(self.streams_snapshot(group)),
        };
        let state = group.state();
        let now = ctx.clock.now();
        Some(GroupSnapshot {
            group_id: group.id().as_str().to_owned(),
            kind: "classic",
            state: state.to_string(),
            epoch: group.generation().0,
            protocol_type: group.protocol_type().unwrap_or_default().to_owned(),
            protocol: group.protocol_name().unwrap_or_default().to_owned(),
            assignor: group.server_assignor_name().map(str::to_owned),
            leader: group.leader().map(|l| l.as_str().to_owned()),
            members: group
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

    /// A consumer group (KIP-848) for the status page: members with their current partitions.
    fn consumer_snapshot(&self, ctx: &Ctx, group: &ConsumerGroup) -> GroupSnapshot {
        let image = &*ctx.settings.image;
        GroupSnapshot {
            group_id: group.id().as_str().to_owned(),
            kind: "consumer",
            state: group.state().as_str().to_owned(),
            epoch: group.group_epoch(),
            protocol_type: "consumer".to_owned(),
            protocol: String::new(),
            assignor: Some(group.assignor_name().to_owned()),
            leader: None,
            members: group
                .members()
                .map(|m| {
                    let partitions = partition_refs(&m.assigned, image);
                    MemberSnapshot {
                        member_id: m.member_id.as_str().to_owned(),
                        instance_id: m.instance_id.as_ref().map(|i| i.as_str().to_owned()),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        partitions,
                    }
                })
                .collect(),
            learners: Vec::new(),
            offsets: self.offsets.count(group.id()),
            rebalances: self.history.rebalances(),
        }
    }

    /// A streams group for the status page: members with their active tasks (a task shows as
    /// the partition of its subtopology, topic `subtopology-<id>`).
    fn streams_snapshot(&self, group: &StreamsGroup) -> GroupSnapshot {
        GroupSnapshot {
            group_id: group.id().as_str().to_owned(),
            kind: "streams",
            state: group.state().as_str().to_owned(),
            epoch: group.group_epoch(),
            protocol_type: "streams".to_owned(),
            protocol: String::new(),
            assignor: Some(group.assignor_name().to_owned()),
            leader: None,
            members: group
                .members()
                .map(|m| MemberSnapshot {
                    member_id: m.member_id.as_str().to_owned(),
                    instance_id: m.instance_id.as_ref().map(|i| i.as_str().to_owned()),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    partitions: m
                        .assigned
                        .active
                        .iter()
                        .map(|t| PartitionRef {
                            topic: format!("subtopology-{}", t.subtopology),
                            partition: t.partition,
                        })
                        .collect(),
                })
                .collect(),
            learners: Vec::new(),
            offsets: self.offsets.count(group.id()),
            rebalances: self.history.rebalances(),
        }
    }

    fn expire_offsets(&mut self, ctx: &Ctx) {
        let now = ctx.clock.now();
        if ctx.settings.offsets.kept_elsewhere {
            self.forget_if_long_empty(ctx, now);
            return;
        }
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
            |topic| {
                self.group
                    .is_subscribed_to_topic(topic, &*ctx.settings.image)
            },
            |tp| self.pending_offsets.is_pending(tp),
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
        // A group with an open transaction's offsets stays (Kafka's cleanupGroupMetadata).
        if expired.all_expired
            && self.group.is_empty()
            && self.pending_offsets.is_empty()
            && self.delete_empty(ctx, now, false)
        {
            let _span = self.log_span();
            info!("empty group with no offsets left deleted");
        }
    }

    /// Gateway mode's retention: an Empty group (with no transaction's offsets pending) that
    /// retention has seen Empty for `offsets.retention.minutes` is forgotten. Its records are
    /// cleared and it leaves koord's memory; its offsets stay upstream (koord holds only those
    /// committed since it started, so it cannot tell whether upstream's have expired, and
    /// deleting the group upstream could lose them). The clock starts at the first check that
    /// sees the group Empty, so a restart only delays it.
    fn forget_if_long_empty(&mut self, ctx: &Ctx, now: Timestamp) {
        if self.group.is_dead() || !self.group.is_empty() || !self.pending_offsets.is_empty() {
            self.empty_since = None;
            return;
        }
        let since = *self.empty_since.get_or_insert(now);
        if now.as_millis().saturating_sub(since.as_millis()) < ctx.settings.offsets.retention_ms {
            return;
        }
        if self.delete_empty(ctx, now, true) {
            let id = self.group.id().clone();
            let offsets = self.offsets.remove_group(&id);
            let _span = self.log_span();
            info!(
                offsets_in_memory = offsets,
                "group Empty for offsets.retention.minutes forgotten (its offsets stay upstream)"
            );
        }
    }

    /// Deletes this Empty group, true when it is gone. Its tombstone deletes its records and
    /// offsets, or with `forget` (gateway retention) clears only its records: its offsets stay
    /// upstream. A classic group's tombstone comes out of the core as Output::Persist.
    fn delete_empty(&mut self, ctx: &Ctx, now: Timestamp, forget: bool) -> bool {
        let group = self.group.id().clone();
        self.forgetting = forget;
        let deleted = match self.group.delete_unless_classic() {
            Some(result) => {
                if result.is_ok() {
                    let tombstone = if forget {
                        Mutation::ClearGroupRecords { group }
                    } else {
                        Mutation::DeleteGroup { group }
                    };
                    self.submit_consumer(ctx, vec![tombstone], Vec::new(), None);
                }
                result.is_ok()
            }
            None => match &mut self.group {
                Core::Classic(group) => group.handle_delete(now).is_ok(),
                _ => false,
            },
        };
        self.forgetting &= deleted;
        deleted
    }

    /// Delivers every output of the core; records go to the storage task, and their
    /// completions come back through [`GroupActor::complete`].
    fn drain(&mut self, ctx: &Ctx) {
        if let Core::Streams(group) = &mut self.group {
            let events = group.take_events();
            if !events.is_empty() {
                let now = ctx.clock.now();
                let _span = self.log_span();
                for event in &events {
                    log_streams_event(event);
                    match event {
                        StreamsEvent::EpochBumped { why, .. } => {
                            self.history.on_round_started(why, now);
                        }
                        StreamsEvent::TargetComputed { assignor, .. } => {
                            self.history.on_planned(assignor, None);
                            metrics().assignor_ran(assignor, self.core_call);
                        }
                        _ => {}
                    }
                }
            }
            // Records a timer or a fenced member produced (heartbeats submit their own).
            self.flush_consumer(ctx, Vec::new(), None);
        }
        if let Core::Consumer(group) = &mut self.group {
            let events = group.take_events();
            if !events.is_empty() {
                let now = ctx.clock.now();
                let _span = self.log_span();
                for event in &events {
                    log_consumer_event(event);
                    match event {
                        ConsumerEvent::EpochBumped { why, .. } => {
                            self.history.on_round_started(why, now);
                        }
                        ConsumerEvent::TargetComputed {
                            assignor, summary, ..
                        } => {
                            self.history.on_planned(assignor, summary.as_deref());
                            metrics().assignor_ran(assignor, self.core_call);
                        }
                        _ => {}
                    }
                }
            }
            // Records a timer or a fenced member produced (heartbeats submit their own).
            self.flush_consumer(ctx, Vec::new(), None);
            self.observe_consumer(ctx);
        }
        while let Some(out) = match &mut self.group {
            Core::Classic(group) => group.poll_output(),
            Core::Consumer(_) | Core::Streams(_) => None,
        } {
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
                // This shell sleeps until `next_deadline` and asks for no timer changes
                // (`Settings::group_config`).
                Output::Timer(_) => {}
                Output::Persist { write, record } => {
                    let group = self.group.id().clone();
                    let (mutation, delete_reply) = match record {
                        GroupRecord::Metadata(record) => {
                            (Mutation::PutGroup { group, record }, None)
                        }
                        GroupRecord::Tombstone if self.forgetting => {
                            (Mutation::ClearGroupRecords { group }, None)
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
        if std::mem::take(&mut self.listing_unchanged) {
            return;
        }
        let mut listing = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        listing.state = self.group.listed_state();
        let protocol_type = self.group.protocol_type();
        listing.members = self.group.num_members();
        if listing.protocol_type != protocol_type {
            listing.protocol_type = protocol_type.to_string();
        }
    }
}

/// A consumer-group member's partitions by topic name, sorted; deleted topics left out.
fn partition_refs(
    partitions: &crate::vocab::Partitions,
    image: &dyn crate::group::consumer::TopicImage,
) -> Vec<PartitionRef> {
    let mut out: Vec<PartitionRef> = partitions
        .iter()
        .filter_map(|(id, ps)| Some((image.name_of(*id)?, ps)))
        .flat_map(|(topic, ps)| {
            ps.iter().map(move |&partition| PartitionRef {
                topic: topic.clone(),
                partition,
            })
        })
        .collect();
    out.sort();
    out
}

fn shrink_if_empty<K, V>(map: &mut HashMap<K, V>) {
    if map.is_empty() && map.capacity() > 0 {
        *map = HashMap::new();
    }
}

fn log_consumer_event(event: &ConsumerEvent) {
    match event {
        ConsumerEvent::Joined { member, instance } => info!(
            member = %member,
            instance_id = instance.as_ref().map(|i| i.as_str()).unwrap_or(""),
            "member joined the consumer group"
        ),
        ConsumerEvent::Left { member, why } => info!(member = %member, "member removed: {why}"),
        ConsumerEvent::EpochBumped { epoch, why } => {
            info!(epoch, "group epoch bumped: {why}")
        }
        ConsumerEvent::TargetComputed {
            epoch,
            assignor,
            summary,
        } => info!(
            epoch,
            assignor,
            "target assignment computed{}",
            summary
                .as_deref()
                .map(|s| format!(": {s}"))
                .unwrap_or_default()
        ),
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

/// StreamsGroupDescribe's view of a streams group.
fn streams_view(g: &StreamsGroup) -> StreamsGroupView {
    let internal_partitions = g
        .configured()
        .and_then(|c| c.subtopologies.as_ref())
        .map(|subs| {
            subs.values()
                .flat_map(|s| {
                    s.repartition_source_topics
                        .iter()
                        .chain(&s.changelog_topics)
                        .map(|(n, p)| (n.clone(), *p))
                })
                .collect()
        })
        .unwrap_or_default();
    StreamsGroupView {
        state: g.state(),
        group_epoch: g.group_epoch(),
        assignment_epoch: g.assignment_epoch(),
        assignor_name: g.assignor_name().to_string(),
        topology: g.topology().cloned(),
        internal_partitions,
        members: g.members().cloned().collect(),
    }
}

/// A streams group's event as a log line: membership, epochs and targets at info (warm-ups
/// being planned and promoted are what an operator watches a scale-out by), the rest at debug.
fn log_streams_event(event: &StreamsEvent) {
    match event {
        StreamsEvent::Joined { member, process } => {
            info!(%member, %process, "streams member joined");
        }
        StreamsEvent::Left { member, why } => info!(%member, why, "streams member left"),
        StreamsEvent::EpochBumped { epoch, why } => debug!(epoch, why, "group epoch bumped"),
        StreamsEvent::TargetComputed {
            epoch,
            assignor,
            tasks,
            members,
        } => info!(
            epoch,
            assignor, tasks, members, "target assignment computed"
        ),
        StreamsEvent::WarmingUp {
            task,
            learner,
            owner,
        } => info!(
            task = %format_args!("{}_{}", task.subtopology, task.partition),
            %learner,
            %owner,
            "warm-up planned: the task stays with its owner while the learner restores its state"
        ),
        StreamsEvent::Promoted { task, learner } => info!(
            task = %format_args!("{}_{}", task.subtopology, task.partition),
            %learner,
            "warm-up promoted: caught up, the task moves to its learner"
        ),
    }
}
