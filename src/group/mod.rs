//! Pure group state machines: no tokio, no clock reads, no I/O, no wire types.
//!
//! [`ClassicGroup`] is Apache Kafka's classic consumer-group protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup and the group checks of OffsetCommit), one value per group, owned by that
//! group's actor. It is written in quinn-proto's sans-IO style:
//!
//! - inputs are `handle_*` methods, each taking `now` ([`Timestamp`], milliseconds);
//! - requests that are never parked (Heartbeat, LeaveGroup, commit checks) return their answer;
//! - everything else comes out of [`ClassicGroup::poll_output`] as [`Output`]s, in order:
//!   JoinGroup/SyncGroup replies addressed by [`RequestToken`] (often for *other* members'
//!   parked requests), timer changes, records to persist and events to log;
//! - timers are keyed ([`TimerKey`]); the shell either mirrors [`TimerChange`]s or sleeps until
//!   [`ClassicGroup::next_deadline`], then calls [`ClassicGroup::handle_timeout`] (or
//!   [`ClassicGroup::handle_timer`] for one key). Expiries are re-checked, so stale ones are
//!   harmless;
//! - a [`Output::Persist`] is acknowledged with [`ClassicGroup::handle_write_complete`]; replies
//!   that depend on the record are produced only then.
//!
//! What happens when a request names a group that does not exist is in [`missing`]; the group
//! directory ([`crate::coordinator`]) consults it before creating a group.
//!
//! The shell's loop, in short (the actor owns the group; `now` from its clock):
//!
//! ```
//! use koord::group::*;
//! use bytes::Bytes;
//!
//! let mut now = Timestamp(0);
//! let mut group = ClassicGroup::new(GroupId::new("g"), GroupConfig::default(), now);
//! group.handle_join(
//!     JoinGroup {
//!         token: RequestToken(1), // the shell keeps the request's oneshot under it
//!         member_id: MemberId::unknown(),
//!         instance_id: None,
//!         client_id: "app".into(),
//!         client_host: "/10.0.0.1".into(),
//!         session_timeout_ms: 10_000,
//!         rebalance_timeout_ms: 60_000,
//!         protocol_type: "consumer".into(),
//!         protocols: vec![Protocol::new("range", Bytes::new())],
//!         require_known_member_id: false,
//!         supports_skip_assignment: false,
//!         reason: None,
//!         member_id_nonce: "2f1c".into(), // a fresh UUID in real life
//!     },
//!     now,
//! );
//! let mut answered = Vec::new();
//! loop {
//!     while let Some(output) = group.poll_output() {
//!         match output {
//!             Output::JoinReply { token, reply } => answered.push((token, reply)),
//!             Output::Persist { write, .. } => group.handle_write_complete(write, Ok(()), now),
//!             _ => {} // sync replies, timer mirrors, events to log
//!         }
//!     }
//!     // Sleep until the next deadline (the initial rebalance delay here), then fire it.
//!     match group.next_deadline() {
//!         Some(deadline) if answered.is_empty() => {
//!             now = deadline;
//!             group.handle_timeout(now);
//!         }
//!         _ => break,
//!     }
//! }
//! let (token, reply) = &answered[0];
//! assert_eq!(*token, RequestToken(1));
//! assert_eq!(reply.member_id, MemberId::new("app-2f1c"));
//! assert_eq!(reply.generation, Generation(1));
//! assert_eq!(group.state(), GroupState::CompletingRebalance);
//! ```
//!
//! [`consumer::ConsumerGroup`] is the consumer group of KIP-848 (ConsumerGroupHeartbeat), in
//! the same style; see its module.
//!
//! Layout: `classic/` (the machine, split by API), `consumer/`, [`member`], [`timers`], [`output`],
//! [`commands`], [`types`]. The ids, time, errors and records it shares with every layer are
//! [`crate::vocab`]; subscribed topics come from [`crate::assignor::protocol`], and the
//! server-assignment seam it calls ([`ServerAssignor`], chosen per group by [`AssignmentMode`])
//! is [`crate::assignor::server`].
//!
//! # Where this differs from Apache Kafka, on purpose
//! Kafka's code (GroupMetadataManager, ClassicGroup; 4.x) is followed check by check; these are
//! the exceptions, none of them visible as a different error code:
//! - A parked JoinGroup/SyncGroup superseded by a retry of the same member (the client gave up
//!   and reconnected) is answered REBALANCE_IN_PROGRESS; Kafka drops it unanswered. Likewise
//!   the parked SyncGroup of a member removed by LeaveGroup gets UNKNOWN_MEMBER_ID. So every
//!   request is answered exactly once, which the shell can rely on.
//! - Every successful JoinGroup/SyncGroup reply restarts the member's session, including the
//!   immediate ones (current generation again, Stable SyncGroup, static replacement); Kafka
//!   restarts it only with heartbeats and the replies that end a phase. Never shorter.
//! - Protocol-vote ties go to the protocol first voted for in join order (Kafka: HashMap order).
//! - The "a member joined during the initial delay" flag is cleared when an initial rebalance
//!   starts, so a stale flag from an earlier one cannot extend it.
//! - A static replacement moves a pending SyncGroup obligation to the new member id; Kafka
//!   keeps the old id pending, which rebalances the group needlessly at the sync timeout.
//! - Subscribed topics are computed from the current members when asked; Kafka caches them
//!   per generation.
//! - Member ids use a nonce drawn by the shell ([`JoinGroup::member_id_nonce`]).

pub mod classic;
pub mod commands;
pub mod consumer;
pub mod core;
pub mod member;
pub mod missing;
pub mod modern;
pub mod output;
pub mod share;
pub mod streams;
pub mod timers;
pub mod types;

#[cfg(test)]
mod tests;

// The classic server-assignment seam, re-exported: the core calls it, `assignor/` defines it.
pub use crate::assignor::server::{
    AssignOutcome, AssignmentInput, AssignmentMember, AssignmentMode, ServerAssignor,
};
pub use classic::ClassicGroup;
pub use commands::{Heartbeat, JoinGroup, LeaveGroup, LeavingMember, OffsetCommitAuth, SyncGroup};
pub use member::Member;
pub use output::{
    AddReason, GroupEvent, GroupRecord, JoinMember, JoinReply, LeaveMemberResult, LeaveOutcome,
    Output, RebalanceReason, RemoveReason, SyncReply,
};
pub use timers::{TimerChange, TimerKey};
pub use types::{GroupState, RequestToken, WriteId};
// The shared vocabulary, re-exported so that the core's users name one module.
pub use crate::vocab::{
    Generation, GroupError, GroupId, GroupMetadataRecord, InstanceId, MemberId, MemberRecord,
    Protocol, Timestamp,
};

/// Kafka `CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`: a new member's parked JoinGroup is dropped
/// after this long, so clients that gave up do not pile up as defunct members.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// The settings the group core owns. (`group.{min,max}.session.timeout.ms` are checked in `api/`.)
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.max.size` (Kafka default: unlimited, `Integer.MAX_VALUE`).
    pub max_size: usize,
    /// `group.initial.rebalance.delay.ms` (3000): how long a rebalance out of Empty waits for
    /// more members, extended while members keep joining.
    pub initial_rebalance_delay_ms: u64,
    /// [`NEW_MEMBER_JOIN_TIMEOUT_MS`], configurable for tests.
    pub new_member_join_timeout_ms: u64,
    /// Who computes assignments.
    pub assignment: AssignmentMode,
    /// `group.assignment.fallback.rejoins`: server-assigned generations in a row whose leader
    /// rejoins unchanged right after koord's assignment before the leader assigns instead
    /// (0: never).
    pub assignment_fallback_rejoins: u32,
    /// `group.rebalance.storm.per.minute`: more rebalances than this within a minute are
    /// reported (0: never).
    pub rebalance_storm_per_minute: u32,
    /// Whether timer changes come out as [`Output::Timer`]: a shell that keeps one sleep per
    /// key mirrors them; one that sleeps until [`ClassicGroup::next_deadline`] (koord's
    /// shards) turns them off, which spares every heartbeat an output.
    pub timer_outputs: bool,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            max_size: i32::MAX as usize,
            initial_rebalance_delay_ms: 3000,
            new_member_join_timeout_ms: NEW_MEMBER_JOIN_TIMEOUT_MS,
            assignment: AssignmentMode::Client,
            assignment_fallback_rejoins: 5,
            rebalance_storm_per_minute: 20,
            timer_outputs: true,
        }
    }
}
