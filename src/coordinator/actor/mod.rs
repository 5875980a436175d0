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
//!
//! Here: the shard loop and a group's commands and write completions. Beside it: [`kinds`]
//! (a group changing kind, the consumer core's records on their way to the store), [`commits`]
//! (offsets, transactions' ends, retention) and [`observe`] (descriptions, snapshots, metrics
//! and log lines).

mod commits;
mod kinds;
mod observe;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::core::Core;
use super::registry;
use super::{
    Clock, Directory, GroupDescription, GroupListing, MemberDescription, OffsetCommit,
    PartitionResults, Settings, TxnMarker, TxnOffsetCommit,
};
use crate::coordinator::status::{
    GroupSnapshot, History, LearnerSnapshot, MemberSnapshot, PartitionRef, SharePartitionSnapshot,
};
use crate::group::consumer::{
    ConsumerEvent, ConsumerGroup, ConsumerGroupState, ConsumerHeartbeat, ConsumerHeartbeatReply,
    Refusal,
};
use crate::group::share::{ShareEvent, ShareGroup};
use crate::group::streams::{StreamsEvent, StreamsGroup};
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
use observe::{log_consumer_event, log_event, log_streams_event, observe_share_events};

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
    /// A kind's own request ([`super::Coordinator::with_kind`]).
    Kind(KindCall),
    DeleteOffsets(
        Vec<TopicPartition>,
        oneshot::Sender<Result<PartitionResults, GroupError>>,
    ),
    /// A deleted topic: its offsets (and a share group's states) go from the group.
    ForgetTopic(
        crate::metadata::Topic,
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

/// A kind's own request, as [`super::Coordinator::with_kind`] sends it: it runs on the group
/// as its kind through [`GroupActor::run_as`].
pub(super) type KindCall = Box<dyn FnOnce(&mut GroupActor, &Ctx) + Send>;

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
    /// Records a kind gave in their stored form ([`Core::take_stored`]), and the answers that
    /// depend on them.
    Records {
        replies: Vec<Deferred>,
        delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    },
}

/// An answer of a group whose records go out in stored form (a modern kind's heartbeat, a
/// classic member's JoinGroup or SyncGroup to a consumer group) held until the writes before
/// it are durable; it is sent with the error of the write, if the write failed.
type Deferred = Box<dyn FnOnce(Option<GroupError>) + Send>;

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
    /// The share groups' records for their dead-letter queues, to the shell's writer.
    pub dead_letters: mpsc::UnboundedSender<super::DeadLetterJob>,
}

/// A group a shard is to own from now on.
pub(super) struct NewGroup {
    pub group: Core,
    pub offsets: MemoryOffsetStore,
    pub pending_offsets: PendingOffsets,
    pub listing: Arc<Mutex<GroupListing>>,
    /// Notified when a share group's records became available again.
    pub available: Arc<tokio::sync::Notify>,
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
    available: Arc<tokio::sync::Notify>,
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
    /// The last write of records in stored form still in flight: answers given while it is
    /// wait for it, so no answer gets ahead of what it depends on.
    last_records_write: Option<u64>,
    /// Its last rebalances and learners, for the status page and metrics.
    history: History,
    /// How long the last core call that can run an assignor took (join, leave, timeout).
    core_call: Duration,
    /// A share group's in-flight records as last added to the metrics' gauge.
    share_in_flight: i64,
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
        metrics().share_in_flight_changed(-actor.share_in_flight);
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
            available: new.available,
            parked_joins: HashMap::new(),
            parked_syncs: HashMap::new(),
            next_token: 0,
            pending: HashMap::new(),
            next_submission: 0,
            delete_reply: None,
            empty_since: None,
            forgetting: false,
            armed: None,
            last_records_write: None,
            history: History::default(),
            core_call: Duration::ZERO,
            share_in_flight: 0,
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
                if let Some(group) = self.group.get_mut::<ClassicGroup>() {
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
            Pending::Records {
                replies,
                delete_reply,
            } => {
                if self.last_records_write == Some(id) {
                    self.last_records_write = None;
                }
                for reply in replies {
                    reply(error);
                }
                if error.is_some() {
                    self.group.handle_write_failed();
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
                self.become_kind(ctx, &registry::CLASSIC);
                // A classic member of a consumer group with members.
                if let Some(group) = self.group.get_mut::<ConsumerGroup>() {
                    let answer = group.handle_classic_join(&req, image, now);
                    self.flush_records(
                        ctx,
                        Vec::new(),
                        Some(Box::new(move |error| {
                            let _ = reply.send(
                                error.map_or(answer, |e| JoinReply::error(e, MemberId::unknown())),
                            );
                        })),
                    );
                    return;
                }
                let Some(group) = self.group.get_mut::<ClassicGroup>() else {
                    // A streams group with members.
                    let _ = reply.send(JoinReply::error(
                        GroupError::InconsistentGroupProtocol,
                        MemberId::unknown(),
                    ));
                    return;
                };
                let token = RequestToken(self.next_token + 1);
                self.next_token += 1;
                req.token = token;
                self.parked_joins.insert(token, reply);
                let started = Instant::now();
                group.handle_join(*req, now);
                self.core_call = started.elapsed();
            }
            Command::Sync(mut req, reply) => {
                if let Some(group) = self.group.get_mut::<ClassicGroup>() {
                    let token = RequestToken(self.next_token + 1);
                    self.next_token += 1;
                    req.token = token;
                    self.parked_syncs.insert(token, reply);
                    group.handle_sync(*req, now);
                } else if let Some(group) = self.group.get_mut::<ConsumerGroup>() {
                    match group.handle_classic_sync(&req, image, now) {
                        Ok(answer) => self.flush_records(
                            ctx,
                            Vec::new(),
                            Some(Box::new(move |error| {
                                let _ = reply.send(error.map_or(answer, SyncReply::error));
                            })),
                        ),
                        Err(e) => {
                            let _ = reply.send(SyncReply::error(e));
                        }
                    }
                } else {
                    let _ = reply.send(SyncReply::error(GroupError::UnknownMemberId));
                }
            }
            Command::Heartbeat(req, reply) => {
                let answer = if let Some(group) = self.group.get_mut::<ClassicGroup>() {
                    // A heartbeat moves a session deadline and nothing ListGroups shows.
                    self.listing_unchanged = true;
                    group.handle_heartbeat(&req, now)
                } else if let Some(group) = self.group.get_mut::<ConsumerGroup>() {
                    group.handle_classic_heartbeat(&req, now)
                } else {
                    Err(GroupError::UnknownMemberId)
                };
                let _ = reply.send(answer);
            }
            Command::Leave(req, reply) => {
                let started = Instant::now();
                let outcome = if let Some(group) = self.group.get_mut::<ClassicGroup>() {
                    group.handle_leave(&req, now)
                } else if let Some(group) = self.group.get_mut::<ConsumerGroup>() {
                    LeaveOutcome {
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
                    }
                } else {
                    LeaveOutcome {
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
                    }
                };
                self.core_call = started.elapsed();
                let _ = reply.send(outcome);
            }
            Command::ConsumerHeartbeat(req, reply) => {
                if req.member_epoch == 0 {
                    self.become_kind(ctx, &registry::CONSUMER);
                }
                // A member joining a classic group with members upgrades it, if it can.
                let mut upgraded = match self.group.get::<ClassicGroup>() {
                    Some(classic)
                        if req.member_epoch == 0
                            && ConsumerGroup::can_upgrade(classic, &ctx.settings.consumer) =>
                    {
                        match ConsumerGroup::from_classic(
                            classic,
                            ctx.settings.consumer.clone(),
                            image,
                            now,
                        ) {
                            Ok(group) => Some(group),
                            Err(refusal) => {
                                let _ = reply.send(Err(refusal));
                                return;
                            }
                        }
                    }
                    _ => None,
                };
                if upgraded.is_none() && !self.group.is::<ConsumerGroup>() {
                    // A classic or streams group with members (or a Dead one).
                    // Kafka 4.4's words (no full stop, unlike ConsumerGroupDescribe's).
                    let message = format!("Group {} is not a consumer group", self.group.id());
                    let _ = reply.send(Err(Refusal::new(GroupError::GroupIdNotFound, message)));
                    return;
                }
                let Some(group) = upgraded
                    .as_mut()
                    .or_else(|| self.group.get_mut::<ConsumerGroup>())
                else {
                    return;
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
                self.flush_records(
                    ctx,
                    first,
                    Some(Box::new(move |error| {
                        let _ = reply.send(error.map_or(Ok(answer), |e| Err(e.into())));
                    })),
                );
            }
            Command::Kind(call) => call(self, ctx),
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
            Command::ForgetTopic(topic, reply) => self.forget_topic(ctx, &topic, reply),
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
        match self.group.delete_by_shell() {
            Some(Ok(())) => {
                let batch = vec![Mutation::DeleteGroup { group: id }];
                self.submit_records(ctx, batch, Vec::new(), Some(reply));
            }
            Some(Err(e)) => {
                let _ = reply.send(Err(e));
            }
            None => {
                let Some(group) = self.group.get_mut::<ClassicGroup>() else {
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

    /// Answers every parked JoinGroup and SyncGroup with `error`.
    fn answer_parked(&mut self, error: GroupError) {
        for (_, tx) in self.parked_joins.drain() {
            let _ = tx.send(JoinReply::error(error, MemberId::unknown()));
        }
        for (_, tx) in self.parked_syncs.drain() {
            let _ = tx.send(SyncReply::error(error));
        }
    }

    /// A share group's records for its dead-letter queue, sent to the shell's writer once
    /// their Archiving state is durable (the reply of the records' write), as Kafka writes to
    /// the queue only after its ARCHIVING state is persisted: a crash in between finds them
    /// Archiving and writes them then, never both in the queue and delivered again. (A failed
    /// write sends them too: the group stores itself whole with the next one.)
    fn dead_letters(&mut self, ctx: &Ctx) -> Option<Deferred> {
        let all = self.group.get_mut::<ShareGroup>()?.take_dead_letters();
        if all.is_empty() {
            return None;
        }
        let id = self.group.id().clone();
        let tx = ctx.dead_letters.clone();
        Some(Box::new(move |_| {
            for letters in all {
                let job = super::DeadLetterJob {
                    group: id.clone(),
                    letters,
                };
                // No writer: the node is shutting down; the next start finds them Archiving.
                let _ = tx.send(job);
            }
        }))
    }

    /// Delivers every output of the core; records go to the storage task, and their
    /// completions come back through [`GroupActor::complete`].
    fn drain(&mut self, ctx: &Ctx) {
        if let Some(group) = self.group.get_mut::<StreamsGroup>() {
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
        }
        if let Some(group) = self.group.get_mut::<ConsumerGroup>() {
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
        }
        let dead_letters = self.dead_letters(ctx);
        if let Some(group) = self.group.get_mut::<ShareGroup>() {
            let events = group.take_events();
            let in_flight: i64 = group
                .partitions()
                .map(|(_, p)| i64::try_from(p.in_flight()).unwrap_or(i64::MAX))
                .sum();
            if !events.is_empty() {
                let _span = self.log_span();
                observe_share_events(&events);
            }
            if events.iter().any(ShareEvent::made_available) {
                self.available.notify_waiters();
            }
            metrics().share_in_flight_changed(in_flight - self.share_in_flight);
            self.share_in_flight = in_flight;
        }
        // Records a timer or a fenced member produced (a kind's own requests submit theirs);
        // a consumer group whose last consumer-protocol member left turns classic here.
        self.flush_records(ctx, Vec::new(), dead_letters);
        self.observe_consumer(ctx);
        while let Some(out) = self
            .group
            .get_mut::<ClassicGroup>()
            .and_then(ClassicGroup::poll_output)
        {
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
                            let record = crate::group::classic::codec::stored(&record);
                            (Mutation::PutGroupRecord { group, record }, None)
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

fn shrink_if_empty<K, V>(map: &mut HashMap<K, V>) {
    if map.is_empty() && map.capacity() > 0 {
        *map = HashMap::new();
    }
}
