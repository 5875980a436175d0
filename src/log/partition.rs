//! One partition's log: record batches in offset order, as the producers sent them except for
//! the base offset and partition leader epoch, which are rewritten on append (and the timestamp
//! under LogAppendTime, and the records a compaction drops).
//!
//! Offsets are assigned contiguously: each batch starts where the previous one ended. The log end offset is
//! also the high watermark (one replica). Transactions: a producer's first transactional batch
//! opens its transaction at that offset; its marker (a control batch, [`PartitionLog::
//! append_marker`]) closes it, and an abort is remembered with its offset range (Kafka's aborted
//! transaction index). The last stable offset is the first offset of the oldest open
//! transaction, or the log end; a read_committed read stops there. Retention
//! (`log.retention.bytes`) drops the oldest batches while the log holds more bytes than allowed,
//! and moves the log start offset to the first batch kept; the newest batch is always kept, as
//! Kafka never deletes the active segment. `retention.ms` drops batches by max timestamp. A
//! compacted log (`cleanup.policy=compact`) keeps the last record per key each time it rolls
//! (every `segment.bytes` appended): offsets stay, so a compacted log has gaps. DeleteRecords
//! moves the log start offset to any offset up to the log end ([`PartitionLog::delete_records_before`]) and drops the batches
//! wholly below it; a batch straddling the new start stays, and reads still begin at the start.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use super::batch::{rewrite, AppendError, ValidBatch};
use super::producer::{ActiveProducer, Producers, SequenceCheck};
use crate::metadata::topic_config::LogSettings;

#[derive(Debug, Clone)]
struct StoredBatch {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    bytes: Bytes,
}

/// The outcome of a successful append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the batch's first record; for a retried batch, the offset it got the first time.
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// The broker's time set on the batch under `message.timestamp.type=LogAppendTime`, else -1.
    pub log_append_time: i64,
    /// The batch was a retry of one already in the log; nothing was appended.
    pub duplicate: bool,
}

/// A fetch offset outside `log start ..= log end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetOutOfRange {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// Batches read from the log, with the offsets a fetch response reports.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// Whole batches, oldest first.
    pub batches: Vec<Bytes>,
    pub bytes: usize,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed: the aborted transactions overlapping what was read, `(producer id,
    /// first offset)`, oldest first.
    pub aborted: Vec<(i64, i64)>,
}

/// The coordinator epoch koord's markers carry: one coordinator that never moves, as a
/// single Kafka node's `__transaction_state` leader writes epoch 0.
pub const COORDINATOR_EPOCH: i32 = 0;

/// One producer of a partition as DescribeProducers reports it: its state, and the first
/// offset of its open transaction here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    pub producer: ActiveProducer,
    /// -1 when no transaction of the producer is open in this partition.
    pub current_txn_start_offset: i64,
}

/// An aborted transaction: its producer and offsets, up to its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AbortedTxn {
    producer_id: i64,
    first_offset: i64,
    last_offset: i64,
}

/// One partition's batches, offsets and producer state.
#[derive(Debug)]
pub struct PartitionLog {
    batches: VecDeque<StoredBatch>,
    log_start: i64,
    log_end: i64,
    size: u64,
    /// The topic's configs the log applies.
    settings: LogSettings,
    /// Bytes appended since the log last rolled (compacted logs compact when they roll).
    active_bytes: u64,
    producers: Producers,
    /// Open transactions: producer id -> first offset.
    open_txns: HashMap<i64, i64>,
    /// Aborted transactions, in the order of their markers (so by last offset).
    aborted: VecDeque<AbortedTxn>,
}

impl PartitionLog {
    /// An empty log; `retention_bytes` follows `log.retention.bytes` (negative: unbounded).
    pub fn new(retention_bytes: i64) -> PartitionLog {
        PartitionLog::with_settings(LogSettings::with_retention_bytes(retention_bytes))
    }

    /// An empty log applying `settings`.
    pub fn with_settings(settings: LogSettings) -> PartitionLog {
        PartitionLog {
            batches: VecDeque::new(),
            log_start: 0,
            log_end: 0,
            size: 0,
            settings,
            active_bytes: 0,
            producers: Producers::default(),
            open_txns: HashMap::new(),
            aborted: VecDeque::new(),
        }
    }

    /// Applies changed topic configs from the next append or expiry on.
    pub fn set_settings(&mut self, settings: LogSettings) {
        self.settings = settings;
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    /// The next offset to be assigned; also the high watermark.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end
    }

    /// The first offset of the oldest open transaction, or the log end: what read_committed
    /// consumers may read up to.
    pub fn last_stable_offset(&self) -> i64 {
        self.open_txns
            .values()
            .copied()
            .min()
            .map_or(self.log_end, |first| first.max(self.log_start))
    }

    /// Every producer whose state this log keeps (Kafka's active producers), by producer id.
    pub fn active_producers(&self) -> Vec<ProducerState> {
        self.producers
            .active()
            .into_iter()
            .map(|producer| ProducerState {
                producer,
                current_txn_start_offset: self
                    .open_txns
                    .get(&producer.producer_id)
                    .copied()
                    .unwrap_or(-1),
            })
            .collect()
    }

    /// Bytes held in batches.
    pub fn size_bytes(&self) -> u64 {
        self.size
    }

    pub fn batch_count(&self) -> usize {
        self.batches.len()
    }

    /// [`PartitionLog::append_at`] without a clock: nothing expires by time and LogAppendTime
    /// batches get timestamp 0.
    ///
    /// # Errors
    /// As [`PartitionLog::append_at`].
    pub fn append(&mut self, batch: &ValidBatch<'_>) -> Result<Appended, AppendError> {
        self.append_at(batch, 0)
    }

    /// Appends a validated batch at the log end offset, after the size and idempotent-producer
    /// checks; `now` (ms since the epoch) is the broker's time for LogAppendTime, time-based
    /// retention and tombstone expiry.
    ///
    /// # Errors
    /// [`AppendError::BatchTooLarge`] beyond `max.message.bytes`, or a producer-state refusal
    /// (see [`super::producer`]). A refused batch changes nothing. Whether a transactional
    /// batch's producer may write here is the transaction coordinator's to check, before.
    pub fn append_at(&mut self, batch: &ValidBatch<'_>, now: i64) -> Result<Appended, AppendError> {
        let header = &batch.header;
        if batch.bytes.len() > self.settings.max_message_bytes {
            return Err(AppendError::BatchTooLarge {
                size: batch.bytes.len(),
                max: self.settings.max_message_bytes,
            });
        }
        if self.settings.compact {
            // Kafka's LogValidator: a compacted log keeps records by key, so every one needs one.
            let records = super::batch::decode_records(&Bytes::copy_from_slice(batch.bytes))
                .map_err(AppendError::InvalidRecord)?;
            if records.iter().any(|r| r.key.is_none()) {
                return Err(AppendError::InvalidRecord(
                    "Compacted topic cannot accept message without key".into(),
                ));
            }
        }
        if let SequenceCheck::Duplicate { base_offset } = self.producers.check(header)? {
            return Ok(Appended {
                base_offset,
                log_start_offset: self.log_start,
                log_append_time: -1,
                duplicate: true,
            });
        }
        let base_offset = self.log_end;
        let last_offset = base_offset + header.offset_span() - 1;
        if header.is_transactional() {
            self.open_txns
                .entry(header.producer_id)
                .or_insert(base_offset);
        }
        let mut bytes = rewrite(batch.bytes, base_offset);
        let mut max_timestamp = header.max_timestamp;
        let mut log_append_time = -1;
        if self.settings.log_append_time {
            bytes = super::batch::set_log_append_time(&bytes, now);
            max_timestamp = now;
            log_append_time = now;
        }
        self.size += bytes.len() as u64;
        self.active_bytes += bytes.len() as u64;
        self.batches.push_back(StoredBatch {
            base_offset,
            last_offset,
            max_timestamp,
            bytes,
        });
        self.log_end = last_offset + 1;
        self.producers.record(header, base_offset, max_timestamp);
        if self.settings.compact
            && self.active_bytes >= self.settings.segment_bytes
            && self.active_bytes * 1000 >= self.size * self.settings.min_dirty_permille
        {
            self.active_bytes = 0;
            self.compact(now);
        }
        self.expire(now);
        Ok(Appended {
            base_offset,
            log_start_offset: self.log_start,
            log_append_time,
            duplicate: false,
        })
    }

    /// Appends the marker that ends `producer_id`'s transaction (commit or abort) as a control
    /// batch, closes the transaction, and remembers it if aborted. Returns the marker's offset.
    ///
    /// # Errors
    /// [`AppendError::StaleMarker`] when the producer already wrote with a newer epoch; nothing
    /// changes then.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now: i64,
    ) -> Result<i64, AppendError> {
        self.append_marker_from(producer_id, producer_epoch, commit, COORDINATOR_EPOCH, now)
    }

    /// [`Partition::append_marker`] from a coordinator of `coordinator_epoch` (WriteTxnMarkers
    /// names it; Kafka's `ProducerAppendInfo.appendEndTxnMarker` checks it).
    ///
    /// # Errors
    /// As [`Partition::append_marker`], and [`AppendError::StaleCoordinator`] when the
    /// producer's last marker came from a newer coordinator epoch.
    pub fn append_marker_from(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        now: i64,
    ) -> Result<i64, AppendError> {
        if let Some(current) = self.producers.coordinator_epoch(producer_id) {
            if coordinator_epoch < current {
                return Err(AppendError::StaleCoordinator {
                    got: coordinator_epoch,
                    current,
                });
            }
        }
        if let Some(current) = self.producers.epoch(producer_id) {
            if producer_epoch < current {
                return Err(AppendError::StaleMarker {
                    got: producer_epoch,
                    current,
                });
            }
        }
        let bytes = super::batch::control_batch(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            now,
        )
        .map_err(AppendError::Corrupt)?;
        let offset = self.log_end;
        let bytes = rewrite(&bytes, offset);
        self.size += bytes.len() as u64;
        self.batches.push_back(StoredBatch {
            base_offset: offset,
            last_offset: offset,
            max_timestamp: now,
            bytes,
        });
        self.log_end = offset + 1;
        self.producers
            .record_marker(producer_id, producer_epoch, offset, now, coordinator_epoch);
        if let Some(first_offset) = self.open_txns.remove(&producer_id) {
            if !commit {
                self.aborted.push_back(AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset: offset,
                });
            }
        }
        Ok(offset)
    }

    /// Drops what `retention.bytes` and `retention.ms` no longer keep (cleanup.policy delete),
    /// oldest first. Size retention keeps the newest batch, as Kafka keeps the active segment;
    /// time retention drops every expired batch, as Kafka rolls an expired active segment.
    pub fn expire(&mut self, now: i64) {
        if !self.settings.delete {
            return;
        }
        let mut dropped = false;
        if let Some(limit) = self.settings.retention_bytes {
            while self.size > limit && self.batches.len() > 1 {
                if let Some(old) = self.batches.pop_front() {
                    self.size -= old.bytes.len() as u64;
                    dropped = true;
                }
            }
        }
        if let Some(ms) = self.settings.retention_ms {
            let oldest_kept = now.saturating_sub(ms);
            while self
                .batches
                .front()
                .is_some_and(|b| b.max_timestamp < oldest_kept)
            {
                if let Some(old) = self.batches.pop_front() {
                    self.size -= old.bytes.len() as u64;
                    dropped = true;
                }
            }
        }
        if dropped {
            self.log_start = self.batches.front().map_or(self.log_end, |b| b.base_offset);
            self.producers.maybe_evict_below(self.log_start);
            self.forget_aborted_below();
        }
    }

    /// Compacts the whole log (cleanup.policy compact), which has just rolled: every keyed
    /// record but the last of its key goes, and tombstones older than `delete.retention.ms`
    /// (by their batch's max timestamp) go too. Records keep their offsets; a batch that loses
    /// records is rewritten uncompressed with only those kept, an emptied batch goes.
    pub fn compact(&mut self, now: i64) {
        use std::collections::HashMap;
        let mut decoded = Vec::with_capacity(self.batches.len());
        let mut last: HashMap<Bytes, i64> = HashMap::new();
        for b in &self.batches {
            match super::batch::decode_records(&b.bytes) {
                Ok(records) => {
                    for r in &records {
                        if let Some(k) = &r.key {
                            last.insert(k.clone(), r.offset);
                        }
                    }
                    decoded.push(Some(records));
                }
                Err(e) => {
                    // Stored batches were validated on append; one that does not decode is kept.
                    tracing::debug!(error = %e, "stored batch does not decode; not compacted");
                    decoded.push(None);
                }
            }
        }
        let tombstone_horizon = now.saturating_sub(self.settings.delete_retention_ms);
        let old = std::mem::take(&mut self.batches);
        self.size = 0;
        for (b, records) in old.into_iter().zip(decoded) {
            let Some(records) = records else {
                self.size += b.bytes.len() as u64;
                self.batches.push_back(b);
                continue;
            };
            let total = records.len();
            let log_append_time = records.first().is_some_and(|r| {
                r.timestamp_type == kafka_protocol::records::TimestampType::LogAppend
            });
            let mut kept: Vec<_> = records
                .into_iter()
                .filter(|r| match &r.key {
                    None => true,
                    Some(k) => {
                        last.get(k) == Some(&r.offset)
                            && (r.value.is_some() || b.max_timestamp >= tombstone_horizon)
                    }
                })
                .collect();
            if let Some(first) = kept.first().map(|r| r.offset) {
                for r in &mut kept {
                    if r.producer_id < 0 {
                        // Keeps the base sequence at -1 (no producer), as Kafka writes it.
                        r.sequence = (r.offset - first) as i32 - 1;
                    }
                    if log_append_time {
                        // The batch's max timestamp is every record's under LogAppendTime.
                        r.timestamp = b.max_timestamp;
                    }
                }
            }
            let batch = if kept.len() == total {
                b
            } else if kept.is_empty() {
                continue;
            } else {
                match super::batch::encode_records(&kept) {
                    Ok(bytes) => StoredBatch {
                        base_offset: kept.first().map_or(b.base_offset, |r| r.offset),
                        last_offset: kept.last().map_or(b.last_offset, |r| r.offset),
                        max_timestamp: b.max_timestamp,
                        bytes: super::batch::rewrite(
                            &bytes,
                            kept.first().map_or(b.base_offset, |r| r.offset),
                        ),
                    },
                    Err(e) => {
                        tracing::debug!(error = %e, "compacted batch does not encode; kept whole");
                        b
                    }
                }
            };
            self.size += batch.bytes.len() as u64;
            self.batches.push_back(batch);
        }
    }

    /// DeleteRecords: moves the log start offset up to `offset` (Kafka's
    /// `UnifiedLog.maybeIncrementLogStartOffset`) and releases every batch wholly below it.
    /// An offset at or below the current start changes nothing. Returns the log start offset.
    ///
    /// # Errors
    /// [`OffsetOutOfRange`] when `offset` is negative or beyond the log end (the high
    /// watermark); the log is unchanged.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, OffsetOutOfRange> {
        if !(0..=self.log_end).contains(&offset) {
            return Err(OffsetOutOfRange {
                log_start_offset: self.log_start,
                log_end_offset: self.log_end,
            });
        }
        if offset <= self.log_start {
            return Ok(self.log_start);
        }
        self.log_start = offset;
        while self.batches.front().is_some_and(|b| b.last_offset < offset) {
            if let Some(old) = self.batches.pop_front() {
                self.size -= old.bytes.len() as u64;
            }
        }
        self.producers.maybe_evict_below(self.log_start);
        self.forget_aborted_below();
        Ok(self.log_start)
    }

    /// Aborted transactions wholly below the log start can no longer be read.
    fn forget_aborted_below(&mut self) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < self.log_start)
        {
            self.aborted.pop_front();
        }
    }

    /// Whole batches from the one holding `offset`, while they fit in `max_bytes`; with
    /// `min_one`, the first batch is returned even if it alone is larger (Kafka's KIP-74 rule,
    /// so that a consumer always makes progress).
    ///
    /// # Errors
    /// [`OffsetOutOfRange`] when `offset` is below the log start or above the log end. The log
    /// end itself is valid and reads nothing.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<Read, OffsetOutOfRange> {
        self.read_isolated(offset, max_bytes, min_one, false)
    }

    /// [`PartitionLog::read`], and with `committed` (read_committed) only batches below the
    /// last stable offset, with the aborted transactions among them.
    ///
    /// # Errors
    /// As [`PartitionLog::read`].
    pub fn read_isolated(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        committed: bool,
    ) -> Result<Read, OffsetOutOfRange> {
        let mut read_end = offset;
        if offset < self.log_start || offset > self.log_end {
            return Err(OffsetOutOfRange {
                log_start_offset: self.log_start,
                log_end_offset: self.log_end,
            });
        }
        let mut read = Read {
            high_watermark: self.log_end,
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log_start,
            ..Read::default()
        };
        let first = self.batches.partition_point(|b| b.last_offset < offset);
        for b in self.batches.range(first..) {
            if committed && b.base_offset >= read.last_stable_offset {
                break;
            }
            let len = b.bytes.len();
            let fits = read.bytes.saturating_add(len) <= max_bytes;
            if !(fits || min_one && read.batches.is_empty()) {
                break;
            }
            read.bytes += len;
            read.batches.push(b.bytes.clone());
            read_end = b.last_offset + 1;
        }
        if committed {
            // Kafka's `collectAbortedTxns(fetchOffset, upperBound)`: every abort overlapping
            // the offsets read.
            read.aborted = self
                .aborted
                .iter()
                .filter(|a| a.last_offset >= offset && a.first_offset < read_end)
                .map(|a| (a.producer_id, a.first_offset))
                .collect();
        }
        Ok(read)
    }

    /// The first batch at or after offset `from` whose max timestamp is at least `timestamp`,
    /// with its last offset (to continue the search after it).
    pub fn batch_reaching(&self, timestamp: i64, from: i64) -> Option<(Bytes, i64)> {
        let start = self.batches.partition_point(|b| b.last_offset < from);
        self.batches
            .range(start..)
            .find(|b| b.max_timestamp >= timestamp)
            .map(|b| (b.bytes.clone(), b.last_offset))
    }

    /// The first batch holding the largest max timestamp in the log, and that timestamp.
    pub fn batch_with_max_timestamp(&self) -> Option<(Bytes, i64)> {
        let mut best: Option<&StoredBatch> = None;
        for b in &self.batches {
            if best.is_none_or(|x| b.max_timestamp > x.max_timestamp) {
                best = Some(b);
            }
        }
        best.map(|b| (b.bytes.clone(), b.max_timestamp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::{batch, simple, Spec};
    use crate::log::batch::{validate_produce, BatchHeader};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn append(log: &mut PartitionLog, b: &Bytes) -> Result<Appended, AppendError> {
        log.append(&validate_produce(b, 9).unwrap())
    }

    fn idem(pid: i64, epoch: i16, seq: i32, records: usize) -> Bytes {
        batch(Spec {
            records,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            ..Spec::default()
        })
    }

    fn base_offsets(read: &Read) -> Vec<i64> {
        read.batches
            .iter()
            .map(|b| BatchHeader::parse(b).unwrap().base_offset)
            .collect()
    }

    #[test]
    fn offsets_are_contiguous_across_batches() {
        let mut log = PartitionLog::new(-1);
        let mut expected = 0;
        for n in [1, 5, 3, 10] {
            let a = append(&mut log, &simple(n)).unwrap();
            assert_eq!(a.base_offset, expected);
            assert!(!a.duplicate);
            expected += n as i64;
        }
        assert_eq!(log.log_end_offset(), 19);
        assert_eq!(log.log_start_offset(), 0);
        let all = log.read(0, usize::MAX, true).unwrap();
        assert_eq!(base_offsets(&all), vec![0, 1, 6, 9]);
        for b in &all.batches {
            let h = BatchHeader::parse(b).unwrap();
            assert_eq!(h.partition_leader_epoch, crate::metadata::LEADER_EPOCH);
            assert!(
                validate_produce(b, 9).is_ok(),
                "stored batch keeps a valid CRC"
            );
        }
        // A read from inside a batch starts at that batch.
        assert_eq!(
            base_offsets(&log.read(7, usize::MAX, true).unwrap()),
            vec![6, 9]
        );
        assert!(log.read(19, usize::MAX, true).unwrap().batches.is_empty());
    }

    #[test]
    fn delete_records_moves_the_start_and_releases_whole_batches_below_it() {
        let mut log = PartitionLog::new(-1);
        let b = simple(3);
        let size = b.len() as u64;
        for _ in 0..4 {
            append(&mut log, &b).unwrap();
        }
        // Offset 4 is inside the second batch (3..=5): the first batch goes, the second stays.
        assert_eq!(log.delete_records_before(4), Ok(4));
        assert_eq!(log.log_start_offset(), 4);
        assert_eq!((log.batch_count(), log.size_bytes()), (3, 3 * size));
        assert_eq!(
            log.read(3, usize::MAX, true).unwrap_err(),
            OffsetOutOfRange {
                log_start_offset: 4,
                log_end_offset: 12
            }
        );
        let read = log.read(4, usize::MAX, true).unwrap();
        assert_eq!(base_offsets(&read), vec![3, 6, 9]);
        assert_eq!(read.log_start_offset, 4);
        // Backwards is a no-op that reports the current start.
        assert_eq!(log.delete_records_before(1), Ok(4));
        assert_eq!(log.delete_records_before(0), Ok(4));
        // A batch boundary releases exactly the batches below it.
        assert_eq!(log.delete_records_before(9), Ok(9));
        assert_eq!((log.batch_count(), log.size_bytes()), (1, size));
        // Up to the high watermark: every batch goes, the log end stays.
        assert_eq!(log.delete_records_before(12), Ok(12));
        assert_eq!((log.batch_count(), log.size_bytes()), (0, 0));
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (12, 12));
        assert!(log.read(12, usize::MAX, true).unwrap().batches.is_empty());
        // Appends continue at the log end.
        assert_eq!(append(&mut log, &b).unwrap().base_offset, 12);
        assert_eq!(append(&mut log, &b).unwrap().log_start_offset, 12);
    }

    #[test]
    fn delete_records_beyond_the_high_watermark_or_negative_changes_nothing() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &simple(3)).unwrap();
        let out = OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 3,
        };
        assert_eq!(log.delete_records_before(4), Err(out));
        assert_eq!(log.delete_records_before(-1), Err(out));
        assert_eq!(log.delete_records_before(i64::MIN), Err(out));
        assert_eq!((log.log_start_offset(), log.batch_count()), (0, 1));
        assert_eq!(PartitionLog::new(-1).delete_records_before(0), Ok(0));
    }

    #[test]
    fn retention_drops_oldest_and_advances_start() {
        let one = simple(2);
        let size = one.len() as i64;
        let mut log = PartitionLog::new(size * 3);
        for _ in 0..5 {
            append(&mut log, &one).unwrap();
        }
        assert_eq!(log.batch_count(), 3);
        assert_eq!(log.size_bytes(), 3 * size as u64);
        assert_eq!(log.log_start_offset(), 4);
        assert_eq!(log.log_end_offset(), 10);
        assert_eq!(
            log.read(3, usize::MAX, true).unwrap_err(),
            OffsetOutOfRange {
                log_start_offset: 4,
                log_end_offset: 10
            }
        );
        assert_eq!(
            base_offsets(&log.read(4, usize::MAX, true).unwrap()),
            vec![4, 6, 8]
        );
        // A batch larger than the whole budget is still kept, alone.
        let big = batch(Spec {
            records: 1,
            value_len: 10 * size as usize,
            ..Spec::default()
        });
        append(&mut log, &big).unwrap();
        assert_eq!(log.batch_count(), 1);
        assert_eq!(log.log_start_offset(), 10);
    }

    #[test]
    fn idempotent_retry_gets_original_offset_and_is_not_appended() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &simple(4)).unwrap();
        let first = idem(77, 0, 0, 3);
        assert_eq!(append(&mut log, &first).unwrap().base_offset, 4);
        append(&mut log, &idem(77, 0, 3, 2)).unwrap();
        let end = log.log_end_offset();
        let retry = append(&mut log, &first).unwrap();
        assert_eq!(
            retry,
            Appended {
                base_offset: 4,
                log_start_offset: 0,
                log_append_time: -1,
                duplicate: true
            }
        );
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.batch_count(), 3);
    }

    #[test]
    fn out_of_order_sequence_is_rejected_and_changes_nothing() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &idem(5, 0, 0, 2)).unwrap();
        let err = append(&mut log, &idem(5, 0, 5, 1)).unwrap_err();
        assert_eq!(
            err.code(),
            kafka_protocol::ResponseError::OutOfOrderSequenceNumber
        );
        assert_eq!(log.log_end_offset(), 2);
        let err = append(&mut log, &idem(5, -1, 2, 1)).unwrap_err();
        assert_eq!(
            err.code(),
            kafka_protocol::ResponseError::InvalidProducerEpoch
        );
        assert_eq!(append(&mut log, &idem(5, 0, 2, 1)).unwrap().base_offset, 2);
    }

    fn txn_batch(pid: i64, seq: i32, records: usize) -> Bytes {
        batch(Spec {
            records,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
            transactional: true,
            ..Spec::default()
        })
    }

    #[test]
    fn an_open_transaction_holds_the_last_stable_offset_until_its_marker() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &simple(2)).unwrap();
        assert_eq!(log.last_stable_offset(), 2);
        append(&mut log, &txn_batch(7, 0, 3)).unwrap();
        append(&mut log, &simple(1)).unwrap();
        assert_eq!((log.last_stable_offset(), log.log_end_offset()), (2, 6));
        let committed = log.read_isolated(0, usize::MAX, true, true).unwrap();
        assert_eq!(
            base_offsets(&committed),
            vec![0],
            "stops at the open transaction"
        );
        assert_eq!(committed.last_stable_offset, 2);
        assert_eq!(log.read(0, usize::MAX, true).unwrap().batches.len(), 3);
        assert_eq!(log.append_marker(7, 0, true, 0), Ok(6));
        assert_eq!(log.last_stable_offset(), 7);
        let all = log.read_isolated(0, usize::MAX, true, true).unwrap();
        assert_eq!(base_offsets(&all), vec![0, 2, 5, 6]);
        assert!(all.aborted.is_empty(), "a commit is not listed");
        let marker = BatchHeader::parse(&all.batches[3]).unwrap();
        assert!(marker.is_control() && marker.is_transactional());
        assert_eq!((marker.producer_id, marker.record_count), (7, 1));
    }

    #[test]
    fn active_producers_show_the_open_transaction_start_until_its_marker() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &simple(2)).unwrap();
        assert!(
            log.active_producers().is_empty(),
            "a plain producer is not tracked"
        );
        append(&mut log, &txn_batch(7, 0, 3)).unwrap(); // 2..=4
        let open = log.active_producers();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].producer.producer_id, 7);
        assert_eq!(open[0].producer.last_sequence, 2);
        assert_eq!(open[0].producer.coordinator_epoch, -1);
        assert_eq!(open[0].current_txn_start_offset, 2);
        log.append_marker(7, 0, true, 5_000).unwrap();
        let done = log.active_producers()[0];
        assert_eq!(done.current_txn_start_offset, -1);
        assert_eq!(done.producer.last_timestamp, 5_000, "the marker's time");
        assert_eq!(done.producer.coordinator_epoch, COORDINATOR_EPOCH);
    }

    #[test]
    fn an_aborted_transaction_is_listed_for_reads_that_overlap_it() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &txn_batch(7, 0, 2)).unwrap(); // 0..=1
        append(&mut log, &txn_batch(8, 0, 2)).unwrap(); // 2..=3
        assert_eq!(log.last_stable_offset(), 0);
        assert_eq!(log.append_marker(7, 0, false, 0), Ok(4));
        assert_eq!(log.last_stable_offset(), 2, "producer 8 still open");
        assert_eq!(log.append_marker(8, 0, true, 0), Ok(5));
        let read = log.read_isolated(0, usize::MAX, true, true).unwrap();
        assert_eq!(read.aborted, vec![(7, 0)]);
        assert_eq!(
            log.read_isolated(5, usize::MAX, true, true)
                .unwrap()
                .aborted,
            vec![],
            "after the abort's marker"
        );
        assert!(log.read(0, usize::MAX, true).unwrap().aborted.is_empty());
    }

    #[test]
    fn a_marker_with_an_older_epoch_is_refused_and_a_newer_one_fences() {
        let mut log = PartitionLog::new(-1);
        append(&mut log, &idem(7, 3, 0, 1)).unwrap();
        assert!(matches!(
            log.append_marker(7, 2, false, 0),
            Err(AppendError::StaleMarker { got: 2, current: 3 })
        ));
        assert_eq!(log.log_end_offset(), 1);
        log.append_marker(7, 4, false, 0).unwrap();
        assert!(matches!(
            append(&mut log, &idem(7, 3, 1, 1)),
            Err(AppendError::InvalidProducerEpoch { got: 3, current: 4 })
        ));
    }

    #[test]
    fn read_respects_max_bytes_but_returns_one_batch() {
        let mut log = PartitionLog::new(-1);
        let b = simple(3);
        let size = b.len();
        for _ in 0..4 {
            append(&mut log, &b).unwrap();
        }
        assert_eq!(log.read(0, size * 2 + 1, true).unwrap().batches.len(), 2);
        assert_eq!(log.read(0, size * 2, false).unwrap().bytes, size * 2);
        let one = log.read(0, 1, true).unwrap();
        assert_eq!((one.batches.len(), one.bytes), (1, size));
        assert!(log.read(0, 1, false).unwrap().batches.is_empty());
        assert!(log.read(0, 0, false).unwrap().batches.is_empty());
        assert_eq!(log.read(5, 0, true).unwrap().batches.len(), 1);
    }

    #[test]
    fn timestamp_search_candidates() {
        let mut log = PartitionLog::new(-1);
        // Record timestamps: batch 0: 1000,1010,1020; batch 1: 5000..5020; batch 2: 3000..3020.
        for first_ts in [1_000, 5_000, 3_000] {
            append(
                &mut log,
                &batch(Spec {
                    first_ts,
                    ..Spec::default()
                }),
            )
            .unwrap();
        }
        let (b, last) = log.batch_reaching(1_015, 0).unwrap();
        assert_eq!((BatchHeader::parse(&b).unwrap().base_offset, last), (0, 2));
        let (b, _) = log.batch_reaching(1_021, 0).unwrap();
        assert_eq!(BatchHeader::parse(&b).unwrap().base_offset, 3);
        let (b, _) = log.batch_reaching(2_000, 6).unwrap();
        assert_eq!(BatchHeader::parse(&b).unwrap().base_offset, 6);
        assert!(log.batch_reaching(5_021, 0).is_none());
        let (b, ts) = log.batch_with_max_timestamp().unwrap();
        assert_eq!(
            (BatchHeader::parse(&b).unwrap().base_offset, ts),
            (3, 5_020)
        );
        assert!(PartitionLog::new(-1).batch_with_max_timestamp().is_none());
    }

    fn settings() -> LogSettings {
        LogSettings::with_retention_bytes(-1)
    }

    /// One batch of `(key, value)` records (value `None`: a tombstone), timestamps `ts`.
    fn keyed(records: &[(&str, Option<&str>)], ts: i64, compression: Compression) -> Bytes {
        let records: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (k, v))| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32 - 1,
                timestamp: ts,
                key: Some(Bytes::from(k.to_string())),
                value: v.map(|v| Bytes::from(v.to_string())),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        buf.freeze()
    }

    /// `(offset, key, value)` of every record from offset 0, each stored batch checked valid.
    fn contents(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
        let read = log.read(log.log_start_offset(), usize::MAX, true).unwrap();
        let mut out = Vec::new();
        for b in &read.batches {
            assert!(
                validate_produce(b, 9).is_ok(),
                "valid v2 batch, CRC included"
            );
            for r in super::super::batch::decode_records(b).unwrap() {
                let text = |b: Bytes| String::from_utf8(b.to_vec()).unwrap();
                out.push((r.offset, text(r.key.unwrap()), r.value.map(text)));
            }
        }
        out
    }

    #[test]
    fn compaction_keeps_the_last_record_per_key_at_its_offset() {
        let mut log = PartitionLog::with_settings(LogSettings {
            compact: true,
            delete: false,
            // Every append rolls the log, so every append compacts.
            segment_bytes: 1,
            delete_retention_ms: 1_000,
            ..settings()
        });
        let b1 = keyed(
            &[("a", Some("a1")), ("b", Some("b1")), ("c", Some("c1"))],
            1_000,
            Compression::Gzip,
        );
        let b2 = keyed(&[("a", Some("a2")), ("b", None)], 1_000, Compression::None);
        let b3 = keyed(&[("d", Some("d1"))], 1_000, Compression::None);
        for b in [&b1, &b2, &b3] {
            log.append_at(&validate_produce(b, 9).unwrap(), 1_500)
                .unwrap();
        }
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            contents(&log),
            vec![
                (2, "c".into(), s("c1")),
                (3, "a".into(), s("a2")),
                (4, "b".into(), None),
                (5, "d".into(), s("d1")),
            ]
        );
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 6));
        // A read from a compacted-away offset starts at the next record kept.
        let from_one = log.read(1, usize::MAX, true).unwrap();
        assert_eq!(
            BatchHeader::parse(&from_one.batches[0])
                .unwrap()
                .base_offset,
            2
        );
        // Once older than delete.retention.ms the tombstone goes too.
        log.compact(2_001);
        assert_eq!(
            contents(&log),
            vec![
                (2, "c".into(), s("c1")),
                (3, "a".into(), s("a2")),
                (5, "d".into(), s("d1")),
            ]
        );
    }

    #[test]
    fn a_compacted_log_refuses_records_without_a_key() {
        let mut log = PartitionLog::with_settings(LogSettings {
            compact: true,
            ..settings()
        });
        let mut buf = bytes::BytesMut::new();
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        };
        RecordBatchEncoder::encode(
            &mut buf,
            [&record],
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        let err = append(&mut log, &buf.freeze()).unwrap_err();
        assert_eq!(err.code(), kafka_protocol::ResponseError::InvalidRecord);
        assert_eq!(log.log_end_offset(), 0);
    }

    #[test]
    fn compaction_waits_for_segment_bytes() {
        let mut log = PartitionLog::with_settings(LogSettings {
            compact: true,
            delete: false,
            segment_bytes: 1 << 20,
            ..settings()
        });
        for _ in 0..3 {
            append(
                &mut log,
                &keyed(&[("a", Some("x"))], 1_000, Compression::None),
            )
            .unwrap();
        }
        assert_eq!(
            contents(&log).len(),
            3,
            "nothing compacted before the log rolls"
        );
    }

    #[test]
    fn compaction_waits_until_the_dirty_part_reaches_min_cleanable_dirty_ratio() {
        let mut log = PartitionLog::with_settings(LogSettings {
            compact: true,
            delete: false,
            // Every append rolls the log: only the dirty ratio holds compaction back.
            segment_bytes: 1,
            min_dirty_permille: 500,
            ..settings()
        });
        let clean: Vec<String> = (0..8).map(|i| format!("key-{i}")).collect();
        let clean: Vec<(&str, Option<&str>)> =
            clean.iter().map(|k| (k.as_str(), Some("v"))).collect();
        append(&mut log, &keyed(&clean, 1_000, Compression::None)).unwrap();
        let update = |v: &'static str| keyed(&[("key-0", Some(v))], 1_000, Compression::None);
        append(&mut log, &update("u1")).unwrap();
        assert_eq!(
            contents(&log).len(),
            9,
            "one small update is under half of the log: not compacted"
        );
        // Each update is smaller than the clean batch but more than an eighth of it: by the
        // eighth, the updates appended are at least half of the log.
        let values = ["u2", "u3", "u4", "u5", "u6", "u7", "u8"];
        for v in values {
            append(&mut log, &update(v)).unwrap();
        }
        let kept = contents(&log);
        assert!(kept.len() < 9 + values.len(), "compacted: {kept:?}");
        let key0: Vec<_> = kept.iter().filter(|(_, k, _)| k == "key-0").collect();
        assert_eq!(key0.last().unwrap().2.as_deref(), Some("u8"));
        assert!(
            key0.iter().all(|(_, _, v)| v.as_deref() != Some("v")),
            "the first value of key-0 compacted away"
        );
        // With a ratio of 0 every roll compacts at once.
        let mut eager = PartitionLog::with_settings(LogSettings {
            compact: true,
            delete: false,
            segment_bytes: 1,
            min_dirty_permille: 0,
            ..settings()
        });
        append(&mut eager, &keyed(&clean, 1_000, Compression::None)).unwrap();
        append(&mut eager, &update("u1")).unwrap();
        assert_eq!(contents(&eager).len(), 8);
    }

    #[test]
    fn retention_ms_drops_batches_older_than_it_on_append_and_expire() {
        let mut log = PartitionLog::with_settings(LogSettings {
            retention_ms: Some(100),
            ..settings()
        });
        let old = batch(Spec {
            first_ts: 1_000,
            ..Spec::default()
        });
        log.append_at(&validate_produce(&old, 9).unwrap(), 1_050)
            .unwrap();
        assert_eq!(log.batch_count(), 1, "within retention.ms");
        log.expire(1_200);
        assert_eq!(log.batch_count(), 0);
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
        let new = batch(Spec {
            first_ts: 5_000,
            ..Spec::default()
        });
        log.append_at(&validate_produce(&old, 9).unwrap(), 5_000)
            .unwrap();
        log.append_at(&validate_produce(&new, 9).unwrap(), 5_000)
            .unwrap();
        assert_eq!(log.batch_count(), 1, "the old batch expired on append");
        assert_eq!(log.log_start_offset(), 6);
    }

    #[test]
    fn max_message_bytes_refuses_a_larger_batch_and_changes_nothing() {
        let small = simple(1);
        let mut log = PartitionLog::with_settings(LogSettings {
            max_message_bytes: small.len(),
            ..settings()
        });
        append(&mut log, &small).unwrap();
        let err = append(&mut log, &simple(2)).unwrap_err();
        assert_eq!(err.code(), kafka_protocol::ResponseError::MessageTooLarge);
        assert_eq!(log.log_end_offset(), 1);
    }

    #[test]
    fn log_append_time_sets_the_batch_max_timestamp_and_keeps_the_crc_valid() {
        let mut log = PartitionLog::with_settings(LogSettings {
            log_append_time: true,
            ..settings()
        });
        let a = log
            .append_at(&validate_produce(&simple(3), 9).unwrap(), 5_555)
            .unwrap();
        assert_eq!(a.log_append_time, 5_555);
        let read = log.read(0, usize::MAX, true).unwrap();
        let h = BatchHeader::parse(&read.batches[0]).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 5_555);
        assert!(validate_produce(&read.batches[0], 9).is_ok());
        assert_eq!(log.batch_with_max_timestamp().unwrap().1, 5_555);
    }
}
