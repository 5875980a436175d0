//! InitProducerId (key 22), v0-5: producer ids for idempotent producers.
//!
//! Without a transactional id Kafka's `TransactionCoordinator.handleInitProducerId` "blindly"
//! hands out a fresh producer id with epoch 0, whatever producer id and epoch a v3+ request
//! carries (KIP-360's epoch bump without a new id is for transactional producers; an idempotent
//! producer bumps its epoch itself and asks for a new id only when the epoch is exhausted).
//! koord does the same, from [`crate::broker::ProducerIds`].
//!
//! Checks, in Kafka's order (`KafkaApis.handleInitProducerIdRequest`, then the coordinator):
//! - v3+: a producer id of -1 with an epoch other than -1, or the reverse: INVALID_REQUEST;
//! - an empty transactional id: INVALID_REQUEST;
//! - a transaction timeout outside `1..=900000` ms (`transaction.max.timeout.ms`):
//!   INVALID_TRANSACTION_TIMEOUT;
//! - any other transactional id: NOT_COORDINATOR. koord hosts no transaction coordinator, and a
//!   Kafka broker answers NOT_COORDINATOR for a transactional id whose coordinator it does not
//!   host; a client then looks the coordinator up again, which FindCoordinator answers with
//!   COORDINATOR_NOT_AVAILABLE.
//!
//! Errors carry producer id -1 and epoch -1.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use kafka_protocol::ResponseError;

use crate::broker::Broker;

/// Kafka's default `transaction.max.timeout.ms`.
const TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;

fn error(e: ResponseError) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(e.code())
        .with_producer_id((-1).into())
        .with_producer_epoch(-1)
}

pub fn handle(broker: &Broker, req: InitProducerIdRequest, version: i16) -> InitProducerIdResponse {
    if version >= 3 && (req.producer_id.0 == -1) != (req.producer_epoch == -1) {
        return error(ResponseError::InvalidRequest);
    }
    match req.transactional_id.as_deref() {
        None => InitProducerIdResponse::default()
            .with_producer_id(broker.producer_ids.allocate().into())
            .with_producer_epoch(0),
        Some(id) if id.is_empty() => error(ResponseError::InvalidRequest),
        Some(_) if !(1..=TRANSACTION_MAX_TIMEOUT_MS).contains(&req.transaction_timeout_ms) => {
            error(ResponseError::InvalidTransactionTimeout)
        }
        Some(_) => error(ResponseError::NotCoordinator),
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

    #[test]
    fn fresh_ids_and_encoding_at_every_served_version() {
        let b = broker();
        let mut last = -1;
        for v in 0..=5 {
            let resp = handle(&b, idempotent(), v);
            assert_eq!(resp.error_code, 0);
            assert_eq!(resp.producer_epoch, 0);
            assert!(resp.producer_id.0 > last, "v{v}: ids are fresh");
            last = resp.producer_id.0;
            for r in [resp, handle(&b, transactional("tx", 60_000), v)] {
                let mut buf = BytesMut::new();
                r.encode(&mut buf, v)
                    .unwrap_or_else(|e| panic!("v{v}: {e}"));
            }
        }
    }

    #[test]
    fn an_existing_id_and_epoch_still_get_a_fresh_id() {
        let b = broker();
        let first = handle(&b, idempotent(), 4);
        let again = handle(
            &b,
            idempotent()
                .with_producer_id(first.producer_id)
                .with_producer_epoch(first.producer_epoch),
            4,
        );
        assert_eq!(again.error_code, 0);
        assert_ne!(again.producer_id, first.producer_id);
        assert_eq!(again.producer_epoch, 0);
    }

    #[test]
    fn refusals() {
        let b = broker();
        let code = |r: InitProducerIdResponse| {
            assert_eq!((r.producer_id.0, r.producer_epoch), (-1, -1));
            r.error_code
        };
        assert_eq!(
            code(handle(&b, idempotent().with_producer_id(5.into()), 3)),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(handle(&b, idempotent().with_producer_epoch(2), 3)),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(handle(&b, transactional("", 1000), 1)),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(handle(&b, transactional("tx", 0), 1)),
            ResponseError::InvalidTransactionTimeout.code()
        );
        assert_eq!(
            code(handle(&b, transactional("tx", 900_001), 1)),
            ResponseError::InvalidTransactionTimeout.code()
        );
        assert_eq!(
            code(handle(&b, transactional("tx", 60_000), 5)),
            ResponseError::NotCoordinator.code()
        );
    }
}
