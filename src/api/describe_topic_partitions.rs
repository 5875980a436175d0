//! DescribeTopicPartitions (key 75), v0 (KIP-966): topics and their partitions a page at a time,
//! as Kafka 4.x's Admin `describeTopics` (and so `kafka-topics --describe`) asks for them.
//!
//! As Kafka's `DescribeTopicPartitionsRequestHandler` and `KRaftMetadataCache.describeTopicResponse`:
//! - no topics named: every topic the principal may DESCRIBE; named: each once, and those it
//!   may not DESCRIBE come last as TOPIC_AUTHORIZATION_FAILED; either way only names at or after
//!   the cursor's, in name order;
//! - a cursor whose topic is not among the named ones, or whose partition is negative:
//!   INVALID_REQUEST for every named topic;
//! - at most `response_partition_limit` partitions (within 1..=2000, Kafka's
//!   `max.request.partition.size.limit`) are answered; where the page ends, `next_cursor` names
//!   the next topic and partition;
//! - a named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION if
//!   its name is not a legal one), topic id zero;
//! - each partition: this node as leader, only replica and ISR, leader epoch 0, empty ELR lists;
//! - every answered topic carries its authorized operations.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use crate::broker::Broker;
use crate::metadata::{is_internal, validate_topic_name, LEADER_EPOCH};
use crate::security::acl::{Operation, ResourceType};

/// Kafka's `max.request.partition.size.limit` default: the most partitions one answer holds.
const MAX_PARTITIONS: i32 = 2000;

fn topic_name(name: &str) -> TopicName {
    TopicName(super::str_bytes(name.to_owned()))
}

/// A topic answered with `error` alone; Kafka tells internal names only for unknown topics.
fn failed(name: &str, error: ResponseError) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(topic_name(name)))
        .with_is_internal(error != ResponseError::TopicAuthorizationFailed && is_internal(name))
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
    _version: i16,
) -> DescribeTopicPartitionsResponse {
    let all = req.topics.is_empty();
    let from = req
        .cursor
        .as_ref()
        .map(|c| c.topic_name.as_str().to_owned())
        .unwrap_or_default();
    let mut names: Vec<String> = if all {
        broker.topics.all().iter().map(|t| t.name.clone()).collect()
    } else {
        req.topics
            .iter()
            .map(|t| t.name.as_str().to_owned())
            .collect()
    };
    names.retain(|n| *n >= from);
    names.sort();
    names.dedup();
    let bad_cursor = req
        .cursor
        .as_ref()
        .is_some_and(|c| c.partition_index < 0 || (!all && names.binary_search(&from).is_err()));
    if bad_cursor {
        let topics = req
            .topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_name(Some(t.name.clone()))
            })
            .collect();
        return DescribeTopicPartitionsResponse::default().with_topics(topics);
    }
    let (authorized, denied): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|n| ctx.may(broker, Operation::Describe, ResourceType::Topic, n));
    let node = BrokerId(broker.node_id());
    let limit = req.response_partition_limit.clamp(1, MAX_PARTITIONS);
    let mut remaining = limit;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in authorized {
        if remaining == 0 {
            next_cursor = Some(Cursor::default().with_topic_name(topic_name(&name)));
            break;
        }
        let Some(topic) = broker.topics.get(&name) else {
            if !all {
                let error = if validate_topic_name(&name).is_ok() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::InvalidTopicException
                };
                topics.push(failed(&name, error));
            }
            continue;
        };
        let start = match &req.cursor {
            Some(c) if c.topic_name.as_str() == name => c.partition_index,
            _ => 0,
        };
        let end = topic.partitions.min(start.saturating_add(remaining));
        let partitions: Vec<_> = (start..end)
            .map(|p| {
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(node)
                    .with_leader_epoch(LEADER_EPOCH)
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node])
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()))
            })
            .collect();
        remaining -= i32::try_from(partitions.len()).unwrap_or(remaining);
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_topic_id(topic.id)
                .with_is_internal(is_internal(&name))
                .with_partitions(partitions),
        );
        if end < topic.partitions {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(end),
            );
            break;
        }
    }
    for t in &mut topics {
        let name = t
            .name
            .as_ref()
            .map(|n| n.as_str().to_owned())
            .unwrap_or_default();
        t.topic_authorized_operations = ctx.operations(broker, ResourceType::Topic, &name);
    }
    if !all {
        topics.extend(
            denied
                .iter()
                .map(|n| failed(n, ResponseError::TopicAuthorizationFailed)),
        );
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}
