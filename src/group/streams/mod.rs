//! Streams groups (KIP-1071): Kafka Streams applications whose tasks the coordinator assigns.
//! Being built for issue 19; tests/streams_groups.rs pins Kafka 4.4's answers.
//!
//! - [`topology`]: the topology members send and its configuration against the topics that
//!   exist (task counts, internal topics to create, the statuses a member is told).
//! - [`sticky`]: the sticky task assignor (active tasks and standbys), Kafka's without rack
//!   awareness; the learner assignor will build on it.

pub mod sticky;
pub mod topology;
