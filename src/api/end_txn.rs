//! EndTxn (key 26), v0-4: commit or abort the producer's transaction; answered once its
//! markers are in every partition it touched. v5 (KIP-890 part 2: the epoch bumped at every
//! end) is not served, so 4.x clients stay on transaction version 1. v4 only adds
//! TRANSACTION_ABORTABLE, which koord never answers here. Below v2 PRODUCER_FENCED is answered
//! as INVALID_PRODUCER_EPOCH.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use crate::broker::Broker;
use crate::txn::ProducerIdAndEpoch;

pub async fn handle(broker: &Broker, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let producer = ProducerIdAndEpoch {
        producer_id: req.producer_id.0,
        epoch: req.producer_epoch,
    };
    let result = broker
        .txns
        .end_txn(broker, &req.transactional_id, producer, req.committed)
        .await;
    let code = match result {
        Ok(()) => 0,
        Err(e) => super::txn_errors::code(&e, version < 2).code(),
    };
    EndTxnResponse::default().with_error_code(code)
}
