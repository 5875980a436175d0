//! OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ended, as consumers ask after a
//! leader change or a reset (KIP-320), with the answers of Kafka's `LeaderEpochFileCache.
//! endOffsetFor` for a log with one epoch, 0, starting at the log start offset:
//! - epoch 0 (ours, the latest): end offset = log end offset, epoch 0;
//! - -1 (undefined): epoch -1, end offset -1, no error;
//! - above 0 (unknown to this node): epoch -1, end offset -1, no error;
//! - below -1: older than every epoch held, so the requested epoch and the log start offset.
//!
//! `current_leader_epoch` -1 means none; above 0 is UNKNOWN_LEADER_EPOCH, below FENCED_LEADER_EPOCH.
//! An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::ResponseError;

use super::check_leader_epoch;
use super::context::RequestContext;
use crate::broker::Broker;
use crate::log::Partition;
use crate::metadata::LEADER_EPOCH;
use crate::security::acl::{Operation, ResourceType};

/// `(leader epoch, end offset)` for a requested epoch.
fn end_offset_for(partition: &Partition, epoch: i32) -> (i32, i64) {
    let log = partition.lock();
    match epoch {
        LEADER_EPOCH => (LEADER_EPOCH, log.log_end_offset()),
        e if e < -1 => (e, log.log_start_offset()),
        _ => (-1, -1),
    }
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
    _version: i16,
) -> OffsetForLeaderEpochResponse {
    let replica = ctx.may_cluster(broker, Operation::ClusterAction);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = broker.topics.get(&t.topic);
            // As Kafka: CLUSTER_ACTION on the cluster (a follower's right), else DESCRIBE on the
            // topic (a consumer's, KIP-320), checked first (TOPIC_AUTHORIZATION_FAILED).
            let describable =
                replica || ctx.may(broker, Operation::Describe, ResourceType::Topic, &t.topic);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let base = EpochEndOffset::default().with_partition(p.partition);
                    let result = describable
                        .then_some(())
                        .ok_or(ResponseError::TopicAuthorizationFailed)
                        .and_then(|()| {
                            topic
                                .as_ref()
                                .and_then(|topic| broker.logs.partition(topic, p.partition))
                                .ok_or(ResponseError::UnknownTopicOrPartition)
                        })
                        .and_then(|partition| {
                            let current = p.current_leader_epoch;
                            check_leader_epoch((current != -1).then_some(current))?;
                            Ok(end_offset_for(&partition, p.leader_epoch))
                        });
                    match result {
                        Ok((epoch, end)) => base.with_leader_epoch(epoch).with_end_offset(end),
                        Err(e) => base.with_error_code(e.code()),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use crate::log::batch::tests::simple;
    use crate::log::batch::validate_produce;
    use bytes::BytesMut;
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use crate::broker::Broker;
    use crate::security::acl::CLUSTER_NAME;
    use crate::security::authorizer::Authorizer;

    fn request(topic: &'static str, parts: &[(i32, i32, i32)]) -> OffsetForLeaderEpochRequest {
        OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(topic)))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(p, current, epoch)| {
                            OffsetForLeaderPartition::default()
                                .with_partition(*p)
                                .with_current_leader_epoch(*current)
                                .with_leader_epoch(*epoch)
                        })
                        .collect(),
                )])
    }

    fn answers(resp: &OffsetForLeaderEpochResponse) -> Vec<(i16, i32, i64)> {
        resp.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
            .collect()
    }

    #[test]
    fn answers_and_encodes_at_every_served_version() {
        let b = broker();
        let topic = b.topics.get("t").unwrap();
        let records = simple(4);
        b.logs
            .partition(&topic, 0)
            .unwrap()
            .append(&validate_produce(&records, 9).unwrap())
            .unwrap();
        for v in 2..=4 {
            let resp = handle(
                &b,
                &crate::api::testing::ctx(&b),
                request(
                    "t",
                    &[
                        (0, -1, 0),
                        (0, 0, -1),
                        (0, -1, 3),
                        (0, -1, -4),
                        (1, 0, 0),
                        (0, 1, 0),
                        (0, -3, 0),
                        (2, -1, 0),
                    ],
                ),
                v,
            );
            assert_eq!(
                answers(&resp),
                vec![
                    (0, 0, 4),
                    (0, -1, -1),
                    (0, -1, -1),
                    (0, -4, 0),
                    (0, 0, 0),
                    (ResponseError::UnknownLeaderEpoch.code(), -1, -1),
                    (ResponseError::FencedLeaderEpoch.code(), -1, -1),
                    (ResponseError::UnknownTopicOrPartition.code(), -1, -1),
                ],
                "v{v}"
            );
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
        let resp = handle(
            &b,
            &crate::api::testing::ctx(&b),
            request("nope", &[(0, -1, 0)]),
            4,
        );
        assert_eq!(
            answers(&resp),
            vec![(ResponseError::UnknownTopicOrPartition.code(), -1, -1)]
        );
    }

    #[test]
    fn topic_describe_or_cluster_action_is_required() {
        use crate::api::testing::allow;
        use crate::security::acl::AuthorizerSettings;
        let mut b = broker();
        let errors = |b: &Broker| {
            let resp = handle(
                b,
                &crate::api::testing::ctx(b),
                request("t", &[(0, -1, 0)]),
                4,
            );
            resp.topics[0].partitions[0].error_code
        };
        // Only a DESCRIBE_CONFIGS on the topic and the cluster: neither is enough.
        b.authorizer = Authorizer::enabled(
            AuthorizerSettings::default(),
            vec![
                allow(ResourceType::Topic, "t", Operation::DescribeConfigs),
                allow(
                    ResourceType::Cluster,
                    CLUSTER_NAME,
                    Operation::DescribeConfigs,
                ),
            ],
        );
        assert_eq!(errors(&b), ResponseError::TopicAuthorizationFailed.code());
        for grant in [
            allow(ResourceType::Topic, "t", Operation::Describe),
            allow(
                ResourceType::Cluster,
                CLUSTER_NAME,
                Operation::ClusterAction,
            ),
        ] {
            b.authorizer = Authorizer::enabled(AuthorizerSettings::default(), vec![grant.clone()]);
            assert_eq!(errors(&b), 0, "{grant:?}");
        }
    }
}
