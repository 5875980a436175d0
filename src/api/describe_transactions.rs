//! DescribeTransactions (key 65), v0: the state of each transactional id this node coordinates
//! (Kafka's `TransactionCoordinator.handleDescribeTransactions`): its state name, timeout,
//! start time (-1 in Empty), producer id and epoch, and the partitions of the open transaction
//! by topic. An unknown id: TRANSACTIONAL_ID_NOT_FOUND; an empty one: INVALID_REQUEST; the other
//! fields then keep their defaults, as Kafka leaves them.

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};

use super::str_bytes;
use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    ctx: &super::context::RequestContext,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .iter()
        .map(|id| {
            let answer = TransactionState::default().with_transactional_id(id.clone());
            // As Kafka: DESCRIBE on each transactional id.
            if !ctx.may(
                broker,
                crate::security::acl::Operation::Describe,
                crate::security::acl::ResourceType::TransactionalId,
                id,
            ) {
                return answer.with_error_code(
                    kafka_protocol::ResponseError::TransactionalIdAuthorizationFailed.code(),
                );
            }
            match broker.txns.describe(id) {
                Ok(d) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for tp in d.partitions {
                        match topics.last_mut() {
                            Some(t) if t.topic.as_str() == tp.topic => {
                                t.partitions.push(tp.partition);
                            }
                            _ => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(str_bytes(tp.topic)))
                                    .with_partitions(vec![tp.partition]),
                            ),
                        }
                    }
                    answer
                        .with_transaction_state(str_bytes(d.state.name()))
                        .with_transaction_timeout_ms(d.timeout_ms)
                        .with_transaction_start_time_ms(d.start_ms)
                        .with_producer_id(ProducerId(d.producer_id))
                        .with_producer_epoch(d.producer_epoch)
                        .with_topics(topics)
                }
                Err(e) => answer.with_error_code(super::txn_errors::code(&e, false).code()),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
