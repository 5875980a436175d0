//! One group's actor: owns the group core and its offsets, serves its queue one command at a
//! time, sleeps until the core's next deadline, and turns the core's outputs into replies, log
//! lines and writes.
//!
//! Every write goes to the storage task with a completion that comes back through the actor's
//! own completion queue. A reply that depends on a write (OffsetCommit, OffsetDelete,
//! DeleteGroups, and through the core the SyncGroup that completes a generation) is sent only
//! in that completion, and in-memory offsets change only then, so a failed write changes nothing
//! and the reply carries the mapped error. The actor keeps serving its queue meanwhile, so
//! commits pipeline; completions arrive in submission order (one FIFO storage task).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info};

use super::{
    Clock, GroupDescription, GroupListing, Handle, MemberDescription, OffsetCommit,
    PartitionResults, Settings,
};
use crate::group::{
    ClassicGroup, GroupError, GroupEvent, GroupId, GroupRecord, GroupState, Heartbeat, JoinGroup,
    JoinReply, LeaveGroup, LeaveOutcome, Output, RequestToken, SyncGroup, SyncReply, WriteId,
};
use crate::offsets::{
    self, FetchedOffset, MemoryOffsetStore, OffsetAndMetadata, OffsetStore, TopicPartition,
};
use crate::storage::{Mutation, Storage, StoreError};

/// A request for the actor, with where its answer goes.
///
/// Large requests are boxed: a group's queue allocates its slots in blocks, so the size of a
/// command is paid per slot of every group whether used or not.
pub(super) enum Command {
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
    /// A write this actor submitted is durable (or failed). Completions come through the same
    /// queue as requests: one queue per group, not two.
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

pub(super) struct GroupActor {
    group: ClassicGroup,
    offsets: MemoryOffsetStore,
    settings: Arc<Settings>,
    clock: Clock,
    rx: mpsc::UnboundedReceiver<Command>,
    /// Our own sender, to recognise our entry in the directory when removing it.
    tx: mpsc::UnboundedSender<Command>,
    listing: Arc<Mutex<GroupListing>>,
    directory: Arc<DashMap<GroupId, Handle>>,
    parked_joins: HashMap<RequestToken, oneshot::Sender<JoinReply>>,
    parked_syncs: HashMap<RequestToken, oneshot::Sender<SyncReply>>,
    next_token: u64,
    storage: Storage,
    /// Submitted writes, by submission id, until their [`Command::WriteDone`].
    pending: HashMap<u64, Pending>,
    next_submission: u64,
    /// The reply of a DeleteGroups whose tombstone the core is about to emit.
    delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
}

/// Everything a new actor starts with besides its queue.
pub(super) struct ActorParts {
    pub group: ClassicGroup,
    pub offsets: MemoryOffsetStore,
    pub settings: Arc<Settings>,
    pub clock: Clock,
    pub storage: Storage,
    pub listing: Arc<Mutex<GroupListing>>,
    pub directory: Arc<DashMap<GroupId, Handle>>,
}

impl GroupActor {
    pub(super) fn new(
        parts: ActorParts,
        rx: mpsc::UnboundedReceiver<Command>,
        tx: mpsc::UnboundedSender<Command>,
    ) -> GroupActor {
        GroupActor {
            group: parts.group,
            offsets: parts.offsets,
            settings: parts.settings,
            clock: parts.clock,
            rx,
            tx,
            listing: parts.listing,
            directory: parts.directory,
            parked_joins: HashMap::new(),
            parked_syncs: HashMap::new(),
            next_token: 0,
            storage: parts.storage,
            pending: HashMap::new(),
            next_submission: 0,
            delete_reply: None,
        }
    }

    /// Sends `batch` to the storage task; `then` runs in [`GroupActor::complete`].
    fn submit(&mut self, batch: Vec<Mutation>, then: Pending) {
        let id = self.next_submission;
        self.next_submission += 1;
        self.pending.insert(id, then);
        let done = self.tx.clone();
        self.storage.submit(
            batch,
            Box::new(move |result| {
                let _ = done.send(Command::WriteDone(id, result));
            }),
        );
    }

    /// A submitted write is durable (or failed): apply it to memory and answer.
    fn complete(&mut self, id: u64, result: Result<(), StoreError>) {
        let Some(pending) = self.pending.remove(&id) else {
            return;
        };
        let error = result.as_ref().err().map(StoreError::group_error);
        match pending {
            Pending::Group {
                write,
                delete_reply,
            } => {
                let now = self.clock.now();
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
                    for tp in &expired {
                        self.offsets.remove(&id, tp);
                    }
                    let _span = self.log_span();
                    info!(count = expired.len(), "expired offsets removed");
                }
            }
        }
    }

    /// The `group` span a log line of this actor is written in. Entered around each line
    /// rather than held for the actor's life: a live span costs every group its registry entry
    /// and formatted fields, and the lines are rare (generations, membership, expiry), never
    /// per heartbeat.
    fn log_span(&self) -> tracing::span::EnteredSpan {
        tracing::info_span!("group", group = %self.group.id()).entered()
    }

    pub(super) async fn run(mut self) {
        {
            self.drain();
            // One sleep, moved only when the core's next deadline moves (most commands, such
            // as a heartbeat, push one member's deadline out and leave the earliest in place).
            let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
            tokio::pin!(sleep);
            let mut armed: Option<tokio::time::Instant> = None;
            loop {
                let deadline = self.group.next_deadline().map(|d| self.clock.instant_at(d));
                if deadline != armed {
                    if let Some(at) = deadline {
                        sleep.as_mut().reset(at);
                    }
                    armed = deadline;
                }
                tokio::select! {
                    cmd = self.rx.recv() => match cmd {
                        Some(cmd) => {
                            self.handle(cmd);
                            // Whatever else is queued is served before the deadline is
                            // looked at again (bounded, so timers are never starved).
                            for _ in 0..BATCH {
                                let Ok(cmd) = self.rx.try_recv() else { break };
                                self.drain();
                                self.handle(cmd);
                            }
                        }
                        // Every sender is gone: the directory dropped us (shutdown).
                        None => break,
                    },
                    _ = &mut sleep, if armed.is_some() => {
                        armed = None;
                        let now = self.clock.now();
                        self.group.handle_timeout(now);
                    }
                }
                self.drain();
                // A Dead group waits for its tombstone (and any other write) to be durable
                // before it leaves the directory, so a group created after it under the same
                // id writes after it.
                if self.group.state() == GroupState::Dead && self.pending.is_empty() {
                    self.retire();
                    break;
                }
            }
        }
    }

    /// Leaves the directory, then answers what was already queued as a Dead group does.
    fn retire(&mut self) {
        let id = self.group.id().clone();
        self.directory
            .remove_if(&id, |_, h| h.tx.same_channel(&self.tx));
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            self.handle(cmd);
            self.drain();
        }
        let _span = self.log_span();
        debug!("group retired");
    }

    fn token(&mut self) -> RequestToken {
        self.next_token += 1;
        RequestToken(self.next_token)
    }

    fn handle(&mut self, cmd: Command) {
        let now = self.clock.now();
        match cmd {
            Command::Join(mut req, reply) => {
                let token = self.token();
                req.token = token;
                self.parked_joins.insert(token, reply);
                self.group.handle_join(*req, now);
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
                let _ = reply.send(self.group.handle_leave(&req, now));
            }
            Command::Commit(commit, reply) => self.commit(*commit, reply),
            Command::WriteDone(id, result) => self.complete(id, result),
            Command::Fetch(partitions, reply) => {
                let readable = self.group.serves_offset_fetch();
                let _ = reply.send(offsets::fetch(
                    &self.offsets,
                    self.group.id(),
                    readable,
                    partitions.as_deref(),
                ));
            }
            Command::DeleteOffsets(partitions, reply) => self.delete_offsets(partitions, reply),
            Command::Describe(reply) => {
                let _ = reply.send(self.describe());
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
            Command::ExpireOffsets => self.expire_offsets(),
        }
    }

    fn commit(
        &mut self,
        commit: OffsetCommit,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        let now = self.clock.now();
        if let Err(e) = self.group.validate_offset_commit(&commit.auth, now) {
            let _ = reply.send(Err(e));
            return;
        }
        let prepared = offsets::prepare_commit(
            &self.settings.offsets,
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

    fn expire_offsets(&mut self) {
        let now = self.clock.now();
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
            self.settings.offsets.retention_ms,
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
            self.submit(batch, Pending::Expired(expired.expired));
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
    fn drain(&mut self) {
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
                        vec![mutation],
                        Pending::Group {
                            write,
                            delete_reply,
                        },
                    );
                }
                Output::Event(event) => {
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
        listing.protocol_type = self.group.protocol_type().unwrap_or_default().to_string();
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
        GroupEvent::AssignmentInstalled { generation } => {
            debug!(generation = generation.0, "assignment installed")
        }
        GroupEvent::LeaderAssignmentIgnored {
            generation,
            entries,
        } => debug!(
            generation = generation.0,
            entries, "leader's assignment ignored: the server assigns this group"
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
