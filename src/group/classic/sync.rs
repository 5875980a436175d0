//! SyncGroup (spec §1.3; Kafka `classicGroupSyncToClassicGroup`).

use std::collections::HashMap;

use bytes::Bytes;

use super::{ClassicGroup, WriteContinuation};
use crate::group::commands::SyncGroup;
use crate::group::output::{GroupEvent, SyncReply};
use crate::group::timers::TimerKey;
use crate::group::types::GroupState;
use crate::vocab::GroupError;
use crate::vocab::{MemberId, Timestamp};

impl ClassicGroup {
    /// A SyncGroup. The reply comes out of [`ClassicGroup::poll_output`] as
    /// [`crate::group::Output::SyncReply`] for `req.token`: at once (errors, Stable) or, while
    /// CompletingRebalance, once the leader's assignment is durable.
    pub fn handle_sync(&mut self, req: SyncGroup, now: Timestamp) {
        if self.state == GroupState::Empty {
            // Kafka answers an Empty group before any other check.
            return self.reply_sync(req.token, SyncReply::error(GroupError::UnknownMemberId));
        }
        if let Err(error) = self.validate_sync(&req) {
            return self.reply_sync(req.token, SyncReply::error(error));
        }
        let id = req.member_id.clone();
        match self.state {
            GroupState::PreparingRebalance => {
                // The generation this member synced for is being replaced: its assignment
                // would be stale. It must rejoin.
                self.reply_sync(req.token, SyncReply::error(GroupError::RebalanceInProgress));
            }
            GroupState::CompletingRebalance => {
                let superseded = self
                    .members
                    .get_mut(&id)
                    .and_then(|m| m.awaiting_sync.replace(req.token));
                if let Some(old) = superseded {
                    // A retried SyncGroup; answer the abandoned one (Kafka drops it).
                    self.reply_sync(old, SyncReply::error(GroupError::RebalanceInProgress));
                }
                self.remove_pending_sync_member(&id, now);
                if self.is_leader(&id) && self.has_server_assignment() {
                    // The server's assignment is already being written.
                    self.event(GroupEvent::LeaderAssignmentIgnored {
                        generation: self.generation,
                        entries: req.assignments.len(),
                    });
                } else if self.is_leader(&id) {
                    let assignment = self.leader_assignment(req.assignments);
                    self.persist(WriteContinuation::Assignment {
                        generation: self.generation,
                        assignment,
                        assignor: None,
                    });
                }
            }
            GroupState::Stable => {
                self.remove_pending_sync_member(&id, now);
                let assignment = self
                    .members
                    .get(&id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                let reply = SyncReply {
                    error: None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment,
                };
                self.reply_sync(req.token, reply);
                self.reset_session(&id, now);
            }
            GroupState::Empty | GroupState::Dead => {
                // Unreachable: handled above and by validate_sync.
                self.reply_sync(
                    req.token,
                    SyncReply::error(GroupError::CoordinatorNotAvailable),
                );
            }
        }
    }

    /// Kafka `validateSyncGroup`, in order: Dead, member, generation, protocol (v5).
    fn validate_sync(&self, req: &SyncGroup) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(&req.member_id, req.instance_id.as_ref())?;
        if req.generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if inconsistent(req.protocol_type.as_deref(), self.protocol_type.as_deref())
            || inconsistent(req.protocol_name.as_deref(), self.protocol_name.as_deref())
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    /// The leader's assignment to store for this generation, with an empty assignment for every
    /// member the leader left out and entries for non-members dropped.
    fn leader_assignment(&self, from_leader: Vec<(MemberId, Bytes)>) -> HashMap<MemberId, Bytes> {
        let source: HashMap<MemberId, Bytes> = from_leader.into_iter().collect();
        self.members
            .keys()
            .map(|id| (id.clone(), source.get(id).cloned().unwrap_or_default()))
            .collect()
    }

    /// A member has synced: once all have, the PendingSync timer is no longer needed.
    fn remove_pending_sync_member(&mut self, id: &MemberId, now: Timestamp) {
        self.pending_sync.shift_remove(id);
        let done = match self.state {
            GroupState::CompletingRebalance | GroupState::Stable => self.pending_sync.is_empty(),
            _ => true,
        };
        if done {
            self.cancel_timer(TimerKey::PendingSync);
        }
        self.maybe_rearm_follow_up(now);
    }
}

/// Kafka `isProtocolInconsistent`: both set and different.
fn inconsistent(requested: Option<&str>, current: Option<&str>) -> bool {
    matches!((requested, current), (Some(r), Some(c)) if r != c)
}
