//! Idempotent producer state of one partition, with Kafka's rules (`ProducerStateManager`,
//! `ProducerAppendInfo.checkSequence`, `ProducerStateEntry.findDuplicateBatch`):
//! - a batch without a producer id (-1) is not checked;
//! - an epoch lower than the producer's current one: INVALID_PRODUCER_EPOCH;
//! - a batch whose producer id, epoch and sequence range equal one of the producer's last five
//!   batches is a retry: acknowledged with that batch's original base offset, not appended;
//! - a new (higher) epoch must start at sequence 0;
//! - within an epoch the first sequence must follow the last one (`i32::MAX` wraps to 0),
//!   otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - an unknown producer may start at any sequence.
//!
//! Memory: a producer is forgotten once every batch it wrote has left the log (retention), as
//! Kafka did before KIP-360 kept such state for a day. A producer coming back after that is an
//! unknown producer again, and is accepted. The sweep runs when the map has doubled since the
//! previous one, so its cost is amortised over the appends that grew it.

use std::collections::{HashMap, VecDeque};

use super::batch::{increment_sequence, AppendError, BatchHeader};

/// How many recent batches per producer are kept for duplicate detection (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`; clients keep at most five in flight).
pub const BATCHES_TO_RETAIN: usize = 5;

const MIN_SWEEP: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
}

#[derive(Debug, Clone)]
struct ProducerEntry {
    epoch: i16,
    /// Oldest first, at most [`BATCHES_TO_RETAIN`].
    batches: VecDeque<BatchMeta>,
    /// Last offset of the newest batch, for eviction.
    last_offset: i64,
    /// The max timestamp of the newest batch, or the newest marker's time (DescribeProducers).
    last_timestamp: i64,
    /// The coordinator epoch of the newest marker; -1 before any (DescribeProducers).
    coordinator_epoch: i32,
}

/// What DescribeProducers tells of one producer of a partition (Kafka's `ProducerStateEntry`
/// as `UnifiedLog.activeProducers` reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of the newest batch kept at the current epoch; -1 when none is (a
    /// marker at a newer epoch forgets the older epoch's batches).
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
}

/// What the producer state says about a batch about to be appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// A retry of a batch already in the log at this base offset: acknowledge, do not append.
    Duplicate { base_offset: i64 },
}

/// Producer state of one partition, keyed by producer id.
#[derive(Debug, Default)]
pub struct Producers {
    entries: HashMap<i64, ProducerEntry>,
    sweep_at: usize,
}

impl Producers {
    /// Checks `batch` against the state of its producer. Changes nothing.
    ///
    /// # Errors
    /// [`AppendError::InvalidProducerEpoch`] or [`AppendError::OutOfOrderSequence`].
    pub fn check(&self, batch: &BatchHeader) -> Result<SequenceCheck, AppendError> {
        if !batch.has_producer_id() {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.entries.get(&batch.producer_id) else {
            return Ok(SequenceCheck::Append);
        };
        let (first, last) = (batch.base_sequence, batch.last_sequence());
        if batch.producer_epoch == entry.epoch {
            if let Some(dup) = entry
                .batches
                .iter()
                .find(|m| m.first_seq == first && m.last_seq == last)
            {
                return Ok(SequenceCheck::Duplicate {
                    base_offset: dup.base_offset,
                });
            }
        }
        if batch.producer_epoch < entry.epoch {
            return Err(AppendError::InvalidProducerEpoch {
                got: batch.producer_epoch,
                current: entry.epoch,
            });
        }
        if batch.producer_epoch > entry.epoch {
            if first != 0 {
                return Err(AppendError::OutOfOrderSequence {
                    got: first,
                    expected: format!("0 for new epoch {}", batch.producer_epoch),
                });
            }
            return Ok(SequenceCheck::Append);
        }
        let last_seq = entry.batches.back().map_or(-1, |m| m.last_seq);
        if first != increment_sequence(last_seq, 1) {
            return Err(AppendError::OutOfOrderSequence {
                got: first,
                expected: increment_sequence(last_seq, 1).to_string(),
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended batch at `base_offset`; `max_timestamp` is its max timestamp as
    /// stored (the append time under LogAppendTime).
    pub fn record(&mut self, batch: &BatchHeader, base_offset: i64, max_timestamp: i64) {
        if !batch.has_producer_id() {
            return;
        }
        let meta = BatchMeta {
            first_seq: batch.base_sequence,
            last_seq: batch.last_sequence(),
            base_offset,
        };
        let last_offset = base_offset + batch.offset_span() - 1;
        let entry = self
            .entries
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: batch.producer_epoch,
                batches: VecDeque::with_capacity(BATCHES_TO_RETAIN),
                last_offset,
                last_timestamp: max_timestamp,
                coordinator_epoch: -1,
            });
        if entry.epoch != batch.producer_epoch {
            entry.epoch = batch.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(meta);
        entry.last_offset = last_offset;
        entry.last_timestamp = max_timestamp;
    }

    /// The coordinator epoch of the producer's last marker here (-1 before any), if it is
    /// known here.
    pub fn coordinator_epoch(&self, producer_id: i64) -> Option<i32> {
        self.entries.get(&producer_id).map(|e| e.coordinator_epoch)
    }

    /// The producer's current epoch, if it is known here.
    pub fn epoch(&self, producer_id: i64) -> Option<i16> {
        self.entries.get(&producer_id).map(|e| e.epoch)
    }

    /// Records a transaction marker written at `offset` and `timestamp` by the coordinator of
    /// `coordinator_epoch` for the producer: a newer epoch (the coordinator fenced the
    /// producer) replaces the old one, whose sequences no longer count.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        offset: i64,
        timestamp: i64,
        coordinator_epoch: i32,
    ) {
        let entry = self
            .entries
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch,
                batches: VecDeque::with_capacity(BATCHES_TO_RETAIN),
                last_offset: offset,
                last_timestamp: timestamp,
                coordinator_epoch,
            });
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.last_offset = offset;
        entry.last_timestamp = timestamp;
        entry.coordinator_epoch = coordinator_epoch;
    }

    /// Every producer known here, by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = self
            .entries
            .iter()
            .map(|(&producer_id, e)| ActiveProducer {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |m| m.last_seq),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }

    /// Forgets producers whose every batch is below `log_start`, when the map has grown enough
    /// since the last sweep to be worth it.
    pub fn maybe_evict_below(&mut self, log_start: i64) {
        if self.entries.len() < self.sweep_at.max(MIN_SWEEP) {
            return;
        }
        self.entries.retain(|_, e| e.last_offset >= log_start);
        self.sweep_at = self.entries.len() * 2;
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 100,
            partition_leader_epoch: -1,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            first_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: records,
        }
    }

    fn append(p: &mut Producers, h: &BatchHeader, at: i64) -> Result<SequenceCheck, AppendError> {
        let c = p.check(h)?;
        if c == SequenceCheck::Append {
            p.record(h, at, h.max_timestamp);
        }
        Ok(c)
    }

    #[test]
    fn unknown_producer_starts_anywhere_then_must_follow() {
        let mut p = Producers::default();
        assert_eq!(
            append(&mut p, &header(1, 0, 40, 5), 0),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            append(&mut p, &header(1, 0, 45, 2), 5),
            Ok(SequenceCheck::Append)
        );
        let gap = p.check(&header(1, 0, 48, 1)).unwrap_err();
        assert!(matches!(
            gap,
            AppendError::OutOfOrderSequence { got: 48, .. }
        ));
        assert!(
            p.check(&header(1, 0, 46, 1)).is_err(),
            "overlap is out of order"
        );
    }

    #[test]
    fn retries_of_the_last_five_are_duplicates() {
        let mut p = Producers::default();
        for i in 0..7 {
            append(&mut p, &header(9, 0, i * 2, 2), 100 + i64::from(i) * 2).unwrap();
        }
        // Batches 2..=6 are cached; 0 and 1 are not.
        assert_eq!(
            p.check(&header(9, 0, 4, 2)),
            Ok(SequenceCheck::Duplicate { base_offset: 104 })
        );
        assert_eq!(
            p.check(&header(9, 0, 12, 2)),
            Ok(SequenceCheck::Duplicate { base_offset: 112 })
        );
        assert!(p.check(&header(9, 0, 2, 2)).is_err());
        // Same first sequence, different range: not a duplicate.
        assert!(p.check(&header(9, 0, 12, 3)).is_err());
    }

    #[test]
    fn epochs() {
        let mut p = Producers::default();
        append(&mut p, &header(3, 2, 0, 1), 0).unwrap();
        assert!(matches!(
            p.check(&header(3, 1, 1, 1)),
            Err(AppendError::InvalidProducerEpoch { got: 1, current: 2 })
        ));
        assert!(matches!(
            p.check(&header(3, 3, 5, 1)),
            Err(AppendError::OutOfOrderSequence { got: 5, .. })
        ));
        assert_eq!(
            append(&mut p, &header(3, 3, 0, 1), 1),
            Ok(SequenceCheck::Append)
        );
        // The old epoch's batch is no longer a duplicate at the new epoch.
        assert_eq!(p.check(&header(3, 3, 1, 1)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut p = Producers::default();
        append(&mut p, &header(4, 0, i32::MAX - 1, 2), 0).unwrap();
        assert_eq!(p.check(&header(4, 0, 0, 1)), Ok(SequenceCheck::Append));
        assert!(p.check(&header(4, 0, i32::MAX, 1)).is_err());
    }

    #[test]
    fn no_producer_id_is_never_checked() {
        let mut p = Producers::default();
        for _ in 0..3 {
            assert_eq!(
                append(&mut p, &header(-1, -1, -1, 1), 0),
                Ok(SequenceCheck::Append)
            );
        }
        assert!(p.is_empty());
    }

    #[test]
    fn eviction_follows_the_log_start() {
        let mut p = Producers::default();
        for pid in 0..100 {
            append(&mut p, &header(pid, 0, 0, 1), pid).unwrap();
        }
        p.maybe_evict_below(90);
        assert_eq!(p.len(), 10);
        // Next sweep only once the map doubled again.
        p.maybe_evict_below(1_000);
        assert_eq!(p.len(), 10);
    }

    #[test]
    fn active_producers_report_the_last_batch_then_the_marker() {
        let mut p = Producers::default();
        let mut h = header(5, 1, 0, 3);
        h.max_timestamp = 1_000;
        append(&mut p, &h, 10).unwrap();
        let before = p.active();
        assert_eq!(
            before,
            vec![ActiveProducer {
                producer_id: 5,
                epoch: 1,
                last_sequence: 2,
                last_timestamp: 1_000,
                coordinator_epoch: -1,
            }]
        );
        // A marker at the same epoch keeps the sequences; its time and coordinator epoch count.
        p.record_marker(5, 1, 13, 2_000, 0);
        assert_eq!(
            (p.active()[0].last_sequence, p.active()[0].last_timestamp),
            (2, 2_000)
        );
        assert_eq!(p.active()[0].coordinator_epoch, 0);
        // A fencing marker at a newer epoch forgets the old epoch's sequences.
        p.record_marker(5, 2, 14, 3_000, 0);
        let fenced = p.active()[0];
        assert_eq!((fenced.epoch, fenced.last_sequence), (2, -1));
    }

    #[test]
    fn active_producers_are_listed_by_producer_id() {
        let mut p = Producers::default();
        for pid in [9, 3, 6] {
            append(&mut p, &header(pid, 0, 0, 1), pid).unwrap();
        }
        let ids: Vec<i64> = p.active().iter().map(|a| a.producer_id).collect();
        assert_eq!(ids, vec![3, 6, 9]);
    }
}
