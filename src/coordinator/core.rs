//! The group a shard's actor owns: a classic group, a consumer group (KIP-848) or a streams
//! group (KIP-1071). One id is one
//! group of one kind at a time; an Empty group of either kind becomes the other kind when a
//! member of the other protocol joins it (as Kafka converts an empty group), keeping its offsets.
//!
//! What offsets, retention and deletion ask of a group is answered here for both kinds, so the
//! actor's offset paths are written once.

use crate::group::consumer::{ConsumerGroup, ConsumerGroupState, TopicImage};
use crate::group::streams::StreamsGroup;
use crate::group::{ClassicGroup, GroupError, GroupId, GroupState, Timestamp};
use crate::vocab::{ExpirationBase, MemberId};

use super::{ListedState, OffsetCommit, TxnOffsetCommit};

/// The state machine behind a group id.
// The actor holding it is boxed already; a consumer group is boxed so that the common classic
// group is not.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Core {
    Classic(ClassicGroup),
    Consumer(Box<ConsumerGroup>),
    Streams(Box<StreamsGroup>),
}

impl Core {
    pub fn id(&self) -> &GroupId {
        match self {
            Core::Classic(g) => g.id(),
            Core::Consumer(g) => g.id(),
            Core::Streams(g) => g.id(),
        }
    }

    pub fn next_deadline(&self) -> Option<Timestamp> {
        match self {
            Core::Classic(g) => g.next_deadline(),
            Core::Consumer(g) => g.next_deadline(),
            Core::Streams(g) => g.next_deadline(),
        }
    }

    pub fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        match self {
            Core::Classic(g) => g.handle_timeout(now),
            Core::Consumer(g) => g.handle_timeout(image, now),
            Core::Streams(g) => g.handle_timeout(image, now),
        }
    }

    /// DeleteGroups of a consumer or streams group (only an Empty one goes; the shell stores the
    /// tombstone); `None` for a classic group, which deletes itself through its outputs.
    pub fn delete_unless_classic(&mut self) -> Option<Result<(), GroupError>> {
        match self {
            Core::Classic(_) => None,
            Core::Consumer(g) => Some(g.delete()),
            Core::Streams(g) => Some(g.delete()),
        }
    }

    pub fn is_dead(&self) -> bool {
        self.listed_state().is_dead()
    }

    /// Whether it has no members (and so may change kind).
    pub fn is_empty(&self) -> bool {
        match self {
            Core::Classic(g) => g.state() == GroupState::Empty,
            Core::Consumer(g) => g.state() == ConsumerGroupState::Empty,
            Core::Streams(g) => g.is_empty(),
        }
    }

    pub fn listed_state(&self) -> ListedState {
        match self {
            Core::Classic(g) => ListedState::Classic(g.state()),
            Core::Consumer(g) => ListedState::Consumer(g.state()),
            Core::Streams(g) => ListedState::Streams(g.state()),
        }
    }

    pub fn num_members(&self) -> usize {
        match self {
            Core::Classic(g) => g.num_members(),
            Core::Consumer(g) => g.members().len(),
            Core::Streams(g) => g.members().len(),
        }
    }

    /// The protocol type ListGroups shows: a consumer group's is `consumer`.
    pub fn protocol_type(&self) -> &str {
        match self {
            Core::Classic(g) => g.protocol_type().unwrap_or_default(),
            Core::Consumer(_) => "consumer",
            Core::Streams(_) => "streams",
        }
    }

    /// The group checks of an OffsetCommit.
    pub fn validate_offset_commit(
        &mut self,
        commit: &OffsetCommit,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        match self {
            Core::Classic(g) => g.validate_offset_commit(&commit.auth, now),
            Core::Consumer(g) => g.validate_offset_commit(
                &commit.auth.member_id,
                commit.auth.generation.0,
                commit.auth.transactional,
                commit.api_version,
            ),
            Core::Streams(g) => {
                g.validate_offset_commit(&commit.auth.member_id, commit.auth.generation.0)
            }
        }
    }

    /// The group checks of a TxnOffsetCommit (Kafka's `validateTransactionalOffsetCommit`):
    /// a consumer-group member's stale epoch is ILLEGAL_GENERATION there.
    pub fn validate_txn_offset_commit(
        &mut self,
        commit: &TxnOffsetCommit,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        let result = match self {
            Core::Classic(g) => g.validate_offset_commit(&commit.auth, now),
            Core::Consumer(g) => g.validate_offset_commit(
                &commit.auth.member_id,
                commit.auth.generation.0,
                true,
                commit.api_version,
            ),
            Core::Streams(g) => {
                g.validate_offset_commit(&commit.auth.member_id, commit.auth.generation.0)
            }
        };
        result.map_err(|e| match e {
            GroupError::StaleMemberEpoch => GroupError::IllegalGeneration,
            e => e,
        })
    }

    /// The group checks of an OffsetFetch (a consumer-group member's epoch); classic groups
    /// check nothing.
    pub fn validate_offset_fetch(
        &self,
        member: &Option<(MemberId, i32)>,
    ) -> Result<(), GroupError> {
        match (self, member) {
            (Core::Consumer(g), Some((id, epoch))) => g.validate_offset_fetch(Some(id), *epoch),
            (Core::Streams(g), Some((id, epoch))) => g.validate_offset_fetch(Some(id), *epoch),
            _ => Ok(()),
        }
    }

    pub fn serves_offset_fetch(&self) -> bool {
        match self {
            Core::Classic(g) => g.serves_offset_fetch(),
            Core::Consumer(g) => g.state() != ConsumerGroupState::Dead,
            Core::Streams(g) => !g.is_dead(),
        }
    }

    pub fn validate_offset_delete(&self) -> Result<(), GroupError> {
        match self {
            Core::Classic(g) => g.validate_offset_delete(),
            Core::Consumer(g) if g.state() == ConsumerGroupState::Dead => {
                Err(GroupError::GroupIdNotFound)
            }
            Core::Consumer(_) => Ok(()),
            Core::Streams(g) if g.is_dead() => Err(GroupError::GroupIdNotFound),
            Core::Streams(_) => Ok(()),
        }
    }

    pub fn is_subscribed_to_topic(&self, topic: &str, image: &dyn TopicImage) -> bool {
        match self {
            Core::Classic(g) => g.is_subscribed_to_topic(topic),
            Core::Consumer(g) => g.is_subscribed_to(topic, image),
            Core::Streams(g) => g.reads_topic(topic),
        }
    }

    /// Kafka's `offsetExpirationCondition`: a consumer group's offsets age from their commit.
    pub fn offset_expiration_base(&self) -> Option<ExpirationBase> {
        match self {
            Core::Classic(g) => g.offset_expiration_base(),
            Core::Consumer(_) | Core::Streams(_) => Some(ExpirationBase::CommitTimestamp),
        }
    }
}
