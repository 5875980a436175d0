//! One share partition of a KIP-932 share group (Apache Kafka 4.4's `SharePartition`): which of
//! the partition's records are in flight, who holds each one, and when a hold runs out.
//!
//! Kept pure because a share partition is all state and rules: the shell reads the log, runs the
//! timer, stores the durable form; this module only decides. Every time-dependent input takes
//! `now` (locks are deadlines, not timer tasks), so tests drive hours of redelivery instantly.
//!
//! The window runs from the start offset (Kafka's SPSO: everything below it is done) to the end
//! offset (the next offset never acquired; Kafka keeps its last offset, inclusive). Each offset
//! in it is Available, Acquired by one member until a deadline, Acknowledged or Archived, with a
//! delivery count. It is stored as runs of equal state keyed by first offset (Kafka's
//! `cachedState`), with indexes of the available runs, the lock deadlines and each member's
//! holdings, so that a fetch, an acknowledgement or a timeout costs what it touches, not the
//! size of the window.
//!
//! Durable form ([`PartitionState`]): the start offset and the state of every run, as Kafka's
//! share coordinator keeps them. A lock does not survive a restart: held records come back
//! Available with their delivery count, so nothing acquired is lost and nothing acknowledged
//! is delivered again. Acquisition alone is not a durable change (as in Kafka, which writes
//! state only on acknowledgement, release, archive and timeout).

use std::collections::{BTreeMap, BTreeSet};

use crate::vocab::codec::{count, end, err, version, DecodeError, Writer, V1};
use crate::vocab::reader::Reader;
use crate::vocab::{GroupError, MemberId, Timestamp};

/// The limits of one share partition, with Kafka 4.4's defaults.
///
/// Each is a broker config (`group.share.*`) that a group may override (`share.*` group
/// configs, bounded by the broker's `group.share.min.*` / `group.share.max.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionConfig {
    /// How long an acquired record is held before it is released: `group.share.record.lock.
    /// duration.ms` (group: `share.record.lock.duration.ms`), default 30000, bounds 15000 to
    /// 60000 (`group.share.min.record.lock.duration.ms`, `group.share.max.record.lock.duration.ms`).
    pub lock_duration_ms: u64,
    /// Deliveries after which a released or timed-out record is archived instead of delivered
    /// again: `group.share.delivery.count.limit` (group: `share.delivery.count.limit`),
    /// default 5, bounds 2 to 10 (`group.share.min.delivery.count.limit`,
    /// `group.share.max.delivery.count.limit`).
    pub delivery_count_limit: u16,
    /// The most records in flight (start to end offset, whatever their state); nothing past it
    /// is acquired: `group.share.partition.max.record.locks` (group:
    /// `share.partition.max.record.locks`), default 2000, bounds 100 to 4000
    /// (`group.share.min.partition.max.record.locks`, `group.share.max.partition.max.record.locks`).
    pub max_in_flight: u32,
    /// Whether the group has a dead-letter queue (KIP-1191: its
    /// `errors.deadletterqueue.topic.name` is set): a rejected record, or one whose delivery
    /// count reached the limit, is then Archiving until the shell has written it to the
    /// queue, and only then Archived.
    pub dead_letter: bool,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_in_flight: 2000,
            dead_letter: false,
        }
    }
}

/// A record's state, with Kafka's `RecordState` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    /// On its way to the group's dead-letter queue: never delivered again, and the start
    /// offset waits for it (Kafka 4.4's ARCHIVING).
    Archiving,
    Archived,
}

/// Why a record goes to the dead-letter queue (the queue record's `__dlq.errors.message`
/// header says it in Kafka's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadCause {
    /// Its consumer rejected it.
    Rejected,
    /// It was delivered `delivery_count_limit` times without being accepted.
    DeliveryLimit,
}

impl DeadCause {
    /// Kafka's message for the cause (`ShareGroupDLQManager.CLIENT_REJECT`,
    /// `DELIVERY_COUNT_EXCEEDED`).
    pub fn message(self) -> &'static str {
        match self {
            DeadCause::Rejected => "Offset rejected by client.",
            DeadCause::DeliveryLimit => "Offset delivery count exceeded the threshold.",
        }
    }
}

/// Records that became Archiving: the shell writes each offset of `[first, last]` to the
/// dead-letter queue, then reports them with [`SharePartition::dead_lettered`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetter {
    pub first: i64,
    pub last: i64,
    pub delivery_count: u16,
    pub cause: DeadCause,
}

impl RecordState {
    pub fn id(self) -> u8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archiving => 3,
            RecordState::Archived => 4,
        }
    }

    pub fn from_id(id: u8) -> Option<RecordState> {
        match id {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            3 => Some(RecordState::Archiving),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }
}

/// How a share fetch acquires records (`ShareAcquireMode`, ShareFetch v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcquireMode {
    /// Kafka's default (`batch_optimized`): whole batches until `max_records` is reached, so
    /// the last one may take the count past it.
    #[default]
    BatchOptimized,
    /// `record_limit` (KIP-1206, ShareFetch v2): at most `max_records` records.
    RecordLimit,
}

impl AcquireMode {
    /// The mode for ShareFetch's `ShareAcquireMode` byte; `None` for an unknown one.
    pub fn from_code(code: i8) -> Option<AcquireMode> {
        match code {
            0 => Some(AcquireMode::BatchOptimized),
            1 => Some(AcquireMode::RecordLimit),
            _ => None,
        }
    }
}

/// An acknowledgement type, from its ShareAcknowledge / ShareFetch wire byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckType {
    /// 0: an offset with no record (compacted away, a control record): archived.
    Gap,
    /// 1: processed: acknowledged.
    Accept,
    /// 2: give it back: available again (archived at the delivery-count limit).
    Release,
    /// 3: unprocessable: archived, never delivered again.
    Reject,
    /// 4: still working on it: the lock is extended, the state kept (KIP-1222).
    Renew,
}

impl AckType {
    /// The type for a wire byte; `None` is Kafka's INVALID_REQUEST.
    pub fn from_code(code: u8) -> Option<AckType> {
        match code {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }

    pub fn code(self) -> u8 {
        match self {
            AckType::Gap => 0,
            AckType::Accept => 1,
            AckType::Release => 2,
            AckType::Reject => 3,
            AckType::Renew => 4,
        }
    }
}

/// One record batch of the log as the shell read it, offsets inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBatch {
    pub first: i64,
    pub last: i64,
    /// Never to be delivered: a control batch, or an aborted transaction's batch under
    /// read_committed. Its offsets are archived as they are met.
    pub skip: bool,
}

/// Records acquired for a member: a contiguous range with one delivery count (a ShareFetch
/// response's `AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first: i64,
    pub last: i64,
    pub delivery_count: u16,
}

/// One acknowledgement batch of a request, offsets inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    pub first: i64,
    pub last: i64,
    /// One type for the whole range, or one per offset.
    pub types: Vec<AckType>,
}

impl AckBatch {
    /// Offsets of the batch acknowledged as `t`.
    pub fn count_of(&self, t: AckType) -> u64 {
        match self.types.as_slice() {
            [one] if *one == t => len(self.first, self.last),
            [_] => 0,
            many => many.iter().filter(|x| **x == t).count() as u64,
        }
    }
}

/// Why an acknowledgement was refused (nothing of the call was applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{error}: {message}")]
pub struct AckError {
    /// INVALID_REQUEST (malformed batches, offsets past the window) or INVALID_RECORD_STATE
    /// (a record not acquired by this member).
    pub error: GroupError,
    pub message: &'static str,
}

impl AckError {
    fn request(message: &'static str) -> AckError {
        AckError {
            error: GroupError::InvalidRequest,
            message,
        }
    }

    fn state(message: &'static str) -> AckError {
        AckError {
            error: GroupError::InvalidRecordState,
            message,
        }
    }
}

/// Records whose locks ended (by timeout or by their member leaving), for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Made available for redelivery.
    pub released: u64,
    /// Archived: their delivery count reached the limit.
    pub archived: u64,
}

/// The durable form of a share partition (Kafka's share-group state: the start offset and
/// state batches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub start_offset: i64,
    /// Ascending, disjoint, at or past the start offset.
    pub batches: Vec<StateBatch>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first: i64,
    pub last: i64,
    pub state: RecordState,
    pub delivery_count: u16,
}

/// What one offset of the window is, for describing and testing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetState<'a> {
    pub state: RecordState,
    pub delivery_count: u16,
    /// The holder and its lock deadline, when acquired.
    pub holder: Option<(&'a MemberId, Timestamp)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Available,
    Acquired {
        member: MemberId,
        deadline: Timestamp,
    },
    Acknowledged,
    Archiving(DeadCause),
    Archived,
}

impl Slot {
    fn state(&self) -> RecordState {
        match self {
            Slot::Available => RecordState::Available,
            Slot::Acquired { .. } => RecordState::Acquired,
            Slot::Acknowledged => RecordState::Acknowledged,
            Slot::Archiving(_) => RecordState::Archiving,
            Slot::Archived => RecordState::Archived,
        }
    }

    fn is_terminal(&self) -> bool {
        matches!(self, Slot::Acknowledged | Slot::Archived)
    }
}

/// Offsets `[key, last]` in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    last: i64,
    slot: Slot,
    count: u16,
}

impl Run {
    /// Archived without ever being delivered (a log gap before a read, a skipped batch): such
    /// offsets are ignored by acknowledgements, as Kafka ignores offsets missing from its cache.
    fn never_delivered(&self) -> bool {
        self.slot == Slot::Archived && self.count == 0
    }
}

fn len(first: i64, last: i64) -> u64 {
    // Within the window: first <= last, both non-negative and below i64::MAX.
    (last - first) as u64 + 1
}

/// Kafka's `throttleRecordsDeliveryLimit`: from this delivery count on, a batch is delivered
/// alone and shrunk, to isolate a poison record without wasting the other records' attempts.
fn throttle_limit(delivery_count_limit: u16) -> u16 {
    delivery_count_limit.div_ceil(2).max(2)
}

/// One share partition's in-flight records. See the module docs.
#[derive(Debug, Clone)]
pub struct SharePartition {
    config: PartitionConfig,
    start: i64,
    /// Exclusive; `start == end` is an empty window.
    end: i64,
    /// Runs tiling `[start, end)` exactly.
    runs: BTreeMap<i64, Run>,
    /// First offsets of the available runs.
    available: BTreeSet<i64>,
    /// Lock deadlines of the acquired runs, by first offset.
    locks: BTreeSet<(Timestamp, i64)>,
    /// Each member's acquired runs.
    held: BTreeSet<(MemberId, i64)>,
    n_available: u64,
    n_acquired: u64,
    n_terminal: u64,
    changed: bool,
    /// Records a RELEASE archived at the delivery limit since last asked (for the metrics).
    archived_by_release: u64,
    /// Records that became Archiving and are not yet handed to the shell.
    dead_letters: Vec<DeadLetter>,
}

impl SharePartition {
    /// An empty partition whose next record to deliver is `start_offset` (Kafka's
    /// initialisation from `share.auto.offset.reset` is the shell's: it knows the log).
    pub fn new(start_offset: i64, config: PartitionConfig) -> SharePartition {
        SharePartition {
            config,
            start: start_offset,
            end: start_offset,
            runs: BTreeMap::new(),
            available: BTreeSet::new(),
            locks: BTreeSet::new(),
            held: BTreeSet::new(),
            n_available: 0,
            n_acquired: 0,
            n_terminal: 0,
            changed: false,
            archived_by_release: 0,
            dead_letters: Vec::new(),
        }
    }

    /// Back from the durable form: what was acquired comes back available with its delivery
    /// count; offsets between state batches (never written: acquired before the crash) come
    /// back available with no delivery. Batches below the start offset or overlapping an
    /// earlier one are clipped ([`decode`] refuses them outright). Archiving records are
    /// handed to the shell again ([`SharePartition::take_dead_letters`]): their write to the
    /// dead-letter queue may not have happened (Kafka's `maybeResumeDlqArchiving`, which
    /// tells the cause by the delivery count).
    pub fn restore(state: PartitionState, config: PartitionConfig) -> SharePartition {
        let mut p = SharePartition::new(state.start_offset, config);
        for b in state.batches {
            let first = b.first.max(p.end);
            if b.last < first || b.last == i64::MAX {
                continue;
            }
            if first > p.end {
                p.insert(
                    p.end,
                    Run {
                        last: first - 1,
                        slot: Slot::Available,
                        count: 0,
                    },
                );
            }
            let slot = match b.state {
                RecordState::Available | RecordState::Acquired => Slot::Available,
                RecordState::Acknowledged => Slot::Acknowledged,
                RecordState::Archiving => {
                    let cause = if b.delivery_count >= config.delivery_count_limit {
                        DeadCause::DeliveryLimit
                    } else {
                        DeadCause::Rejected
                    };
                    p.dead_letters.push(DeadLetter {
                        first,
                        last: b.last,
                        delivery_count: b.delivery_count,
                        cause,
                    });
                    Slot::Archiving(cause)
                }
                RecordState::Archived => Slot::Archived,
            };
            p.insert(
                first,
                Run {
                    last: b.last,
                    slot,
                    count: b.delivery_count,
                },
            );
            p.end = b.last + 1;
        }
        p.merge_span(p.start, p.end);
        p.advance_start();
        p.changed = false;
        p
    }

    pub fn config(&self) -> &PartitionConfig {
        &self.config
    }

    /// A group config change; it applies to what happens next (locks already set keep their
    /// deadline, as Kafka's timer tasks do).
    pub fn set_config(&mut self, config: PartitionConfig) {
        self.config = config;
    }

    /// The share-partition start offset (SPSO): every offset below it is done.
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The offset after the last one ever acquired (Kafka's endOffset + 1).
    pub fn end_offset(&self) -> i64 {
        self.end
    }

    /// Records in flight: from the start to the end offset, whatever their state (Kafka's
    /// count against `group.share.partition.max.record.locks`).
    pub fn in_flight(&self) -> u64 {
        self.end.saturating_sub(self.start).max(0) as u64
    }

    pub fn acquired_count(&self) -> u64 {
        self.n_acquired
    }

    pub fn available_count(&self) -> u64 {
        self.n_available
    }

    /// Acknowledged or archived records still in the window (Kafka's deliveryCompleteCount).
    pub fn delivered_count(&self) -> u64 {
        self.n_terminal
    }

    /// Records not yet delivered to completion below `high_watermark`: from the start offset
    /// on, less those already acknowledged or archived.
    pub fn lag(&self, high_watermark: i64) -> u64 {
        let span = high_watermark.saturating_sub(self.start).max(0) as u64;
        span.saturating_sub(self.n_terminal)
    }

    /// Where the shell should read the log from next: the first available offset of the
    /// window, else the end of the window.
    pub fn next_fetch_offset(&self) -> i64 {
        self.available.first().copied().unwrap_or(self.end)
    }

    /// The earliest lock deadline, for the shell's one timer.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.locks.first().map(|&(deadline, _)| deadline)
    }

    /// Records a RELEASE archived at the delivery limit since the last call.
    pub fn take_archived(&mut self) -> u64 {
        std::mem::take(&mut self.archived_by_release)
    }

    /// Records that became Archiving since the last call (and, after a restore, those stored
    /// Archiving): the shell writes them to the dead-letter queue.
    pub fn take_dead_letters(&mut self) -> Vec<DeadLetter> {
        std::mem::take(&mut self.dead_letters)
    }

    /// The dead-letter queue write of `[first, last]` ended (written, or given up: Kafka
    /// archives regardless): its records still Archiving become Archived, and the start
    /// offset moves past them if it can. Whether anything changed (records since reset or
    /// removed are left alone).
    pub fn dead_lettered(&mut self, first: i64, last: i64) -> bool {
        let (lo, hi) = (first.max(self.start), last.min(self.end - 1));
        if lo > hi {
            return false;
        }
        let mut spans = Vec::new();
        let from = self.run_at(lo).map_or(lo, |(f, _)| f);
        for (&k, run) in self.runs.range(from..=hi) {
            if matches!(run.slot, Slot::Archiving(_)) {
                spans.push((k.max(lo), run.last.min(hi)));
            }
        }
        if spans.is_empty() {
            return false;
        }
        for &(a, b) in &spans {
            self.replace_span(a, b, Slot::Archived, None);
        }
        self.merge_span(lo, hi);
        self.changed = true;
        self.advance_start();
        true
    }

    /// Whether a durable change (acknowledgement, release, archive, timeout, start move)
    /// happened since last asked: the shell then stores [`SharePartition::snapshot`].
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// One offset's state: `None` outside the window (below it: done; past it: not read yet).
    pub fn state_of(&self, offset: i64) -> Option<OffsetState<'_>> {
        let (_, run) = self.run_at(offset)?;
        Some(OffsetState {
            state: run.slot.state(),
            delivery_count: run.count,
            holder: match &run.slot {
                Slot::Acquired { member, deadline } => Some((member, *deadline)),
                _ => None,
            },
        })
    }

    /// Acquires records for `member` from what the shell read of the log, starting at
    /// [`SharePartition::next_fetch_offset`] (the first batch holds that offset, or starts past
    /// it when the log has no record there: then the window's available records before the
    /// first batch are archived, Kafka's `maybeArchiveStaleBatches`).
    ///
    /// Available records of the window and new records at or past its end are acquired, with
    /// a lock until `now` + the lock duration and one more delivery. As Kafka (batch-optimized
    /// acquisition), whole batches are taken until `max_records` is reached, so the last batch
    /// may take it past; nothing new is taken once the window holds the in-flight limit. Gaps
    /// between read batches are acquired with them (the client acknowledges them as Gap); a
    /// gap between the window end and the first new batch is archived. Records the log still
    /// has but which have been delivered many times are throttled as in Kafka 4.4: from half the
    /// delivery-count limit a batch is delivered alone and shrunk, and a record on its last
    /// attempt alone.
    ///
    /// `batches` must ascend without overlap at non-negative offsets; otherwise nothing is
    /// acquired.
    pub fn acquire(
        &mut self,
        member: &MemberId,
        batches: &[ReadBatch],
        max_records: u32,
        now: Timestamp,
    ) -> Vec<Acquired> {
        self.acquire_in(
            AcquireMode::BatchOptimized,
            member,
            batches,
            max_records,
            now,
        )
    }

    /// [`SharePartition::acquire`] in either of Kafka's acquire modes: in
    /// [`AcquireMode::RecordLimit`] never more than `max_records` records, a batch split where
    /// the limit falls (its other records stay available, or unread past the window's end).
    pub fn acquire_in(
        &mut self,
        mode: AcquireMode,
        member: &MemberId,
        batches: &[ReadBatch],
        max_records: u32,
        now: Timestamp,
    ) -> Vec<Acquired> {
        let record_limit = mode == AcquireMode::RecordLimit;
        let mut out = Vec::new();
        if max_records == 0 || !well_formed(batches) {
            return out;
        }
        let (Some(first_batch), Some(last_batch)) = (batches.first(), batches.last()) else {
            return out;
        };
        if last_batch.last < self.start {
            return out;
        }
        let fetch = self.next_fetch_offset();
        let room = u64::from(self.config.max_in_flight).saturating_sub(self.in_flight());
        let (max, last_to_acquire) = if room > 0 {
            (u64::from(max_records).min(room), last_batch.last)
        } else if fetch < self.end {
            // At the limit, records released inside the window can still go out.
            (
                u64::from(max_records).min(len(fetch, self.end - 1)),
                last_batch.last.min(self.end - 1),
            )
        } else {
            return out;
        };
        if fetch < first_batch.first {
            self.archive_available(fetch, first_batch.first - 1);
        }
        let deadline = now.plus_ms(self.config.lock_duration_ms);
        let limit = self.config.delivery_count_limit;
        let throttle = throttle_limit(limit);
        let mut got = 0u64;
        let mut touched: Option<(i64, i64)> = None;
        let mut prev_last: Option<i64> = None;
        for b in batches {
            if got >= max {
                break;
            }
            // The batch with the gap before it, if the log has one since the previous batch.
            let mut segments = Vec::with_capacity(2);
            if let Some(p) = prev_last.filter(|&p| p + 1 < b.first) {
                segments.push((p + 1, b.first - 1, false));
            }
            segments.push((b.first, b.last, b.skip));
            prev_last = Some(b.last);
            let group_lo = segments[0].0.max(self.start);
            let group_hi = b.last.min(last_to_acquire);
            if group_lo > last_to_acquire {
                break;
            }
            if group_lo > group_hi {
                continue;
            }
            // Throttling looks at the most-delivered available record this batch would hand out.
            let mut throttled: Option<Throttle> = None;
            if group_lo < self.end {
                let hi = group_hi.min(self.end - 1);
                let most = segments
                    .iter()
                    .filter(|s| !s.2)
                    .filter_map(|&(lo, shi, _)| self.most_delivered(lo.max(group_lo), shi.min(hi)))
                    .max();
                if most.is_some_and(|c| c >= throttle) {
                    if got > 0 {
                        break;
                    }
                    throttled = Some(Throttle {
                        size: len(group_lo, hi),
                        cap: None,
                        got: 0,
                    });
                }
            }
            let mut stop = false;
            for (lo, hi, skip) in segments {
                let lo = lo.max(self.start);
                let hi = hi.min(last_to_acquire);
                if lo > hi || stop {
                    continue;
                }
                // From the window end: a gap archived before new records joins its neighbours.
                let from = lo.min(self.end);
                touched = Some(touched.map_or((from, hi), |(a, _)| (a.min(from), hi)));
                // The part inside the window.
                if lo < self.end {
                    let ex_hi = hi.min(self.end - 1);
                    if skip {
                        self.archive_available(lo, ex_hi);
                    } else {
                        let mut cur = lo;
                        while let Some((a, b, c)) = self.next_available(cur, ex_hi) {
                            let mut n = len(a, b);
                            if record_limit {
                                if got >= max {
                                    stop = true;
                                    break;
                                }
                                n = n.min(max - got);
                                stop = got + n >= max;
                            }
                            if let Some(t) = throttled.as_mut() {
                                if limit > 2 && c.saturating_add(1) == limit {
                                    // The last attempt goes out alone.
                                    if t.got > 0 {
                                        stop = true;
                                        break;
                                    }
                                    n = 1;
                                    stop = true;
                                } else {
                                    if c >= throttle && t.cap.is_none() {
                                        let shift = u32::from(c - throttle) + 1;
                                        t.cap = Some(t.size.checked_shr(shift).unwrap_or(0).max(1));
                                    }
                                    if let Some(cap) = t.cap {
                                        // Kafka compares for equality only, and so does not stop
                                        // when the batch already gave more than the cap.
                                        n = n.min(cap.saturating_sub(t.got));
                                        stop = t.got + n >= cap;
                                        if n == 0 {
                                            break;
                                        }
                                    }
                                }
                                t.got += n;
                            }
                            let last = a + (n as i64) - 1;
                            let count = c.saturating_add(1);
                            self.replace_span(
                                a,
                                last,
                                Slot::Acquired {
                                    member: member.clone(),
                                    deadline,
                                },
                                Some(count),
                            );
                            push(&mut out, a, last, count);
                            got += n;
                            if stop {
                                break;
                            }
                            cur = last + 1;
                        }
                    }
                }
                // New records: not throttled (never delivered), but not taken after a throttled batch.
                let room_left = !record_limit || got < max;
                if hi >= self.end && !stop && room_left && throttled.is_none_or(|t| t.got == 0) {
                    let new_lo = lo.max(self.end);
                    // Record limit: the window ends where the limit falls; the rest of the
                    // batch is read again by the next fetch.
                    let hi = if record_limit && !skip && len(new_lo, hi) > max - got {
                        stop = true;
                        new_lo + i64::try_from(max - got).unwrap_or(i64::MAX) - 1
                    } else {
                        hi
                    };
                    if new_lo > self.end {
                        if self.runs.is_empty() {
                            // Nothing in flight: the window simply starts at the first record.
                            self.start = new_lo;
                        } else {
                            self.insert(
                                self.end,
                                Run {
                                    last: new_lo - 1,
                                    slot: Slot::Archived,
                                    count: 0,
                                },
                            );
                        }
                        self.end = new_lo;
                        self.changed = true;
                    }
                    let run = if skip {
                        self.changed = true;
                        Run {
                            last: hi,
                            slot: Slot::Archived,
                            count: 0,
                        }
                    } else {
                        push(&mut out, new_lo, hi, 1);
                        got += len(new_lo, hi);
                        Run {
                            last: hi,
                            slot: Slot::Acquired {
                                member: member.clone(),
                                deadline,
                            },
                            count: 1,
                        }
                    };
                    self.insert(new_lo, run);
                    self.end = hi + 1;
                }
            }
            if stop || throttled.is_some_and(|t| t.got > 0) {
                break;
            }
        }
        if let Some((lo, hi)) = touched {
            self.merge_span(lo, hi);
        }
        self.advance_start();
        out
    }

    /// Applies one request's acknowledgements by `member`, all or nothing (Kafka rolls back a
    /// partition's whole call on the first error).
    ///
    /// Offsets below the start offset are already done and pass; every other offset must be
    /// acquired by `member` (offsets archived without ever being delivered are ignored).
    ///
    /// # Errors
    /// INVALID_REQUEST for malformed batches (first past last, out of order or overlapping,
    /// no types, a type count that is neither one nor one per offset) or offsets past the
    /// window; INVALID_RECORD_STATE for a record this member does not hold.
    pub fn acknowledge(
        &mut self,
        member: &MemberId,
        batches: &[AckBatch],
        now: Timestamp,
    ) -> Result<(), AckError> {
        // Kafka's request checks (KafkaApis.validateAcknowledgementBatches).
        let mut prev_last: Option<i64> = None;
        for b in batches {
            if b.first > b.last || b.first < 0 {
                return Err(AckError::request("first offset past last offset"));
            }
            if let Some(p) = prev_last {
                if b.first < p {
                    return Err(AckError::request("acknowledgement batches out of order"));
                }
                if b.first == p {
                    // Kafka lets this through and then finds the shared offset no longer acquired.
                    return Err(AckError::state("offset acknowledged twice"));
                }
            }
            prev_last = Some(b.last);
            if b.types.is_empty() {
                return Err(AckError::request("no acknowledgement types"));
            }
            if b.types.len() > 1 && b.types.len() as u64 != len(b.first, b.last) {
                return Err(AckError::request(
                    "acknowledgement types do not match offsets",
                ));
            }
        }
        // Ownership, before anything changes.
        for b in batches {
            if b.last < self.start {
                continue;
            }
            if self.runs.is_empty() {
                return Err(AckError::state("no records are in flight"));
            }
            let lo = b.first.max(self.start);
            if lo >= self.end || b.last >= self.end {
                return Err(AckError::request("offsets past the acquired records"));
            }
            let from = self.run_at(lo).map_or(lo, |(f, _)| f);
            for (_, run) in self.runs.range(from..=b.last) {
                match &run.slot {
                    Slot::Acquired { member: m, .. } if m == member => {}
                    Slot::Acquired { .. } => {
                        return Err(AckError::state("member is not the owner of the records"))
                    }
                    _ if run.never_delivered() => {}
                    _ => return Err(AckError::state("records are not acquired")),
                }
            }
        }
        let deadline = now.plus_ms(self.config.lock_duration_ms);
        for b in batches {
            if b.last < self.start {
                continue;
            }
            let lo = b.first.max(self.start);
            if let [t] = b.types[..] {
                self.ack_span(lo, b.last, t, member, deadline);
            } else {
                // One type per offset: applied a run of equal types at a time.
                let skip = (lo - b.first) as usize;
                let mut from = lo;
                let types = &b.types[skip..];
                let mut i = 0;
                while i < types.len() {
                    let mut j = i + 1;
                    while j < types.len() && types[j] == types[i] {
                        j += 1;
                    }
                    let to = from + (j - i) as i64 - 1;
                    self.ack_span(from, to, types[i], member, deadline);
                    from = to + 1;
                    i = j;
                }
            }
        }
        self.advance_start();
        Ok(())
    }

    /// Lock timeouts: every record whose lock deadline is at or before `now` becomes
    /// available again, or archived at the delivery-count limit.
    pub fn handle_timeout(&mut self, now: Timestamp) -> Released {
        let mut out = Released::default();
        while let Some(&(deadline, first)) = self.locks.first() {
            if deadline > now {
                break;
            }
            self.locks.remove(&(deadline, first));
            self.release_run(first, &mut out);
        }
        self.advance_start();
        out
    }

    /// A member left the group or closed its share session: its records are released as on
    /// a lock timeout (Kafka's `releaseAcquiredRecords`).
    pub fn release_member(&mut self, member: &MemberId, _now: Timestamp) -> Released {
        let mut out = Released::default();
        let firsts: Vec<i64> = self
            .held
            .range((member.clone(), i64::MIN)..=(member.clone(), i64::MAX))
            .map(|&(_, f)| f)
            .collect();
        for first in firsts {
            self.release_run(first, &mut out);
        }
        self.advance_start();
        out
    }

    /// AlterShareGroupOffsets: delivery starts over at `offset`, the window emptied (Kafka
    /// allows it only while the group has no members, so nothing is held).
    pub fn reset_start(&mut self, offset: i64) {
        let config = self.config;
        *self = SharePartition::new(offset, config);
        self.changed = true;
    }

    /// The durable form. Held records are written available with their delivery count: a
    /// lock does not outlive the process that granted it.
    pub fn snapshot(&self) -> PartitionState {
        let mut batches: Vec<StateBatch> = Vec::new();
        for (&first, run) in &self.runs {
            let state = match run.slot {
                Slot::Acquired { .. } => RecordState::Available,
                ref s => s.state(),
            };
            match batches.last_mut() {
                Some(prev)
                    if prev.last + 1 == first
                        && prev.state == state
                        && prev.delivery_count == run.count =>
                {
                    prev.last = run.last;
                }
                _ => batches.push(StateBatch {
                    first,
                    last: run.last,
                    state,
                    delivery_count: run.count,
                }),
            }
        }
        PartitionState {
            start_offset: self.start,
            batches,
        }
    }

    // --- The runs and their indexes ---

    fn insert(&mut self, first: i64, run: Run) {
        let n = len(first, run.last);
        match &run.slot {
            Slot::Available => {
                self.available.insert(first);
                self.n_available += n;
            }
            Slot::Acquired { member, deadline } => {
                self.locks.insert((*deadline, first));
                self.held.insert((member.clone(), first));
                self.n_acquired += n;
            }
            Slot::Acknowledged | Slot::Archived => self.n_terminal += n,
            Slot::Archiving(_) => {}
        }
        self.runs.insert(first, run);
    }

    fn remove(&mut self, first: i64) -> Option<Run> {
        let run = self.runs.remove(&first)?;
        let n = len(first, run.last);
        match &run.slot {
            Slot::Available => {
                self.available.remove(&first);
                self.n_available -= n;
            }
            Slot::Acquired { member, deadline } => {
                self.locks.remove(&(*deadline, first));
                self.held.remove(&(member.clone(), first));
                self.n_acquired -= n;
            }
            Slot::Acknowledged | Slot::Archived => self.n_terminal -= n,
            Slot::Archiving(_) => {}
        }
        Some(run)
    }

    /// The run holding `offset`, with its first offset.
    fn run_at(&self, offset: i64) -> Option<(i64, &Run)> {
        let (&first, run) = self.runs.range(..=offset).next_back()?;
        (run.last >= offset).then_some((first, run))
    }

    /// Makes `at` the first offset of a run (if it is inside one).
    fn split(&mut self, at: i64) {
        let Some((first, _)) = self.run_at(at) else {
            return;
        };
        if first == at {
            return;
        }
        if let Some(mut head) = self.remove(first) {
            let tail = Run {
                last: head.last,
                slot: head.slot.clone(),
                count: head.count,
            };
            head.last = at - 1;
            self.insert(first, head);
            self.insert(at, tail);
        }
    }

    /// Joins equal neighbouring runs from the one before `lo` to the one after `hi`.
    fn merge_span(&mut self, lo: i64, hi: i64) {
        let from = self
            .run_at(lo.saturating_sub(1))
            .map(|(f, _)| f)
            .unwrap_or(lo);
        let keys: Vec<i64> = self
            .runs
            .range(from..=hi.saturating_add(1))
            .map(|(&k, _)| k)
            .collect();
        let Some((&head, rest)) = keys.split_first() else {
            return;
        };
        let mut cur = head;
        for &k in rest {
            let same = match (self.runs.get(&cur), self.runs.get(&k)) {
                (Some(a), Some(b)) => a.last + 1 == k && a.slot == b.slot && a.count == b.count,
                _ => false,
            };
            if !same {
                cur = k;
                continue;
            }
            if let (Some(b), Some(mut a)) = (self.remove(k), self.remove(cur)) {
                a.last = b.last;
                self.insert(cur, a);
            }
        }
    }

    /// Sets `[lo, hi]` (inside the window) to `slot`, keeping each run's delivery count unless
    /// `count` is given.
    fn replace_span(&mut self, lo: i64, hi: i64, slot: Slot, count: Option<u16>) {
        self.split(lo);
        self.split(hi + 1);
        let keys: Vec<i64> = self.runs.range(lo..=hi).map(|(&k, _)| k).collect();
        for k in keys {
            if let Some(mut run) = self.remove(k) {
                run.slot = slot.clone();
                if let Some(c) = count {
                    run.count = c;
                }
                self.insert(k, run);
            }
        }
    }

    /// The first available stretch at or after `from`, up to `hi`: (first, last, count).
    fn next_available(&self, from: i64, hi: i64) -> Option<(i64, i64, u16)> {
        if from > hi {
            return None;
        }
        let (first, run) = match self.run_at(from) {
            Some((f, r)) if r.slot == Slot::Available => (f, r),
            _ => {
                let &f = self.available.range(from..=hi).next()?;
                (f, self.runs.get(&f)?)
            }
        };
        Some((first.max(from), run.last.min(hi), run.count))
    }

    /// The highest delivery count of the available records in `[lo, hi]`.
    fn most_delivered(&self, lo: i64, hi: i64) -> Option<u16> {
        let mut most = None;
        let mut cur = lo;
        while let Some((_, last, count)) = self.next_available(cur, hi) {
            most = most.max(Some(count));
            cur = last + 1;
        }
        most
    }

    /// Archives the available records of `[lo, hi]` (clipped to the window), counts kept.
    fn archive_available(&mut self, lo: i64, hi: i64) {
        let (lo, hi) = (lo.max(self.start), hi.min(self.end - 1));
        let mut cur = lo;
        while let Some((a, b, _)) = self.next_available(cur, hi) {
            self.replace_span(a, b, Slot::Archived, None);
            self.changed = true;
            cur = b + 1;
        }
        if lo <= hi {
            self.merge_span(lo, hi);
        }
    }

    /// One acknowledgement type over `[lo, hi]`, checked beforehand to be held by `member`.
    fn ack_span(&mut self, lo: i64, hi: i64, t: AckType, member: &MemberId, deadline: Timestamp) {
        self.split(lo);
        self.split(hi + 1);
        let keys: Vec<i64> = self.runs.range(lo..=hi).map(|(&k, _)| k).collect();
        for k in keys {
            let Some(mut run) = self.remove(k) else {
                continue;
            };
            if !run.never_delivered() {
                run.slot = match t {
                    AckType::Accept => Slot::Acknowledged,
                    AckType::Reject => self.archived(DeadCause::Rejected),
                    AckType::Gap => Slot::Archived,
                    AckType::Release => {
                        let slot = self.released(run.count);
                        if slot != Slot::Available {
                            self.archived_by_release += len(k, run.last);
                        }
                        slot
                    }
                    AckType::Renew => Slot::Acquired {
                        member: member.clone(),
                        deadline,
                    },
                };
            }
            self.note_dead_letter(k, &run);
            self.insert(k, run);
        }
        if t != AckType::Renew {
            self.changed = true;
        }
        self.merge_span(lo, hi);
    }

    /// Where a record whose lock ended goes.
    fn released(&self, count: u16) -> Slot {
        if count >= self.config.delivery_count_limit {
            self.archived(DeadCause::DeliveryLimit)
        } else {
            Slot::Available
        }
    }

    /// Where a record that is done with for `cause` goes: to the dead-letter queue first when
    /// the group has one.
    fn archived(&self, cause: DeadCause) -> Slot {
        if self.config.dead_letter {
            Slot::Archiving(cause)
        } else {
            Slot::Archived
        }
    }

    /// Hands the run at `first` to the shell when it just became Archiving.
    fn note_dead_letter(&mut self, first: i64, run: &Run) {
        if let Slot::Archiving(cause) = run.slot {
            self.dead_letters.push(DeadLetter {
                first,
                last: run.last,
                delivery_count: run.count,
                cause,
            });
        }
    }

    /// Ends the lock of the acquired run at `first`.
    fn release_run(&mut self, first: i64, out: &mut Released) {
        let Some(mut run) = self.remove(first) else {
            return;
        };
        if matches!(run.slot, Slot::Acquired { .. }) {
            run.slot = self.released(run.count);
            let n = len(first, run.last);
            if run.slot == Slot::Available {
                out.released += n;
            } else {
                out.archived += n;
            }
            self.note_dead_letter(first, &run);
            self.changed = true;
        }
        let last = run.last;
        self.insert(first, run);
        self.merge_span(first, last);
    }

    /// Moves the start offset past every leading acknowledged or archived record, which is
    /// then forgotten.
    fn advance_start(&mut self) {
        while let Some((&first, run)) = self.runs.first_key_value() {
            if !run.slot.is_terminal() {
                break;
            }
            if let Some(run) = self.remove(first) {
                self.start = run.last + 1;
                self.changed = true;
            }
        }
        if self.runs.is_empty() && self.start != self.end {
            self.start = self.end;
            self.changed = true;
        }
    }

    /// Every internal invariant, for tests: the runs tile the window, the indexes and counts
    /// match the runs, neighbours differ.
    #[cfg(test)]
    fn check(&self) {
        let mut next = self.start;
        let (mut av, mut acq, mut term) = (0, 0, 0);
        let mut prev: Option<&Run> = None;
        for (&first, run) in &self.runs {
            assert_eq!(first, next, "runs tile the window");
            assert!(run.last >= first);
            if let Some(p) = prev {
                assert!(
                    p.slot != run.slot || p.count != run.count,
                    "equal neighbours at {first}"
                );
            }
            let n = len(first, run.last);
            match &run.slot {
                Slot::Available => {
                    assert!(self.available.contains(&first));
                    av += n;
                }
                Slot::Acquired { member, deadline } => {
                    assert!(self.locks.contains(&(*deadline, first)));
                    assert!(self.held.contains(&(member.clone(), first)));
                    acq += n;
                }
                Slot::Archiving(_) => {}
                _ => term += n,
            }
            next = run.last + 1;
            prev = Some(run);
        }
        assert_eq!(next, self.end, "runs end at the window end");
        assert_eq!(
            (av, acq, term),
            (self.n_available, self.n_acquired, self.n_terminal)
        );
        assert_eq!(
            self.available.len(),
            self.runs
                .values()
                .filter(|r| r.slot == Slot::Available)
                .count()
        );
        assert_eq!(self.locks.len(), self.held.len());
        assert_eq!(
            self.locks.len(),
            self.runs
                .values()
                .filter(|r| matches!(r.slot, Slot::Acquired { .. }))
                .count()
        );
        if let Some(r) = self.runs.values().next() {
            assert!(
                !r.slot.is_terminal(),
                "the start offset moved past done records"
            );
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Throttle {
    /// The batch's records in the window (Kafka shifts the in-flight batch's size).
    size: u64,
    /// How many records the batch may deliver, once a throttled record is met.
    cap: Option<u64>,
    got: u64,
}

/// Ascending, disjoint batches at offsets a window can hold.
fn well_formed(batches: &[ReadBatch]) -> bool {
    let mut prev: Option<i64> = None;
    batches.iter().all(|b| {
        let ok = b.first >= 0
            && b.first <= b.last
            && b.last < i64::MAX
            && prev.is_none_or(|p| b.first > p);
        prev = Some(b.last);
        ok
    })
}

/// Adds an acquired range, joined to the previous one when contiguous with the same count
/// (Kafka's `accumulateAcquiredRecords`).
fn push(out: &mut Vec<Acquired>, first: i64, last: i64, delivery_count: u16) {
    if let Some(prev) = out.last_mut() {
        if prev.last + 1 == first && prev.delivery_count == delivery_count {
            prev.last = last;
            return;
        }
    }
    out.push(Acquired {
        first,
        last,
        delivery_count,
    });
}

/// Bytes of one state batch: first, last, state, delivery count.
const STATE_BATCH_BYTES: usize = 8 + 8 + 1 + 2;

pub fn encode(state: &PartitionState) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.i64(state.start_offset);
    // A window holds at most a few thousand runs (the in-flight limit).
    w.u32(state.batches.len() as u32);
    for b in &state.batches {
        w.i64(b.first);
        w.i64(b.last);
        w.u8(b.state.id());
        w.0.extend_from_slice(&b.delivery_count.to_be_bytes());
    }
    w.0
}

/// # Errors
/// [`DecodeError`] for damage: truncation, an unknown version or state, a count larger than
/// the bytes, batches out of order, overlapping or below the start offset.
pub fn decode(value: &[u8]) -> Result<PartitionState, DecodeError> {
    const WHAT: &str = "share partition state";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let start_offset = r.i64(WHAT)?;
    if start_offset < 0 {
        return Err(err(format!("{WHAT}: negative start offset {start_offset}")));
    }
    let n = count(&mut r, STATE_BATCH_BYTES, WHAT)?;
    let mut batches = Vec::with_capacity(n);
    let mut next = start_offset;
    for _ in 0..n {
        let first = r.i64(WHAT)?;
        let last = r.i64(WHAT)?;
        let id = r.u8(WHAT)?;
        let delivery_count = r.u16(WHAT)?;
        let state =
            RecordState::from_id(id).ok_or_else(|| err(format!("{WHAT}: unknown state {id}")))?;
        if first < next || last < first || last == i64::MAX {
            return Err(err(format!(
                "{WHAT}: batch {first}..={last} out of order (expected at or past {next})"
            )));
        }
        next = last + 1;
        batches.push(StateBatch {
            first,
            last,
            state,
            delivery_count,
        });
    }
    end(&r, WHAT)?;
    Ok(PartitionState {
        start_offset,
        batches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: u64 = 30_000;

    fn m(s: &str) -> MemberId {
        MemberId::new(s)
    }

    fn t(ms: u64) -> Timestamp {
        Timestamp(ms)
    }

    fn batch(first: i64, last: i64) -> ReadBatch {
        ReadBatch {
            first,
            last,
            skip: false,
        }
    }

    fn acq(first: i64, last: i64, delivery_count: u16) -> Acquired {
        Acquired {
            first,
            last,
            delivery_count,
        }
    }

    fn ack(first: i64, last: i64, t: AckType) -> AckBatch {
        AckBatch {
            first,
            last,
            types: vec![t],
        }
    }

    fn part() -> SharePartition {
        SharePartition::new(0, PartitionConfig::default())
    }

    fn state(p: &SharePartition, o: i64) -> Option<(RecordState, u16)> {
        p.state_of(o).map(|s| (s.state, s.delivery_count))
    }

    #[test]
    fn defaults_are_kafka_4_4() {
        let c = PartitionConfig::default();
        assert_eq!(
            (c.lock_duration_ms, c.delivery_count_limit, c.max_in_flight),
            (30_000, 5, 2000)
        );
        assert_eq!(throttle_limit(5), 3);
        assert_eq!(throttle_limit(2), 2);
        assert_eq!(throttle_limit(10), 5);
    }

    #[test]
    fn acquire_accept_advances_start() {
        let mut p = part();
        let a = m("a");
        assert_eq!(p.next_fetch_offset(), 0);
        let got = p.acquire(&a, &[batch(0, 4), batch(5, 9)], 500, t(100));
        assert_eq!(got, vec![acq(0, 9, 1)]);
        assert_eq!(
            (p.start_offset(), p.end_offset(), p.in_flight()),
            (0, 10, 10)
        );
        assert_eq!(p.acquired_count(), 10);
        assert_eq!(p.next_fetch_offset(), 10);
        assert_eq!(p.next_deadline(), Some(t(100 + LOCK)));
        assert!(!p.take_changed(), "acquisition alone is not durable");
        p.acknowledge(&a, &[ack(0, 3, AckType::Accept)], t(200))
            .unwrap();
        assert_eq!(p.start_offset(), 4);
        assert!(p.take_changed());
        assert_eq!(state(&p, 3), None);
        assert_eq!(state(&p, 4), Some((RecordState::Acquired, 1)));
        p.acknowledge(&a, &[ack(4, 9, AckType::Accept)], t(300))
            .unwrap();
        assert_eq!(
            (p.start_offset(), p.end_offset(), p.in_flight()),
            (10, 10, 0)
        );
        assert_eq!(p.next_deadline(), None);
        assert_eq!(p.lag(15), 5);
        p.check();
    }

    #[test]
    fn release_redelivers_with_count_two() {
        let mut p = part();
        let (a, b) = (m("a"), m("b"));
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        p.acknowledge(&a, &[ack(0, 9, AckType::Release)], t(10))
            .unwrap();
        assert!(p.take_changed());
        assert_eq!(p.next_fetch_offset(), 0);
        assert_eq!(p.available_count(), 10);
        assert_eq!(p.next_deadline(), None);
        let got = p.acquire(&b, &[batch(0, 9), batch(10, 14)], 500, t(20));
        assert_eq!(got, vec![acq(0, 9, 2), acq(10, 14, 1)]);
        assert_eq!(p.state_of(5).unwrap().holder, Some((&b, t(20 + LOCK))));
        p.check();
    }

    #[test]
    fn reject_archives() {
        let mut p = part();
        let a = m("a");
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        p.acknowledge(&a, &[ack(2, 4, AckType::Reject)], t(1))
            .unwrap();
        assert_eq!(state(&p, 3), Some((RecordState::Archived, 1)));
        assert_eq!(p.start_offset(), 0);
        assert_eq!(p.delivered_count(), 3);
        p.acknowledge(&a, &[ack(0, 1, AckType::Accept)], t(2))
            .unwrap();
        assert_eq!(p.start_offset(), 5, "start moves past archived records too");
        // Nothing archived is delivered again.
        p.acknowledge(&a, &[ack(5, 9, AckType::Release)], t(3))
            .unwrap();
        assert_eq!(p.next_fetch_offset(), 5);
        p.check();
    }

    #[test]
    fn lock_timeout_redelivers() {
        let mut p = part();
        let a = m("a");
        p.acquire(&a, &[batch(0, 4)], 500, t(1000));
        p.acquire(&a, &[batch(5, 9)], 500, t(2000));
        assert_eq!(p.next_deadline(), Some(t(1000 + LOCK)));
        assert_eq!(p.handle_timeout(t(1000 + LOCK - 1)), Released::default());
        assert!(!p.take_changed());
        let r = p.handle_timeout(t(1000 + LOCK));
        assert_eq!(
            r,
            Released {
                released: 5,
                archived: 0
            }
        );
        assert!(p.take_changed());
        assert_eq!(p.next_deadline(), Some(t(2000 + LOCK)));
        assert_eq!(p.next_fetch_offset(), 0);
        // The late acknowledgement of a timed-out record fails.
        let e = p.acknowledge(&a, &[ack(0, 4, AckType::Accept)], t(1000 + LOCK + 1));
        assert_eq!(e.unwrap_err().error, GroupError::InvalidRecordState);
        let got = p.acquire(&a, &[batch(0, 4), batch(5, 9)], 500, t(40_000));
        assert_eq!(got, vec![acq(0, 4, 2)]);
        p.check();
    }

    #[test]
    fn delivery_count_limit_archives() {
        let config = PartitionConfig {
            delivery_count_limit: 2,
            ..PartitionConfig::default()
        };
        let mut p = SharePartition::new(0, config);
        let a = m("a");
        assert_eq!(p.acquire(&a, &[batch(0, 4)], 500, t(0)), vec![acq(0, 4, 1)]);
        p.handle_timeout(t(LOCK));
        assert_eq!(
            p.acquire(&a, &[batch(0, 4)], 500, t(LOCK)),
            vec![acq(0, 4, 2)]
        );
        let r = p.handle_timeout(t(2 * LOCK));
        assert_eq!(
            r,
            Released {
                released: 0,
                archived: 5
            }
        );
        assert_eq!((p.start_offset(), p.in_flight()), (5, 0));
        // A release at the limit archives as well.
        p.acquire(&a, &[batch(5, 5)], 500, t(0));
        p.acknowledge(&a, &[ack(5, 5, AckType::Release)], t(1))
            .unwrap();
        p.acquire(&a, &[batch(5, 5)], 500, t(2));
        p.acknowledge(&a, &[ack(5, 5, AckType::Release)], t(3))
            .unwrap();
        assert_eq!(p.start_offset(), 6);
        p.check();
    }

    #[test]
    fn two_members_acquire_disjoint_records() {
        let mut p = part();
        let (a, b) = (m("a"), m("b"));
        let log = [batch(0, 4), batch(5, 9), batch(10, 14)];
        assert_eq!(p.acquire(&a, &log, 5, t(0)), vec![acq(0, 4, 1)]);
        // b reads from the next fetch offset: what a holds is not handed out again.
        assert_eq!(p.next_fetch_offset(), 5);
        assert_eq!(p.acquire(&b, &log[1..], 5, t(0)), vec![acq(5, 9, 1)]);
        assert_eq!(p.acquire(&b, &log, 500, t(0)), vec![acq(10, 14, 1)]);
        let e = p.acknowledge(&b, &[ack(0, 9, AckType::Accept)], t(1));
        assert_eq!(e.unwrap_err().error, GroupError::InvalidRecordState);
        p.acknowledge(&b, &[ack(5, 9, AckType::Accept)], t(1))
            .unwrap();
        assert_eq!(
            p.release_member(&a, t(2)),
            Released {
                released: 5,
                archived: 0
            }
        );
        assert_eq!(p.next_fetch_offset(), 0);
        assert_eq!(state(&p, 12), Some((RecordState::Acquired, 1)));
        p.check();
    }

    #[test]
    fn refused_acknowledgements_change_nothing() {
        let mut p = part();
        let (a, b) = (m("a"), m("b"));
        p.acquire(&a, &[batch(0, 4)], 500, t(0));
        p.acquire(&b, &[batch(5, 9)], 500, t(0));
        p.acknowledge(&a, &[ack(0, 0, AckType::Release)], t(1))
            .unwrap();
        p.take_changed();
        let before = p.snapshot();
        let deadline = p.next_deadline();
        let refused = |p: &mut SharePartition, batches: &[AckBatch]| {
            p.acknowledge(&a, batches, t(2)).unwrap_err().error
        };
        // Someone else's records, after a good batch: the good one is not applied either.
        let e = refused(
            &mut p,
            &[ack(1, 2, AckType::Accept), ack(5, 5, AckType::Accept)],
        );
        assert_eq!(e, GroupError::InvalidRecordState);
        // A released (unacquired) record.
        assert_eq!(
            refused(&mut p, &[ack(0, 1, AckType::Accept)]),
            GroupError::InvalidRecordState
        );
        // Past the window.
        assert_eq!(
            refused(&mut p, &[ack(8, 12, AckType::Accept)]),
            GroupError::InvalidRequest
        );
        // Malformed.
        assert_eq!(
            refused(&mut p, &[ack(3, 2, AckType::Accept)]),
            GroupError::InvalidRequest
        );
        let no_types = AckBatch {
            first: 1,
            last: 2,
            types: vec![],
        };
        assert_eq!(refused(&mut p, &[no_types]), GroupError::InvalidRequest);
        let wrong_count = AckBatch {
            first: 1,
            last: 3,
            types: vec![AckType::Accept, AckType::Accept],
        };
        assert_eq!(refused(&mut p, &[wrong_count]), GroupError::InvalidRequest);
        let out_of_order = [ack(3, 4, AckType::Accept), ack(1, 2, AckType::Accept)];
        assert_eq!(refused(&mut p, &out_of_order), GroupError::InvalidRequest);
        let touching = [ack(1, 2, AckType::Accept), ack(2, 3, AckType::Accept)];
        assert_eq!(refused(&mut p, &touching), GroupError::InvalidRecordState);
        // A renewal is refused like any other type.
        assert_eq!(
            refused(&mut p, &[ack(5, 5, AckType::Renew)]),
            GroupError::InvalidRecordState
        );
        assert_eq!(p.snapshot(), before);
        assert_eq!(p.next_deadline(), deadline);
        assert!(!p.take_changed());
        // Below the start offset: already done, accepted.
        p.reset_start(100);
        p.acknowledge(&a, &[ack(0, 4, AckType::Accept)], t(3))
            .unwrap();
        p.check();
    }

    #[test]
    fn per_offset_and_gap_acknowledgements() {
        let mut p = part();
        let a = m("a");
        p.acquire(&a, &[batch(0, 2), batch(5, 7)], 500, t(0));
        assert_eq!(
            p.end_offset(),
            8,
            "the log gap 3..=4 is acquired with the batches"
        );
        use AckType::*;
        let types = vec![Accept, Accept, Reject, Gap, Gap, Accept, Release, Renew];
        p.acknowledge(
            &a,
            &[AckBatch {
                first: 0,
                last: 7,
                types,
            }],
            t(100),
        )
        .unwrap();
        assert_eq!(p.start_offset(), 6);
        assert_eq!(state(&p, 6), Some((RecordState::Available, 1)));
        assert_eq!(p.state_of(7).unwrap().holder, Some((&a, t(100 + LOCK))));
        assert_eq!(p.next_deadline(), Some(t(100 + LOCK)), "renewed");
        p.check();
    }

    #[test]
    fn renew_extends_the_lock_and_is_not_durable() {
        let mut p = part();
        let a = m("a");
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        p.acknowledge(&a, &[ack(0, 9, AckType::Renew)], t(20_000))
            .unwrap();
        assert!(!p.take_changed());
        assert_eq!(p.handle_timeout(t(LOCK)), Released::default());
        assert_eq!(p.next_deadline(), Some(t(20_000 + LOCK)));
        assert_eq!(state(&p, 0), Some((RecordState::Acquired, 1)));
        p.check();
    }

    #[test]
    fn skip_batches_are_archived_never_delivered() {
        let mut p = part();
        let a = m("a");
        let log = [
            ReadBatch {
                first: 0,
                last: 1,
                skip: true,
            },
            batch(2, 5),
            ReadBatch {
                first: 6,
                last: 6,
                skip: true,
            },
            batch(7, 9),
        ];
        assert_eq!(
            p.acquire(&a, &log, 500, t(0)),
            vec![acq(2, 5, 1), acq(7, 9, 1)]
        );
        assert!(p.take_changed(), "archiving is durable");
        assert_eq!(p.start_offset(), 2);
        assert_eq!(state(&p, 6), Some((RecordState::Archived, 0)));
        // An acknowledgement spanning the skipped offset passes over it.
        p.acknowledge(&a, &[ack(2, 9, AckType::Accept)], t(1))
            .unwrap();
        assert_eq!((p.start_offset(), p.in_flight()), (10, 0));
        p.check();
    }

    #[test]
    fn max_records_is_batch_aligned() {
        let mut p = part();
        let a = m("a");
        let log = [batch(0, 9), batch(10, 19), batch(20, 29)];
        assert_eq!(p.acquire(&a, &log, 12, t(0)), vec![acq(0, 19, 1)]);
        assert_eq!(p.acquire(&a, &log[2..], 1, t(0)), vec![acq(20, 29, 1)]);
        // Redelivery is batch-aligned too.
        p.release_member(&a, t(1));
        assert_eq!(p.acquire(&a, &log, 3, t(2)), vec![acq(0, 9, 2)]);
        p.check();
    }

    #[test]
    fn in_flight_limit() {
        let config = PartitionConfig {
            max_in_flight: 10,
            ..PartitionConfig::default()
        };
        let mut p = SharePartition::new(0, config);
        let a = m("a");
        let log = [batch(0, 3), batch(4, 7), batch(8, 11), batch(12, 15)];
        assert_eq!(p.acquire(&a, &log, 500, t(0)), vec![acq(0, 11, 1)]);
        assert_eq!(p.in_flight(), 12, "the last batch may pass the limit");
        assert_eq!(p.acquire(&a, &log[3..], 500, t(0)), vec![]);
        // Released records inside the window still go out at the limit, nothing past it.
        p.acknowledge(&a, &[ack(4, 7, AckType::Release)], t(1))
            .unwrap();
        assert_eq!(p.acquire(&a, &log[1..], 500, t(2)), vec![acq(4, 7, 2)]);
        assert_eq!(p.end_offset(), 12);
        p.acknowledge(&a, &[ack(0, 3, AckType::Accept)], t(3))
            .unwrap();
        assert_eq!(p.in_flight(), 8);
        assert_eq!(p.acquire(&a, &log[3..], 500, t(4)), vec![acq(12, 15, 1)]);
        p.check();
    }

    #[test]
    fn log_gaps() {
        let mut p = part();
        let a = m("a");
        // Empty window: it starts at the first record the log has.
        assert_eq!(p.acquire(&a, &[batch(5, 9)], 500, t(0)), vec![acq(5, 9, 1)]);
        assert_eq!(p.start_offset(), 5);
        // A gap after the window end: archived, never delivered.
        assert_eq!(
            p.acquire(&a, &[batch(15, 19)], 500, t(0)),
            vec![acq(15, 19, 1)]
        );
        assert_eq!(state(&p, 12), Some((RecordState::Archived, 0)));
        p.acknowledge(&a, &[ack(5, 19, AckType::Release)], t(1))
            .unwrap();
        // Released records the log no longer has (compacted): archived when the read skips them.
        assert_eq!(p.next_fetch_offset(), 5);
        assert_eq!(
            p.acquire(&a, &[batch(8, 9), batch(15, 19)], 500, t(2)),
            vec![acq(8, 9, 2), acq(15, 19, 2)]
        );
        assert_eq!(p.start_offset(), 8);
        p.check();
    }

    #[test]
    fn throttled_redelivery() {
        // Limit 5: from the 4th delivery a batch goes alone, halved; the 5th goes one by one.
        let mut p = part();
        let a = m("a");
        let log = [batch(0, 7), batch(8, 15)];
        let mut now = 0;
        for round in 1..=3u16 {
            let got = p.acquire(&a, &log, 500, t(now));
            assert_eq!(got, vec![acq(0, 15, round)]);
            now += LOCK;
            p.handle_timeout(t(now));
        }
        assert_eq!(p.acquire(&a, &log, 500, t(now)), vec![acq(0, 3, 4)]);
        assert_eq!(p.acquire(&a, &log, 500, t(now)), vec![acq(4, 7, 4)]);
        assert_eq!(p.acquire(&a, &log[1..], 500, t(now)), vec![acq(8, 11, 4)]);
        now += LOCK;
        p.handle_timeout(t(now));
        assert_eq!(p.acquire(&a, &log, 500, t(now)), vec![acq(0, 0, 5)]);
        assert_eq!(p.acquire(&a, &log, 500, t(now)), vec![acq(1, 1, 5)]);
        now += LOCK;
        let r = p.handle_timeout(t(now));
        assert_eq!(r.archived, 2);
        assert_eq!(p.start_offset(), 2);
        p.check();
    }

    #[test]
    fn snapshot_restore() {
        let mut p = part();
        let (a, b) = (m("a"), m("b"));
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        p.acknowledge(
            &a,
            &[ack(0, 1, AckType::Accept), ack(4, 5, AckType::Release)],
            t(1),
        )
        .unwrap();
        p.acknowledge(&a, &[ack(6, 6, AckType::Reject)], t(1))
            .unwrap();
        p.acquire(&b, &[batch(4, 5)], 500, t(2));
        let s = p.snapshot();
        assert_eq!(s.start_offset, 2);
        assert_eq!(
            s.batches,
            vec![
                StateBatch {
                    first: 2,
                    last: 3,
                    state: RecordState::Available,
                    delivery_count: 1
                },
                StateBatch {
                    first: 4,
                    last: 5,
                    state: RecordState::Available,
                    delivery_count: 2
                },
                StateBatch {
                    first: 6,
                    last: 6,
                    state: RecordState::Archived,
                    delivery_count: 1
                },
                StateBatch {
                    first: 7,
                    last: 9,
                    state: RecordState::Available,
                    delivery_count: 1
                },
            ]
        );
        let mut q =
            SharePartition::restore(decode(&encode(&s)).unwrap(), PartitionConfig::default());
        q.check();
        assert!(!q.take_changed());
        assert_eq!(
            (q.start_offset(), q.end_offset(), q.acquired_count()),
            (2, 10, 0)
        );
        assert_eq!(q.next_deadline(), None);
        let got = q.acquire(&a, &[batch(0, 9), batch(10, 10)], 500, t(3));
        assert_eq!(
            got,
            vec![acq(2, 3, 2), acq(4, 5, 3), acq(7, 9, 2), acq(10, 10, 1)]
        );
        // Kafka's form: gaps between batches come back available, never delivered; leading
        // done records move the start.
        let kafka = PartitionState {
            start_offset: 10,
            batches: vec![
                StateBatch {
                    first: 10,
                    last: 11,
                    state: RecordState::Acknowledged,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 15,
                    last: 15,
                    state: RecordState::Archived,
                    delivery_count: 3,
                },
            ],
        };
        let q = SharePartition::restore(kafka, PartitionConfig::default());
        q.check();
        assert_eq!((q.start_offset(), q.end_offset()), (12, 16));
        assert_eq!(state(&q, 13), Some((RecordState::Available, 0)));
        assert_eq!(q.next_fetch_offset(), 12);
    }

    #[test]
    fn reset_start_empties_the_window() {
        let mut p = part();
        let a = m("a");
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        p.reset_start(50);
        assert!(p.take_changed());
        assert_eq!(
            (p.start_offset(), p.end_offset(), p.next_fetch_offset()),
            (50, 50, 50)
        );
        assert_eq!(p.next_deadline(), None);
        assert_eq!(
            p.acquire(&a, &[batch(45, 55)], 500, t(1)),
            vec![acq(50, 55, 1)]
        );
        p.check();
    }

    #[test]
    fn encode_decode_round_trip_and_garbage() {
        let s = PartitionState {
            start_offset: 7,
            batches: vec![
                StateBatch {
                    first: 7,
                    last: 9,
                    state: RecordState::Available,
                    delivery_count: 2,
                },
                StateBatch {
                    first: 12,
                    last: 12,
                    state: RecordState::Acknowledged,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 13,
                    last: 20,
                    state: RecordState::Archived,
                    delivery_count: 5,
                },
            ],
        };
        let bytes = encode(&s);
        assert_eq!(decode(&bytes), Ok(s.clone()));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "truncated at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        // A huge count: refused before anything is sized by it.
        let mut huge = bytes[..9].to_vec();
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&huge).is_err());
        let mut bad_state = bytes.clone();
        bad_state[13 + 16] = 5;
        assert!(decode(&bad_state).is_err());
        let mut bad_version = bytes.clone();
        bad_version[0] = 9;
        assert!(decode(&bad_version).is_err());
        let mut overlapping = s.clone();
        overlapping.batches[1].first = 9;
        assert!(decode(&encode(&overlapping)).is_err());
        let mut below = s;
        below.batches[0].first = 6;
        assert!(decode(&encode(&below)).is_err());
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let n = (rng.next() % 64) as usize;
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            let _ = decode(&junk);
            let mut flipped = bytes.clone();
            let i = (rng.next() as usize) % flipped.len();
            flipped[i] ^= 1 << (rng.next() % 8);
            if let Ok(s) = decode(&flipped) {
                SharePartition::restore(s, PartitionConfig::default()).check();
            }
        }
    }

    #[test]
    fn malformed_reads_acquire_nothing() {
        let mut p = part();
        let a = m("a");
        assert_eq!(p.acquire(&a, &[batch(5, 4)], 500, t(0)), vec![]);
        assert_eq!(
            p.acquire(&a, &[batch(0, 4), batch(3, 6)], 500, t(0)),
            vec![]
        );
        assert_eq!(p.acquire(&a, &[batch(-3, 4)], 500, t(0)), vec![]);
        assert_eq!(p.acquire(&a, &[batch(0, i64::MAX)], 500, t(0)), vec![]);
        assert_eq!(p.acquire(&a, &[batch(0, 4)], 0, t(0)), vec![]);
        assert_eq!(p.acquire(&a, &[], 10, t(0)), vec![]);
        assert_eq!(p.in_flight(), 0);
        p.check();
    }

    /// xorshift64: reproducible from its seed, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The reference: one entry per log offset.
    #[derive(Debug, Clone, PartialEq)]
    enum Model {
        /// Never acquired.
        Fresh,
        Available(u16),
        Acquired(usize, Timestamp, u16),
        Done,
    }

    /// Random interleavings of fetches by several members, acknowledgements of every type
    /// (right and wrong), timeouts, members leaving and restarts through the stored form,
    /// against a per-offset model: after every step each offset's state matches, the start
    /// offset is the first unfinished offset, and a fetch with something to hand out hands
    /// something out.
    #[test]
    fn record_limit_splits_batches_where_the_limit_falls() {
        let (a, b) = (MemberId::new("a"), MemberId::new("b"));
        let mut p = SharePartition::new(0, PartitionConfig::default());
        let log = [batch(0, 9)];
        let mode = AcquireMode::RecordLimit;
        let spans = |got: Vec<Acquired>| {
            got.iter()
                .map(|r| (r.first, r.last, r.delivery_count))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            spans(p.acquire_in(mode, &a, &log, 3, t(0))),
            vec![(0, 2, 1)]
        );
        assert_eq!(p.next_fetch_offset(), 3);
        // The next fetch reads the same batch again: the records after the first three.
        assert_eq!(
            spans(p.acquire_in(mode, &b, &log, 3, t(0))),
            vec![(3, 5, 1)]
        );
        // Released records go first, then new ones, up to the limit.
        p.acknowledge(&a, &[ack(0, 2, AckType::Release)], t(1))
            .unwrap();
        assert_eq!(
            spans(p.acquire_in(mode, &b, &log, 4, t(2))),
            vec![(0, 2, 2), (6, 6, 1)]
        );
        // Batch-optimized takes the whole rest of the batch whatever the limit.
        assert_eq!(spans(p.acquire(&a, &log, 1, t(3))), vec![(7, 9, 1)]);
    }

    #[test]
    fn model_of_random_interleavings() {
        const LOG_END: i64 = 400;
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
            let config = PartitionConfig {
                lock_duration_ms: 1000,
                delivery_count_limit: 2 + rng.below(5) as u16,
                max_in_flight: 20 + rng.below(80) as u32,
                dead_letter: seed % 2 == 0,
            };
            let limit = config.delivery_count_limit;
            // The log: contiguous batches of 1 to 8 records.
            let mut log = Vec::new();
            let mut o = 0;
            while o < LOG_END {
                let n = 1 + rng.below(8) as i64;
                log.push(batch(o, (o + n - 1).min(LOG_END - 1)));
                o += n;
            }
            let members: Vec<MemberId> = (0..3).map(|i| m(&format!("m{i}"))).collect();
            let mut p = SharePartition::new(0, config);
            let mut model = vec![Model::Fresh; LOG_END as usize];
            let mut now = 0u64;
            for step in 0..600 {
                let ctx = format!("seed {seed} step {step}");
                match rng.below(10) {
                    0..=3 => {
                        let who = rng.below(3) as usize;
                        let fetch = p.next_fetch_offset();
                        let Some(i) = log.iter().position(|b| b.last >= fetch) else {
                            continue;
                        };
                        let read = &log[i..(i + 1 + rng.below(6) as usize).min(log.len())];
                        let max = 1 + rng.below(30) as u32;
                        let can = p.in_flight() < u64::from(config.max_in_flight)
                            || fetch < p.end_offset();
                        let mode = if rng.below(2) == 0 {
                            AcquireMode::BatchOptimized
                        } else {
                            AcquireMode::RecordLimit
                        };
                        let got = p.acquire_in(mode, &members[who], read, max, Timestamp(now));
                        assert!(!can || !got.is_empty(), "{ctx}: nothing acquired");
                        if mode == AcquireMode::RecordLimit {
                            let n: i64 = got.iter().map(|r| r.last - r.first + 1).sum();
                            assert!(n <= i64::from(max), "{ctx}: {n} acquired, limit {max}");
                        }
                        for r in &got {
                            for o in r.first..=r.last {
                                let e = &mut model[o as usize];
                                let before = match *e {
                                    Model::Fresh => 0,
                                    Model::Available(c) => c,
                                    ref other => panic!("{ctx}: acquired {o} in {other:?}"),
                                };
                                assert_eq!(r.delivery_count, before + 1, "{ctx}: count of {o}");
                                *e = Model::Acquired(who, Timestamp(now + 1000), before + 1);
                            }
                        }
                    }
                    4..=6 => {
                        let who = rng.below(3) as usize;
                        let start = p.start_offset();
                        // Mostly from what the member holds, sometimes anywhere near the start.
                        let held: Vec<i64> = (0..LOG_END)
                            .filter(|&o| matches!(model[o as usize], Model::Acquired(w, _, _) if w == who))
                            .collect();
                        let first = if !held.is_empty() && rng.below(4) != 0 {
                            held[rng.below(held.len() as u64) as usize]
                        } else {
                            (start - 2 + rng.below(12) as i64).max(0)
                        };
                        let mut last = first + rng.below(6) as i64;
                        if rng.below(5) != 0 {
                            // Usually within one held stretch.
                            last = (first..=last)
                                .take_while(|o| held.binary_search(o).is_ok())
                                .last()
                                .unwrap_or(last);
                        }
                        let types: Vec<AckType> = if rng.below(2) == 0 {
                            vec![AckType::from_code(rng.below(5) as u8).unwrap()]
                        } else {
                            (first..=last)
                                .map(|_| AckType::from_code(rng.below(5) as u8).unwrap())
                                .collect()
                        };
                        let b = AckBatch {
                            first,
                            last,
                            types: types.clone(),
                        };
                        let lo = first.max(start);
                        let ok = last < start
                            || (lo < p.end_offset()
                                && last < p.end_offset()
                                && (lo..=last).all(|o| {
                                    matches!(model[o as usize], Model::Acquired(w, _, _) if w == who)
                                }));
                        let res = p.acknowledge(&members[who], &[b], Timestamp(now));
                        assert_eq!(res.is_ok(), ok, "{ctx}: {res:?}");
                        if ok {
                            for o in lo..=last {
                                let ty = types[if types.len() == 1 {
                                    0
                                } else {
                                    (o - first) as usize
                                }];
                                let e = &mut model[o as usize];
                                let Model::Acquired(w, _, c) = *e else {
                                    unreachable!()
                                };
                                *e = match ty {
                                    AckType::Accept | AckType::Reject | AckType::Gap => Model::Done,
                                    AckType::Release if c >= limit => Model::Done,
                                    AckType::Release => Model::Available(c),
                                    AckType::Renew => Model::Acquired(w, Timestamp(now + 1000), c),
                                };
                            }
                        }
                    }
                    7 => {
                        now += rng.below(800);
                        p.handle_timeout(Timestamp(now));
                        for e in model.iter_mut() {
                            if let Model::Acquired(_, d, c) = *e {
                                if d.0 <= now {
                                    *e = if c >= limit {
                                        Model::Done
                                    } else {
                                        Model::Available(c)
                                    };
                                }
                            }
                        }
                    }
                    8 => {
                        let who = rng.below(3) as usize;
                        p.release_member(&members[who], Timestamp(now));
                        for e in model.iter_mut() {
                            if let Model::Acquired(w, _, c) = *e {
                                if w == who {
                                    *e = if c >= limit {
                                        Model::Done
                                    } else {
                                        Model::Available(c)
                                    };
                                }
                            }
                        }
                    }
                    _ => {
                        let bytes = encode(&p.snapshot());
                        p = SharePartition::restore(decode(&bytes).unwrap(), config);
                        for e in model.iter_mut() {
                            if let Model::Acquired(_, _, c) = *e {
                                *e = Model::Available(c);
                            }
                        }
                    }
                }
                // The shell's dead-letter writes end now and then (Archiving until they do).
                if rng.below(2) == 0 {
                    for d in p.take_dead_letters() {
                        p.dead_lettered(d.first, d.last);
                    }
                }
                p.check();
                let (start, end) = (p.start_offset(), p.end_offset());
                for (o, e) in model.iter().enumerate() {
                    let o = o as i64;
                    let seen = p.state_of(o).map(|s| (s.state, s.delivery_count, s.holder));
                    let want = match *e {
                        _ if o < start => {
                            assert_eq!(*e, Model::Done, "{ctx}: {o} below start {start}");
                            continue;
                        }
                        _ if o >= end => {
                            assert_eq!(*e, Model::Fresh, "{ctx}: {o} past end {end}");
                            continue;
                        }
                        Model::Fresh => panic!("{ctx}: {o} in the window but never acquired"),
                        Model::Available(c) => Some((RecordState::Available, c, None)),
                        Model::Acquired(w, d, c) => {
                            Some((RecordState::Acquired, c, Some((&members[w], d))))
                        }
                        Model::Done => {
                            let s = p.state_of(o).unwrap().state;
                            assert!(
                                matches!(s, RecordState::Acknowledged | RecordState::Archived)
                                    || (config.dead_letter && s == RecordState::Archiving),
                                "{ctx}: {o} done but {s:?}"
                            );
                            continue;
                        }
                    };
                    assert_eq!(seen, want, "{ctx}: offset {o}");
                }
                if start < end && model[start as usize] == Model::Done {
                    assert_eq!(
                        p.state_of(start).map(|s| s.state),
                        Some(RecordState::Archiving),
                        "{ctx}: start not moved"
                    );
                }
            }
        }
    }

    fn dlq_part(limit: u16) -> SharePartition {
        SharePartition::new(
            0,
            PartitionConfig {
                delivery_count_limit: limit,
                dead_letter: true,
                ..PartitionConfig::default()
            },
        )
    }

    #[test]
    fn with_a_dead_letter_queue_a_reject_is_archiving_until_written() {
        let mut p = dlq_part(5);
        let a = m("a");
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        let acks = [
            ack(0, 1, AckType::Accept),
            ack(2, 3, AckType::Reject),
            ack(4, 9, AckType::Accept),
        ];
        p.acknowledge(&a, &acks, t(1)).unwrap();
        p.check();
        assert_eq!(state(&p, 2), Some((RecordState::Archiving, 1)));
        // The start offset waits for the queue; nothing there is delivered again.
        assert_eq!((p.start_offset(), p.next_fetch_offset()), (2, 10));
        assert_eq!(
            p.take_dead_letters(),
            vec![DeadLetter {
                first: 2,
                last: 3,
                delivery_count: 1,
                cause: DeadCause::Rejected
            }]
        );
        assert!(p.take_dead_letters().is_empty());
        // Stored as Kafka's ARCHIVING (3).
        let snap = p.snapshot();
        assert_eq!(snap.batches[0].state, RecordState::Archiving);
        assert_eq!(decode(&encode(&snap)).unwrap(), snap);
        // Acknowledging it again is not allowed.
        assert_eq!(
            p.acknowledge(&a, &[ack(2, 2, AckType::Accept)], t(2))
                .unwrap_err()
                .error,
            GroupError::InvalidRecordState
        );
        assert!(p.dead_lettered(2, 3));
        p.check();
        assert_eq!((p.start_offset(), p.in_flight()), (10, 0));
        assert!(!p.dead_lettered(2, 3), "done once");
    }

    #[test]
    fn with_a_dead_letter_queue_the_delivery_limit_sends_records_there() {
        let mut p = dlq_part(2);
        let (a, b) = (m("a"), m("b"));
        let log = [batch(0, 1), batch(2, 4)];
        p.acquire(&a, &log, 500, t(0));
        p.acknowledge(&a, &[ack(0, 4, AckType::Release)], t(1))
            .unwrap();
        // Second delivery: the lock runs out on 0-1, the member leaves holding 2-4.
        p.acquire_in(AcquireMode::RecordLimit, &b, &log, 2, t(10));
        p.acquire(&a, &log, 500, t(20));
        assert_eq!(p.handle_timeout(t(10 + LOCK)).archived, 2);
        assert_eq!(p.release_member(&a, t(10 + LOCK)).archived, 3);
        p.check();
        let letters = p.take_dead_letters();
        let offsets: u64 = letters.iter().map(|d| len(d.first, d.last)).sum();
        assert_eq!(offsets, 5);
        assert!(letters
            .iter()
            .all(|d| d.cause == DeadCause::DeliveryLimit && d.delivery_count == 2));
        assert_eq!(p.start_offset(), 0);
        assert!(p.dead_lettered(0, 4));
        assert_eq!(p.start_offset(), 5);
    }

    #[test]
    fn archiving_records_are_handed_out_again_after_a_restore() {
        let mut p = dlq_part(2);
        let a = m("a");
        p.acquire(&a, &[batch(0, 9)], 500, t(0));
        p.acknowledge(&a, &[ack(0, 0, AckType::Reject)], t(1))
            .unwrap();
        p.acknowledge(&a, &[ack(1, 9, AckType::Release)], t(1))
            .unwrap();
        p.acquire(&a, &[batch(1, 9)], 500, t(2));
        p.acknowledge(&a, &[ack(1, 9, AckType::Release)], t(2))
            .unwrap();
        let snap = p.snapshot();
        let mut q = SharePartition::restore(snap, *p.config());
        q.check();
        assert_eq!(
            q.take_dead_letters(),
            vec![
                DeadLetter {
                    first: 0,
                    last: 0,
                    delivery_count: 1,
                    cause: DeadCause::Rejected
                },
                DeadLetter {
                    first: 1,
                    last: 9,
                    delivery_count: 2,
                    cause: DeadCause::DeliveryLimit
                },
            ]
        );
        assert!(q.dead_lettered(0, 9));
        assert_eq!(q.start_offset(), 10);
    }

    #[test]
    fn without_a_dead_letter_queue_nothing_is_archiving() {
        let mut p = part();
        let a = m("a");
        p.acquire(&a, &[batch(0, 4)], 500, t(0));
        p.acknowledge(&a, &[ack(0, 4, AckType::Reject)], t(1))
            .unwrap();
        assert!(p.take_dead_letters().is_empty());
        assert_eq!(p.start_offset(), 5);
        // A reset forgets what was on its way.
        let mut q = dlq_part(5);
        q.acquire(&a, &[batch(0, 4)], 500, t(0));
        q.acknowledge(&a, &[ack(0, 4, AckType::Reject)], t(1))
            .unwrap();
        q.reset_start(3);
        assert!(q.take_dead_letters().is_empty());
        assert!(!q.dead_lettered(0, 4));
    }
}
