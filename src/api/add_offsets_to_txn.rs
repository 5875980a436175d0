//! AddOffsetsToTxn (key 25), v0-4: a group's offsets join the producer's transaction, so that
//! its TxnOffsetCommits are allowed. v4 only adds TRANSACTION_ABORTABLE, which koord never
//! answers here. Below v2 PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::broker::Broker;
use crate::txn::ProducerIdAndEpoch;

pub async fn handle(
    broker: &Broker,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let producer = ProducerIdAndEpoch {
        producer_id: req.producer_id.0,
        epoch: req.producer_epoch,
    };
    let result = broker
        .txns
        .add_offsets(&req.transactional_id, producer, &req.group_id)
        .await;
    let code = match result {
        Ok(()) => 0,
        Err(e) => super::txn_errors::code(&e, version < 2).code(),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}
