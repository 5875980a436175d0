//! The values of streams groups (KIP-1071) that the group core keeps, the store persists and the
//! wire describes: tasks, members and the topology. Plain data, shared by the layers.

use std::collections::{BTreeMap, BTreeSet};

use super::{InstanceId, MemberId};

/// A task: a subtopology's partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId {
    pub subtopology: String,
    pub partition: i32,
}

impl TaskId {
    pub fn new(subtopology: impl Into<String>, partition: i32) -> TaskId {
        TaskId {
            subtopology: subtopology.into(),
            partition,
        }
    }
}

/// An internal topic as the topology declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    /// 0: the coordinator decides.
    pub partitions: i32,
    /// 0: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

impl TopicInfo {
    pub fn named(name: impl Into<String>) -> TopicInfo {
        TopicInfo {
            name: name.into(),
            partitions: 0,
            replication_factor: 0,
            configs: Vec::new(),
        }
    }
}

/// Topics that must be co-partitioned: indexes into their subtopology's source and repartition
/// source topics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub repartition_sink_topics: Vec<String>,
    pub repartition_source_topics: Vec<TopicInfo>,
    pub changelog_topics: Vec<TopicInfo>,
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// The topology a member joined with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

/// A member's tasks by role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSet {
    pub active: BTreeSet<TaskId>,
    pub standby: BTreeSet<TaskId>,
    /// Warm-up tasks: standbys that restore a task's state before it moves here.
    pub warmup: BTreeSet<TaskId>,
}

impl TaskSet {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    /// Whether any task of `other` is here in the same role.
    pub fn contains_any(&self, other: &TaskSet) -> bool {
        !self.active.is_disjoint(&other.active)
            || !self.standby.is_disjoint(&other.standby)
            || !self.warmup.is_disjoint(&other.warmup)
    }

    /// Whether every task here is in `other` in the same role.
    pub fn is_subset(&self, other: &TaskSet) -> bool {
        self.active.is_subset(&other.active)
            && self.standby.is_subset(&other.standby)
            && self.warmup.is_subset(&other.warmup)
    }

    /// Every task in any role.
    pub fn all(&self) -> impl Iterator<Item = &TaskId> {
        self.active.iter().chain(&self.standby).chain(&self.warmup)
    }
}

/// Tasks by subtopology, partitions in order (how the wire lists them).
pub fn by_subtopology(tasks: &BTreeSet<TaskId>) -> BTreeMap<&str, Vec<i32>> {
    let mut by: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for t in tasks {
        by.entry(&t.subtopology).or_default().push(t.partition);
    }
    by
}

/// Kafka's streams `MemberState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamsMemberState {
    #[default]
    Stable,
    /// It must give up tasks before it moves to the target epoch.
    UnrevokedTasks,
    /// It is at the target epoch and waits for tasks others still hold.
    UnreleasedTasks,
}

impl StreamsMemberState {
    pub fn code(self) -> u8 {
        match self {
            StreamsMemberState::Stable => 0,
            StreamsMemberState::UnrevokedTasks => 1,
            StreamsMemberState::UnreleasedTasks => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<StreamsMemberState> {
        Some(match code {
            0 => StreamsMemberState::Stable,
            1 => StreamsMemberState::UnrevokedTasks,
            2 => StreamsMemberState::UnreleasedTasks,
            _ => return None,
        })
    }
}

/// An Interactive Queries endpoint (`application.server`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// One member of a streams group: a Kafka Streams stream thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsMember {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: StreamsMemberState,
    pub instance_id: Option<InstanceId>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    /// The topology epoch it joined with.
    pub topology_epoch: i32,
    /// Its Kafka Streams instance (several members, one per stream thread, share one).
    pub process_id: String,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Vec<(String, String)>,
    /// Cumulative changelog offsets of the tasks whose state it has (-2: a running active
    /// task, caught up by definition).
    pub task_offsets: BTreeMap<TaskId, i64>,
    /// Cumulative changelog end offsets of its tasks.
    pub task_end_offsets: BTreeMap<TaskId, i64>,
    /// What it holds now.
    pub assigned: TaskSet,
    /// What it must give up before it moves on.
    pub pending_revocation: TaskSet,
    /// Where the group wants it.
    pub target: TaskSet,
}

impl StreamsMember {
    pub fn new(member_id: MemberId) -> StreamsMember {
        StreamsMember {
            member_id,
            rebalance_timeout_ms: -1,
            ..StreamsMember::default()
        }
    }
}

/// A streams group's own record: epochs, the topology and the hash of the topic metadata its
/// target assignment was computed against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsGroupRecord {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub metadata_hash: u64,
    pub topology: Option<Topology>,
}
