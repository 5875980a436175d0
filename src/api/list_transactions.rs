//! ListTransactions (key 66), v0-2: the transactional ids this node coordinates, filtered by
//! state names (unknown names are reported back and match nothing), producer ids, v1's
//! duration (transactions running longer than it; an id in Empty has no start time and counts
//! as running since -1, as in Kafka) and v2's transactional id pattern (KIP-1152: a regular
//! expression matching the whole id; empty or null: no filter; invalid:
//! INVALID_REGULAR_EXPRESSION). Kafka compiles the pattern with Java's `java.util.regex`,
//! koord with the `regex` crate: look-around and back-references, which the crate lacks, are
//! refused as invalid here.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::ResponseError;

use super::str_bytes;
use crate::broker::Broker;
use crate::txn::ListFilter;

/// The largest compiled pattern accepted; a bigger one is refused as invalid rather than
/// allowed to take the node's memory.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

pub fn handle(
    broker: &Broker,
    ctx: &super::context::RequestContext,
    req: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let pattern = match req.transactional_id_pattern.as_deref() {
        Some(p) if version >= 2 && !p.is_empty() => {
            match regex::RegexBuilder::new(&format!("^(?:{p})$"))
                .size_limit(PATTERN_SIZE_LIMIT)
                .build()
            {
                Ok(re) => Some(re),
                Err(_) => {
                    return ListTransactionsResponse::default()
                        .with_error_code(ResponseError::InvalidRegularExpression.code())
                }
            }
        }
        _ => None,
    };
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let producer_ids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let filter = ListFilter {
        states: &states,
        producer_ids: &producer_ids,
        min_duration_ms: if version >= 1 {
            req.duration_filter
        } else {
            -1
        },
        pattern: pattern.as_ref(),
    };
    match broker.txns.list(&filter) {
        Ok(listing) => ListTransactionsResponse::default()
            .with_unknown_state_filters(listing.unknown_states.into_iter().map(str_bytes).collect())
            .with_transaction_states(
                listing
                    .txns
                    .into_iter()
                    // As Kafka: only the ids the principal may DESCRIBE.
                    .filter(|t| {
                        ctx.may(
                            broker,
                            crate::security::acl::Operation::Describe,
                            crate::security::acl::ResourceType::TransactionalId,
                            &t.transactional_id,
                        )
                    })
                    .map(|t| {
                        TransactionState::default()
                            .with_transactional_id(TransactionalId(str_bytes(t.transactional_id)))
                            .with_producer_id(ProducerId(t.producer_id))
                            .with_transaction_state(str_bytes(t.state.name()))
                    })
                    .collect(),
            ),
        Err(e) => ListTransactionsResponse::default()
            .with_error_code(super::txn_errors::code(&e, false).code()),
    }
}
