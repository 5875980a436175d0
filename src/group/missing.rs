//! Answers for requests that name a group which does not exist.
//!
//! The group directory consults these before routing to (or creating) a group actor, so that a
//! stray Heartbeat never spawns a group. Kafka behaviour per GroupMetadataManager and
//! GroupCoordinatorService.

use super::commands::{JoinGroup, LeaveGroup, OffsetCommitAuth};
use super::output::{JoinReply, LeaveMemberResult, LeaveOutcome};
use crate::vocab::Generation;
use crate::vocab::GroupError;

/// JoinGroup: `None` means "create the group (Empty, generation 0) and hand it the request";
/// `Some(reply)` is the answer. A member that claims an id in a group that does not exist is
/// UNKNOWN_MEMBER_ID.
pub fn join(req: &JoinGroup) -> Option<JoinReply> {
    if req.member_id.is_unknown() {
        None
    } else {
        Some(JoinReply::error(
            GroupError::UnknownMemberId,
            req.member_id.clone(),
        ))
    }
}

/// SyncGroup and Heartbeat on a missing group: UNKNOWN_MEMBER_ID.
pub fn sync_or_heartbeat() -> GroupError {
    GroupError::UnknownMemberId
}

/// LeaveGroup on a missing group: every entry UNKNOWN_MEMBER_ID, no top-level error.
pub fn leave(req: &LeaveGroup) -> LeaveOutcome {
    LeaveOutcome {
        error: None,
        members: req
            .members
            .iter()
            .map(|m| LeaveMemberResult {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                error: Some(GroupError::UnknownMemberId),
            })
            .collect(),
    }
}

/// OffsetCommit on a missing group. `Ok(())`: create a *simple* group (Empty, no protocol type,
/// see [`crate::group::ClassicGroup::new_simple`]) and accept the commit. A commit claiming a
/// generation is GROUP_ID_NOT_FOUND from OffsetCommit v9 on and ILLEGAL_GENERATION before
/// (`group_id_not_found_supported` is that version check, made by `api/`).
///
/// # Errors
/// The error every partition of the commit gets.
pub fn offset_commit(
    auth: &OffsetCommitAuth,
    group_id_not_found_supported: bool,
) -> Result<(), GroupError> {
    if auth.generation < Generation(0) {
        Ok(())
    } else if group_id_not_found_supported {
        Err(GroupError::GroupIdNotFound)
    } else {
        Err(GroupError::IllegalGeneration)
    }
}
