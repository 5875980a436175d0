//! The error codes of the transactional APIs, from the transaction coordinator's refusals.

use kafka_protocol::ResponseError;

use crate::transactions::ShellError;
use crate::txn::TxnError;

/// The code a transactional API answers with. `fenced_is_epoch`: the request's version predates
/// PRODUCER_FENCED, which Kafka then answers as INVALID_PRODUCER_EPOCH.
pub(crate) fn code(e: &ShellError, fenced_is_epoch: bool) -> ResponseError {
    match e {
        ShellError::Txn(t) => match t {
            TxnError::InvalidRequest => ResponseError::InvalidRequest,
            TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
            TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
            TxnError::ProducerFenced if fenced_is_epoch => ResponseError::InvalidProducerEpoch,
            TxnError::ProducerFenced => ResponseError::ProducerFenced,
            TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            TxnError::InvalidTxnState | TxnError::NotInTransaction => {
                ResponseError::InvalidTxnState
            }
            TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
            // Kafka: "Producer ID block is full. Waiting for next block" (retriable).
            TxnError::ProducerIdsPending => ResponseError::CoordinatorLoadInProgress,
        },
        ShellError::Store(_) => ResponseError::NotCoordinator,
        ShellError::Loading => ResponseError::CoordinatorLoadInProgress,
    }
}
