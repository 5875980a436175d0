//! Share groups (KIP-932): consumers that share the records of a partition, each record
//! acquired by one member at a time, acknowledged, released or rejected (ShareGroupHeartbeat,
//! ShareGroupDescribe, ShareFetch, ShareAcknowledge).
//!
//! - [`group`]: the share group, a pure state machine beside the consumer and streams ones:
//!   membership, its members' share sessions, and its share partitions.
//! - [`assign`]: the assignor (Kafka's `simple`): a partition may go to several members.
//! - [`partition`]: a share partition's in-flight records: acquisition with a lock deadline,
//!   acknowledgement, redelivery up to the delivery-count limit, its stored form.
//! - [`codec`]: the group's stored records.

pub mod assign;
pub mod codec;
pub mod group;
pub mod partition;
#[cfg(test)]
mod tests;

pub use group::{
    AutoOffsetReset, DeadLetters, PartitionAcks, ReadPartition, SessionAnswer, SessionRequest,
    ShareEvent, ShareGroup, ShareGroupState, ShareHeartbeat, ShareHeartbeatReply, ShareMember,
    ShareRecord, ShareSettings, ShareTimer,
};

use crate::group::core::TopicImage;
use crate::vocab::{GroupError, GroupId, MemberId, Timestamp};

impl crate::group::core::Kind for ShareGroup {
    const KIND: crate::vocab::stored::GroupKind = codec::KIND;
    const CONVERTS: bool = false;
}

impl crate::group::core::GroupCore for ShareGroup {
    fn id(&self) -> &GroupId {
        (**self).id()
    }

    fn kind(&self) -> crate::vocab::stored::GroupKind {
        codec::KIND
    }

    fn state_name(&self) -> &'static str {
        self.state().as_str()
    }

    fn is_dead(&self) -> bool {
        (**self).is_dead()
    }

    fn is_empty(&self) -> bool {
        (**self).is_empty()
    }

    fn num_members(&self) -> usize {
        self.members().len()
    }

    fn protocol_type(&self) -> &str {
        "share"
    }

    fn next_deadline(&self) -> Option<Timestamp> {
        (**self).next_deadline()
    }

    fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        ShareGroup::handle_timeout(self, image, now);
    }

    fn delete(&mut self) -> Option<Result<(), GroupError>> {
        Some(ShareGroup::delete(self))
    }

    /// A share group has no committed offsets: Kafka answers an OffsetCommit for it as for a
    /// group of another protocol.
    fn check_offset_commit(
        &mut self,
        _auth: &crate::group::OffsetCommitAuth,
        _api_version: i16,
        _now: Timestamp,
    ) -> Result<(), GroupError> {
        Err(GroupError::GroupIdNotFound)
    }

    fn check_offset_fetch(&self, _member: &Option<(MemberId, i32)>) -> Result<(), GroupError> {
        Err(GroupError::GroupIdNotFound)
    }

    fn serves_offset_fetch(&self) -> bool {
        false
    }

    fn check_offset_delete(&self) -> Result<(), GroupError> {
        Err(GroupError::GroupIdNotFound)
    }

    fn subscribes_to(&self, topic: &str, _image: &dyn TopicImage) -> bool {
        self.reads_topic(topic)
    }

    /// Its state is not offsets: nothing expires.
    fn offset_expiration_base(&self) -> Option<crate::vocab::ExpirationBase> {
        None
    }

    fn take_stored(&mut self) -> Vec<crate::vocab::stored::RecordChange> {
        self.take_records().into_iter().map(codec::change).collect()
    }

    fn handle_write_failed(&mut self) {
        ShareGroup::handle_write_failed(self);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
