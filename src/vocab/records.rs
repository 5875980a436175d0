//! The durable records: what the group core and the offset rules write, and what every store
//! keeps and loads. Plain data; the rules over them live with their owners (`group/`,
//! `offsets/`), the encodings with each store.

use bytes::Bytes;

use super::ids::{Generation, InstanceId, MemberId};
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
