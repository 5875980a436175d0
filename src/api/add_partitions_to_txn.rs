//! AddPartitionsToTxn (key 24), v0-5: v0-3 are the client's form, one transaction per request;
//! v4+ the broker's (a partition leader's, KIP-890): a batch of transactions, each added or, when
//! `verify_only`, checked. v4+ need CLUSTER_ACTION on the cluster (else the top-level
//! CLUSTER_AUTHORIZATION_FAILED and no results, as Kafka's error response) and skip the topic
//! WRITE check; a verification answers each partition NONE if it is in the open transaction
//! and TRANSACTION_ABORTABLE if not (`TransactionCoordinator.handleVerifyPartitionsInTransaction`),
//! or the producer's refusal for them all. v5 only changes what a leader sends.
//!
//! Kafka's order (`KafkaApis.handleAddPartitionsToTxnRequest`): without WRITE on the
//! transactional id every partition fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then a
//! partition of a topic the principal may not WRITE fails with TOPIC_AUTHORIZATION_FAILED, one
//! of an unknown topic (or a partition the topic lacks) with UNKNOWN_TOPIC_OR_PARTITION, and if
//! any failed every other partition gets OPERATION_NOT_ATTEMPTED; otherwise every partition
//! gets the coordinator's answer. Below v2 PRODUCER_FENCED is answered as
//! INVALID_PRODUCER_EPOCH.

use std::collections::BTreeMap;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};
use crate::transactions::ShellError;
use crate::txn::{Member, ProducerIdAndEpoch, TxnError};
use crate::vocab::TopicPartition;

/// One transaction's partition results, grouped by topic in order.
fn topic_results(results: BTreeMap<(TopicName, i32), i16>) -> Vec<AddPartitionsToTxnTopicResult> {
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
    topics
}

type Key = (TopicName, i32);

/// The partitions of `topics` that exist, or, if any does not (or, with `check_write`, may not
/// be written), each partition's error (OPERATION_NOT_ATTEMPTED for the others).
fn known_partitions(
    broker: &Broker,
    ctx: &RequestContext,
    topics: &[AddPartitionsToTxnTopic],
    check_write: bool,
) -> Result<Vec<(Key, TopicPartition)>, BTreeMap<Key, i16>> {
    let mut partitions = Vec::new();
    // Partitions that fail: unauthorized, or of unknown topics.
    let mut unknown = BTreeMap::new();
    for t in topics {
        let writable =
            !check_write || ctx.may(broker, Operation::Write, ResourceType::Topic, &t.name);
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
    if unknown.is_empty() {
        return Ok(partitions);
    }
    for (key, _) in partitions {
        unknown
            .entry(key)
            .or_insert(ResponseError::OperationNotAttempted.code());
    }
    Err(unknown)
}

fn every_partition(topics: &[AddPartitionsToTxnTopic], error: ResponseError) -> BTreeMap<Key, i16> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| ((t.name.clone(), p), error.code()))
        })
        .collect()
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version >= 4 {
        return handle_batch(broker, ctx, req).await;
    }
    let topics = &req.v3_and_below_topics;
    let id = &req.v3_and_below_transactional_id;
    let results = if !ctx.may(broker, Operation::Write, ResourceType::TransactionalId, id) {
        every_partition(topics, ResponseError::TransactionalIdAuthorizationFailed)
    } else {
        let producer = ProducerIdAndEpoch {
            producer_id: req.v3_and_below_producer_id.0,
            epoch: req.v3_and_below_producer_epoch,
        };
        match known_partitions(broker, ctx, topics, true) {
            Err(failed) => failed,
            Ok(partitions) => add(broker, id, producer, partitions, version).await,
        }
    };
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topic_results(results))
}

/// The coordinator adds `partitions` to the transaction: its answer for each of them.
async fn add(
    broker: &Broker,
    id: &str,
    producer: ProducerIdAndEpoch,
    partitions: Vec<(Key, TopicPartition)>,
    version: i16,
) -> BTreeMap<Key, i16> {
    let tps: Vec<TopicPartition> = partitions.iter().map(|(_, tp)| tp.clone()).collect();
    let error = match broker.txns.add_partitions(id, producer, &tps).await {
        Ok(()) => 0,
        Err(e) => super::txn_errors::code(&e, version < 2).code(),
    };
    partitions
        .into_iter()
        .map(|(key, _)| (key, error))
        .collect()
}

/// Whether each of `partitions` is in the producer's open transaction.
fn verify(
    broker: &Broker,
    id: &str,
    producer: ProducerIdAndEpoch,
    partitions: Vec<(Key, TopicPartition)>,
) -> BTreeMap<Key, i16> {
    let mut out = BTreeMap::new();
    for (key, tp) in partitions {
        let code = match broker.txns.verify(id, producer, Member::Partition(&tp)) {
            Ok(()) => 0,
            Err(ShellError::Txn(TxnError::NotInTransaction)) => {
                ResponseError::TransactionAbortable.code()
            }
            Err(e) => super::txn_errors::code(&e, false).code(),
        };
        out.insert(key, code);
    }
    out
}

/// v4+: every transaction of the batch, in order.
async fn handle_batch(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if !ctx.may_cluster(broker, Operation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut results = Vec::with_capacity(req.transactions.len());
    for txn in &req.transactions {
        let producer = ProducerIdAndEpoch {
            producer_id: txn.producer_id.0,
            epoch: txn.producer_epoch,
        };
        let outcome = match known_partitions(broker, ctx, &txn.topics, false) {
            Err(failed) => failed,
            Ok(partitions) if txn.verify_only => {
                verify(broker, &txn.transactional_id, producer, partitions)
            }
            Ok(partitions) => add(broker, &txn.transactional_id, producer, partitions, 4).await,
        };
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(topic_results(outcome)),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::allow;
    use crate::api::testing::{broker, ctx};
    use crate::security::acl::{AuthorizerSettings, CLUSTER_NAME};
    use crate::security::authorizer::Authorizer;
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
    use kafka_protocol::messages::TransactionalId;
    use kafka_protocol::protocol::StrBytes;

    #[tokio::test]
    async fn the_brokers_form_needs_cluster_action() {
        let mut b = broker();
        let batch = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx")))
                .with_verify_only(true)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![0])]),
        ]);
        b.authorizer = Authorizer::enabled(
            AuthorizerSettings::default(),
            vec![
                allow(ResourceType::TransactionalId, "tx", Operation::Write),
                allow(ResourceType::Topic, "t", Operation::Write),
            ],
        );
        let r = handle(&b, &ctx(&b), batch.clone(), 4).await;
        assert_eq!(
            r.error_code,
            ResponseError::ClusterAuthorizationFailed.code()
        );
        assert!(r.results_by_transaction.is_empty());
        b.authorizer = Authorizer::enabled(
            AuthorizerSettings::default(),
            vec![allow(
                ResourceType::Cluster,
                CLUSTER_NAME,
                Operation::ClusterAction,
            )],
        );
        let r = handle(&b, &ctx(&b), batch, 5).await;
        assert_eq!(r.error_code, 0);
        let code = r.results_by_transaction[0].topic_results[0].results_by_partition[0]
            .partition_error_code;
        assert_eq!(
            code,
            ResponseError::InvalidProducerIdMapping.code(),
            "past authorization: an unknown transactional id"
        );
    }
}
