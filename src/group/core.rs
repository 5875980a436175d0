//! What the shell asks of a group whatever its kind: its identity and listing, its timers,
//! deletion, and the group checks of offset commits, fetches, deletions and retention. Each
//! kind implements [`GroupCore`] beside its state machine; the coordinator's actor holds a
//! `Box<dyn GroupCore>` and reaches a kind's own inputs (its heartbeats, joins and syncs) by
//! downcasting to it.

use std::any::Any;

use super::commands::OffsetCommitAuth;
use crate::vocab::stored::{GroupKind, RecordChange};
use crate::vocab::{ExpirationBase, GroupError, GroupId, MemberId, Timestamp, TopicId};

/// The topics the group can see: a read-only view of the node's topic metadata.
pub trait TopicImage: std::fmt::Debug {
    /// Changes whenever a topic is created, deleted or gets more partitions.
    fn version(&self) -> u64;
    /// A topic's id and partition count.
    fn topic(&self, name: &str) -> Option<(TopicId, u32)>;
    /// Every topic's name (regular expressions are matched against them).
    fn names(&self) -> Vec<String>;
    /// A topic's name by id.
    fn name_of(&self, id: TopicId) -> Option<String>;
}

/// A group of any kind, as the shell sees it.
pub trait GroupCore: Any + Send + std::fmt::Debug {
    fn id(&self) -> &GroupId;
    /// Its kind (ListGroups v5's `GroupType` is its name).
    fn kind(&self) -> GroupKind;
    /// Its state in Kafka's spelling.
    fn state_name(&self) -> &'static str;
    fn is_dead(&self) -> bool;
    /// Whether it has no members (and so may change kind).
    fn is_empty(&self) -> bool;
    fn num_members(&self) -> usize;
    /// The protocol type ListGroups shows.
    fn protocol_type(&self) -> &str;
    fn next_deadline(&self) -> Option<Timestamp>;
    fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp);
    /// DeleteGroups: `Some` for a kind the shell deletes (only an Empty one goes; the shell
    /// stores the tombstone), `None` for one that deletes itself through its outputs.
    fn delete(&mut self) -> Option<Result<(), GroupError>>;
    /// The group checks of an OffsetCommit (`auth.transactional`: a TxnOffsetCommit's).
    fn check_offset_commit(
        &mut self,
        auth: &OffsetCommitAuth,
        api_version: i16,
        now: Timestamp,
    ) -> Result<(), GroupError>;
    /// The group checks of an OffsetFetch by a member with its epoch (none for a classic
    /// group).
    fn check_offset_fetch(&self, member: &Option<(MemberId, i32)>) -> Result<(), GroupError>;
    fn serves_offset_fetch(&self) -> bool;
    fn check_offset_delete(&self) -> Result<(), GroupError>;
    fn subscribes_to(&self, topic: &str, image: &dyn TopicImage) -> bool;
    /// Kafka's `offsetExpirationCondition`.
    fn offset_expiration_base(&self) -> Option<ExpirationBase>;
    /// The records it wrote since they were last taken, in their stored form (none for a kind
    /// whose records go out through its outputs, as the classic kind's do).
    fn take_stored(&mut self) -> Vec<RecordChange>;
    /// A write of the records it gave failed (the shell answered its members with the error).
    fn handle_write_failed(&mut self);
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A kind of group, as the coordinator's registry names it: a group is made, rebuilt and
/// reached as its own kind by this.
pub trait Kind: GroupCore {
    /// Its stored name (the same as [`GroupCore::kind`]).
    const KIND: GroupKind;
    /// Whether a request that creates a group of this kind turns an Empty group of another
    /// kind into one (Kafka converts empty classic, consumer and streams groups; a share group
    /// is never made from another: GROUP_ID_NOT_FOUND).
    const CONVERTS: bool = true;
}

impl dyn GroupCore {
    /// The group as its own kind, if it is a `T`.
    pub fn get<T: GroupCore>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }

    /// The group as its own kind, if it is a `T`.
    pub fn get_mut<T: GroupCore>(&mut self) -> Option<&mut T> {
        self.as_any_mut().downcast_mut()
    }

    pub fn is<T: GroupCore>(&self) -> bool {
        self.as_any().is::<T>()
    }
}
