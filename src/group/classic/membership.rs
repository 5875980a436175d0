//! Heartbeat, LeaveGroup and session expiry (spec §1.1, §1.4).

use super::ClassicGroup;
use crate::group::commands::{Heartbeat, LeaveGroup};
use crate::group::output::{LeaveMemberResult, LeaveOutcome, RebalanceReason, RemoveReason};
use crate::group::types::GroupState;
use crate::vocab::GroupError;
use crate::vocab::{MemberId, Timestamp};

impl ClassicGroup {
    /// A Heartbeat: `Ok(())` is NONE. The session restarts whenever the member is valid and the
    /// group is rebalancing or settled (also when the answer is REBALANCE_IN_PROGRESS, which
    /// tells the member to rejoin).
    ///
    /// # Errors
    /// COORDINATOR_NOT_AVAILABLE (Dead), UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (not a member),
    /// ILLEGAL_GENERATION, then by state: UNKNOWN_MEMBER_ID (Empty), REBALANCE_IN_PROGRESS
    /// (PreparingRebalance). CompletingRebalance answers NONE: clients heartbeat between their
    /// JoinGroup and SyncGroup replies (Kafka's code, not its state javadoc).
    pub fn handle_heartbeat(&mut self, req: &Heartbeat, now: Timestamp) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_instance(&req.member_id, req.instance_id.as_ref())?;
        // One lookup of the member for the check and the session (the heartbeat path is the
        // hottest there is: BENCHMARKS.md, issue 25).
        let session_timeout_ms = match self.members.get(&req.member_id) {
            Some(m) => m.session_timeout_ms,
            None => return Err(GroupError::UnknownMemberId),
        };
        if req.generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        let answer = match self.state {
            GroupState::Empty | GroupState::Dead => return Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
        };
        self.reschedule_heartbeat(&req.member_id, session_timeout_ms, now);
        answer
    }

    /// A LeaveGroup, every entry judged on its own (v3+ batch semantics): an empty member id
    /// with a known instance id is an administrative removal; a KIP-394 pending id is simply
    /// forgotten; anything else must pass `validateMember`. Any removal rebalances the group
    /// (or lets a running join phase complete).
    pub fn handle_leave(&mut self, req: &LeaveGroup, now: Timestamp) -> LeaveOutcome {
        if self.state == GroupState::Dead {
            return LeaveOutcome {
                error: Some(GroupError::CoordinatorNotAvailable),
                members: Vec::new(),
            };
        }
        let mut results = Vec::with_capacity(req.members.len());
        let mut left: Vec<MemberId> = Vec::new();
        for leaving in &req.members {
            let reason = leaving.reason.clone();
            let error = if leaving.member_id.is_unknown() {
                let target = leaving
                    .instance_id
                    .as_ref()
                    .and_then(|i| self.static_members.get(i).cloned());
                match target {
                    Some(id) => {
                        self.remove_member(&id, RemoveReason::AdminRemoved { reason });
                        left.push(id);
                        None
                    }
                    None => Some(GroupError::UnknownMemberId),
                }
            } else if self.remove_pending_member(
                &leaving.member_id,
                RemoveReason::Left {
                    reason: reason.clone(),
                },
            ) {
                left.push(leaving.member_id.clone());
                None
            } else {
                match self.validate_member(&leaving.member_id, leaving.instance_id.as_ref()) {
                    Ok(()) => {
                        self.remove_member(&leaving.member_id, RemoveReason::Left { reason });
                        left.push(leaving.member_id.clone());
                        None
                    }
                    Err(error) => Some(error),
                }
            };
            results.push(LeaveMemberResult {
                member_id: leaving.member_id.clone(),
                instance_id: leaving.instance_id.clone(),
                error,
            });
        }
        if !left.is_empty() {
            match self.state {
                GroupState::Stable | GroupState::CompletingRebalance => self
                    .maybe_prepare_rebalance_or_complete_join(
                        RebalanceReason::MembersLeft(left),
                        now,
                    ),
                GroupState::PreparingRebalance => self.maybe_complete_join_phase(now),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        LeaveOutcome {
            error: None,
            members: results,
        }
    }

    /// A member's session timer fired (Kafka `expireClassicGroupMemberHeartbeat`). Static
    /// members expire like dynamic ones. A member parked in JoinGroup or SyncGroup is not
    /// expired (its session restarts when it is answered), unless it is new: then the timer
    /// was the new-member join timeout.
    pub(super) fn on_heartbeat_timeout(&mut self, id: &MemberId, now: Timestamp) {
        if self.state == GroupState::Dead {
            return;
        }
        if self.remove_pending_member(id, RemoveReason::PendingMemberExpired) {
            if self.state == GroupState::PreparingRebalance && self.has_all_members_joined() {
                self.complete_join(now);
            }
            return;
        }
        let Some(member) = self.members.get(id) else {
            return;
        };
        if member.has_satisfied_heartbeat() {
            return;
        }
        let reason = if member.is_new {
            RemoveReason::NewMemberJoinTimeout
        } else {
            RemoveReason::SessionExpired
        };
        self.remove_member(id, reason.clone());
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self
                .maybe_prepare_rebalance_or_complete_join(
                    RebalanceReason::MemberRemoved(id.clone(), reason),
                    now,
                ),
            GroupState::PreparingRebalance if self.has_all_members_joined() => {
                self.complete_join(now)
            }
            _ => {}
        }
    }
}
