//! The streams group of KIP-1071 (StreamsGroupHeartbeat), PURE, in the discipline of
//! [`crate::group::consumer::ConsumerGroup`]: inputs take `now` and a read-only [`TopicImage`],
//! answers are returned, records to persist and events to log are drained with
//! [`StreamsGroup::take_records`] and [`StreamsGroup::take_events`], and timers are re-checked
//! when they fire.
//!
//! Followed check by check from Apache Kafka 4.4's `GroupMetadataManager.streamsGroupHeartbeat`
//! and the streams `CurrentAssignmentBuilder`:
//! 1. the member is created or updated; a new member, a changed process or endpoint, or a
//!    change in the topics the topology reads or creates bumps the group epoch;
//! 2. the topology is configured against the topics that exist ([`configure`]): task counts,
//!    internal topics to create (handed to the shell in the reply, as Kafka's coordinator hands
//!    them to its broker), and the statuses members are told;
//! 3. when the group epoch is ahead of the target assignment's, a new target is computed for
//!    every member (sticky, or learner-aware: [`learner`]); a new group waits
//!    `group.streams.initial.rebalance.delay.ms` first (status ASSIGNMENT_DELAYED);
//! 4. the member moves towards its target: what it must give up is revoked first, and a task
//!    is granted only when no other member holds it (an active task only when no member runs
//!    it and its process holds no standby or warm-up of it).
//!
//! Where this differs from Kafka, on purpose:
//! - A member that acknowledged a revocation is not counted as still holding what it revoked
//!   when its next tasks are granted in the same heartbeat (Kafka grants them one heartbeat
//!   later).
//! - A member waiting for tasks others still hold is told to heartbeat every
//!   `waiting_heartbeat_interval_ms`, so a task moves as soon as it is released rather than a
//!   whole heartbeat interval later (the client takes the interval from each response).
//! - A group with no members accepts a new topology (Kafka refuses any topology update).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use super::learner::{self, LearnerSettings};
use super::member::{Endpoint, StreamsGroupRecord, StreamsMember, StreamsMemberState, TaskSet};
use super::sticky::{self, MemberTasks, SubtopologyTasks, TaskId};
use super::topology::{configure, ConfiguredTopology, TopicToCreate, Topology};
use crate::group::consumer::{Refusal, TopicImage};
use crate::group::modern::{Modern, ModernMember};
use crate::group::timers::TimerTable;
use crate::vocab::{GroupError, GroupId, InstanceId, MemberId, Timestamp};

/// `StreamsGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH`.
pub const LEAVE_EPOCH: i32 = -1;
/// A static member leaves for now and keeps its tasks until its session expires.
pub const LEAVE_STATIC_EPOCH: i32 = -2;

/// StreamsGroupHeartbeatResponse status codes.
pub mod status {
    pub const STALE_TOPOLOGY: i8 = 0;
    pub const MISSING_SOURCE_TOPICS: i8 = 1;
    pub const SHUTDOWN_APPLICATION: i8 = 2;
    pub const ASSIGNMENT_DELAYED: i8 = 5;
}

/// Who computes a streams group's target assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsAssignor {
    /// Kafka's sticky task assignor: a task moves at once, its new owner restores its state
    /// while nobody processes it.
    Sticky,
    /// Moved tasks are warmed up on their new owner first ([`learner`]).
    Learner(LearnerSettings),
}

impl StreamsAssignor {
    pub fn name(&self) -> &'static str {
        match self {
            StreamsAssignor::Sticky => "sticky",
            StreamsAssignor::Learner(_) => "learner",
        }
    }
}

/// The settings of streams groups (Kafka's `group.streams.*`).
#[derive(Debug, Clone)]
pub struct StreamsGroupConfig {
    /// `group.streams.heartbeat.interval.ms` (5000).
    pub heartbeat_interval_ms: i32,
    /// What a member waiting for released tasks is told instead (see the module docs).
    pub waiting_heartbeat_interval_ms: i32,
    /// `group.streams.session.timeout.ms` (45000).
    pub session_timeout_ms: u64,
    /// `group.streams.max.size` (unlimited).
    pub max_size: usize,
    /// `group.streams.num.standby.replicas` (0).
    pub num_standby_replicas: usize,
    /// `group.streams.initial.rebalance.delay.ms` (3000).
    pub initial_rebalance_delay_ms: u64,
    /// Sent to members: how often they report task offsets (Kafka: 60000).
    pub task_offset_interval_ms: i32,
    /// Sent to members: a warm-up this close is reported at once (Kafka: 10000).
    pub acceptable_recovery_lag: i64,
    pub assignor: StreamsAssignor,
}

impl Default for StreamsGroupConfig {
    fn default() -> Self {
        StreamsGroupConfig {
            heartbeat_interval_ms: 5000,
            waiting_heartbeat_interval_ms: 500,
            session_timeout_ms: 45_000,
            max_size: i32::MAX as usize,
            num_standby_replicas: 0,
            initial_rebalance_delay_ms: 3000,
            task_offset_interval_ms: 60_000,
            acceptable_recovery_lag: 10_000,
            assignor: StreamsAssignor::Learner(LearnerSettings {
                max_learners: 2,
                acceptable_recovery_lag: 10_000,
            }),
        }
    }
}

/// A StreamsGroupHeartbeat (API key 88) in domain terms; `None` fields were null (unchanged).
#[derive(Debug, Clone, Default)]
pub struct StreamsHeartbeat {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<InstanceId>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    pub topology: Option<Topology>,
    /// What the member holds (all three task kinds, or none).
    pub owned: Option<TaskSet>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Option<Vec<(String, String)>>,
    pub task_offsets: Option<Vec<(TaskId, i64)>>,
    pub task_end_offsets: Option<Vec<(TaskId, i64)>>,
    pub shutdown_application: bool,
    pub client_id: String,
    pub client_host: String,
}

/// A heartbeat's checks that need no group (Kafka's `throwIfStreamsGroupHeartbeatRequestIsInvalid`
/// and the unsupported-feature checks before it). `regex_sources`: whether the topology names
/// source topics by regular expression; `tasks_all_or_none`: whether the three owned task
/// lists were all null or all non-null.
///
/// # Errors
/// INVALID_REQUEST with Kafka's message.
pub fn validate(
    group_id: &str,
    req: &StreamsHeartbeat,
    regex_sources: bool,
    tasks_all_or_none: bool,
) -> Result<(), Refusal> {
    let invalid = |m: &str| Err(Refusal::new(GroupError::InvalidRequest, m));
    if regex_sources {
        return invalid("Regular expressions for source topics are not supported yet.");
    }
    if req.member_id.as_str().is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req
        .instance_id
        .as_ref()
        .is_some_and(|i| i.as_str().is_empty())
    {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if req.member_epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if let Some(owned) = &req.owned {
            if !owned.active.is_empty() {
                return invalid("ActiveTasks must be empty when (re-)joining.");
            }
            if !owned.standby.is_empty() {
                return invalid("StandbyTasks must be empty when (re-)joining.");
            }
            if !owned.warmup.is_empty() {
                return invalid("WarmupTasks must be empty when (re-)joining.");
            }
        }
        match &req.topology {
            None => return invalid("Topology must be non-null when (re-)joining."),
            Some(t) => {
                for s in &t.subtopologies {
                    if let Some(c) = s.changelog_topics.iter().find(|c| c.partitions != 0) {
                        return Err(Refusal::new(
                            GroupError::StreamsInvalidTopology,
                            format!(
                                "Changelog topic {} must have an undefined partition count, but \
                                 it is set to {}.",
                                c.name, c.partitions
                            ),
                        ));
                    }
                }
            }
        }
    } else if req.member_epoch == LEAVE_STATIC_EPOCH {
        if req.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if req.member_epoch < LEAVE_STATIC_EPOCH {
        return Err(Refusal::new(
            GroupError::InvalidRequest,
            format!(
                "MemberEpoch is {}, but must be greater than or equal to -2.",
                req.member_epoch
            ),
        ));
    }
    if !tasks_all_or_none {
        return invalid("If one task-type is non-null, all must be non-null.");
    }
    if req.member_epoch != 0 && req.topology.is_some() {
        return invalid("Topology can only be provided when (re-)joining.");
    }
    Ok(())
}

/// The partitions an Interactive Queries endpoint serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: Endpoint,
    pub active: BTreeMap<String, BTreeSet<i32>>,
    pub standby: BTreeMap<String, BTreeSet<i32>>,
}

/// The answer to a heartbeat that was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsHeartbeatReply {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    pub task_offset_interval_ms: i32,
    /// (code, detail).
    pub status: Vec<(i8, String)>,
    /// The member's whole assignment, when it changed or the member (re)joined.
    pub assignment: Option<TaskSet>,
    pub endpoint_information_epoch: i32,
    /// Every endpoint's partitions, when the member's endpoint information is stale.
    pub partitions_by_endpoint: Option<Vec<EndpointPartitions>>,
    /// Internal topics the topology needs that do not exist: the shell creates them.
    pub to_create: BTreeMap<String, TopicToCreate>,
}

/// A change to persist, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamsRecord {
    Group(Box<StreamsGroupRecord>),
    Member(Box<StreamsMember>),
    RemoveMember(MemberId),
}

/// Kafka's `StreamsGroupState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamsGroupState {
    Empty,
    /// The topology cannot be run: topics are missing or wrongly partitioned.
    NotReady,
    Assigning,
    Reconciling,
    Stable,
    Dead,
}

impl StreamsGroupState {
    /// Kafka's spelling (StreamsGroupDescribe, ListGroups).
    pub fn as_str(self) -> &'static str {
        match self {
            StreamsGroupState::Empty => "Empty",
            StreamsGroupState::NotReady => "NotReady",
            StreamsGroupState::Assigning => "Assigning",
            StreamsGroupState::Reconciling => "Reconciling",
            StreamsGroupState::Stable => "Stable",
            StreamsGroupState::Dead => "Dead",
        }
    }
}

/// What a streams group's timer is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamsTimer {
    Session(MemberId),
    /// The member must have revoked by then, or it is fenced (if still at this epoch).
    Revocation(MemberId, i32),
    /// The initial rebalance delay of a new group.
    InitialDelay,
}

/// What happened, for the shell to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamsEvent {
    Joined {
        member: MemberId,
        process: String,
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
        tasks: usize,
        members: usize,
    },
    /// A task stays with its owner while its new owner warms it up.
    WarmingUp {
        task: TaskId,
        learner: MemberId,
        owner: MemberId,
    },
    /// A warm-up is caught up: the task moves to it.
    Promoted {
        task: TaskId,
        learner: MemberId,
    },
}

/// A streams group.
#[derive(Debug)]
pub struct StreamsGroup {
    /// The id, epochs, members, timers, records and events, as every modern kind has them.
    base: Modern<StreamsMember, StreamsRecord, StreamsEvent, StreamsTimer>,
    config: Arc<StreamsGroupConfig>,
    topology: Option<Topology>,
    configured: Option<ConfiguredTopology>,
    metadata_hash: u64,
    /// The topic image version the topology was last configured against.
    image_version: Option<u64>,
    /// Bumped whenever what endpoints serve changes.
    endpoint_epoch: i32,
    shutdown_requested: bool,
}

impl StreamsGroup {
    pub fn new(id: GroupId, config: Arc<StreamsGroupConfig>) -> StreamsGroup {
        StreamsGroup {
            base: Modern::new(id),
            config,
            topology: None,
            configured: None,
            metadata_hash: 0,
            image_version: None,
            endpoint_epoch: 0,
            shutdown_requested: false,
        }
    }

    /// Records to persist, in order, since the last call.
    pub fn take_records(&mut self) -> Vec<StreamsRecord> {
        self.base.take_records()
    }

    /// Events since the last call, in order.
    pub fn take_events(&mut self) -> Vec<StreamsEvent> {
        self.base.take_events()
    }

    /// A group as stored. Every member's session starts `now`, and a member that was revoking
    /// gets its rebalance timeout again.
    pub fn from_records(
        id: GroupId,
        config: Arc<StreamsGroupConfig>,
        record: StreamsGroupRecord,
        members: Vec<StreamsMember>,
        now: Timestamp,
    ) -> StreamsGroup {
        let mut group = StreamsGroup::new(id, config);
        group.base.group_epoch = record.group_epoch;
        group.base.assignment_epoch = record.assignment_epoch;
        group.metadata_hash = record.metadata_hash;
        group.topology = record.topology;
        group.endpoint_epoch = record.group_epoch;
        for member in members {
            let session = now.plus_ms(group.config.session_timeout_ms);
            group
                .base
                .timers
                .set(StreamsTimer::Session(member.member_id.clone()), session);
            group.arm_revocation(&member, now);
            group.put_member(member);
        }
        group
    }

    pub fn topology(&self) -> Option<&Topology> {
        self.topology.as_ref()
    }

    /// The topology configured against the topics (after a heartbeat or timer saw them).
    pub fn configured(&self) -> Option<&ConfiguredTopology> {
        self.configured.as_ref()
    }

    pub fn assignor_name(&self) -> &'static str {
        self.config.assignor.name()
    }

    pub fn state(&self) -> StreamsGroupState {
        if self.base.dead {
            StreamsGroupState::Dead
        } else if self.base.members.is_empty() {
            StreamsGroupState::Empty
        } else if !self.configured.as_ref().is_some_and(|c| c.is_ready()) {
            StreamsGroupState::NotReady
        } else if self.base.group_epoch != self.base.assignment_epoch {
            StreamsGroupState::Assigning
        } else if self.base.members.values().any(|m| {
            m.member_epoch != self.base.assignment_epoch || m.state != StreamsMemberState::Stable
        }) {
            StreamsGroupState::Reconciling
        } else {
            StreamsGroupState::Stable
        }
    }

    /// A write of the group's records failed: everything is written again with the next one.
    pub fn handle_write_failed(&mut self) {
        self.base.records = self.snapshot();
    }

    /// Everything needed to store the group from scratch.
    pub fn snapshot(&self) -> Vec<StreamsRecord> {
        let mut out = vec![StreamsRecord::Group(Box::new(self.group_record()))];
        out.extend(
            self.base
                .members
                .values()
                .map(|m| StreamsRecord::Member(Box::new(m.clone()))),
        );
        out
    }

    fn group_record(&self) -> StreamsGroupRecord {
        StreamsGroupRecord {
            group_epoch: self.base.group_epoch,
            assignment_epoch: self.base.assignment_epoch,
            metadata_hash: self.metadata_hash,
            topology: self.topology.clone(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Heartbeats
    // -----------------------------------------------------------------------------------------

    /// A heartbeat that passed [`validate`]: joins, updates, reconciles or leaves a member.
    ///
    /// # Errors
    /// Kafka's codes and messages: GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
    /// FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, INVALID_REQUEST (a
    /// topology update).
    pub fn handle_heartbeat(
        &mut self,
        req: StreamsHeartbeat,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> Result<StreamsHeartbeatReply, Refusal> {
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == LEAVE_STATIC_EPOCH {
            return self.handle_leave(&req, image);
        }
        let joining = req.member_epoch == 0;
        if joining
            && !self.base.members.contains_key(&req.member_id)
            && self.base.members.len() >= self.config.max_size
        {
            return Err(Refusal::new(
                GroupError::GroupMaxSizeReached,
                format!(
                    "The streams group has reached its maximum capacity of {} members.",
                    self.config.max_size
                ),
            ));
        }
        let mut replaced = None;
        let member = match &req.instance_id {
            None => match self.base.members.get(&req.member_id) {
                Some(m) if joining => m.clone(),
                Some(m) => {
                    check_epoch(m, req.member_epoch, req.owned.as_ref())?;
                    m.clone()
                }
                None if joining => StreamsMember::new(req.member_id.clone()),
                None => return Err(self.base.unknown_member(&req.member_id)),
            },
            Some(instance) => {
                match self
                    .base
                    .static_members
                    .get(instance)
                    .and_then(|id| self.base.members.get(id))
                {
                    None if joining => self
                        .base
                        .members
                        .get(&req.member_id)
                        .cloned()
                        .unwrap_or_else(|| StreamsMember::new(req.member_id.clone())),
                    None => return Err(unknown_instance(instance)),
                    Some(old) if old.member_id == req.member_id => {
                        if !joining {
                            check_epoch(old, req.member_epoch, req.owned.as_ref())?;
                        }
                        old.clone()
                    }
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
                        StreamsMember {
                            member_id: req.member_id.clone(),
                            member_epoch: 0,
                            previous_member_epoch: 0,
                            ..old.clone()
                        }
                    }
                    Some(old) => {
                        return Err(Refusal::new(
                            GroupError::FencedInstanceId,
                            format!(
                                "Static member {} with instance id {instance} was fenced by \
                                 member {}.",
                                req.member_id, old.member_id
                            ),
                        ));
                    }
                }
            }
        };
        // The topology: set by the first member, the same epoch from every later one.
        let mut bump: Option<&'static str> = None;
        if joining {
            let topology = req.topology.clone().unwrap_or_default();
            match &self.topology {
                Some(t) if t.epoch == topology.epoch => {}
                Some(_) if !self.base.members.is_empty() => {
                    return Err(Refusal::new(
                        GroupError::InvalidRequest,
                        "Topology updates are not supported yet.",
                    ));
                }
                _ => {
                    self.topology = Some(topology);
                    self.image_version = None;
                    bump = Some("the topology was set");
                }
            }
        }
        let is_new = !self.base.members.contains_key(&member.member_id);
        if let Some(old) = replaced {
            self.remove_member(&old);
            self.base.records.push(StreamsRecord::RemoveMember(old));
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
        if let Some(t) = &req.topology {
            updated.topology_epoch = t.epoch;
        }
        if let Some(p) = &req.process_id {
            updated.process_id = p.clone();
        }
        if req.user_endpoint.is_some() {
            updated.user_endpoint = req.user_endpoint.clone();
        }
        if let Some(tags) = &req.client_tags {
            updated.client_tags = tags.clone();
        }
        if let Some(offsets) = &req.task_offsets {
            updated.task_offsets = offsets.iter().cloned().collect();
        }
        if let Some(offsets) = &req.task_end_offsets {
            updated.task_end_offsets = offsets.iter().cloned().collect();
        }
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        if is_new {
            self.base.events.push(StreamsEvent::Joined {
                member: updated.member_id.clone(),
                process: updated.process_id.clone(),
            });
            bump = bump.or(Some("a member joined"));
        } else if updated.process_id != member.process_id
            || updated.user_endpoint != member.user_endpoint
            || updated.rack_id != member.rack_id
            || updated.client_tags != member.client_tags
        {
            bump = bump.or(Some("a member changed its process, endpoint or tags"));
        }
        if !is_new
            && (updated.task_offsets != member.task_offsets
                || updated.task_end_offsets != member.task_end_offsets)
            && self.learner_ready(&updated)
        {
            bump = bump.or(Some("a warm-up task caught up"));
        }
        if is_new || updated != member {
            self.put_member(updated);
            self.persist_member(&req.member_id);
        }
        if req.shutdown_application && !self.shutdown_requested {
            self.shutdown_requested = true;
        }

        // 2. The topology against the topics.
        if self.refresh_topology(image) {
            bump = bump.or(Some("the topics changed"));
        }
        if let Some(why) = bump {
            if self.base.group_epoch == 0 && self.config.initial_rebalance_delay_ms > 0 {
                self.base.timers.set(
                    StreamsTimer::InitialDelay,
                    now.plus_ms(self.config.initial_rebalance_delay_ms),
                );
            }
            self.bump_epoch(why);
        }

        // 3. A new target assignment when the group epoch is ahead of it (not during the
        // initial delay: then the target is empty, at epoch 1 at least).
        let delayed = self
            .base
            .timers
            .deadline(&StreamsTimer::InitialDelay)
            .is_some()
            && self.base.group_epoch > self.base.assignment_epoch;
        if !delayed && self.base.group_epoch > self.base.assignment_epoch {
            self.compute_target();
        }

        // 4. The member towards its target.
        let reassigned = if delayed {
            self.reconcile_member(
                &req.member_id,
                self.base.assignment_epoch.max(1),
                &TaskSet::default(),
                req.owned.as_ref(),
                now,
            )
        } else {
            let target = self.base.members[&req.member_id].target.clone();
            self.reconcile_member(
                &req.member_id,
                self.base.assignment_epoch,
                &target,
                req.owned.as_ref(),
                now,
            )
        };
        self.base.timers.set(
            StreamsTimer::Session(req.member_id.clone()),
            now.plus_ms(self.config.session_timeout_ms),
        );
        if reassigned {
            self.endpoints_changed();
        }

        let m = &self.base.members[&req.member_id];
        let mut status = self.statuses(m);
        if delayed {
            status.push((
                status::ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.".to_string(),
            ));
        }
        let waiting = m.state == StreamsMemberState::UnreleasedTasks;
        let endpoint_stale = req.endpoint_information_epoch != self.endpoint_epoch
            && self
                .base
                .members
                .values()
                .any(|m| m.user_endpoint.is_some());
        Ok(StreamsHeartbeatReply {
            member_id: m.member_id.clone(),
            member_epoch: m.member_epoch,
            heartbeat_interval_ms: if waiting {
                self.config
                    .waiting_heartbeat_interval_ms
                    .min(self.config.heartbeat_interval_ms)
            } else {
                self.config.heartbeat_interval_ms
            },
            acceptable_recovery_lag: self.config.acceptable_recovery_lag,
            task_offset_interval_ms: self.config.task_offset_interval_ms,
            status,
            assignment: (joining || reassigned).then(|| m.assigned.clone()),
            endpoint_information_epoch: self.endpoint_epoch,
            partitions_by_endpoint: endpoint_stale.then(|| self.partitions_by_endpoint()),
            to_create: self
                .configured
                .as_ref()
                .map(|c| c.to_create.clone())
                .unwrap_or_default(),
        })
    }

    /// Epoch -1 (the member leaves) or -2 (a static member leaves for now).
    fn handle_leave(
        &mut self,
        req: &StreamsHeartbeat,
        image: &dyn TopicImage,
    ) -> Result<StreamsHeartbeatReply, Refusal> {
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
                    return Err(Refusal::new(
                        GroupError::FencedInstanceId,
                        format!(
                            "Static member {} with instance id {instance} was fenced by member \
                             {id}.",
                            req.member_id
                        ),
                    ));
                }
                id
            }
        };
        if req.member_epoch == LEAVE_STATIC_EPOCH {
            let mut m = self.base.members[&member_id].clone();
            self.base
                .timers
                .cancel(&StreamsTimer::Revocation(member_id.clone(), m.member_epoch));
            m.member_epoch = LEAVE_STATIC_EPOCH;
            self.put_member(m);
            self.persist_member(&member_id);
        } else {
            self.fence(&member_id, "it left the group", image);
        }
        Ok(StreamsHeartbeatReply {
            member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            acceptable_recovery_lag: self.config.acceptable_recovery_lag,
            task_offset_interval_ms: self.config.task_offset_interval_ms,
            status: Vec::new(),
            assignment: None,
            endpoint_information_epoch: self.endpoint_epoch,
            partitions_by_endpoint: None,
            to_create: BTreeMap::new(),
        })
    }

    /// Removes a member and bumps the group epoch.
    fn fence(&mut self, id: &MemberId, why: &'static str, image: &dyn TopicImage) {
        if self.remove_member(id).is_none() {
            return;
        }
        self.base
            .records
            .push(StreamsRecord::RemoveMember(id.clone()));
        self.base.events.push(StreamsEvent::Left {
            member: id.clone(),
            why,
        });
        self.refresh_topology(image);
        self.bump_epoch(why);
        self.endpoints_changed();
        if self.base.members.is_empty() {
            // Nothing to assign: the (empty) target is at the new epoch at once.
            self.base.assignment_epoch = self.base.group_epoch;
            self.shutdown_requested = false;
            self.base.timers.cancel(&StreamsTimer::InitialDelay);
            if let Some(StreamsRecord::Group(record)) = self.base.records.last_mut() {
                record.assignment_epoch = self.base.assignment_epoch;
            }
        } else if self
            .base
            .timers
            .deadline(&StreamsTimer::InitialDelay)
            .is_none()
        {
            // The tasks it ran go to their learners (or anyone) now, not at the next
            // heartbeat of someone else.
            self.compute_target();
        }
    }

    // -----------------------------------------------------------------------------------------
    // Timers
    // -----------------------------------------------------------------------------------------

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        while let Some((key, deadline)) = self.base.timers.next() {
            if deadline > now {
                break;
            }
            self.base.timers.cancel(&key);
            match key {
                StreamsTimer::Session(id) => {
                    self.fence(&id, "its session expired", image);
                }
                StreamsTimer::Revocation(id, epoch) => {
                    if self.base.members.get(&id).is_some_and(|m| {
                        m.member_epoch == epoch && m.state == StreamsMemberState::UnrevokedTasks
                    }) {
                        self.fence(
                            &id,
                            "it did not revoke its tasks within its rebalance timeout",
                            image,
                        );
                    }
                }
                StreamsTimer::InitialDelay => {
                    if self.refresh_topology(image) {
                        self.bump_epoch("the topics changed");
                    }
                    if self.base.group_epoch > self.base.assignment_epoch
                        && !self.base.members.is_empty()
                    {
                        self.compute_target();
                    }
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Offsets, describing and administration
    // -----------------------------------------------------------------------------------------

    /// Kafka's `StreamsGroup.validateOffsetCommit` for a commit at `api_version`
    /// (`transactional`: a TxnOffsetCommit).
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (an OffsetCommit below v9), STALE_MEMBER_EPOCH.
    pub fn validate_offset_commit(
        &self,
        member_id: &MemberId,
        member_epoch: i32,
        transactional: bool,
        api_version: i16,
    ) -> Result<(), GroupError> {
        if member_epoch < 0 && self.base.members.is_empty() {
            // An admin commit to a group without members (kafka-streams-groups
            // --reset-offsets), as Kafka.
            return Ok(());
        }
        let member = self
            .base
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if !transactional && api_version < 9 {
            return Err(GroupError::UnsupportedVersion);
        }
        if member_epoch != member.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Kafka's `StreamsGroup.validateOffsetFetch`: `member_id` `None` with a negative epoch is
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
            return if member_epoch < 0 {
                Ok(())
            } else {
                Err(GroupError::UnknownMemberId)
            };
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

    /// Whether the topology reads `topic` (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC).
    pub fn reads_topic(&self, topic: &str) -> bool {
        self.topology.as_ref().is_some_and(|t| {
            t.subtopologies.iter().any(|s| {
                s.source_topics.iter().any(|n| n == topic)
                    || s.repartition_source_topics.iter().any(|r| r.name == topic)
            })
        })
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

    /// Configures the topology against `image` when either changed; true when what the
    /// assignment depends on changed (the group epoch must move).
    fn refresh_topology(&mut self, image: &dyn TopicImage) -> bool {
        if self.image_version == Some(image.version()) && self.configured.is_some() {
            return false;
        }
        self.image_version = Some(image.version());
        let Some(topology) = &self.topology else {
            return false;
        };
        let configured = configure(topology, &|t| image.topic(t).map(|(_, p)| p as i32));
        let hash = configuration_hash(&configured);
        self.configured = Some(configured);
        if hash != self.metadata_hash {
            self.metadata_hash = hash;
            return true;
        }
        false
    }

    /// The statuses a member is told (Kafka's order: topology problems first).
    fn statuses(&self, m: &StreamsMember) -> Vec<(i8, String)> {
        let mut out = Vec::new();
        if let Some(p) = self.configured.as_ref().and_then(|c| c.problem.as_ref()) {
            out.push((p.code(), p.detail().to_string()));
        }
        if let Some(t) = &self.topology {
            if m.topology_epoch < t.epoch {
                out.push((
                    status::STALE_TOPOLOGY,
                    format!(
                        "The member's topology epoch {} is behind the group's topology epoch {}.",
                        m.topology_epoch, t.epoch
                    ),
                ));
            }
        }
        if self.shutdown_requested {
            out.push((
                status::SHUTDOWN_APPLICATION,
                "A KafkaStreams instance encountered a fatal error and requested a shutdown for \
                 the entire application."
                    .to_string(),
            ));
        }
        out
    }

    /// Whether one of `member`'s warm-ups is now caught up.
    fn learner_ready(&self, member: &StreamsMember) -> bool {
        let StreamsAssignor::Learner(settings) = self.config.assignor else {
            return false;
        };
        if member.target.warmup.is_empty() {
            return false;
        }
        let owners = learner::running_owners(&self.base.members);
        member.target.warmup.iter().any(|t| {
            let owner = owners
                .get(t)
                .copied()
                .filter(|o| o.member_id != member.member_id);
            learner::ready(member, owner, t, settings)
        })
    }

    fn bump_epoch(&mut self, why: &'static str) {
        self.base.group_epoch += 1;
        self.base
            .records
            .push(StreamsRecord::Group(Box::new(self.group_record())));
        self.base.events.push(StreamsEvent::EpochBumped {
            epoch: self.base.group_epoch,
            why,
        });
    }

    fn endpoints_changed(&mut self) {
        if self
            .base
            .members
            .values()
            .any(|m| m.user_endpoint.is_some())
        {
            self.endpoint_epoch += 1;
        }
    }

    /// A new target assignment for every member at the group epoch.
    fn compute_target(&mut self) {
        let subtopologies: BTreeMap<String, SubtopologyTasks> = match (
            self.configured.as_ref().filter(|c| c.is_ready()),
            &self.topology,
        ) {
            (Some(c), Some(t)) => c
                .subtopologies
                .iter()
                .flatten()
                .map(|(id, s)| {
                    let stateful = t
                        .subtopologies
                        .iter()
                        .any(|d| &d.id == id && !d.changelog_topics.is_empty());
                    (
                        id.clone(),
                        SubtopologyTasks {
                            tasks: s.tasks,
                            stateful,
                        },
                    )
                })
                .collect(),
            _ => BTreeMap::new(),
        };
        let intended = learner::intended_active(&self.base.members);
        let inputs: Vec<MemberTasks> = self
            .base
            .members
            .values()
            .map(|m| MemberTasks {
                member_id: m.member_id.as_str().to_string(),
                process_id: m.process_id.clone(),
                active: intended.get(&m.member_id).cloned().unwrap_or_default(),
                standby: m.target.standby.clone(),
                warmup: m.target.warmup.clone(),
                task_offsets: m.task_offsets.clone(),
            })
            .collect();
        let placed = sticky::assign(&inputs, &subtopologies, self.config.num_standby_replicas);
        let stateful = |t: &TaskId| {
            subtopologies
                .get(&t.subtopology)
                .is_some_and(|s| s.stateful)
        };
        let targets: BTreeMap<MemberId, TaskSet> = match self.config.assignor {
            StreamsAssignor::Sticky => placed
                .into_iter()
                .map(|(id, a)| {
                    (
                        MemberId::new(id),
                        TaskSet {
                            active: a.active,
                            standby: a.standby,
                            warmup: Default::default(),
                        },
                    )
                })
                .collect(),
            StreamsAssignor::Learner(settings) => {
                let plan = learner::plan(&placed, &self.base.members, &stateful, settings);
                for (task, learner) in plan.promoted {
                    self.base
                        .events
                        .push(StreamsEvent::Promoted { task, learner });
                }
                for (task, learner, owner) in plan.learning {
                    let already = self.base.members[&learner].target.warmup.contains(&task);
                    if !already {
                        self.base.events.push(StreamsEvent::WarmingUp {
                            task,
                            learner,
                            owner,
                        });
                    }
                }
                plan.target
            }
        };
        self.base.assignment_epoch = self.base.group_epoch;
        let tasks: usize = subtopologies
            .values()
            .map(|s| s.tasks.max(0) as usize)
            .sum();
        self.base.events.push(StreamsEvent::TargetComputed {
            epoch: self.base.group_epoch,
            assignor: self.config.assignor.name(),
            tasks,
            members: self.base.members.len(),
        });
        self.base
            .records
            .push(StreamsRecord::Group(Box::new(self.group_record())));
        let ids: Vec<MemberId> = self.base.members.keys().cloned().collect();
        for id in ids {
            let target = targets.get(&id).cloned().unwrap_or_default();
            if self.base.members[&id].target != target {
                if let Some(m) = self.base.members.get_mut(&id) {
                    m.target = target;
                }
                self.persist_member(&id);
            }
        }
    }

    /// Moves the member towards `target` at `target_epoch`; true when its assignment changed.
    fn reconcile_member(
        &mut self,
        id: &MemberId,
        target_epoch: i32,
        target: &TaskSet,
        owned: Option<&TaskSet>,
        now: Timestamp,
    ) -> bool {
        let member = &self.base.members[id];
        if member.state == StreamsMemberState::Stable && member.member_epoch == target_epoch {
            // Reconciled: nothing to look up (the common heartbeat).
            return false;
        }
        let holders = Holders::of_others(&self.base.members, id);
        let Some(next) = reconcile(member, target_epoch, target, &holders, owned) else {
            return false;
        };
        let changed = member.assigned != next.assigned;
        let old_epoch = member.member_epoch;
        self.base
            .timers
            .cancel(&StreamsTimer::Revocation(id.clone(), old_epoch));
        self.arm_revocation(&next, now);
        self.put_member(next);
        self.persist_member(id);
        changed
    }

    fn arm_revocation(&mut self, member: &StreamsMember, now: Timestamp) {
        if member.state == StreamsMemberState::UnrevokedTasks {
            let timeout = u64::try_from(member.rebalance_timeout_ms.max(0)).unwrap_or(0);
            self.base.timers.set(
                StreamsTimer::Revocation(member.member_id.clone(), member.member_epoch),
                now.plus_ms(timeout),
            );
        }
    }

    fn persist_member(&mut self, id: &MemberId) {
        if let Some(m) = self.base.members.get(id) {
            self.base
                .records
                .push(StreamsRecord::Member(Box::new(m.clone())));
        }
    }

    fn put_member(&mut self, member: StreamsMember) {
        self.base.insert_member(member);
    }

    fn remove_member(&mut self, id: &MemberId) -> Option<StreamsMember> {
        let member = self.base.remove_member(id)?;
        self.base.timers.cancel(&StreamsTimer::Session(id.clone()));
        self.base
            .timers
            .cancel(&StreamsTimer::Revocation(id.clone(), member.member_epoch));
        Some(member)
    }

    /// Every endpoint's partitions: the source and repartition-source partitions of the
    /// tasks its members run and stand by for.
    fn partitions_by_endpoint(&self) -> Vec<EndpointPartitions> {
        let inputs = |task: &TaskId| -> Vec<String> {
            self.topology
                .iter()
                .flat_map(|t| &t.subtopologies)
                .filter(|s| s.id == task.subtopology)
                .flat_map(|s| {
                    s.source_topics
                        .iter()
                        .cloned()
                        .chain(s.repartition_source_topics.iter().map(|r| r.name.clone()))
                })
                .collect()
        };
        let mut by: BTreeMap<Endpoint, EndpointPartitions> = BTreeMap::new();
        for m in self.base.members.values() {
            let Some(e) = &m.user_endpoint else { continue };
            let entry = by.entry(e.clone()).or_insert_with(|| EndpointPartitions {
                endpoint: e.clone(),
                active: BTreeMap::new(),
                standby: BTreeMap::new(),
            });
            for t in &m.assigned.active {
                for topic in inputs(t) {
                    entry.active.entry(topic).or_default().insert(t.partition);
                }
            }
            for t in m.assigned.standby.iter().chain(&m.assigned.warmup) {
                for topic in inputs(t) {
                    entry.standby.entry(topic).or_default().insert(t.partition);
                }
            }
        }
        by.into_values().collect()
    }
}

/// What a target assignment depends on in a configured topology: task and internal topic
/// partition counts, and whether it can run.
fn configuration_hash(c: &ConfiguredTopology) -> u64 {
    let mut h = DefaultHasher::new();
    for (id, s) in c.subtopologies.iter().flatten() {
        id.hash(&mut h);
        s.tasks.hash(&mut h);
        s.repartition_source_topics.hash(&mut h);
        s.changelog_topics.hash(&mut h);
    }
    c.problem.as_ref().map(|p| p.code()).hash(&mut h);
    h.finish()
}

fn unknown_instance(instance: &InstanceId) -> Refusal {
    Refusal::new(
        GroupError::UnknownMemberId,
        format!("Instance id {instance} is unknown."),
    )
}

/// Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`.
fn check_epoch(member: &StreamsMember, epoch: i32, owned: Option<&TaskSet>) -> Result<(), Refusal> {
    let fenced = |which: &str| {
        Refusal::new(
            GroupError::FencedMemberEpoch,
            format!(
                "The streams group member has a {which} member epoch ({epoch}) than the one \
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
        && (epoch != member.previous_member_epoch
            || !owned.is_none_or(|o| o.is_subset(&member.assigned)))
    {
        return Err(fenced("smaller"));
    }
    Ok(())
}

/// Who holds which task, among the other members of the group.
struct Holders<'a> {
    active: BTreeMap<&'a TaskId, &'a str>,
    /// Processes holding the task as a standby or warm-up.
    standby: BTreeMap<&'a TaskId, BTreeSet<&'a str>>,
}

impl<'a> Holders<'a> {
    fn of_others(members: &'a BTreeMap<MemberId, StreamsMember>, me: &MemberId) -> Holders<'a> {
        let mut h = Holders {
            active: BTreeMap::new(),
            standby: BTreeMap::new(),
        };
        for m in members.values().filter(|m| &m.member_id != me) {
            for set in [&m.assigned, &m.pending_revocation] {
                for t in &set.active {
                    h.active.insert(t, m.process_id.as_str());
                }
                for t in set.standby.iter().chain(&set.warmup) {
                    h.standby
                        .entry(t)
                        .or_default()
                        .insert(m.process_id.as_str());
                }
            }
        }
        h
    }

    fn process_has_standby(&self, t: &TaskId, process: &str) -> bool {
        self.standby.get(t).is_some_and(|p| p.contains(process))
    }
}

/// Kafka's streams `CurrentAssignmentBuilder.build`: the member's next state, or `None` when it
/// stays as it is.
fn reconcile(
    member: &StreamsMember,
    target_epoch: i32,
    target: &TaskSet,
    holders: &Holders,
    owned: Option<&TaskSet>,
) -> Option<StreamsMember> {
    let next = match member.state {
        StreamsMemberState::Stable if member.member_epoch == target_epoch => return None,
        StreamsMemberState::UnrevokedTasks
            if owned.is_none_or(|o| o.contains_any(&member.pending_revocation)) =>
        {
            return None
        }
        _ => next_assignment(member, target_epoch, target, holders, owned),
    };
    (next != *member).then_some(next)
}

fn next_assignment(
    member: &StreamsMember,
    target_epoch: i32,
    target: &TaskSet,
    holders: &Holders,
    owned: Option<&TaskSet>,
) -> StreamsMember {
    let p = member.process_id.as_str();
    let (active, revoke_active, unreleased_active) =
        diff(&member.assigned.active, &target.active, |t| {
            holders.active.contains_key(t) || holders.process_has_standby(t, p)
        });
    let in_process =
        |t: &TaskId| holders.active.get(t) == Some(&p) || holders.process_has_standby(t, p);
    let (standby, revoke_standby, unreleased_standby) =
        diff(&member.assigned.standby, &target.standby, in_process);
    let (warmup, revoke_warmup, unreleased_warmup) =
        diff(&member.assigned.warmup, &target.warmup, in_process);
    let unreleased = unreleased_active || unreleased_standby || unreleased_warmup;
    let revoke = TaskSet {
        active: revoke_active,
        standby: revoke_standby,
        warmup: revoke_warmup,
    };
    let must_revoke = !revoke.is_empty() && owned.is_none_or(|o| o.contains_any(&revoke));
    let mut next = member.clone();
    if must_revoke {
        next.state = StreamsMemberState::UnrevokedTasks;
        next.assigned = TaskSet {
            active: active.kept,
            standby: standby.kept,
            warmup: warmup.kept,
        };
        next.pending_revocation = revoke;
        return next;
    }
    next.state = if unreleased {
        StreamsMemberState::UnreleasedTasks
    } else {
        StreamsMemberState::Stable
    };
    if next.member_epoch != target_epoch {
        next.previous_member_epoch = member.member_epoch;
        next.member_epoch = target_epoch;
    }
    next.assigned = TaskSet {
        active: active.granted(),
        standby: standby.granted(),
        warmup: warmup.granted(),
    };
    next.pending_revocation = TaskSet::default();
    next
}

/// One role's tasks: those kept (current and wanted) and those granted (wanted, free).
struct Kept {
    kept: BTreeSet<TaskId>,
    added: BTreeSet<TaskId>,
}

impl Kept {
    fn granted(mut self) -> BTreeSet<TaskId> {
        self.kept.extend(self.added);
        self.kept
    }
}

/// Kafka's `computeAssignmentDifference` for one role: what is kept and granted, what must be
/// revoked, and whether some wanted task is still `held` elsewhere.
fn diff(
    current: &BTreeSet<TaskId>,
    wanted: &BTreeSet<TaskId>,
    held: impl Fn(&TaskId) -> bool,
) -> (Kept, BTreeSet<TaskId>, bool) {
    let kept: BTreeSet<TaskId> = current.intersection(wanted).cloned().collect();
    let revoke: BTreeSet<TaskId> = current.difference(wanted).cloned().collect();
    let mut unreleased = false;
    let mut added = BTreeSet::new();
    for t in wanted.difference(current) {
        if held(t) {
            unreleased = true;
        } else {
            added.insert(t.clone());
        }
    }
    (Kept { kept, added }, revoke, unreleased)
}

impl std::ops::Deref for StreamsGroup {
    type Target = Modern<StreamsMember, StreamsRecord, StreamsEvent, StreamsTimer>;

    /// The shared part's accessors (id, epochs, members, records, events, timers).
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl ModernMember for StreamsMember {
    fn member_id(&self) -> &MemberId {
        &self.member_id
    }

    fn instance_id(&self) -> Option<&InstanceId> {
        self.instance_id.as_ref()
    }
}
