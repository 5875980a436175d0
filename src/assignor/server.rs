//! What a classic group core asks for server-side assignment.
//!
//! A classic group is either assigned by its leader (Apache Kafka's behaviour: the leader's
//! SyncGroup carries every member's assignment) or by koord. The core asks a
//! [`ServerAssignor`] at the one moment a server assignment can be computed: when the join phase
//! completes and the generation's members and protocol are known. The result is held for that
//! generation's write and installed as soon as it is durable, without waiting for the leader's
//! SyncGroup (whatever the leader sends is ignored), so clients keep the Kafka protocol
//! unchanged. A classic member's metadata is opaque bytes of its protocol type, so this seam is
//! in bytes; for `consumer` groups [`super::consumer::ConsumerAssignor`] decodes them into a
//! [`super::GroupSpec`] and calls an [`super::Assignor`], the seam every group kind shares.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::vocab::GroupError;
use crate::vocab::{Generation, GroupId, InstanceId, MemberId, Protocol, Timestamp};

/// A member as the server assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignmentMember<'a> {
    pub member_id: &'a MemberId,
    pub instance_id: Option<&'a InstanceId>,
    /// The member's metadata for the selected protocol (for `consumer`, its subscription).
    pub metadata: &'a Bytes,
    /// The assignment the member held in the previous generation, so the assignor can be
    /// sticky (empty for new members).
    pub current_assignment: &'a Bytes,
}

/// Everything a server assignor may read: a read-only view, no group internals.
#[derive(Debug, Clone)]
pub struct AssignmentInput<'a> {
    pub group_id: &'a GroupId,
    pub generation: Generation,
    pub protocol_type: &'a str,
    /// The protocol (assignor name) the members voted for.
    pub protocol_name: &'a str,
    pub members: Vec<AssignmentMember<'a>>,
    /// The time of the rebalance: stateful assignors time warm-ups and deadlines with it.
    pub now: Timestamp,
    /// What the assignor kept for this group at the last installed generation (empty at
    /// first): opaque to the core, persisted with the group.
    pub state: &'a Bytes,
}

/// A server assignment of one generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignOutcome {
    /// `(member, assignment)` pairs; members left out get an empty assignment.
    pub assignments: Vec<(MemberId, Bytes)>,
    /// The assignor's state for this group once the generation is installed.
    pub state: Bytes,
    /// When the coordinator must start a rebalance by itself (a learner's warm-up ends, a
    /// leaver's deadline passes, a probe comes due), if ever.
    pub follow_up: Option<Timestamp>,
    /// What the assignor did and why, for the generation's log line.
    pub summary: Option<String>,
    /// What an operator should hear of (its state record did not decode, so it planned from
    /// an empty state), logged at warn.
    pub warning: Option<String>,
}

/// Computes every member's assignment bytes for a generation. Pure and synchronous.
pub trait ServerAssignor: Send + Sync + fmt::Debug {
    /// Whether groups of this protocol type may be assigned by the server (others are assigned
    /// by their leader, as in Kafka).
    fn serves(&self, protocol_type: &str) -> bool;

    /// The name of the assignor that assigns a generation whose members selected
    /// `protocol_name` (DescribeGroups shows it as the group's protocol), or `None` if that
    /// generation's leader assigns.
    fn assignor_for(&self, protocol_name: &str) -> Option<&str>;

    /// Checks a joining member's metadata for every protocol it offers.
    ///
    /// # Errors
    /// INCONSISTENT_GROUP_PROTOCOL for metadata the assignor cannot read: the member's
    /// JoinGroup fails and the group is untouched.
    fn validate(&self, protocols: &[Protocol]) -> Result<(), GroupError>;

    /// Computes the generation's assignment.
    ///
    /// # Errors
    /// Any error makes this generation client-assigned (the leader is not told to skip).
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<AssignOutcome, GroupError>;
}

/// Who assigns a group's members.
#[derive(Debug, Clone, Default)]
pub enum AssignmentMode {
    /// The leader's SyncGroup assignment is used (Apache Kafka).
    #[default]
    Client,
    /// koord computes it when the join phase completes.
    Server(Arc<dyn ServerAssignor>),
}
