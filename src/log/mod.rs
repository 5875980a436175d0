//! The data plane: an in-memory log per partition, behind Produce, Fetch, ListOffsets and
//! OffsetForLeaderEpoch.
//!
//! - [`batch`]: the v2 record batch header, produce-time validation (lengths, magic, CRC32C,
//!   Kafka's batch rules, then the records) and the base-offset rewrite.
//! - [`records`]: the records of a batch, walked (and decompressed, capped) without building
//!   them: produce-time record validation and the per-record offsets and timestamps.
//! - [`producer`]: idempotent producer state (epoch, last five sequence ranges) per partition.
//! - [`partition`]: [`PartitionLog`], the batches of one partition, offsets and retention.
//! - here: [`Logs`], every partition log keyed by (topic id, partition), and [`AppendWatch`],
//!   which parks a Fetch long-poll until an append to one of its partitions.
//!
//! Memory only by design: nothing survives a restart. Each partition applies its topic's configs
//! ([`crate::metadata::topic_config::LogSettings`]): bounded by `retention.bytes` (default
//! `log.retention.bytes`), and `retention.ms`, `max.message.bytes`, compaction, LogAppendTime.

pub mod batch;
pub mod partition;
pub mod producer;
pub mod records;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use dashmap::DashMap;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use uuid::Uuid;

pub use batch::{AppendError, ValidBatch};
pub use partition::{Appended, OffsetOutOfRange, PartitionLog, Read};

use crate::metadata::topic_config::LogSettings;
use crate::metadata::Topic;

/// One partition: its log and the notifier appends wake fetchers with.
///
/// The log sits behind a std `Mutex`: every operation on it is short and synchronous, and
/// nothing is awaited while it is held, so an async lock would only add cost. Decoding records
/// (ListOffsets by timestamp) happens after the guard is dropped, on a cheap clone of the
/// batch's bytes.
#[derive(Debug)]
pub struct Partition {
    log: Mutex<PartitionLog>,
    appended: Notify,
}

impl Partition {
    #[cfg(test)]
    fn new(retention_bytes: i64) -> Partition {
        Partition::with_settings(LogSettings::with_retention_bytes(retention_bytes))
    }

    fn with_settings(settings: LogSettings) -> Partition {
        Partition {
            log: Mutex::new(PartitionLog::with_settings(settings)),
            appended: Notify::new(),
        }
    }

    /// The log, for reads and appends. Never hold the guard across an `.await`.
    pub fn lock(&self) -> MutexGuard<'_, PartitionLog> {
        // A poisoned lock means a thread panicked while holding it. Every mutation of the log
        // completes its bookkeeping before anything that could panic, so the log is consistent.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a validated batch and wakes the fetchers waiting on this partition.
    ///
    /// # Errors
    /// See [`PartitionLog::append`].
    pub fn append(&self, batch: &ValidBatch<'_>) -> Result<Appended, AppendError> {
        let appended = self.lock().append_at(batch, now_ms())?;
        if !appended.duplicate {
            self.appended.notify_waiters();
        }
        Ok(appended)
    }

    /// Writes a transaction marker from a coordinator of `coordinator_epoch`
    /// ([`PartitionLog::append_marker_from`]) and wakes the fetchers.
    ///
    /// # Errors
    /// As [`PartitionLog::append_marker_from`].
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> Result<i64, AppendError> {
        let offset = self.lock().append_marker_from(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            now_ms(),
        )?;
        self.appended.notify_waiters();
        Ok(offset)
    }

    /// DeleteRecords on this partition; see [`PartitionLog::delete_records_before`].
    ///
    /// # Errors
    /// As [`PartitionLog::delete_records_before`].
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, OffsetOutOfRange> {
        self.lock().delete_records_before(offset)
    }

    /// The first record whose timestamp is at least `timestamp`: `(offset, timestamp)`.
    ///
    /// Kafka's search (`FileRecords.searchForTimestamp`): the first batch whose max timestamp
    /// reaches the target, then the first record in it that does; if none does (a batch whose
    /// header overstates its records), the search goes on with the next batch.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
        max_decompressed: usize,
    ) -> Option<(i64, i64)> {
        // Records below the log start offset (in a batch straddling it) are not searched, as
        // Kafka's search starts at the log start offset.
        let start = self.lock().log_start_offset();
        let mut from = start;
        loop {
            let (bytes, last_offset) = self.lock().batch_reaching(timestamp, from)?;
            match batch::record_timestamps(&bytes, max_decompressed) {
                Ok(records) => {
                    if let Some(found) = records
                        .into_iter()
                        .find(|(o, ts)| *o >= start && *ts >= timestamp)
                    {
                        return Some(found);
                    }
                }
                Err(e) => tracing::debug!(error = %e, "stored batch does not decode"),
            }
            from = last_offset.checked_add(1)?;
        }
    }

    /// The first record carrying the largest timestamp in the log: `(offset, timestamp)`
    /// (ListOffsets MAX_TIMESTAMP; Kafka's `RecordBatch.offsetOfMaxTimestamp`).
    pub fn offset_of_max_timestamp(&self, max_decompressed: usize) -> Option<(i64, i64)> {
        let (bytes, max) = self.lock().batch_with_max_timestamp()?;
        let records = batch::record_timestamps(&bytes, max_decompressed)
            .map_err(|e| tracing::debug!(error = %e, "stored batch does not decode"))
            .ok()?;
        records.into_iter().find(|(_, ts)| *ts == max)
    }
}

/// The wall clock in ms since the Unix epoch: the broker's time for the logs.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Every partition log, created on first use for a partition of a known topic.
#[derive(Debug)]
pub struct Logs {
    partitions: DashMap<(Uuid, i32), Arc<Partition>>,
    /// Settings of topics with configs of their own; others get `default`.
    settings: DashMap<Uuid, LogSettings>,
    default: LogSettings,
}

impl Logs {
    /// `retention_bytes` is `log.retention.bytes`: bytes kept per partition, negative for no
    /// bound.
    pub fn new(retention_bytes: i64) -> Logs {
        Logs::with_default(LogSettings::with_retention_bytes(retention_bytes))
    }

    /// Logs whose topics apply `default` unless configured otherwise.
    pub fn with_default(default: LogSettings) -> Logs {
        Logs {
            partitions: DashMap::new(),
            settings: DashMap::new(),
            default,
        }
    }

    /// Applies `settings` to every partition of topic `id`, present and future.
    pub fn configure(&self, id: Uuid, settings: LogSettings) {
        self.settings.insert(id, settings);
        for p in self.partitions.iter().filter(|e| e.key().0 == id) {
            p.value().lock().set_settings(settings);
        }
    }

    /// The log of partition `index` of `topic`, created empty on first use; `None` if the topic
    /// has no such partition.
    pub fn partition(&self, topic: &Topic, index: i32) -> Option<Arc<Partition>> {
        if !(0..topic.partitions).contains(&index) {
            return None;
        }
        let key = (topic.id, index);
        if let Some(p) = self.partitions.get(&key) {
            return Some(p.clone());
        }
        Some(
            self.partitions
                .entry(key)
                .or_insert_with(|| {
                    let settings = self.settings.get(&topic.id).map_or(self.default, |s| *s);
                    Arc::new(Partition::with_settings(settings))
                })
                .clone(),
        )
    }
}

impl Logs {
    /// Drops every partition log of `topic` (DeleteTopics): their memory goes once in-flight
    /// requests holding a partition finish.
    pub fn remove_topic(&self, topic: &Topic) {
        for index in 0..topic.partitions {
            self.partitions.remove(&(topic.id, index));
        }
    }
}

/// Interest in appends to a set of partitions, registered when built. Build it BEFORE reading
/// the logs: an append that lands between the read and the wait then still wakes the waiter.
pub struct AppendWatch<'a> {
    notified: Vec<Pin<Box<Notified<'a>>>>,
}

impl<'a> AppendWatch<'a> {
    pub fn new(partitions: impl IntoIterator<Item = &'a Partition>) -> AppendWatch<'a> {
        let notified = partitions
            .into_iter()
            .map(|p| {
                let mut n = Box::pin(p.appended.notified());
                n.as_mut().enable();
                n
            })
            .collect();
        AppendWatch { notified }
    }

    /// Completes once any of the partitions got an append since [`AppendWatch::new`]. Never
    /// completes for an empty set.
    pub async fn appended(&mut self) {
        std::future::poll_fn(|cx| {
            for n in &mut self.notified {
                if n.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::batch::tests::{batch, Spec};
    use super::batch::{validate_produce, DEFAULT_MAX_DECOMPRESSED as MAX};
    use super::*;
    use crate::metadata::name_based_id as topic_id;
    use std::time::Duration;

    fn topic(name: &str, partitions: i32) -> Topic {
        Topic {
            name: name.into(),
            id: topic_id(name),
            partitions,
        }
    }

    #[test]
    fn partitions_are_separate_and_bounded_by_the_topic() {
        let logs = Logs::new(-1);
        let t = topic("t", 2);
        assert!(logs.partition(&t, 2).is_none());
        assert!(logs.partition(&t, -1).is_none());
        let p0 = logs.partition(&t, 0).unwrap();
        let b = batch(Spec::default());
        p0.append(&validate_produce(&b, 9).unwrap()).unwrap();
        assert!(Arc::ptr_eq(&p0, &logs.partition(&t, 0).unwrap()));
        assert_eq!(logs.partition(&t, 0).unwrap().lock().log_end_offset(), 3);
        assert_eq!(logs.partition(&t, 1).unwrap().lock().log_end_offset(), 0);
        let other = topic("u", 2);
        assert_eq!(
            logs.partition(&other, 0).unwrap().lock().log_end_offset(),
            0
        );
    }

    #[test]
    fn removed_topic_starts_empty_and_search_skips_deleted_records() {
        let logs = Logs::new(-1);
        let t = topic("t", 2);
        let p0 = logs.partition(&t, 0).unwrap();
        let b = batch(Spec::default());
        p0.append(&validate_produce(&b, 9).unwrap()).unwrap();
        // Offset 1 is inside the batch 0..=2: the search by timestamp starts at it.
        assert_eq!(p0.offset_for_timestamp(0, MAX).map(|f| f.0), Some(0));
        assert_eq!(p0.delete_records_before(1), Ok(1));
        assert_eq!(p0.offset_for_timestamp(0, MAX).map(|f| f.0), Some(1));
        logs.remove_topic(&t);
        assert!(!Arc::ptr_eq(&p0, &logs.partition(&t, 0).unwrap()));
        let fresh = logs.partition(&t, 0).unwrap();
        let log = fresh.lock();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    }

    #[test]
    fn list_offsets_by_timestamp_picks_the_exact_record() {
        let p = Partition::new(-1);
        // Offsets 0..=4 at 1000..=1040, offsets 5..=9 at 2000..=2040 (gzip).
        for (first_ts, compression) in [
            (1_000, kafka_protocol::records::Compression::None),
            (2_000, kafka_protocol::records::Compression::Gzip),
        ] {
            let b = batch(Spec {
                records: 5,
                first_ts,
                compression,
                ..Spec::default()
            });
            p.append(&validate_produce(&b, 9).unwrap()).unwrap();
        }
        assert_eq!(p.offset_for_timestamp(0, MAX), Some((0, 1_000)));
        assert_eq!(p.offset_for_timestamp(1_000, MAX), Some((0, 1_000)));
        assert_eq!(p.offset_for_timestamp(1_011, MAX), Some((2, 1_020)));
        assert_eq!(p.offset_for_timestamp(1_041, MAX), Some((5, 2_000)));
        assert_eq!(p.offset_for_timestamp(2_033, MAX), Some((9, 2_040)));
        assert_eq!(p.offset_for_timestamp(2_041, MAX), None);
        assert_eq!(p.offset_of_max_timestamp(MAX), Some((9, 2_040)));
    }

    #[tokio::test(start_paused = true)]
    async fn watch_wakes_on_append_not_on_time() {
        let p = Arc::new(Partition::new(-1));
        let q = Arc::new(Partition::new(-1));
        let waiter = {
            let (p, q) = (p.clone(), q.clone());
            tokio::spawn(async move {
                let mut watch = AppendWatch::new([&*p, &*q]);
                let start = tokio::time::Instant::now();
                tokio::select! {
                    _ = watch.appended() => Some(start.elapsed()),
                    _ = tokio::time::sleep(Duration::from_secs(3600)) => None,
                }
            })
        };
        // Let the waiter register; with paused time this also proves it is parked, not polling.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let b = batch(Spec::default());
        q.append(&validate_produce(&b, 9).unwrap()).unwrap();
        let elapsed = waiter.await.unwrap().expect("woken by the append");
        assert_eq!(elapsed, Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn append_between_watch_and_wait_is_not_lost() {
        let p = Partition::new(-1);
        let mut watch = AppendWatch::new([&p]);
        let b = batch(Spec::default());
        p.append(&validate_produce(&b, 9).unwrap()).unwrap();
        tokio::time::timeout(Duration::from_secs(1), watch.appended())
            .await
            .expect("registered interest sees the append");
    }
}
