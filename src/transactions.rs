//! The transaction coordinator's shell: the pure [`crate::txn::TxnCoordinator`] behind a std
//! `Mutex` (every call on it is short and synchronous; nothing is awaited while it is held),
//! its records written through the node's storage task, and its markers written into the
//! partition logs.
//!
//! Durability: every answer waits for a store write submitted while the lock was held (empty
//! when the call changed nothing). The storage task applies writes in submission order, so an
//! answer never depends on a state that is not yet durable, whichever request changed it.
//!
//! An ending transaction (EndTxn, a fencing InitProducerId, a timeout, or one found ending at
//! start-up) goes: its PrepareCommit/PrepareAbort record is durable, then its markers are
//! appended to every partition it touched and every group it committed offsets to (the group
//! commits or drops them durably), then its CompleteCommit/CompleteAbort record is written;
//! EndTxn answers after the markers, so a read_committed consumer sees the transaction, and an
//! OffsetFetch its offsets, by the time the producer learns it committed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;

use crate::coordinator::{Coordinator, TxnMarker};
use crate::storage::{Mutation, Storage, StoreError};
use crate::txn::{
    Description, End, EndTxn, Init, InitProducer, ListFilter, Listing, Markers, Member,
    ProducerIdAndEpoch, TxnCoordinator, TxnError,
};
use crate::vocab::{GroupId, Timestamp, TopicPartition, TxnRecord};

/// What the transaction coordinator needs of the node it runs in (the broker is one).
pub trait Host: Send + Sync {
    /// The group coordinator, which commits or drops a transaction's offsets.
    fn coordinator(&self) -> &Arc<Coordinator>;
    /// A producer id never handed out before; `None` while none can be (the next block is
    /// being stored).
    fn allocate_producer_id(&self) -> Option<i64>;
    /// Appends the markers of an ending transaction to its partitions. A partition whose
    /// topic is gone gets none; a producer that already wrote with a newer epoch keeps its
    /// state (logged).
    fn write_markers(&self, markers: &Markers);
}

/// Why a transactional request failed in the shell.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellError {
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// The record could not be stored: the client is told NOT_COORDINATOR and retries.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored ids are not loaded yet (COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers).
    #[error("transactional ids are loading")]
    Loading,
}

/// The transaction coordinator of this node.
pub struct Transactions {
    /// Shared with the tasks that finish the transactions found ending at start-up.
    core: Arc<Mutex<TxnCoordinator>>,
    storage: Storage,
    /// Set once the stored ids are loaded; until then every request is refused.
    loaded: AtomicBool,
}

/// Wall-clock milliseconds: transaction start times are stored and outlive the process.
pub fn wall_clock() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0)),
    )
}

fn put(record: TxnRecord) -> Mutation {
    Mutation::PutTxn(Box::new(record))
}

impl Transactions {
    pub fn new(max_timeout_ms: i32, storage: Storage) -> Transactions {
        Transactions {
            core: Arc::new(Mutex::new(TxnCoordinator::new(max_timeout_ms))),
            storage,
            loaded: AtomicBool::new(false),
        }
    }

    /// The core, for a request: refused until the stored ids are loaded.
    fn serving(&self) -> Result<MutexGuard<'_, TxnCoordinator>, ShellError> {
        if self.loaded.load(Ordering::Acquire) {
            Ok(self.core())
        } else {
            Err(ShellError::Loading)
        }
    }

    fn core(&self) -> MutexGuard<'_, TxnCoordinator> {
        lock(&self.core)
    }

    /// Queues `batch` (under the caller's lock, so in the order of the transitions).
    fn submit(&self, batch: Vec<Mutation>) -> oneshot::Receiver<Result<(), StoreError>> {
        submit(&self.storage, batch)
    }

    async fn durable(rx: oneshot::Receiver<Result<(), StoreError>>) -> Result<(), StoreError> {
        rx.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Waits for the write of `written`; if the store refused it, the id goes back to
    /// `previous` ([`TxnCoordinator::revert`]).
    async fn durable_or_revert(
        &self,
        rx: oneshot::Receiver<Result<(), StoreError>>,
        written: Option<TxnRecord>,
        previous: Option<TxnRecord>,
    ) -> Result<(), ShellError> {
        let result = Self::durable(rx).await;
        if let (Err(_), Some(written)) = (&result, &written) {
            self.core().revert(written, previous);
        }
        Ok(result?)
    }

    /// Takes the stored transactional ids over and finishes every transaction found ending,
    /// in tasks of their own (the groups are loaded already, so their markers find them).
    pub fn load(&self, host: &dyn Host, records: Vec<TxnRecord>) {
        let count = records.len();
        let pending = self.core().load(records);
        if count > 0 {
            tracing::info!(
                ids = count,
                ending = pending.len(),
                "transactional ids loaded"
            );
        }
        for markers in pending {
            host.write_markers(&markers);
            let (core, storage) = (self.core.clone(), self.storage.clone());
            let coordinator = host.coordinator().clone();
            tokio::spawn(async move {
                end_in_groups(&coordinator, &markers).await;
                let record = lock(&core).complete(&markers, wall_clock());
                let rx = submit(&storage, record.into_iter().map(put).collect());
                if let Err(e) = Self::durable(rx).await {
                    tracing::warn!(
                        transactional_id = %markers.transactional_id,
                        "transaction completion not stored: {e}"
                    );
                }
            });
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// InitProducerId with a transactional id: the producer id and epoch, durable.
    ///
    /// # Errors
    /// The coordinator's refusal, CONCURRENT_TRANSACTIONS after fencing an open transaction,
    /// or the store's error.
    pub async fn init_producer(
        &self,
        host: &dyn Host,
        req: &InitProducer,
    ) -> Result<ProducerIdAndEpoch, ShellError> {
        let (rx, outcome) = {
            let mut core = self.serving()?;
            let outcome =
                core.init_producer(req, wall_clock(), &mut || host.allocate_producer_id())?;
            let record = match &outcome {
                Init::Ready(r) => r.clone(),
                Init::Fenced { record, .. } => record.clone(),
            };
            (self.submit(vec![put(record)]), outcome)
        };
        Self::durable(rx).await?;
        match outcome {
            Init::Ready(r) => Ok(ProducerIdAndEpoch {
                producer_id: r.producer_id,
                epoch: r.producer_epoch,
            }),
            Init::Fenced { record, markers } => {
                tracing::info!(
                    transactional_id = %record.transactional_id,
                    epoch = record.producer_epoch,
                    "fenced the previous producer; aborting its transaction"
                );
                self.finish(host, &markers).await;
                Err(TxnError::ConcurrentTransactions.into())
            }
        }
    }

    /// AddPartitionsToTxn.
    ///
    /// # Errors
    /// The coordinator's refusal or the store's error.
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &[TopicPartition],
    ) -> Result<(), ShellError> {
        let (rx, written, previous) = {
            let mut core = self.serving()?;
            let previous = core.get(transactional_id).cloned();
            let record =
                core.add_partitions(transactional_id, producer, partitions, wall_clock())?;
            (
                self.submit(record.iter().cloned().map(put).collect()),
                record,
                previous,
            )
        };
        self.durable_or_revert(rx, written, previous).await
    }

    /// AddOffsetsToTxn.
    ///
    /// # Errors
    /// The coordinator's refusal or the store's error.
    pub async fn add_offsets(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group: &str,
    ) -> Result<(), ShellError> {
        let (rx, written, previous) = {
            let mut core = self.serving()?;
            let previous = core.get(transactional_id).cloned();
            let record = core.add_offsets(transactional_id, producer, group, wall_clock())?;
            (
                self.submit(record.iter().cloned().map(put).collect()),
                record,
                previous,
            )
        };
        self.durable_or_revert(rx, written, previous).await
    }

    /// Whether the producer may write transactional records to `member` now.
    ///
    /// # Errors
    /// The coordinator's refusal.
    pub fn verify(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        member: Member<'_>,
    ) -> Result<(), ShellError> {
        Ok(self.serving()?.verify(transactional_id, producer, member)?)
    }

    /// DescribeTransactions of one id.
    ///
    /// # Errors
    /// The coordinator's refusal, or COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn describe(&self, transactional_id: &str) -> Result<Description, ShellError> {
        Ok(self.serving()?.describe(transactional_id)?)
    }

    /// ListTransactions.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while loading.
    pub fn list(&self, filter: &ListFilter<'_>) -> Result<Listing, ShellError> {
        Ok(self.serving()?.list(filter, wall_clock()))
    }

    /// EndTxn: answers once the transaction's markers are written, with the producer id and
    /// epoch the producer goes on with (transaction version 2 bumps it).
    ///
    /// # Errors
    /// The coordinator's refusal or the store's error.
    pub async fn end_txn(
        &self,
        host: &dyn Host,
        end: &EndTxn<'_>,
    ) -> Result<ProducerIdAndEpoch, ShellError> {
        let (rx, outcome, previous) = {
            let mut core = self.serving()?;
            let previous = core.get(end.transactional_id).cloned();
            let outcome = core.end_txn(end, wall_clock(), &mut || host.allocate_producer_id())?;
            let batch = match &outcome {
                End::AlreadyDone(_) => Vec::new(),
                End::Prepared(e) => vec![put(e.record.clone())],
            };
            (self.submit(batch), outcome, previous)
        };
        let written = match &outcome {
            End::AlreadyDone(_) => None,
            End::Prepared(e) => Some(e.record.clone()),
        };
        self.durable_or_revert(rx, written, previous).await?;
        Ok(match outcome {
            End::AlreadyDone(answer) => answer,
            End::Prepared(e) => {
                self.finish(host, &e.markers).await;
                e.answer
            }
        })
    }

    /// Writes the markers of an ending transaction, then completes it. The ending record is
    /// durable already. A failed completion write leaves the stored state ending: the markers
    /// are written again at the next start, which is harmless.
    async fn finish(&self, host: &dyn Host, markers: &Markers) {
        host.write_markers(markers);
        end_in_groups(host.coordinator(), markers).await;
        let rx = {
            let record = self.core().complete(markers, wall_clock());
            self.submit(record.into_iter().map(put).collect())
        };
        if let Err(e) = Self::durable(rx).await {
            tracing::warn!(
                transactional_id = %markers.transactional_id,
                "transaction completion not stored: {e}"
            );
        }
        tracing::debug!(
            transactional_id = %markers.transactional_id,
            commit = markers.commit,
            partitions = markers.partitions.len(),
            "transaction completed"
        );
    }

    /// Aborts every open transaction past its timeout.
    pub async fn abort_timed_out(&self, host: &dyn Host) {
        let (rx, ending) = {
            let mut core = self.core();
            let ending = core.abort_timed_out(wall_clock());
            if ending.is_empty() {
                return;
            }
            let batch = ending.iter().map(|(r, _)| put(r.clone())).collect();
            (self.submit(batch), ending)
        };
        if let Err(e) = Self::durable(rx).await {
            tracing::warn!("aborts of timed-out transactions not stored: {e}");
            return;
        }
        for (record, markers) in ending {
            tracing::info!(
                transactional_id = %record.transactional_id,
                "transaction timed out; aborted"
            );
            self.finish(host, &markers).await;
        }
    }

    /// Forgets idle transactional ids older than `expiration_ms`.
    pub async fn expire_ids(&self, expiration_ms: u64) {
        let rx = {
            let mut core = self.core();
            let expired = core.expire_ids(wall_clock(), expiration_ms);
            if expired.is_empty() {
                return;
            }
            tracing::info!(ids = expired.len(), "expired transactional ids");
            let batch = expired
                .into_iter()
                .map(|transactional_id| Mutation::DeleteTxn { transactional_id })
                .collect();
            self.submit(batch)
        };
        if let Err(e) = Self::durable(rx).await {
            tracing::warn!("expired transactional ids not deleted: {e}");
        }
    }
}

fn lock(core: &Mutex<TxnCoordinator>) -> MutexGuard<'_, TxnCoordinator> {
    // Every transition completes before anything that could panic.
    core.lock().unwrap_or_else(|e| e.into_inner())
}

/// Queues `batch` on the storage task; the receiver gets its result.
fn submit(storage: &Storage, batch: Vec<Mutation>) -> oneshot::Receiver<Result<(), StoreError>> {
    let (tx, rx) = oneshot::channel();
    storage.submit(
        batch,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx
}

/// Ends the transaction in every group it committed offsets to; returns once each group's
/// change is durable. A group that cannot store it (a failing store) is asked again, with a
/// growing pause: the transaction cannot complete before its offsets are settled, as Kafka's
/// coordinator retries a marker until it is written.
async fn end_in_groups(coordinator: &Coordinator, markers: &Markers) {
    let marker = TxnMarker {
        producer_id: markers.producer_id,
        producer_epoch: markers.producer_epoch,
        commit: markers.commit,
    };
    for group in &markers.groups {
        let mut pause = Duration::from_millis(100);
        while let Err(e) = coordinator
            .txn_marker(GroupId::new(group.as_str()), marker)
            .await
        {
            tracing::warn!(
                transactional_id = %markers.transactional_id,
                group = %group,
                "transaction marker not stored in the group, retrying: {e}"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::storage::{MemoryStore, Store};
    use crate::vocab::TxnState;

    #[tokio::test]
    async fn a_refused_write_answers_with_the_store_error_and_is_taken_back() {
        let broker = crate::api::testing::broker();
        let store = Arc::new(MemoryStore::default());
        let txns = Transactions::new(900_000, Storage::inline(store.clone()));
        let init = InitProducer {
            transactional_id: "tx".into(),
            timeout_ms: 60_000,
            expected: None,
        };
        assert_eq!(
            txns.init_producer(&broker, &init).await,
            Err(ShellError::Loading),
            "nothing is served before the load"
        );
        txns.load(&broker, Vec::new());
        let p = txns.init_producer(&broker, &init).await.unwrap();
        let tp = [TopicPartition::new("t", 0)];
        store.fail_writes(true);
        assert!(matches!(
            txns.add_partitions("tx", p, &tp).await,
            Err(ShellError::Store(_))
        ));
        assert_eq!(txns.core().get("tx").unwrap().state, TxnState::Empty);
        store.fail_writes(false);
        txns.add_partitions("tx", p, &tp).await.unwrap();
        let stored = store.load_txns().unwrap();
        assert_eq!(stored[0].state, TxnState::Ongoing);
        assert_eq!(stored[0].partitions.len(), 1, "the retry is stored");
    }
}
