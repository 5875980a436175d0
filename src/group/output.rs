//! What the core asks of its shell: replies (possibly to other, parked requests), timer changes,
//! records to persist and events to log. Drained with
//! [`crate::group::ClassicGroup::poll_output`] after every input, in order.

use std::fmt;

use bytes::Bytes;

use super::timers::TimerChange;
use super::types::{GroupState, RequestToken, WriteId};
use crate::vocab::GroupError;
use crate::vocab::{Generation, GroupMetadataRecord, InstanceId, MemberId};

/// One output of the core.
#[derive(Debug, Clone)]
pub enum Output {
    /// Answer the JoinGroup request `token` (it may have been parked long ago).
    JoinReply {
        token: RequestToken,
        reply: JoinReply,
    },
    /// Answer the SyncGroup request `token`.
    SyncReply {
        token: RequestToken,
        reply: SyncReply,
    },
    /// Mirror a timer change (optional for shells that use `next_deadline`).
    Timer(TimerChange),
    /// Persist `record` (records of one group in the order given: each replaces the previous
    /// one), then call `handle_write_complete(write, result, now)`. Replies that depend on the
    /// record (the assignment, a static replacement) are only produced by that call, so
    /// nothing the shell sends before it depends on an unwritten record.
    Persist { write: WriteId, record: GroupRecord },
    /// Something worth an info-level log line.
    Event(GroupEvent),
}

/// A member as the leader sees it in its JoinGroup reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    /// The member's metadata for the selected protocol.
    pub metadata: Bytes,
}

/// A JoinGroup reply, version-independent; `api/` drops what the request's version lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinReply {
    pub error: Option<GroupError>,
    /// `-1` on errors.
    pub generation: Generation,
    /// v7+.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// Empty when there is no leader (errors).
    pub leader: MemberId,
    /// v9+: the leader need not compute an assignment (KIP-814 / server-side assignment).
    pub skip_assignment: bool,
    /// The member's id; for MEMBER_ID_REQUIRED the id to rejoin with.
    pub member_id: MemberId,
    /// Only the leader gets the members (with their metadata for the selected protocol).
    pub members: Vec<JoinMember>,
}

impl JoinReply {
    /// An error reply carrying `member_id` (Kafka sets `""` or the request's id by case).
    pub fn error(error: GroupError, member_id: MemberId) -> JoinReply {
        JoinReply {
            error: Some(error),
            generation: Generation::NONE,
            protocol_type: None,
            protocol_name: None,
            leader: MemberId::unknown(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        }
    }
}

/// A SyncGroup reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReply {
    pub error: Option<GroupError>,
    /// v5+; None on errors.
    pub protocol_type: Option<String>,
    /// v5+; None on errors.
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncReply {
    pub fn error(error: GroupError) -> SyncReply {
        SyncReply {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// The per-member result of a LeaveGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveMemberResult {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub error: Option<GroupError>,
}

/// A LeaveGroup answer. For v0-2 `api/` uses the single member's error as the top-level error
/// (Kafka's `LeaveGroupResponse` does the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveOutcome {
    /// Set when the whole request fails (Dead group); `members` is then empty.
    pub error: Option<GroupError>,
    pub members: Vec<LeaveMemberResult>,
}

impl LeaveOutcome {
    /// The top-level ErrorCode of a LeaveGroup v0-2 response, which names one member: the
    /// request's error if the whole request failed, else that member's error.
    pub fn single_member_error(&self) -> Option<GroupError> {
        self.error
            .or_else(|| self.members.first().and_then(|m| m.error))
    }
}

/// Why a member joined the group's member list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddReason {
    /// A new dynamic or static member (first join, or rejoin after MEMBER_ID_REQUIRED).
    Joined,
    /// A static member rejoining without its id took over its instance id from `old`.
    ReplacedStatic { old: MemberId },
    /// Reloaded from a persisted record.
    Loaded,
    /// A member of the consumer group this group was until the last consumer-protocol
    /// member left (online downgrade).
    Downgraded,
}

/// Why a member left the group's member list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoveReason {
    /// No heartbeat (nor Join/Sync reply, nor commit) within its session timeout.
    SessionExpired,
    /// A new member parked in JoinGroup for the new-member join timeout (5 minutes).
    NewMemberJoinTimeout,
    /// A KIP-394 pending member did not rejoin within its session timeout.
    PendingMemberExpired,
    /// A dynamic member that did not rejoin before the join phase ended.
    NotRejoined,
    /// A member of the new generation that did not send SyncGroup within the rebalance timeout.
    NotSynced,
    /// LeaveGroup from the member itself (or a pending member).
    Left { reason: Option<String> },
    /// LeaveGroup by instance id without a member id (admin tools).
    AdminRemoved { reason: Option<String> },
    /// A static member whose instance id was taken over by a new member id.
    FencedByStaticReplacement { new: MemberId },
    /// The group was over `group.max.size` when this member's JoinGroup arrived.
    GroupMaxSizeReached,
}

/// Why a rebalance started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceReason {
    MemberJoined(MemberId),
    /// A known member rejoined with different protocols, or the leader rejoined while Stable.
    MemberUpdated(MemberId),
    /// A static member was replaced while CompletingRebalance, or with a protocol change.
    StaticMemberReplaced(MemberId),
    MembersLeft(Vec<MemberId>),
    MemberRemoved(MemberId, RemoveReason),
    /// Members of the new generation never sent SyncGroup.
    PendingSyncExpired(Vec<MemberId>),
    /// Storing the leader's assignment failed.
    AssignmentWriteFailed(GroupError),
    /// A reloaded group is above `group.max.size`.
    LoadedOverCapacity,
    /// The group was a consumer group until its last consumer-protocol member left: its
    /// classic members join a classic generation.
    Downgraded,
    /// The server assignor asked for it (a learner's warm-up ended, a leaver's deadline
    /// passed, a probe came due).
    AssignorFollowUp,
}

/// Log-worthy facts: every generation change and every member added or removed, with reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    StateChanged {
        from: GroupState,
        to: GroupState,
    },
    RebalanceStarted {
        generation: Generation,
        reason: RebalanceReason,
    },
    /// A new generation: logged once per generation.
    GenerationStarted {
        generation: Generation,
        protocol_type: Option<String>,
        protocol_name: Option<String>,
        leader: Option<MemberId>,
        members: Vec<MemberId>,
    },
    /// The leader changed outside a generation change (the old one left or was replaced).
    LeaderChanged {
        old: Option<MemberId>,
        new: Option<MemberId>,
    },
    MemberAdded {
        member: MemberId,
        instance_id: Option<InstanceId>,
        reason: AddReason,
    },
    MemberRemoved {
        member: MemberId,
        instance_id: Option<InstanceId>,
        reason: RemoveReason,
    },
    /// A KIP-394 pending member id was handed out (MEMBER_ID_REQUIRED).
    PendingMemberAdded {
        member: MemberId,
    },
    /// The assignment of `generation` is stored and delivered; the group is Stable.
    AssignmentInstalled {
        generation: Generation,
        /// The server assignor whose plan it is; `None`: the leader's.
        assigned_by: Option<String>,
    },
    /// The leader of a server-assigned generation sent an assignment; it was ignored.
    LeaderAssignmentIgnored {
        generation: Generation,
        entries: usize,
    },
    /// The server assignor, computing `generation`, met something an operator should hear of.
    AssignorWarning {
        generation: Generation,
        assignor: String,
        warning: String,
    },
    /// The leader of server-assigned generations kept rejoining unchanged right after koord's
    /// assignment, `rejoins` generations in a row: the leader assigns this group from now on.
    AssignmentFallback {
        generation: Generation,
        rejoins: u32,
    },
    /// More than `limit` rebalances started within the last minute.
    RebalanceStorm {
        generation: Generation,
        rebalances: u32,
        limit: u32,
    },
    /// The server assignor computed `generation`: what it did and why.
    AssignmentPlanned {
        generation: Generation,
        assignor: String,
        summary: String,
    },
}

impl fmt::Display for RemoveReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoveReason::SessionExpired => f.write_str("session timeout expired"),
            RemoveReason::NewMemberJoinTimeout => f.write_str("new member join timeout"),
            RemoveReason::PendingMemberExpired => f.write_str("pending member expired"),
            RemoveReason::NotRejoined => f.write_str("did not rejoin before the join phase ended"),
            RemoveReason::NotSynced => f.write_str("did not sync within the rebalance timeout"),
            RemoveReason::Left { reason } => {
                write!(
                    f,
                    "left the group ({})",
                    reason.as_deref().unwrap_or("not provided")
                )
            }
            RemoveReason::AdminRemoved { reason } => write!(
                f,
                "removed by instance id ({})",
                reason.as_deref().unwrap_or("not provided")
            ),
            RemoveReason::FencedByStaticReplacement { new } => {
                write!(f, "replaced by static member {new}")
            }
            RemoveReason::GroupMaxSizeReached => f.write_str("group.max.size reached"),
        }
    }
}

/// A record to persist for this group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRecord {
    Metadata(GroupMetadataRecord),
    /// The group is deleted.
    Tombstone,
}
