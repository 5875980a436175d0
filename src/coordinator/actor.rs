//! One group's actor: owns the group core and its offsets, serves its queue one command at a
//! time, sleeps until the core's next deadline, and turns the core's outputs into replies, log
//! lines and (for now, immediately acknowledged) writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, Instrument};

use super::{
    Clock, GroupDescription, GroupListing, Handle, MemberDescription, OffsetCommit,
    PartitionResults, Settings,
};
use crate::group::{
    ClassicGroup, GroupError, GroupEvent, GroupId, GroupState, Heartbeat, JoinGroup, JoinReply,
    LeaveGroup, LeaveOutcome, Output, RequestToken, SyncGroup, SyncReply,
};
use crate::offsets::{self, FetchedOffset, MemoryOffsetStore, OffsetStore, TopicPartition};

/// A request for the actor, with where its answer goes.
pub(super) enum Command {
    Join(JoinGroup, oneshot::Sender<JoinReply>),
    Sync(SyncGroup, oneshot::Sender<SyncReply>),
    Heartbeat(Heartbeat, oneshot::Sender<Result<(), GroupError>>),
    Leave(LeaveGroup, oneshot::Sender<LeaveOutcome>),
    Commit(
        OffsetCommit,
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
    Delete(oneshot::Sender<Result<(), GroupError>>),
    ExpireOffsets,
}

pub(super) struct GroupActor {
    group: ClassicGroup,
    offsets: MemoryOffsetStore,
    settings: Settings,
    clock: Clock,
    rx: mpsc::UnboundedReceiver<Command>,
    /// Our own sender, to recognise our entry in the directory when removing it.
    tx: mpsc::UnboundedSender<Command>,
    listing: Arc<Mutex<GroupListing>>,
    directory: Arc<DashMap<GroupId, Handle>>,
    parked_joins: HashMap<RequestToken, oneshot::Sender<JoinReply>>,
    parked_syncs: HashMap<RequestToken, oneshot::Sender<SyncReply>>,
    next_token: u64,
}

impl GroupActor {
    pub(super) fn new(
        group: ClassicGroup,
        settings: Settings,
        clock: Clock,
        rx: mpsc::UnboundedReceiver<Command>,
        tx: mpsc::UnboundedSender<Command>,
        listing: Arc<Mutex<GroupListing>>,
        directory: Arc<DashMap<GroupId, Handle>>,
    ) -> GroupActor {
        GroupActor {
            group,
            offsets: MemoryOffsetStore::default(),
            settings,
            clock,
            rx,
            tx,
            listing,
            directory,
            parked_joins: HashMap::new(),
            parked_syncs: HashMap::new(),
            next_token: 0,
        }
    }

    pub(super) async fn run(mut self) {
        let span = tracing::info_span!("group", group = %self.group.id());
        async move {
            loop {
                let deadline = self.group.next_deadline().map(|d| self.clock.instant_at(d));
                let sleep = async {
                    match deadline {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    cmd = self.rx.recv() => match cmd {
                        Some(cmd) => self.handle(cmd),
                        // Every sender is gone: the directory dropped us (shutdown).
                        None => break,
                    },
                    _ = sleep => {
                        let now = self.clock.now();
                        self.group.handle_timeout(now);
                    }
                }
                self.drain();
                if self.group.state() == GroupState::Dead {
                    self.retire();
                    break;
                }
            }
        }
        .instrument(span)
        .await
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
                self.group.handle_join(req, now);
            }
            Command::Sync(mut req, reply) => {
                let token = self.token();
                req.token = token;
                self.parked_syncs.insert(token, reply);
                self.group.handle_sync(req, now);
            }
            Command::Heartbeat(req, reply) => {
                let _ = reply.send(self.group.handle_heartbeat(&req, now));
            }
            Command::Leave(req, reply) => {
                let _ = reply.send(self.group.handle_leave(&req, now));
            }
            Command::Commit(commit, reply) => {
                let _ = reply.send(self.commit(commit));
            }
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
                let _ = reply.send(self.delete_offsets(partitions));
            }
            Command::Describe(reply) => {
                let _ = reply.send(self.describe());
            }
            Command::Delete(reply) => {
                let result = if self.group.state() == GroupState::Dead {
                    Err(GroupError::GroupIdNotFound)
                } else {
                    self.group.handle_delete(now)
                };
                if result.is_ok() {
                    let removed = self.offsets.remove_group(self.group.id());
                    info!(offsets = removed, "group deleted");
                }
                let _ = reply.send(result);
            }
            Command::ExpireOffsets => self.expire_offsets(),
        }
    }

    fn commit(&mut self, commit: OffsetCommit) -> Result<PartitionResults, GroupError> {
        let now = self.clock.now();
        self.group.validate_offset_commit(&commit.auth, now)?;
        let prepared = offsets::prepare_commit(
            &self.settings.offsets,
            commit.partitions,
            commit.retention_time_ms,
            now,
        );
        let id = self.group.id().clone();
        for (tp, offset) in prepared.writes {
            self.offsets.put(&id, tp, offset);
        }
        Ok(prepared.results)
    }

    fn delete_offsets(
        &mut self,
        partitions: Vec<TopicPartition>,
    ) -> Result<PartitionResults, GroupError> {
        self.group.validate_offset_delete()?;
        let id = self.group.id().clone();
        Ok(partitions
            .into_iter()
            .map(|tp| {
                if self.group.is_subscribed_to_topic(&tp.topic) {
                    (tp, Some(GroupError::GroupSubscribedToTopic))
                } else {
                    self.offsets.remove(&id, &tp);
                    (tp, None)
                }
            })
            .collect())
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
        let expired = offsets::expired_offsets(
            &current,
            self.group.offset_expiration_base(),
            |topic| self.group.is_subscribed_to_topic(topic),
            |_| false,
            now,
            self.settings.offsets.retention_ms,
        );
        for tp in &expired.expired {
            self.offsets.remove(&id, tp);
        }
        if !expired.expired.is_empty() {
            info!(count = expired.expired.len(), "expired offsets removed");
        }
        if expired.all_expired
            && self.group.state() == GroupState::Empty
            && self.group.handle_delete(now).is_ok()
        {
            info!("empty group with no offsets left deleted");
        }
    }

    /// Delivers every output of the core. Writes are acknowledged at once (no durable store
    /// yet), which may produce further outputs, so this loops until the core is quiet.
    fn drain(&mut self) {
        loop {
            let mut writes = Vec::new();
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
                    Output::Persist { write, .. } => writes.push(write),
                    Output::Event(event) => log_event(&event),
                }
            }
            if writes.is_empty() {
                break;
            }
            let now = self.clock.now();
            for write in writes {
                self.group.handle_write_complete(write, Ok(()), now);
            }
        }
        let mut listing = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        listing.state = self.group.state();
        listing.protocol_type = self.group.protocol_type().unwrap_or_default().to_string();
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
    }
}
