//! Streams groups (KIP-1071): Kafka Streams applications whose tasks the coordinator assigns
//! (StreamsGroupHeartbeat, StreamsGroupDescribe).
//!
//! - [`group`]: the streams group, a pure state machine beside the classic and consumer ones.
//! - [`member`]: its members, task sets and stored record.
//! - [`topology`]: the topology members send and its configuration against the topics that
//!   exist (task counts, internal topics to create, the statuses a member is told).
//! - [`sticky`]: the sticky task assignor (active tasks and standbys), Kafka's without rack
//!   awareness.
//! - [`learner`]: the learner-aware assignor on top of it: a moved stateful task is warmed up
//!   on its new owner first.

pub mod codec;
pub mod group;
pub mod learner;
pub mod member;
pub mod sticky;
pub mod topology;

#[cfg(test)]
mod tests;

pub use group::{
    StreamsAssignor, StreamsEvent, StreamsGroup, StreamsGroupConfig, StreamsGroupState,
    StreamsHeartbeat, StreamsHeartbeatReply, StreamsRecord, StreamsTimer,
};
pub use member::{Endpoint, StreamsGroupRecord, StreamsMember, StreamsMemberState, TaskSet};

use crate::group::core::TopicImage;
use crate::vocab::{GroupError, GroupId, MemberId, Timestamp};

impl crate::group::core::Kind for StreamsGroup {
    const KIND: crate::vocab::stored::GroupKind = codec::KIND;
}

impl crate::group::core::GroupCore for StreamsGroup {
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
        "streams"
    }

    fn next_deadline(&self) -> Option<Timestamp> {
        (**self).next_deadline()
    }

    fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        StreamsGroup::handle_timeout(self, image, now);
    }

    fn delete(&mut self) -> Option<Result<(), GroupError>> {
        Some(StreamsGroup::delete(self))
    }

    fn check_offset_commit(
        &mut self,
        auth: &crate::group::OffsetCommitAuth,
        api_version: i16,
        _now: Timestamp,
    ) -> Result<(), GroupError> {
        if auth.is_anonymous_transactional() {
            return Ok(());
        }
        self.validate_offset_commit(
            &auth.member_id,
            auth.generation.0,
            auth.transactional,
            api_version,
        )
    }

    fn check_offset_fetch(&self, member: &Option<(MemberId, i32)>) -> Result<(), GroupError> {
        match member {
            Some((id, epoch)) => self.validate_offset_fetch(Some(id), *epoch),
            None => Ok(()),
        }
    }

    fn serves_offset_fetch(&self) -> bool {
        !(**self).is_dead()
    }

    fn check_offset_delete(&self) -> Result<(), GroupError> {
        if (**self).is_dead() {
            return Err(GroupError::GroupIdNotFound);
        }
        Ok(())
    }

    fn subscribes_to(&self, topic: &str, _image: &dyn TopicImage) -> bool {
        self.reads_topic(topic)
    }

    /// Offsets age from their commit.
    fn offset_expiration_base(&self) -> Option<crate::vocab::ExpirationBase> {
        Some(crate::vocab::ExpirationBase::CommitTimestamp)
    }

    fn take_stored(&mut self) -> Vec<crate::vocab::stored::RecordChange> {
        self.take_records().into_iter().map(codec::change).collect()
    }

    fn handle_write_failed(&mut self) {
        StreamsGroup::handle_write_failed(self);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
