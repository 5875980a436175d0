//! Domain commands: the inputs `api/` builds from wire requests, version quirks already
//! normalised (v0 rebalance timeout = session timeout, MEMBER_ID_REQUIRED only for v4+, ...).

use bytes::Bytes;

use super::types::RequestToken;
use crate::vocab::{Generation, InstanceId, MemberId, Protocol};

/// A JoinGroup (API key 11), any version.
#[derive(Debug, Clone)]
pub struct JoinGroup {
    /// Where the reply goes; it may be answered now or parked.
    pub token: RequestToken,
    /// Empty for a member without an id yet.
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub client_id: String,
    pub client_host: String,
    /// Already checked against `group.{min,max}.session.timeout.ms` by `api/`.
    pub session_timeout_ms: u64,
    /// v0: equal to the session timeout (normalised by `api/`).
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// v4+: a dynamic member without an id is told MEMBER_ID_REQUIRED (KIP-394).
    pub require_known_member_id: bool,
    /// v9+: the reply may set SkipAssignment (KIP-814).
    pub supports_skip_assignment: bool,
    /// v8+ `Reason`, for logs.
    pub reason: Option<String>,
    /// A fresh random string (a UUID) drawn by the shell for this request. If the core allocates
    /// a member id it is `{instance_id or client_id}-{nonce}`, as Kafka's; drawing it outside
    /// keeps the core deterministic.
    pub member_id_nonce: String,
}

/// A SyncGroup (API key 14), any version.
#[derive(Debug, Clone)]
pub struct SyncGroup {
    pub token: RequestToken,
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub generation: Generation,
    /// v5+, nullable: checked against the group's when both are set.
    pub protocol_type: Option<String>,
    /// v5+, nullable: checked against the group's when both are set.
    pub protocol_name: Option<String>,
    /// The leader's assignment (followers send none). Ignored for server-assigned groups.
    pub assignments: Vec<(MemberId, Bytes)>,
}

/// A Heartbeat (API key 12).
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub generation: Generation,
}

/// One member leaving. v0-2 requests are normalised to a single entry without instance id.
#[derive(Debug, Clone)]
pub struct LeavingMember {
    /// Empty together with an instance id: administrative removal by instance id.
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    /// v5+ `Reason`, for logs.
    pub reason: Option<String>,
}

/// A LeaveGroup (API key 13). v3+ batches members and answers each one separately.
#[derive(Debug, Clone)]
pub struct LeaveGroup {
    pub members: Vec<LeavingMember>,
}

/// The group part of an OffsetCommit (API key 8) or TxnOffsetCommit: who commits, at which
/// generation. Per-partition checks (metadata size, topic existence) live in `offsets/`.
#[derive(Debug, Clone)]
pub struct OffsetCommitAuth {
    /// Empty for admin tools and simple consumers.
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    /// `-1` ([`Generation::NONE`]) outside group management.
    pub generation: Generation,
    /// TxnOffsetCommit: group state is not enforced (no REBALANCE_IN_PROGRESS), and a missing
    /// member id is accepted in a non-empty group.
    pub transactional: bool,
}

impl OffsetCommitAuth {
    /// A TxnOffsetCommit that names no member (generation -1, no member or instance id): a
    /// transactional producer outside the group's membership, which Kafka 4.4's consumer and
    /// streams groups let commit whatever their members ([`Generation::NONE`]).
    pub fn is_anonymous_transactional(&self) -> bool {
        self.transactional
            && self.generation == Generation::NONE
            && self.member_id.is_unknown()
            && self.instance_id.is_none()
    }
}
