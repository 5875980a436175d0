//! DescribeProducers (key 61), v0: the producers each partition's log keeps state for (Kafka's
//! `KafkaApis.handleDescribeProducersRequest` and `UnifiedLog.activeProducers`): producer id,
//! epoch, last sequence, last timestamp, the coordinator epoch of its last marker (-1 before
//! one) and the first offset of its open transaction (-1 when none). An invalid topic name:
//! INVALID_TOPIC_EXCEPTION with Kafka's message; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION
//! with its default message; a partition the topic lacks: UNKNOWN_TOPIC_OR_PARTITION, no
//! message.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::str_bytes;
use crate::broker::Broker;

/// Kafka's default message of UNKNOWN_TOPIC_OR_PARTITION (`Errors.java`), which it sends for an
/// unknown topic here.
const UNKNOWN_TOPIC_MESSAGE: &str = "This server does not host this topic-partition.";

/// Why Kafka's `Topic.validate` refuses a name, in its words; `None` for a valid name.
fn invalid_topic(name: &str) -> Option<String> {
    let reason = if name.is_empty() {
        "the empty string is not allowed".to_string()
    } else if name == "." || name == ".." {
        format!("'{name}' is not allowed")
    } else if name.chars().count() > 249 {
        format!("the length of '{name}' is longer than the max allowed length 249")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        format!("'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
    } else {
        return None;
    };
    Some(format!("Topic name is invalid: {reason}"))
}

pub fn handle(
    broker: &Broker,
    ctx: &super::context::RequestContext,
    req: DescribeProducersRequest,
    _version: i16,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.as_str();
            // As Kafka: READ on the topic, before anything else is looked at.
            let readable = ctx.may(
                broker,
                crate::security::acl::Operation::Read,
                crate::security::acl::ResourceType::Topic,
                name,
            );
            let topic_error = match invalid_topic(name) {
                _ if !readable => Some((ResponseError::TopicAuthorizationFailed, None)),
                Some(message) => Some((ResponseError::InvalidTopicException, Some(message))),
                None if broker.topics.get(name).is_none() => Some((
                    ResponseError::UnknownTopicOrPartition,
                    Some(UNKNOWN_TOPIC_MESSAGE.to_string()),
                )),
                None => None,
            };
            let topic = broker.topics.get(name);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    if let Some((e, message)) = &topic_error {
                        return answer
                            .with_error_code(e.code())
                            .with_error_message(message.clone().map(str_bytes));
                    }
                    let Some(partition) = topic
                        .as_ref()
                        .and_then(|topic| broker.logs.partition(topic, index))
                    else {
                        return answer
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let producers = partition.lock().active_producers();
                    answer.with_active_producers(
                        producers
                            .into_iter()
                            .map(|p| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(p.producer.producer_id))
                                    .with_producer_epoch(i32::from(p.producer.epoch))
                                    .with_last_sequence(p.producer.last_sequence)
                                    .with_last_timestamp(p.producer.last_timestamp)
                                    .with_coordinator_epoch(p.producer.coordinator_epoch)
                                    .with_current_txn_start_offset(p.current_txn_start_offset)
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_topic_names_get_kafkas_messages() {
        assert_eq!(invalid_topic("ok.name_1-x"), None);
        assert_eq!(
            invalid_topic("bad name!").as_deref(),
            Some("Topic name is invalid: 'bad name!' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
        );
        assert_eq!(
            invalid_topic("").as_deref(),
            Some("Topic name is invalid: the empty string is not allowed")
        );
        assert_eq!(
            invalid_topic("..").as_deref(),
            Some("Topic name is invalid: '..' is not allowed")
        );
        assert!(invalid_topic(&"a".repeat(250)).is_some());
    }
}
