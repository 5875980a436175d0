//! OffsetDelete (key 47), v0: removes a group's committed offsets for partitions it does not
//! consume. Group errors (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID) are top-level;
//! per partition, GROUP_SUBSCRIBED_TO_TOPIC for a topic the group subscribes to and
//! UNKNOWN_TOPIC_OR_PARTITION for one this node does not have, TOPIC_AUTHORIZATION_FAILED for
//! one the principal may not READ (GROUP_AUTHORIZATION_FAILED without DELETE on the group).
//! Gateway mode: the offsets of a group koord does not have are deleted upstream if upstream
//! has the group (offsets only, or from before koord), with upstream's answers.

use std::collections::HashMap;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::check_group_id;
use super::reply::PartitionReplies;
use super::table::RequestContext;
use crate::broker::Broker;
use crate::group::{GroupError, GroupId};
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
    // Gateway mode: kept in case koord does not have the group and upstream is asked.
    let kept = broker.upstream.is_some().then(|| partitions.clone());
    match (
        broker
            .coordinator
            .delete_offsets(group.clone(), partitions)
            .await,
        kept,
    ) {
        (Err(GroupError::GroupIdNotFound), Some(passed)) => {
            match upstream_only(broker, &group, &passed).await {
                Ok(errors) => replies.answer(errors),
                Err(code) => return OffsetDeleteResponse::default().with_error_code(code),
            }
        }
        (Err(e), _) => return OffsetDeleteResponse::default().with_error_code(e.code()),
        (Ok(results), _) => replies.answer(results.into_iter().map(|(_, e)| e)),
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

/// Gateway mode, a group koord does not have: the upstream's (offsets only, or from before
/// koord), its offsets deleted there as Kafka deletes them. Each passed partition's error as
/// upstream answered it (a code koord has no name for as UNKNOWN_SERVER_ERROR), or the group's
/// code: upstream's (GROUP_ID_NOT_FOUND when it has none either), COORDINATOR_LOAD_IN_PROGRESS
/// when it could not serve in time (clients retry).
async fn upstream_only(
    broker: &Broker,
    group: &GroupId,
    partitions: &[TopicPartition],
) -> Result<Vec<Option<GroupError>>, i16> {
    let Some(up) = &broker.upstream else {
        return Err(GroupError::GroupIdNotFound.code());
    };
    // Cluster mode: only while the group's shard is still this node's.
    broker.fence(group).await.map_err(GroupError::code)?;
    let answered = up
        .offset_delete(group.as_str(), partitions)
        .await
        .map_err(|e| e.answer(group.as_str(), "OffsetDelete"))?;
    let code_of: HashMap<&TopicPartition, i16> = answered.iter().map(|(tp, c)| (tp, *c)).collect();
    Ok(partitions
        .iter()
        .map(|tp| match code_of.get(tp).copied().unwrap_or(0) {
            0 => None,
            c => Some(GroupError::from_code(c).unwrap_or(GroupError::UnknownServerError)),
        })
        .collect())
}
