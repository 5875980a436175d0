//! The durable record of one transactional id, as the transaction coordinator
//! (`crate::txn`, doc link only) keeps it and the store persists it: Kafka's
//! `TransactionMetadata` (its `__transaction_state` value), with the groups of AddOffsetsToTxn
//! named directly instead of through their `__consumer_offsets` partitions.

use std::collections::BTreeSet;

use super::{Timestamp, TopicPartition};

/// Kafka's `NO_PRODUCER_ID`.
pub const NO_PRODUCER_ID: i64 = -1;
/// Kafka's `NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// The states of a transactional id that are ever stored (Kafka's `TransactionState` without
/// the two transient ones: `PrepareEpochFence` is decided and left in one step here, and `Dead`
/// is a deleted record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction started since the producer was initialised.
    Empty,
    /// Partitions or offsets were added: a transaction is open.
    Ongoing,
    /// EndTxn(commit) is decided; the markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing producer decided an abort; markers being written.
    PrepareAbort,
    /// The last transaction committed; every marker is written.
    CompleteCommit,
    /// The last transaction aborted; every marker is written.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name for the state (DescribeTransactions, logs).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// The code the store writes.
    pub fn code(self) -> u8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
        }
    }

    pub fn from_code(code: u8) -> Option<TxnState> {
        Some(match code {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            _ => return None,
        })
    }

    /// A transaction's markers are being written: requests wait (CONCURRENT_TRANSACTIONS).
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// No transaction is open or ending.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// One transactional id's state. Times are wall-clock milliseconds since the Unix epoch (they
/// are stored, and a transaction's age must survive a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last rotation (an exhausted epoch), so that a retried
    /// InitProducerId from the old id is recognised (Kafka's `previousProducerId`).
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump by InitProducerId, so that a retried KIP-360 bump is
    /// answered with the same epoch (Kafka's `lastProducerEpoch`).
    pub last_producer_epoch: i16,
    /// Transaction version 2: the producer id an ending transaction hands over to once it
    /// completes, because its epoch is exhausted (Kafka's `nextProducerId`); otherwise
    /// [`NO_PRODUCER_ID`].
    pub next_producer_id: i64,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the open (or ending) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// The groups whose offsets the open (or ending) transaction commits (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// When the open transaction started (its first AddPartitions/AddOffsets); timeouts count
    /// from here.
    pub started: Timestamp,
    /// The last change; `transactional.id.expiration.ms` counts from here.
    pub updated: Timestamp,
}

/// An offset a group received in a transaction (TxnOffsetCommit), pending until the
/// transaction's marker: applied to the group's committed offsets when it commits, dropped when
/// it aborts (Kafka's `pendingTransactionalOffsets`). Stored, so that it survives a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffset {
    pub producer_id: i64,
    pub tp: TopicPartition,
    pub offset: super::OffsetAndMetadata,
    /// A plain OffsetCommit of the partition came after it: the commit marker does not apply
    /// it (Kafka keeps the later of the two commit records).
    pub superseded: bool,
}
