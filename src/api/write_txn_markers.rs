//! WriteTxnMarkers (key 27), v1-2: a transaction coordinator, or an administrator ending a
//! hanging transaction (`kafka-transactions abort`, Admin `abortTransaction`), has the partition
//! leader write a commit or abort marker for a producer. koord's own coordinator writes its
//! markers directly; this API is the administrator's.
//!
//! As Kafka's `KafkaApis.handleWriteTxnMarkersRequest`: ALTER or CLUSTER_ACTION on the cluster,
//! else every partition CLUSTER_AUTHORIZATION_FAILED; an unknown topic or partition
//! UNKNOWN_TOPIC_OR_PARTITION; each marker is appended as a control batch with the producer
//! id, epoch and coordinator epoch it names, so a marker older than the producer's epoch is
//! INVALID_PRODUCER_EPOCH and one from an older coordinator epoch than the producer's last
//! marker TRANSACTION_COORDINATOR_FENCED (`ProducerAppendInfo.appendEndTxnMarker`). The answer
//! lists each producer id once, its markers' partitions merged. v2's transaction version of a
//! marker (KIP-1228) changes nothing in how it is written.

use std::collections::BTreeMap;

use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use crate::broker::Broker;
use crate::security::acl::Operation;

/// Writes one marker into one partition.
fn write(
    broker: &Broker,
    marker: &WritableTxnMarker,
    topic: &str,
    index: i32,
) -> Result<(), ResponseError> {
    let topic = broker
        .topics
        .get(topic)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let partition = broker
        .logs
        .partition(&topic, index)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    partition
        .append_marker(
            marker.producer_id.0,
            marker.producer_epoch,
            marker.transaction_result,
            marker.coordinator_epoch,
        )
        .map(|_| ())
        .map_err(|e| {
            tracing::info!(topic = %topic.name, partition = index, producer_id = marker.producer_id.0, "marker refused: {e}");
            e.code()
        })
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
    _version: i16,
) -> WriteTxnMarkersResponse {
    let allowed = ctx.may_cluster(broker, Operation::Alter)
        || ctx.may_cluster(broker, Operation::ClusterAction);
    // Producer id -> topic -> partition -> code, each producer in the order first named.
    let mut order: Vec<i64> = Vec::new();
    let mut results: BTreeMap<i64, BTreeMap<TopicName, BTreeMap<i32, i16>>> = BTreeMap::new();
    for marker in &req.markers {
        let pid = marker.producer_id.0;
        if !results.contains_key(&pid) {
            order.push(pid);
        }
        let by_topic = results.entry(pid).or_default();
        for t in &marker.topics {
            for &index in &t.partition_indexes {
                let outcome = if allowed {
                    write(broker, marker, t.name.as_str(), index)
                } else {
                    Err(ResponseError::ClusterAuthorizationFailed)
                };
                let code = outcome.err().map_or(0, |e| e.code());
                by_topic
                    .entry(t.name.clone())
                    .or_default()
                    .insert(index, code);
            }
        }
    }
    let markers = order
        .into_iter()
        .map(|pid| {
            let topics = results
                .remove(&pid)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, partitions)| {
                    WritableTxnMarkerTopicResult::default()
                        .with_name(name)
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(index, code)| {
                                    WritableTxnMarkerPartitionResult::default()
                                        .with_partition_index(index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(pid.into())
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarkerTopic;
    use kafka_protocol::protocol::StrBytes;

    fn marker(
        pid: i64,
        epoch: i16,
        coordinator_epoch: i32,
        partitions: Vec<i32>,
    ) -> WritableTxnMarker {
        WritableTxnMarker::default()
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_indexes(partitions)])
    }

    fn codes(resp: &WriteTxnMarkersResponse) -> Vec<(i64, i32, i16)> {
        resp.markers
            .iter()
            .flat_map(|m| {
                m.topics.iter().flat_map(move |t| {
                    t.partitions
                        .iter()
                        .map(move |p| (m.producer_id.0, p.partition_index, p.error_code))
                })
            })
            .collect()
    }

    #[test]
    fn writes_an_abort_marker_and_refuses_stale_epochs_and_unknown_partitions() {
        let b = broker();
        let ctx = crate::api::testing::ctx(&b);
        let req = WriteTxnMarkersRequest::default().with_markers(vec![
            marker(7, 3, 0, vec![0, 99]),
            marker(7, 2, 0, vec![1]),
            marker(8, 0, 0, vec![0]),
        ]);
        let resp = handle(&b, &ctx, req, 1);
        assert_eq!(
            codes(&resp),
            vec![
                (7, 0, 0),
                (7, 1, 0),
                (7, 99, ResponseError::UnknownTopicOrPartition.code()),
                (8, 0, 0),
            ],
            "producer 7 listed once, its two markers merged"
        );
        let topic = b.topics.get("t").unwrap();
        let log = b.logs.partition(&topic, 0).unwrap();
        assert_eq!(log.lock().log_end_offset(), 2, "two markers in partition 0");
        // Epoch 2 after epoch 3 at partition 0; coordinator epoch -1 after 0.
        let req = WriteTxnMarkersRequest::default()
            .with_markers(vec![marker(7, 2, 0, vec![0]), marker(8, 0, -1, vec![0])]);
        assert_eq!(
            codes(&handle(&b, &ctx, req, 1)),
            vec![
                (7, 0, ResponseError::InvalidProducerEpoch.code()),
                (8, 0, ResponseError::TransactionCoordinatorFenced.code()),
            ]
        );
        assert_eq!(log.lock().log_end_offset(), 2, "nothing written");
    }

    #[test]
    fn alter_or_cluster_action_on_the_cluster_is_required() {
        use crate::api::testing::allow;
        use crate::security::acl::{AuthorizerSettings, ResourceType, CLUSTER_NAME};
        use crate::security::authorizer::Authorizer;
        let mut b = broker();
        let code = |b: &Broker| {
            let req =
                WriteTxnMarkersRequest::default().with_markers(vec![marker(7, 0, 0, vec![0])]);
            codes(&handle(b, &crate::api::testing::ctx(b), req, 1))[0].2
        };
        // WRITE on the topic and DESCRIBE on the cluster are not enough.
        b.authorizer = Authorizer::enabled(
            AuthorizerSettings::default(),
            vec![
                allow(ResourceType::Topic, "t", Operation::Write),
                allow(ResourceType::Cluster, CLUSTER_NAME, Operation::Describe),
            ],
        );
        assert_eq!(code(&b), ResponseError::ClusterAuthorizationFailed.code());
        let topic = b.topics.get("t").unwrap();
        assert_eq!(
            b.logs.partition(&topic, 0).unwrap().lock().log_end_offset(),
            0,
            "nothing written"
        );
        for op in [Operation::Alter, Operation::ClusterAction] {
            b.authorizer = Authorizer::enabled(
                AuthorizerSettings::default(),
                vec![allow(ResourceType::Cluster, CLUSTER_NAME, op)],
            );
            assert_eq!(code(&b), 0, "{op:?}");
        }
    }
}
