//! DeleteRecords (key 21), v0-2: moves partitions' log start offsets forward, as Kafka's
//! `ReplicaManager.deleteRecords` does on the leader.
//!
//! Per partition: offset -1 means the high watermark; an offset beyond the high watermark, or
//! below -1, is OFFSET_OUT_OF_RANGE; an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION
//! (DeleteRecords never creates topics); a topic whose `cleanup.policy` lacks `delete` (compacted
//! only) is POLICY_VIOLATION, checked first as Kafka's `Partition.deleteRecordsOnLeader` does. A
//! success answers the low watermark, the new log start
//! offset; an offset at or below the current start changes nothing and answers the current
//! start. Failures answer low watermark -1. `timeout_ms` is accepted and not waited on: koord is
//! the only replica, so the low watermark is reached as soon as the log start moves.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use crate::broker::Broker;
use crate::metadata::topic_config::LogSettings;
use crate::security::acl::{Operation, ResourceType};

/// Kafka's `DeleteRecordsRequest.HIGH_WATERMARK`: delete up to the high watermark.
const HIGH_WATERMARK: i64 = -1;

/// Kafka's `DeleteRecordsResponse.INVALID_LOW_WATERMARK`, answered with an error.
const INVALID_LOW_WATERMARK: i64 = -1;

fn delete(broker: &Broker, topic: &str, index: i32, offset: i64) -> Result<i64, ResponseError> {
    let topic = broker
        .topics
        .get(topic)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if crate::metadata::is_internal(&topic.name) {
        // Kafka's "Cannot delete records of internal topic".
        return Err(ResponseError::InvalidTopicException);
    }
    if !LogSettings::new(
        &broker.topics.configs(&topic.name),
        &broker.config.topic_defaults(),
    )
    .delete
    {
        return Err(ResponseError::PolicyViolation);
    }
    let partition = broker
        .logs
        .partition(&topic, index)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let mut log = partition.lock();
    let offset = if offset == HIGH_WATERMARK {
        log.log_end_offset()
    } else {
        offset
    };
    log.delete_records_before(offset)
        .map_err(|_| ResponseError::OffsetOutOfRange)
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            // As Kafka: DELETE on the topic, checked first (TOPIC_AUTHORIZATION_FAILED).
            let deletable = ctx.may(broker, Operation::Delete, ResourceType::Topic, &t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index);
                    let deleted = if deletable {
                        delete(broker, t.name.as_str(), p.partition_index, p.offset)
                    } else {
                        Err(ResponseError::TopicAuthorizationFailed)
                    };
                    match deleted {
                        Ok(low) => r.with_low_watermark(low),
                        Err(e) => r
                            .with_error_code(e.code())
                            .with_low_watermark(INVALID_LOW_WATERMARK),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use crate::log::batch::tests::simple;
    use crate::log::batch::validate_produce;
    use bytes::BytesMut;
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn request(topic: &str, parts: &[(i32, i64)]) -> DeleteRecordsRequest {
        DeleteRecordsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(i, o)| {
                            DeleteRecordsPartition::default()
                                .with_partition_index(*i)
                                .with_offset(*o)
                        })
                        .collect(),
                )])
    }

    fn answers(resp: &DeleteRecordsResponse) -> Vec<(i32, i16, i64)> {
        resp.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.error_code, p.low_watermark))
            .collect()
    }

    /// Broker with `t-0` holding offsets 0..10 in batches of 2.
    fn loaded() -> Broker {
        let b = broker();
        let p = b.logs.partition(&b.topics.get("t").unwrap(), 0).unwrap();
        for _ in 0..5 {
            let batch = simple(2);
            p.append(&validate_produce(&batch, 9).unwrap()).unwrap();
        }
        b
    }

    #[test]
    fn encodes_at_every_served_version() {
        for v in 0..=2 {
            let b = loaded();
            let resp = handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("t", &[(0, 3), (1, 0), (2, 0)]),
                v,
            );
            let unknown = ResponseError::UnknownTopicOrPartition.code();
            assert_eq!(
                answers(&resp),
                vec![(0, 0, 3), (1, 0, 0), (2, unknown, -1)],
                "v{v}"
            );
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }

    #[test]
    fn offsets_as_kafka_answers_them() {
        let b = loaded();
        let out = ResponseError::OffsetOutOfRange.code();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let one = |o: i64| {
            answers(&handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("t", &[(0, o)]),
                2,
            ))[0]
        };
        assert_eq!(one(11), (0, out, -1));
        assert_eq!(one(-2), (0, out, -1));
        assert_eq!(one(5), (0, 0, 5));
        assert_eq!(one(2), (0, 0, 5), "backwards answers the current start");
        assert_eq!(one(-1), (0, 0, 10), "-1 is the high watermark");
        assert_eq!(
            answers(&handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("nope", &[(0, 0)]),
                2
            )),
            vec![(0, unknown, -1)]
        );
        assert!(b.topics.get("nope").is_none(), "no auto-creation");
        let log = b.logs.partition(&b.topics.get("t").unwrap(), 0).unwrap();
        assert_eq!(log.lock().batch_count(), 0);
    }

    #[test]
    fn a_compacted_topic_is_policy_violation() {
        let b = loaded();
        let configs = [("cleanup.policy".to_owned(), "compact".to_owned())]
            .into_iter()
            .collect();
        b.topics.set_configs("t", configs);
        let policy = ResponseError::PolicyViolation.code();
        assert_eq!(
            answers(&handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("t", &[(0, 3)]),
                2
            )),
            vec![(0, policy, -1)]
        );
        let both = [("cleanup.policy".to_owned(), "compact,delete".to_owned())]
            .into_iter()
            .collect();
        b.topics.set_configs("t", both);
        assert_eq!(
            answers(&handle(
                &b,
                &crate::api::testing::ctx(&b),
                request("t", &[(0, 3)]),
                2
            )),
            vec![(0, 0, 3)]
        );
    }
}
