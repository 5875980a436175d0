//! OffsetCommit (key 8), v2-10. v10 names topics by id (KIP-848): each is given its name
//! first, and the partitions of an id no topic has answer UNKNOWN_TOPIC_ID. An empty group id
//! fails every partition with INVALID_GROUP_ID; a partition of a topic or partition this node
//! does not have gets UNKNOWN_TOPIC_OR_PARTITION and is not passed on (Kafka's `KafkaApis` does
//! the same before the coordinator); the rest go to the group, which checks the committer and
//! then each partition's metadata size.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};

use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::context::RequestContext;
use super::reply::{PartitionReplies, TopicReplies};
use super::{check_group_id, opt_string};
use crate::broker::Broker;
use crate::coordinator::OffsetCommit;
use crate::group::{Generation, GroupError, GroupId, MemberId, OffsetCommitAuth};
use crate::offsets::{PartitionCommit, TopicPartition};
use crate::security::acl::{Operation, ResourceType};

/// One requested partition of an OffsetCommit or TxnOffsetCommit.
pub(super) struct Committed<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// -1: none.
    pub leader_epoch: i32,
    pub metadata: &'a Option<StrBytes>,
}

/// OffsetCommit v10+ and TxnOffsetCommit v6+ name topics by id: the topic with id `id` gives
/// `name` its name, as Kafka's `KafkaApis` does before anything else. An id no topic has leaves
/// `name` empty, which [`Committed::check`] answers with UNKNOWN_TOPIC_ID.
pub(super) fn name_by_id(broker: &Broker, id: Uuid, name: &mut TopicName) {
    if let Some(n) = broker.topics.name_of(id) {
        *name = TopicName(StrBytes::from_string(n));
    }
}

impl Committed<'_> {
    /// Fails the partition with UNKNOWN_TOPIC_ID (`by_id` and no name: [`name_by_id`] found
    /// none), the group id's error, TOPIC_AUTHORIZATION_FAILED (not `readable`: no READ on the
    /// topic) or UNKNOWN_TOPIC_OR_PARTITION, or passes it on to the group.
    pub(super) fn check(
        &self,
        broker: &Broker,
        group: &Result<GroupId, GroupError>,
        by_id: bool,
        readable: bool,
        reply: &mut TopicReplies<'_, PartitionCommit>,
    ) {
        if by_id && self.topic.is_empty() {
            reply.fail(self.partition, GroupError::UnknownTopicId);
            return;
        }
        if let Err(e) = group {
            reply.fail(self.partition, *e);
            return;
        }
        if !readable {
            reply.fail(self.partition, GroupError::TopicAuthorizationFailed);
            return;
        }
        match broker.topics.get(self.topic) {
            Some(t) if (0..t.partitions).contains(&self.partition) => reply.pass(
                self.partition,
                PartitionCommit {
                    tp: TopicPartition::new(self.topic, self.partition),
                    offset: self.offset,
                    leader_epoch: (self.leader_epoch >= 0).then_some(self.leader_epoch),
                    metadata: opt_string(self.metadata),
                },
            ),
            _ => reply.fail(self.partition, GroupError::UnknownTopicOrPartition),
        }
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    mut req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let by_id = version >= 10;
    if by_id {
        for t in &mut req.topics {
            name_by_id(broker, t.topic_id, &mut t.name);
        }
    }
    // As Kafka: READ on the group, else GROUP_AUTHORIZATION_FAILED on every partition; then
    // READ on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions.
    let group = if ctx.may(broker, Operation::Read, ResourceType::Group, &req.group_id) {
        check_group_id(&req.group_id)
    } else {
        Err(GroupError::GroupAuthorizationFailed)
    };
    let mut replies = PartitionReplies::new();
    for topic in &req.topics {
        let readable = ctx.may(broker, Operation::Read, ResourceType::Topic, &topic.name);
        let mut reply = replies.topic();
        for p in &topic.partitions {
            let commit = Committed {
                topic: topic.name.as_str(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: &p.committed_metadata,
            };
            commit.check(broker, &group, by_id, readable, &mut reply);
        }
    }
    let partitions = replies.take_items();
    if let (Ok(group), false) = (group, partitions.is_empty()) {
        let commit = OffsetCommit {
            auth: OffsetCommitAuth {
                member_id: MemberId::new(req.member_id.as_str()),
                instance_id: super::instance_id(&req.group_instance_id),
                generation: Generation(req.generation_id_or_member_epoch),
                transactional: false,
            },
            partitions,
            retention_time_ms: if version <= 4 {
                req.retention_time_ms
            } else {
                -1
            },
            group_id_not_found_supported: version >= 9,
            api_version: version,
        };
        match broker.coordinator.commit_offsets(group, commit).await {
            Ok(results) => replies.answer(results.into_iter().map(|(_, e)| e)),
            Err(e) => replies.answer(std::iter::repeat(Some(e))),
        }
    }
    let topics = replies.into_topics(
        req.topics.into_iter().map(|t| (t.name, t.topic_id)),
        |(name, id), partitions| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_topic_id(id)
                .with_partitions(partitions)
        },
        |index, code| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
    );
    OffsetCommitResponse::default().with_topics(topics)
}
