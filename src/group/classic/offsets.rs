//! The group checks of OffsetCommit / TxnOffsetCommit for a classic group (spec §3.1; Kafka
//! `ClassicGroup.validateOffsetCommit` and `OffsetMetadataManager.commitOffset`).

use super::ClassicGroup;
use crate::group::commands::OffsetCommitAuth;
use crate::group::errors::GroupError;
use crate::group::types::{Generation, GroupState, Timestamp};

impl ClassicGroup {
    /// May this commit be stored? `Ok(())` means every partition goes on to the per-partition
    /// checks (metadata size, ...). A valid plain commit also keeps the member's session alive
    /// while the group is Stable or PreparingRebalance (a consumer busy committing is alive).
    ///
    /// # Errors
    /// COORDINATOR_NOT_AVAILABLE (Dead); UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID /
    /// ILLEGAL_GENERATION for a commit claiming membership that does not check out;
    /// UNKNOWN_MEMBER_ID for an anonymous commit to a non-empty group; REBALANCE_IN_PROGRESS
    /// while CompletingRebalance (not for transactional commits).
    pub fn validate_offset_commit(
        &mut self,
        auth: &OffsetCommitAuth,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if auth.generation < Generation(0) && self.state == GroupState::Empty {
            // Admin tools and consumers outside group management.
            return Ok(());
        }
        if auth.generation >= Generation(0)
            || !auth.member_id.is_unknown()
            || auth.instance_id.is_some()
        {
            self.validate_member(&auth.member_id, auth.instance_id.as_ref())?;
            if auth.generation != self.generation {
                return Err(GroupError::IllegalGeneration);
            }
        } else if !auth.transactional && self.state != GroupState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if !auth.transactional && self.state == GroupState::CompletingRebalance {
            // The member has the new generation from its JoinGroup reply but no assignment
            // yet; committing now would be for partitions it may no longer own.
            return Err(GroupError::RebalanceInProgress);
        }
        if !auth.transactional
            && matches!(
                self.state,
                GroupState::Stable | GroupState::PreparingRebalance
            )
        {
            self.reset_session(&auth.member_id, now);
        }
        Ok(())
    }
}
