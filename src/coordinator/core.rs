//! The group a shard's actor owns, of whatever kind ([`GroupCore`]): one id is one group of
//! one kind at a time; an Empty group becomes another kind when a member of another protocol
//! joins it (as Kafka converts an empty group), keeping its offsets.
//!
//! What offsets, retention, listing and deletion ask of a group goes through the kind's
//! [`GroupCore`], so the actor's offset paths are written once; a kind's own inputs reach it
//! by [`Core::get_mut`].

use crate::group::consumer::TopicImage;
use crate::group::core::GroupCore;
use crate::group::{GroupError, GroupId, Timestamp};
use crate::vocab::{ExpirationBase, MemberId};

use super::{ListedState, OffsetCommit, TxnOffsetCommit};

/// The state machine behind a group id.
#[derive(Debug)]
pub(super) struct Core(Box<dyn GroupCore>);

impl Core {
    pub fn new(group: impl GroupCore) -> Core {
        Core(Box::new(group))
    }

    /// The group as its own kind, if it is a `T`.
    pub fn get<T: GroupCore>(&self) -> Option<&T> {
        self.0.get()
    }

    /// The group as its own kind, if it is a `T`.
    pub fn get_mut<T: GroupCore>(&mut self) -> Option<&mut T> {
        self.0.get_mut()
    }

    pub fn is<T: GroupCore>(&self) -> bool {
        self.0.is::<T>()
    }

    pub fn id(&self) -> &GroupId {
        self.0.id()
    }

    pub fn kind(&self) -> crate::vocab::stored::GroupKind {
        self.0.kind()
    }

    /// Its records since they were last taken, in their stored form.
    pub fn take_stored(&mut self) -> Vec<crate::vocab::stored::RecordChange> {
        self.0.take_stored()
    }

    pub fn handle_write_failed(&mut self) {
        self.0.handle_write_failed();
    }

    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.0.next_deadline()
    }

    pub fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        self.0.handle_timeout(image, now);
    }

    /// DeleteGroups of a kind the shell deletes (only an Empty one goes; the shell stores the
    /// tombstone); `None` for one that deletes itself through its outputs (classic).
    pub fn delete_by_shell(&mut self) -> Option<Result<(), GroupError>> {
        self.0.delete()
    }

    pub fn is_dead(&self) -> bool {
        self.0.is_dead()
    }

    /// Whether it has no members (and so may change kind).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn listed_state(&self) -> ListedState {
        ListedState {
            group_type: self.0.kind().name,
            state: self.0.state_name(),
            dead: self.0.is_dead(),
        }
    }

    pub fn num_members(&self) -> usize {
        self.0.num_members()
    }

    /// The protocol type ListGroups shows: a consumer group's is `consumer`.
    pub fn protocol_type(&self) -> &str {
        self.0.protocol_type()
    }

    /// The group checks of an OffsetCommit.
    pub fn validate_offset_commit(
        &mut self,
        commit: &OffsetCommit,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        self.0
            .check_offset_commit(&commit.auth, commit.api_version, now)
    }

    /// The group checks of a TxnOffsetCommit (Kafka's `validateTransactionalOffsetCommit`):
    /// a modern member's stale epoch is ILLEGAL_GENERATION below v6 (KIP-1319 lets v6 say
    /// STALE_MEMBER_EPOCH).
    pub fn validate_txn_offset_commit(
        &mut self,
        commit: &TxnOffsetCommit,
        now: Timestamp,
    ) -> Result<(), GroupError> {
        self.0
            .check_offset_commit(&commit.auth, commit.api_version, now)
            .map_err(|e| match e {
                GroupError::StaleMemberEpoch if commit.api_version < 6 => {
                    GroupError::IllegalGeneration
                }
                e => e,
            })
    }

    /// The group checks of an OffsetFetch (a modern member's epoch); classic groups check
    /// nothing.
    pub fn validate_offset_fetch(
        &self,
        member: &Option<(MemberId, i32)>,
    ) -> Result<(), GroupError> {
        self.0.check_offset_fetch(member)
    }

    pub fn serves_offset_fetch(&self) -> bool {
        self.0.serves_offset_fetch()
    }

    pub fn validate_offset_delete(&self) -> Result<(), GroupError> {
        self.0.check_offset_delete()
    }

    pub fn is_subscribed_to_topic(&self, topic: &str, image: &dyn TopicImage) -> bool {
        self.0.subscribes_to(topic, image)
    }

    /// Kafka's `offsetExpirationCondition`: a modern group's offsets age from their commit.
    pub fn offset_expiration_base(&self) -> Option<ExpirationBase> {
        self.0.offset_expiration_base()
    }
}
