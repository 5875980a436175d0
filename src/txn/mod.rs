//! The transaction coordinator, PURE: no tokio, no clock reads, no I/O. Every input takes
//! `now` (wall-clock milliseconds: transaction ages are stored) and returns what the shell must
//! do: a record to persist before it replies, and for a transaction that ends, the markers to
//! write into partition logs and groups before [`TxnCoordinator::complete`] finishes it.
//!
//! Kafka's rules (`TransactionCoordinator`, `TransactionMetadata`), transaction versions 1 (the
//! client adds every partition with AddPartitionsToTxn; EndTxn does not bump the epoch) and 2
//! (KIP-890 part 2: Produce v12+ and TxnOffsetCommit v5 add what they write through the same
//! AddPartitions/AddOffsets transitions; EndTxn v5 bumps the epoch, [`TxnCoordinator::end_txn`]):
//! - InitProducerId with a transactional id: a new id gets a fresh producer id at epoch 0; a
//!   known one in Empty/CompleteCommit/CompleteAbort gets its epoch bumped (a new producer id
//!   once the epoch is exhausted); Ongoing: the open transaction is aborted with a bumped epoch
//!   (Kafka's PrepareEpochFence) and the caller gets CONCURRENT_TRANSACTIONS, to retry once the
//!   abort completed; PrepareCommit/PrepareAbort: CONCURRENT_TRANSACTIONS. With a producer id
//!   and epoch (KIP-360): the current id (or an epoch-exhausted previous id) is required, else
//!   PRODUCER_FENCED; the current epoch is bumped, a retry of the last bump gets the same epoch
//!   again, any other epoch is PRODUCER_FENCED.
//! - AddPartitionsToTxn / AddOffsetsToTxn: unknown id or another producer id:
//!   INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED; while a transaction ends:
//!   CONCURRENT_TRANSACTIONS; else the transaction is Ongoing with them (started now if it was
//!   not open).
//! - EndTxn: the same id and epoch checks; Ongoing goes to PrepareCommit/PrepareAbort (the
//!   markers follow); a retry of a completed end is answered NONE; the other end of a completed
//!   or ending transaction, or an end in Empty, is INVALID_TXN_STATE; an end already being
//!   written is CONCURRENT_TRANSACTIONS. At v5 the epoch goes up by one at every end (the
//!   markers carry it), a retry is told by the epoch before the bump, an abort with nothing
//!   open ends an empty transaction, and an exhausted epoch hands over to a new producer id
//!   when the transaction completes.
//! - Timeouts: an Ongoing transaction older than its timeout is aborted by the coordinator, with
//!   the epoch bumped so that the producer is fenced ([`TxnCoordinator::abort_timed_out`]).
//! - `transactional.id.expiration.ms`: an idle id not updated for that long is forgotten
//!   ([`TxnCoordinator::expire_ids`]).
//! - Load: an id found in PrepareCommit/PrepareAbort has its markers written again and is
//!   completed; an Ongoing one is left to time out, as Kafka does.
//! - Admin (read-only): [`TxnCoordinator::describe`] (DescribeTransactions) and
//!   [`TxnCoordinator::list`] (ListTransactions), with Kafka's `handleDescribeTransactions` and
//!   `listTransactionStates` rules: an id in Empty has no start time (-1), which a duration
//!   filter counts as running forever; unknown state names are reported back, and a filter of
//!   only unknown names matches nothing.
//!
//! A transition is applied at once; the shell persists its record before it replies, and every
//! reply goes through the same ordered store queue, so no answer depends on a state that is not
//! durable yet. A record the store refuses is taken back ([`TxnCoordinator::revert`]).

#[cfg(test)]
mod tests;

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};

use crate::vocab::txn::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::vocab::{Timestamp, TopicPartition, TxnRecord, TxnState};

/// Kafka's `transaction.max.timeout.ms` default.
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;

/// An epoch at which a producer id cannot be bumped any further (Kafka's
/// `TransactionMetadata.isEpochExhausted`: `Short.MaxValue - 1`).
fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Why a request is refused; each maps to one Kafka error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("invalid request")]
    InvalidRequest,
    #[error("transaction timeout outside 1..=transaction.max.timeout.ms")]
    InvalidTransactionTimeout,
    #[error("a transaction of this id is being completed")]
    ConcurrentTransactions,
    #[error("a newer producer epoch exists")]
    ProducerFenced,
    #[error("the producer id does not belong to this transactional id")]
    InvalidProducerIdMapping,
    #[error("the request does not fit the transaction's state")]
    InvalidTxnState,
    #[error("the partition was not added to the transaction")]
    NotInTransaction,
    #[error("no such transactional id")]
    TransactionalIdNotFound,
    /// No producer id can be handed out until the next block is stored.
    #[error("the next producer id block is not ready")]
    ProducerIdsPending,
}

/// The producer id and epoch a request claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

/// InitProducerId for a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducer {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// KIP-360: the producer's current id and epoch (v3+; `None` when both are -1).
    pub expected: Option<ProducerIdAndEpoch>,
}

/// What InitProducerId leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Init {
    /// Persist `record`, then answer with its producer id and epoch.
    Ready(TxnRecord),
    /// The open transaction is aborted with a bumped epoch: persist `record`, write `markers`,
    /// complete, then answer CONCURRENT_TRANSACTIONS (the producer retries).
    Fenced { record: TxnRecord, markers: Markers },
}

/// EndTxn from the producer.
#[derive(Debug, Clone, Copy)]
pub struct EndTxn<'a> {
    pub transactional_id: &'a str,
    pub producer: ProducerIdAndEpoch,
    pub commit: bool,
    /// EndTxn v5+: transaction version 2, the epoch bumped at every end.
    pub tv2: bool,
}

/// What EndTxn leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// A retry of an end that already completed: answer NONE with this producer id and epoch.
    AlreadyDone(ProducerIdAndEpoch),
    /// Persist the record (PrepareCommit/PrepareAbort), write the markers, complete, answer.
    Prepared(Box<Ending>),
}

/// A transaction decided to end: the record to persist, then the markers to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub record: TxnRecord,
    pub markers: Markers,
    /// The producer id and epoch the answer carries (v5+): the producer's from now on.
    pub answer: ProducerIdAndEpoch,
}

/// The end of one transaction, to write into every partition and group it touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Markers {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub partitions: Vec<TopicPartition>,
    pub groups: Vec<String>,
}

/// What DescribeTransactions tells of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub state: TxnState,
    pub timeout_ms: i32,
    /// When the open (or last completed) transaction started, in ms since the epoch; -1 in
    /// Empty (nothing started since InitProducerId).
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The partitions of the open or ending transaction, in order.
    pub partitions: Vec<TopicPartition>,
}

/// ListTransactions' filters; each empty (or negative, or `None`) filter lets everything by.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFilter<'a> {
    /// State names as Kafka spells them (`Ongoing`, `CompleteCommit`, ...).
    pub states: &'a [String],
    pub producer_ids: &'a [i64],
    /// v1: only transactions running for longer than this; negative: no filter.
    pub min_duration_ms: i64,
    /// v2: only ids this matches (the caller anchors it: Kafka matches the whole id).
    pub pattern: Option<&'a regex::Regex>,
}

/// One transactional id of a ListTransactions answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// What ListTransactions answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// The state filters Kafka does not know, once each, in request order.
    pub unknown_states: Vec<String>,
    /// The matching ids, sorted by transactional id.
    pub txns: Vec<Listed>,
}

/// Kafka's transaction state names that koord never holds (a transient fence, an id being
/// expired): known to a state filter, matching nothing.
const TRANSIENT_STATE_NAMES: [&str; 2] = ["PrepareEpochFence", "Dead"];

const STATES: [TxnState; 6] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
];

/// The start time DescribeTransactions reports: -1 in Empty.
fn start_ms(txn: &TxnRecord) -> i64 {
    if txn.state == TxnState::Empty {
        -1
    } else {
        i64::try_from(txn.started.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A change to persist: the id's record, or its deletion (an expired id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put(TxnRecord),
    Delete(String),
}

/// Every transactional id this node coordinates.
#[derive(Debug, Default)]
pub struct TxnCoordinator {
    txns: HashMap<String, TxnRecord>,
    max_timeout_ms: i32,
}

impl TxnCoordinator {
    /// An empty coordinator with `transaction.max.timeout.ms`.
    pub fn new(max_timeout_ms: i32) -> TxnCoordinator {
        TxnCoordinator {
            txns: HashMap::new(),
            max_timeout_ms,
        }
    }

    /// Takes the stored records over; returns the markers of every transaction found ending
    /// (PrepareCommit/PrepareAbort), which the shell writes before it completes them.
    pub fn load(&mut self, records: Vec<TxnRecord>) -> Vec<Markers> {
        let mut pending = Vec::new();
        for r in records {
            if r.state.is_preparing() {
                pending.push(markers_of(&r));
            }
            self.txns.insert(r.transactional_id.clone(), r);
        }
        pending
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnRecord> {
        self.txns.get(transactional_id)
    }

    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// DescribeTransactions of one id.
    ///
    /// # Errors
    /// INVALID_REQUEST for an empty id, TRANSACTIONAL_ID_NOT_FOUND for an unknown one.
    pub fn describe(&self, transactional_id: &str) -> Result<Description, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let txn = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        Ok(Description {
            state: txn.state,
            timeout_ms: txn.timeout_ms,
            start_ms: start_ms(txn),
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            partitions: txn.partitions.iter().cloned().collect(),
        })
    }

    /// ListTransactions: the ids that pass every filter at `now`.
    pub fn list(&self, filter: &ListFilter<'_>, now: Timestamp) -> Listing {
        let mut unknown_states: Vec<String> = Vec::new();
        let mut states: Vec<TxnState> = Vec::new();
        for name in filter.states {
            match STATES.iter().find(|s| s.name() == name.as_str()) {
                Some(&s) => states.push(s),
                None if TRANSIENT_STATE_NAMES.contains(&name.as_str()) => {}
                None if unknown_states.contains(name) => {}
                None => unknown_states.push(name.clone()),
            }
        }
        let now_ms = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
        let mut txns: Vec<Listed> = self
            .txns
            .values()
            .filter(|t| filter.states.is_empty() || states.contains(&t.state))
            .filter(|t| {
                filter.producer_ids.is_empty() || filter.producer_ids.contains(&t.producer_id)
            })
            .filter(|t| {
                filter.min_duration_ms < 0
                    || now_ms.saturating_sub(start_ms(t)) > filter.min_duration_ms
            })
            .filter(|t| {
                filter
                    .pattern
                    .is_none_or(|p| p.is_match(&t.transactional_id))
            })
            .map(|t| Listed {
                transactional_id: t.transactional_id.clone(),
                producer_id: t.producer_id,
                state: t.state,
            })
            .collect();
        txns.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Listing {
            unknown_states,
            txns,
        }
    }

    /// InitProducerId with a transactional id. `new_producer_id` hands out a fresh id; it is
    /// called only when one is needed.
    ///
    /// # Errors
    /// INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED.
    pub fn init_producer(
        &mut self,
        req: &InitProducer,
        now: Timestamp,
        new_producer_id: &mut dyn FnMut() -> Option<i64>,
    ) -> Result<Init, TxnError> {
        if req.transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        if !(1..=self.max_timeout_ms).contains(&req.timeout_ms) {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let txn = match self.txns.entry(req.transactional_id.clone()) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(new) => {
                let producer_id = new_producer_id().ok_or(TxnError::ProducerIdsPending)?;
                new.insert(TxnRecord {
                    transactional_id: req.transactional_id.clone(),
                    producer_id,
                    previous_producer_id: NO_PRODUCER_ID,
                    producer_epoch: NO_PRODUCER_EPOCH,
                    last_producer_epoch: NO_PRODUCER_EPOCH,
                    next_producer_id: NO_PRODUCER_ID,
                    timeout_ms: req.timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    groups: BTreeSet::new(),
                    started: now,
                    updated: now,
                })
            }
        };
        if let Some(expected) = req.expected {
            let valid = txn.producer_epoch == NO_PRODUCER_EPOCH
                || expected.producer_id == txn.producer_id
                || (expected.producer_id == txn.previous_producer_id
                    && epoch_exhausted(expected.epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        match txn.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                fence_and_abort(txn, now);
                Ok(Init::Fenced {
                    record: txn.clone(),
                    markers: markers_of(txn),
                })
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let rotate = epoch_exhausted(txn.producer_epoch)
                    && req.expected.is_none_or(|e| e.epoch == txn.producer_epoch);
                if rotate {
                    let producer_id = new_producer_id().ok_or(TxnError::ProducerIdsPending)?;
                    txn.previous_producer_id = txn.producer_id;
                    txn.last_producer_epoch = if req.expected.is_some() {
                        txn.producer_epoch
                    } else {
                        NO_PRODUCER_EPOCH
                    };
                    txn.producer_id = producer_id;
                    txn.producer_epoch = 0;
                } else {
                    let (epoch, last) = next_epoch(txn, req.expected.map(|e| e.epoch))?;
                    txn.producer_epoch = epoch;
                    txn.last_producer_epoch = last;
                }
                txn.timeout_ms = req.timeout_ms;
                txn.state = TxnState::Empty;
                txn.partitions.clear();
                txn.groups.clear();
                txn.updated = now;
                Ok(Init::Ready(txn.clone()))
            }
        }
    }

    /// The transaction of `transactional_id` if `producer` owns it and it is not ending.
    fn owned(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
    ) -> Result<&mut TxnRecord, TxnError> {
        let txn = self.of_producer(transactional_id, producer)?;
        if txn.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(txn)
    }

    /// The transaction of `transactional_id` if `producer` (id and epoch) owns it.
    fn of_producer(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
    ) -> Result<&mut TxnRecord, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let txn = self
            .txns
            .get_mut(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if txn.producer_id != producer.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer.epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(txn)
    }

    /// AddPartitionsToTxn: `Ok(None)` when every partition is already in the open transaction
    /// (nothing to persist), else the record to persist before answering.
    ///
    /// # Errors
    /// INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &[TopicPartition],
        now: Timestamp,
    ) -> Result<Option<TxnRecord>, TxnError> {
        let txn = self.owned(transactional_id, producer)?;
        if txn.state == TxnState::Ongoing && partitions.iter().all(|p| txn.partitions.contains(p)) {
            return Ok(None);
        }
        open(txn, now);
        txn.partitions.extend(partitions.iter().cloned());
        Ok(Some(txn.clone()))
    }

    /// AddOffsetsToTxn: the group's offsets join the transaction. As
    /// [`TxnCoordinator::add_partitions`].
    ///
    /// # Errors
    /// As [`TxnCoordinator::add_partitions`].
    pub fn add_offsets(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group: &str,
        now: Timestamp,
    ) -> Result<Option<TxnRecord>, TxnError> {
        let txn = self.owned(transactional_id, producer)?;
        if txn.state == TxnState::Ongoing && txn.groups.contains(group) {
            return Ok(None);
        }
        open(txn, now);
        txn.groups.insert(group.to_owned());
        Ok(Some(txn.clone()))
    }

    /// Whether `producer` may write transactional records to `partition` now (Produce, TxnOffsetCommit): the
    /// partition (or group) is in its open transaction.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, and
    /// [`TxnError::NotInTransaction`] for a partition not added.
    pub fn verify(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        member: Member<'_>,
    ) -> Result<(), TxnError> {
        let txn = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if txn.producer_id != producer.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer.epoch {
            return Err(TxnError::ProducerFenced);
        }
        if txn.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let added = txn.state == TxnState::Ongoing
            && match member {
                Member::Partition(p) => txn.partitions.contains(p),
                Member::Group(g) => txn.groups.contains(g),
            };
        if added {
            Ok(())
        } else {
            Err(TxnError::NotInTransaction)
        }
    }

    /// EndTxn from the producer. `tv2` (EndTxn v5+, transaction version 2) bumps the epoch at
    /// every end, as Kafka's `TransactionCoordinator.endTransaction` with a client transaction
    /// version that supports it: the markers carry the bumped epoch, so a zombie of the
    /// transaction is fenced at every partition it wrote, and the answer tells the producer
    /// its epoch (a new producer id at epoch 0 once the epoch is exhausted). Its epoch checks:
    /// in Ongoing and Empty the current epoch; while ending or ended, a retry (the epoch just
    /// before the bump, or the last epoch of a producer id given up) is recognised, and an
    /// abort that is no retry in Empty or a completed state bumps the epoch with nothing to
    /// mark (the producer learns its new epoch).
    ///
    /// # Errors
    /// INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
    /// INVALID_TXN_STATE; [`TxnError::ProducerIdsPending`] while no new id can be handed out.
    pub fn end_txn(
        &mut self,
        end: &EndTxn<'_>,
        now: Timestamp,
        new_producer_id: &mut dyn FnMut() -> Option<i64>,
    ) -> Result<End, TxnError> {
        if !end.tv2 {
            return self.end_txn_v1(end.transactional_id, end.producer, end.commit, now);
        }
        if end.transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let txn = self
            .txns
            .get_mut(end.transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        let p = end.producer;
        let retry_on_overflow = txn.previous_producer_id == p.producer_id
            && p.epoch == i16::MAX - 1
            && txn.producer_epoch == 0;
        let retry_on_bump = i32::from(txn.producer_epoch) == i32::from(p.epoch) + 1;
        let current = p.epoch == txn.producer_epoch;
        let valid = match txn.state {
            TxnState::Ongoing | TxnState::Empty => current,
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_bump || retry_on_overflow || current
            }
        };
        let retry = retry_on_bump || retry_on_overflow;
        if txn.producer_id != p.producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if !valid {
            return Err(TxnError::ProducerFenced);
        }
        let answer = ProducerIdAndEpoch {
            producer_id: txn.producer_id,
            epoch: txn.producer_epoch,
        };
        match (txn.state, end.commit) {
            (TxnState::Ongoing, _) => {}
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                return Ok(End::AlreadyDone(answer));
            }
            (TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty, false)
                if !retry => {}
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions);
            }
            _ => return Err(TxnError::InvalidTxnState),
        }
        let next = if epoch_exhausted(txn.producer_epoch) {
            new_producer_id().ok_or(TxnError::ProducerIdsPending)?
        } else {
            NO_PRODUCER_ID
        };
        if txn.state != TxnState::Ongoing {
            // An abort with nothing added: it starts and ends now.
            txn.partitions.clear();
            txn.groups.clear();
            txn.started = now;
        }
        txn.last_producer_epoch = txn.producer_epoch;
        txn.producer_epoch = txn.producer_epoch.saturating_add(1);
        txn.next_producer_id = next;
        txn.state = if end.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        txn.updated = now;
        let answer = if next == NO_PRODUCER_ID {
            ProducerIdAndEpoch {
                producer_id: txn.producer_id,
                epoch: txn.producer_epoch,
            }
        } else {
            ProducerIdAndEpoch {
                producer_id: next,
                epoch: 0,
            }
        };
        Ok(End::Prepared(Box::new(Ending {
            record: txn.clone(),
            markers: markers_of(txn),
            answer,
        })))
    }

    /// EndTxn below v5 (transaction version 1): the epoch stays.
    fn end_txn_v1(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        now: Timestamp,
    ) -> Result<End, TxnError> {
        let txn = self.of_producer(transactional_id, producer)?;
        match (txn.state, commit) {
            (TxnState::Ongoing, _) => {
                txn.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                txn.updated = now;
                Ok(End::Prepared(Box::new(Ending {
                    record: txn.clone(),
                    markers: markers_of(txn),
                    answer: producer,
                })))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(End::AlreadyDone(producer))
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// A record the store refused: the id goes back to `previous` (absent: forgotten), unless
    /// it changed again since `written`, so that memory never holds what the store does not
    /// and the client, told NOT_COORDINATOR, retries from the stored state.
    pub fn revert(&mut self, written: &TxnRecord, previous: Option<TxnRecord>) {
        let id = &written.transactional_id;
        if self.txns.get(id) != Some(written) {
            return;
        }
        match previous {
            Some(p) => {
                self.txns.insert(id.clone(), p);
            }
            None => {
                self.txns.remove(id);
            }
        }
    }

    /// Every marker of `markers` is written: the transaction completes. `None` when the id has
    /// moved on meanwhile (nothing to persist).
    pub fn complete(&mut self, markers: &Markers, now: Timestamp) -> Option<TxnRecord> {
        let txn = self.txns.get_mut(&markers.transactional_id)?;
        let expected = if markers.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if txn.state != expected
            || txn.producer_id != markers.producer_id
            || txn.producer_epoch != markers.producer_epoch
        {
            return None;
        }
        txn.state = if markers.commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        if txn.next_producer_id != NO_PRODUCER_ID {
            // Transaction version 2 with the epoch exhausted: the next id takes over.
            txn.previous_producer_id = txn.producer_id;
            txn.producer_id = txn.next_producer_id;
            txn.producer_epoch = 0;
            txn.next_producer_id = NO_PRODUCER_ID;
        }
        txn.partitions.clear();
        txn.groups.clear();
        txn.updated = now;
        Some(txn.clone())
    }

    /// Aborts every Ongoing transaction older than its timeout, fencing its producer with a
    /// bumped epoch (Kafka's `abortTimedOutTransactions`): each record to persist, then its
    /// markers to write and complete.
    pub fn abort_timed_out(&mut self, now: Timestamp) -> Vec<(TxnRecord, Markers)> {
        let mut out = Vec::new();
        for txn in self.txns.values_mut() {
            let deadline = txn
                .started
                .plus_ms(u64::try_from(txn.timeout_ms).unwrap_or(0));
            if txn.state == TxnState::Ongoing && deadline < now {
                fence_and_abort(txn, now);
                out.push((txn.clone(), markers_of(txn)));
            }
        }
        out
    }

    /// Forgets every idle id not updated for `expiration_ms` (Kafka's
    /// `transactional.id.expiration.ms`): the ids to delete from the store.
    pub fn expire_ids(&mut self, now: Timestamp, expiration_ms: u64) -> Vec<String> {
        let expired: Vec<String> = self
            .txns
            .values()
            .filter(|t| t.state.is_idle() && t.updated.plus_ms(expiration_ms) <= now)
            .map(|t| t.transactional_id.clone())
            .collect();
        for id in &expired {
            self.txns.remove(id);
        }
        expired
    }
}

/// What a transactional write names: a partition (Produce) or a group (TxnOffsetCommit).
#[derive(Debug, Clone, Copy)]
pub enum Member<'a> {
    Partition(&'a TopicPartition),
    Group(&'a str),
}

/// Opens a transaction on an idle id (the first partition or group of it).
fn open(txn: &mut TxnRecord, now: Timestamp) {
    if txn.state != TxnState::Ongoing {
        txn.state = TxnState::Ongoing;
        txn.partitions.clear();
        txn.groups.clear();
        txn.started = now;
    }
    txn.updated = now;
}

/// The next epoch and last epoch of an InitProducerId bump (Kafka's
/// `prepareIncrementProducerEpoch`).
fn next_epoch(txn: &TxnRecord, expected: Option<i16>) -> Result<(i16, i16), TxnError> {
    let bumped = txn.producer_epoch.saturating_add(1);
    match expected {
        None => Ok((bumped, NO_PRODUCER_EPOCH)),
        Some(e) if txn.producer_epoch == NO_PRODUCER_EPOCH || e == txn.producer_epoch => {
            Ok((bumped, txn.producer_epoch))
        }
        // A retry of a bump whose answer was lost: the same epoch again.
        Some(e) if e == txn.last_producer_epoch => {
            Ok((txn.producer_epoch, txn.last_producer_epoch))
        }
        Some(_) => Err(TxnError::ProducerFenced),
    }
}

/// Kafka's PrepareEpochFence followed by its abort: the epoch goes up (unless exhausted) so
/// that the old producer is fenced, and the open transaction is aborted under the new epoch.
fn fence_and_abort(txn: &mut TxnRecord, now: Timestamp) {
    if !epoch_exhausted(txn.producer_epoch) {
        txn.producer_epoch += 1;
    }
    txn.last_producer_epoch = NO_PRODUCER_EPOCH;
    txn.state = TxnState::PrepareAbort;
    txn.updated = now;
}

fn markers_of(txn: &TxnRecord) -> Markers {
    Markers {
        transactional_id: txn.transactional_id.clone(),
        producer_id: txn.producer_id,
        producer_epoch: txn.producer_epoch,
        commit: txn.state == TxnState::PrepareCommit,
        partitions: txn.partitions.iter().cloned().collect(),
        groups: txn.groups.iter().cloned().collect(),
    }
}
