//! InitProducerId (key 22), v0-5: producer ids for idempotent and transactional producers.
//!
//! Without a transactional id Kafka's `TransactionCoordinator.handleInitProducerId` "blindly"
//! hands out a fresh producer id with epoch 0, whatever producer id and epoch a v3+ request
//! carries (KIP-360's epoch bump without a new id is for transactional producers; an idempotent
//! producer bumps its epoch itself and asks for a new id only when the epoch is exhausted).
//! koord does the same, from [`crate::broker::ProducerIds`].
//!
//! With a transactional id the transaction coordinator answers ([`crate::txn`]): a new
//! transactional id, an epoch bump, KIP-360's expected producer id and epoch (v3+), an open
//! transaction of an older producer aborted (CONCURRENT_TRANSACTIONS, the producer retries).
//!
//! Checks, in Kafka's order (`KafkaApis.handleInitProducerIdRequest`, then the coordinator):
//! - v3+: a producer id of -1 with an epoch other than -1, or the reverse: INVALID_REQUEST;
//! - an empty transactional id: INVALID_REQUEST;
//! - a transaction timeout outside `1..=transaction.max.timeout.ms`: INVALID_TRANSACTION_TIMEOUT.
//!
//! Below v4 PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH. v5 only adds
//! TRANSACTION_ABORTABLE, never answered here. Errors carry producer id -1 and epoch -1.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use kafka_protocol::ResponseError;

use crate::broker::Broker;
use crate::txn::{InitProducer, ProducerIdAndEpoch};

fn error(e: ResponseError) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(e.code())
        .with_producer_id((-1).into())
        .with_producer_epoch(-1)
}

pub async fn handle(
    broker: &Broker,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    if version >= 3 && (req.producer_id.0 == -1) != (req.producer_epoch == -1) {
        return error(ResponseError::InvalidRequest);
    }
    let Some(id) = req.transactional_id.as_deref() else {
        // Kafka answers COORDINATOR_LOAD_IN_PROGRESS while its next id block is on its way.
        return match broker.producer_ids.allocate() {
            Some(producer_id) => InitProducerIdResponse::default()
                .with_producer_id(producer_id.into())
                .with_producer_epoch(0),
            None => error(ResponseError::CoordinatorLoadInProgress),
        };
    };
    let init = InitProducer {
        transactional_id: id.to_string(),
        timeout_ms: req.transaction_timeout_ms,
        expected: (req.producer_id.0 != -1).then_some(ProducerIdAndEpoch {
            producer_id: req.producer_id.0,
            epoch: req.producer_epoch,
        }),
    };
    match broker.txns.init_producer(broker, &init).await {
        Ok(p) => InitProducerIdResponse::default()
            .with_producer_id(p.producer_id.into())
            .with_producer_epoch(p.epoch),
        Err(e) => error(super::txn_errors::code(&e, version < 4)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use bytes::BytesMut;
    use kafka_protocol::messages::TransactionalId;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn idempotent() -> InitProducerIdRequest {
        InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
    }

    fn transactional(id: &'static str, timeout: i32) -> InitProducerIdRequest {
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(id))))
            .with_transaction_timeout_ms(timeout)
    }

    #[tokio::test]
    async fn fresh_ids_and_encoding_at_every_served_version() {
        let b = broker();
        let mut last = -1;
        for v in 0..=5 {
            let resp = handle(&b, idempotent(), v).await;
            assert_eq!(resp.error_code, 0);
            assert_eq!(resp.producer_epoch, 0);
            assert!(resp.producer_id.0 > last, "v{v}: ids are fresh");
            last = resp.producer_id.0;
            for r in [resp, handle(&b, transactional("tx", 60_000), v).await] {
                let mut buf = BytesMut::new();
                r.encode(&mut buf, v)
                    .unwrap_or_else(|e| panic!("v{v}: {e}"));
            }
        }
    }

    #[tokio::test]
    async fn an_existing_id_and_epoch_still_get_a_fresh_id() {
        let b = broker();
        let first = handle(&b, idempotent(), 4).await;
        let again = handle(
            &b,
            idempotent()
                .with_producer_id(first.producer_id)
                .with_producer_epoch(first.producer_epoch),
            4,
        )
        .await;
        assert_eq!(again.error_code, 0);
        assert_ne!(again.producer_id, first.producer_id);
        assert_eq!(again.producer_epoch, 0);
    }

    #[tokio::test]
    async fn refusals() {
        let b = broker();
        let code = |r: InitProducerIdResponse| {
            assert_eq!((r.producer_id.0, r.producer_epoch), (-1, -1));
            r.error_code
        };
        assert_eq!(
            code(handle(&b, idempotent().with_producer_id(5.into()), 3).await),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(handle(&b, idempotent().with_producer_epoch(2), 3).await),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(handle(&b, transactional("", 1000), 1).await),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(handle(&b, transactional("tx", 0), 1).await),
            ResponseError::InvalidTransactionTimeout.code()
        );
        assert_eq!(
            code(handle(&b, transactional("tx", 900_001), 1).await),
            ResponseError::InvalidTransactionTimeout.code()
        );
        let first = handle(&b, transactional("tx", 60_000), 5).await;
        assert_eq!((first.error_code, first.producer_epoch), (0, 0));
        let again = handle(&b, transactional("tx", 60_000), 5).await;
        assert_eq!(
            (again.producer_id, again.producer_epoch),
            (first.producer_id, 1),
            "the transactional id's epoch is bumped"
        );
        // KIP-360 with the old epoch, which is neither current nor the last one: fenced; below
        // v4 that reads INVALID_PRODUCER_EPOCH.
        let stale = transactional("tx", 60_000)
            .with_producer_id(first.producer_id)
            .with_producer_epoch(0);
        let third = handle(&b, transactional("tx", 60_000), 5).await;
        assert_eq!(third.producer_epoch, 2);
        assert_eq!(
            code(handle(&b, stale.clone(), 4).await),
            ResponseError::ProducerFenced.code()
        );
        assert_eq!(
            code(handle(&b, stale, 3).await),
            ResponseError::InvalidProducerEpoch.code()
        );
    }
}
