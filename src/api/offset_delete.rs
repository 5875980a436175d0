//! OffsetDelete (key 47), v0: removes a group's committed offsets for partitions it does not
//! consume. Group errors (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID) are top-level;
//! per partition, GROUP_SUBSCRIBED_TO_TOPIC for a topic the group subscribes to and
//! UNKNOWN_TOPIC_OR_PARTITION for one this node does not have, TOPIC_AUTHORIZATION_FAILED for
//! one the principal may not READ (GROUP_AUTHORIZATION_FAILED without DELETE on the group).
//! Gateway mode: the offsets of a group koord does not have are deleted upstream if upstream
//! has the group (offsets only, or from before koord), with upstream's answers.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::check_group_id;
use super::context::RequestContext;
use super::reply::PartitionReplies;
use crate::broker::Broker;
use crate::group::GroupError;
use crate::offsets::TopicPartition;
use crate::security::acl::{Operation, ResourceType};

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let group = match check_group_id(&req.group_id) {
        Ok(g) => g,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let mut replies = PartitionReplies::new();
    for topic in &req.topics {
        let exists = broker.topics.get(topic.name.as_str());
        // As Kafka: READ on each topic (DELETE on the group is checked before dispatch).
        let readable = ctx.may(broker, Operation::Read, ResourceType::Topic, &topic.name);
        let mut reply = replies.topic();
        for p in &topic.partitions {
            match &exists {
                _ if !readable => {
                    reply.fail(p.partition_index, GroupError::TopicAuthorizationFailed)
                }
                Some(t) if (0..t.partitions).contains(&p.partition_index) => reply.pass(
                    p.partition_index,
                    TopicPartition::new(topic.name.as_str(), p.partition_index),
                ),
                _ => reply.fail(p.partition_index, GroupError::UnknownTopicOrPartition),
            }
        }
    }
    let partitions = replies.take_items();
    match broker
        .backend
        .delete_offsets(broker.local(), group, partitions)
        .await
    {
        Ok(errors) => replies.answer(errors),
        Err(code) => return OffsetDeleteResponse::default().with_error_code(code),
    }
    let topics = replies.into_topics(
        req.topics.into_iter().map(|t| t.name),
        |name, partitions| {
            OffsetDeleteResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
        |index, code| {
            OffsetDeleteResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
    );
    OffsetDeleteResponse::default().with_topics(topics)
}
