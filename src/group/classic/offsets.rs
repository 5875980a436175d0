//! The group checks of OffsetCommit / TxnOffsetCommit for a classic group (spec §3.1; Kafka
//! `ClassicGroup.validateOffsetCommit` and `OffsetMetadataManager.commitOffset`).

use std::collections::BTreeSet;

use bytes::Bytes;

use super::ClassicGroup;
use crate::assignor::protocol::union_of_topics;
use crate::group::commands::OffsetCommitAuth;
use crate::group::types::GroupState;
use crate::vocab::ExpirationBase;
use crate::vocab::GroupError;
use crate::vocab::{Generation, Timestamp};

/// The protocol type of Kafka consumers, whose metadata koord can read.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

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

impl ClassicGroup {
    /// The topics the group consumes, when Kafka can know them: protocol type `consumer` and
    /// a selected protocol whose member metadata parses as a `ConsumerProtocolSubscription`.
    /// An Empty consumer group subscribes to nothing. Computed from the current members (Kafka
    /// caches it per generation).
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let metadata: Vec<Bytes> = self
            .members
            .values()
            .map(|m| m.metadata(protocol))
            .collect();
        union_of_topics(metadata.iter().map(|b| b.as_ref()))
    }

    /// Kafka `isSubscribedToTopic`: when the subscriptions are unknown, a `consumer` group is
    /// assumed subscribed (so its offsets are not expired or deleted by mistake).
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match self.subscribed_topics() {
            Some(topics) => topics.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// From when this group's offsets age (spec §3.3; Kafka `offsetExpirationCondition`):
    /// an Empty group from the moment it became Empty; a Stable `consumer` group with known
    /// subscriptions from each commit; a simple group (no protocol type) from each commit;
    /// otherwise never (a rebalancing group keeps its offsets).
    pub fn offset_expiration_base(&self) -> Option<ExpirationBase> {
        match &self.protocol_type {
            None => Some(ExpirationBase::CommitTimestamp),
            Some(_) if self.state == GroupState::Empty => {
                Some(ExpirationBase::StateTimestamp(self.state_timestamp))
            }
            Some(_)
                if self.uses_consumer_protocol()
                    && self.state == GroupState::Stable
                    && self.subscribed_topics().is_some() =>
            {
                Some(ExpirationBase::CommitTimestamp)
            }
            Some(_) => None,
        }
    }

    /// OffsetDelete's group check (spec §3.4): a Dead group does not exist; a non-empty group
    /// whose protocol is not `consumer` cannot have offsets deleted (its subscriptions are
    /// unknowable). Per partition, [`ClassicGroup::is_subscribed_to_topic`] then answers
    /// GROUP_SUBSCRIBED_TO_TOPIC.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP.
    pub fn validate_offset_delete(&self) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => Err(GroupError::GroupIdNotFound),
            GroupState::Empty => Ok(()),
            _ if self.uses_consumer_protocol() => Ok(()),
            _ => Err(GroupError::NonEmptyGroup),
        }
    }

    /// OffsetFetch reads this group's offsets unless it is Dead (then it is answered as a
    /// missing group: every partition -1).
    pub fn serves_offset_fetch(&self) -> bool {
        self.state != GroupState::Dead
    }
}
