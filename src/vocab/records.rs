//! The durable records: what the group core and the offset rules write, and what every store
//! keeps and loads. Plain data; the rules over them live with their owners (`group/`,
//! `offsets/`), the encodings with each store.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::ids::{Generation, InstanceId, MemberId, Protocol};
use super::time::Timestamp;

/// A topic partition by name (topic ids are resolved to names in `api/`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// A committed offset as stored (Kafka `OffsetAndMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    pub offset: i64,
    /// None when the client sent -1.
    pub leader_epoch: Option<i32>,
    /// A null metadata is stored as "".
    pub metadata: String,
    pub commit_timestamp: Timestamp,
    /// Set only by OffsetCommit v2-4 with an explicit RetentionTimeMs.
    pub expire_timestamp: Option<Timestamp>,
}

/// One member in a persisted group record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    pub session_timeout_ms: u64,
    /// The member's metadata for the selected protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// The durable state of a classic group (Kafka's `GroupMetadataValue`). Written when a
/// generation's assignment is stored, when the group becomes Empty, when a static member is
/// replaced while Stable, and once when the group is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataRecord {
    /// None for a simple group (offsets only, no membership).
    pub protocol_type: Option<String>,
    pub generation: Generation,
    pub protocol_name: Option<String>,
    pub leader: Option<MemberId>,
    pub state_timestamp: Timestamp,
    pub members: Vec<MemberRecord>,
    /// The server assignor's state for this group (the learner assignor's S), opaque here.
    pub assignor_state: Bytes,
    /// When the server assignor wants the next rebalance, if ever.
    pub follow_up: Option<Timestamp>,
}

/// From when a group's offsets age, as the group decides (no base at all: they never do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpirationBase {
    /// An Empty classic group: from when it became Empty.
    StateTimestamp(Timestamp),
    /// From each offset's commit time.
    CommitTimestamp,
}

/// A topic's id (Kafka's `Uuid`): KIP-848 names topics by id on the wire.
pub type TopicId = uuid::Uuid;

/// Partitions by topic id: each list sorted ascending, without duplicates, never empty.
pub type Partitions = BTreeMap<TopicId, Vec<i32>>;

/// Where a consumer-group member is in reconciling towards its target (Kafka `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerMemberState {
    /// It holds exactly what it was given at its epoch.
    Stable,
    /// It must revoke partitions before it moves to the next epoch.
    UnrevokedPartitions,
    /// Some of its target partitions are still held by other members.
    UnreleasedPartitions,
}

impl ConsumerMemberState {
    /// The stored byte (Kafka's `MemberState` values).
    pub fn code(self) -> u8 {
        match self {
            ConsumerMemberState::Stable => 1,
            ConsumerMemberState::UnrevokedPartitions => 2,
            ConsumerMemberState::UnreleasedPartitions => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<ConsumerMemberState> {
        match code {
            1 => Some(ConsumerMemberState::Stable),
            2 => Some(ConsumerMemberState::UnrevokedPartitions),
            3 => Some(ConsumerMemberState::UnreleasedPartitions),
            _ => None,
        }
    }
}

/// A member of a consumer group (KIP-848), as kept in memory and stored: Kafka's member
/// metadata, current assignment and target assignment records in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    /// Sorted, without duplicates.
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: ConsumerMemberState,
    /// What it holds at its epoch.
    pub assigned: Partitions,
    /// What it must give up before it moves on.
    pub pending_revocation: Partitions,
    /// What the last target assignment gives it.
    pub target: Partitions,
    /// Set for a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat)
    /// inside a consumer group: a classic group upgraded online, or a classic member joining
    /// (Kafka's `ClassicMemberMetadata`).
    pub classic: Option<ClassicMemberMetadata>,
}

/// What a classic-protocol member of a consumer group sent in its JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: u64,
    /// The protocols it offered, in its order of preference (never empty).
    pub protocols: Vec<Protocol>,
}

impl ConsumerMember {
    /// A member that has just joined: epoch 0, nothing assigned.
    pub fn new(member_id: MemberId) -> ConsumerMember {
        ConsumerMember {
            member_id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: ConsumerMemberState::Stable,
            assigned: Partitions::new(),
            pending_revocation: Partitions::new(),
            target: Partitions::new(),
            classic: None,
        }
    }

    /// Whether it speaks the classic protocol.
    pub fn uses_classic_protocol(&self) -> bool {
        self.classic.is_some()
    }
}

/// The group-level record of a consumer group (Kafka's group epoch, target assignment
/// metadata and metadata hash records in one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupRecord {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// A hash of the subscribed topics' ids and partition counts when the epoch was last bumped.
    pub metadata_hash: u64,
    /// The server assignor's state (the learner assignor's S), opaque here.
    pub assignor_state: Bytes,
}
