//! AddPartitionsToTxn (key 24), v0-3: the client's form, one transaction per request. v4+ (a
//! batch of transactions, and verify-only) is broker-to-broker in Kafka and not served.
//!
//! Kafka's order (`KafkaApis.handleAddPartitionsToTxnRequest`): without WRITE on the
//! transactional id every partition fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then a
//! partition of a topic the principal may not WRITE fails with TOPIC_AUTHORIZATION_FAILED, one
//! of an unknown topic (or a partition the topic lacks) with UNKNOWN_TOPIC_OR_PARTITION, and if
//! any failed every other partition gets OPERATION_NOT_ATTEMPTED; otherwise every partition
//! gets the coordinator's answer. Below v2 PRODUCER_FENCED is answered as
//! INVALID_PRODUCER_EPOCH.

use std::collections::BTreeMap;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};
use crate::txn::ProducerIdAndEpoch;
use crate::vocab::TopicPartition;

fn response(results: BTreeMap<(TopicName, i32), i16>) -> AddPartitionsToTxnResponse {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((name, index), error) in results {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(index)
            .with_partition_error_code(error);
        match topics.last_mut() {
            Some(t) if t.name == name => t.results_by_partition.push(result),
            _ => topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(name)
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let every_partition = |error: ResponseError| {
        req.v3_and_below_topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| ((t.name.clone(), p), error.code()))
            })
            .collect()
    };
    let id = &req.v3_and_below_transactional_id;
    if !ctx.may(broker, Operation::Write, ResourceType::TransactionalId, id) {
        return response(every_partition(
            ResponseError::TransactionalIdAuthorizationFailed,
        ));
    }
    let mut partitions = Vec::new();
    // Partitions that fail: unauthorized, or of unknown topics.
    let mut unknown = BTreeMap::new();
    for t in &req.v3_and_below_topics {
        let writable = ctx.may(broker, Operation::Write, ResourceType::Topic, &t.name);
        let topic = broker.topics.get(&t.name);
        for &p in &t.partitions {
            let key = (t.name.clone(), p);
            match &topic {
                _ if !writable => {
                    unknown.insert(key, ResponseError::TopicAuthorizationFailed.code());
                }
                Some(topic) if (0..topic.partitions).contains(&p) => {
                    partitions.push((key, TopicPartition::new(t.name.as_str(), p)));
                }
                _ => {
                    unknown.insert(key, ResponseError::UnknownTopicOrPartition.code());
                }
            }
        }
    }
    if !unknown.is_empty() {
        for (key, _) in partitions {
            unknown
                .entry(key)
                .or_insert(ResponseError::OperationNotAttempted.code());
        }
        return response(unknown);
    }
    let producer = ProducerIdAndEpoch {
        producer_id: req.v3_and_below_producer_id.0,
        epoch: req.v3_and_below_producer_epoch,
    };
    let tps: Vec<TopicPartition> = partitions.iter().map(|(_, tp)| tp.clone()).collect();
    let result = broker
        .txns
        .add_partitions(&req.v3_and_below_transactional_id, producer, &tps)
        .await;
    let error = match result {
        Ok(()) => 0,
        Err(e) => super::txn_errors::code(&e, version < 2).code(),
    };
    response(
        partitions
            .into_iter()
            .map(|(key, _)| (key, error))
            .collect(),
    )
}
