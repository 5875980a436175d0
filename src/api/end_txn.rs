//! EndTxn (key 26), v0-5: commit or abort the producer's transaction; answered once its
//! markers are in every partition it touched. v5 is transaction version 2 (KIP-890 part 2):
//! the coordinator bumps the producer's epoch at every end and answers the producer id and
//! epoch to go on with ([`crate::txn::TxnCoordinator::end_txn`]); below v5 the epoch stays and
//! the answer's producer id and epoch are not sent. v4 only adds TRANSACTION_ABORTABLE, which
//! koord never answers here. Below v2 PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.
//! An error carries producer id -1 and epoch -1, as Kafka's.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use crate::broker::Broker;
use crate::txn::{EndTxn, ProducerIdAndEpoch};

pub async fn handle(broker: &Broker, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let end = EndTxn {
        transactional_id: &req.transactional_id,
        producer: ProducerIdAndEpoch {
            producer_id: req.producer_id.0,
            epoch: req.producer_epoch,
        },
        commit: req.committed,
        tv2: version >= 5,
    };
    match broker.txns.end_txn(broker, &end).await {
        Ok(p) => EndTxnResponse::default()
            .with_producer_id(p.producer_id.into())
            .with_producer_epoch(p.epoch),
        Err(e) => EndTxnResponse::default()
            .with_error_code(super::txn_errors::code(&e, version < 2).code())
            .with_producer_id((-1).into())
            .with_producer_epoch(-1),
    }
}
