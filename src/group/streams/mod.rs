//! Streams groups (KIP-1071): Kafka Streams applications whose tasks the coordinator assigns
//! (StreamsGroupHeartbeat, StreamsGroupDescribe).
//!
//! - [`group`]: the streams group, a pure state machine beside the classic and consumer ones.
//! - [`member`]: its members, task sets and stored record.
//! - [`topology`]: the topology members send and its configuration against the topics that
//!   exist (task counts, internal topics to create, the statuses a member is told).
//! - [`sticky`]: the sticky task assignor (active tasks and standbys), Kafka's without rack
//!   awareness.
//! - [`learner`]: the learner-aware assignor on top of it: a moved stateful task is warmed up
//!   on its new owner first.

pub mod codec;
pub mod group;
pub mod learner;
pub mod member;
pub mod sticky;
pub mod topology;

#[cfg(test)]
mod tests;

pub use group::{
    StreamsAssignor, StreamsEvent, StreamsGroup, StreamsGroupConfig, StreamsGroupState,
    StreamsHeartbeat, StreamsHeartbeatReply, StreamsRecord, StreamsTimer,
};
pub use member::{Endpoint, StreamsGroupRecord, StreamsMember, StreamsMemberState, TaskSet};
