//! A group's transactional offsets waiting for their transaction's marker (Kafka's
//! `OffsetMetadataManager.pendingTransactionalOffsets`), PURE: the actor stores what these
//! calls return and applies the rest.
//!
//! - TxnOffsetCommit puts an offset under its producer id; it is not a committed offset yet.
//! - OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for a partition that has
//!   one ([`PendingOffsets::is_pending`]).
//! - The transaction's marker takes every offset of the producer: a commit applies those not
//!   superseded, an abort drops them all ([`PendingOffsets::take`], [`committed`]).
//! - A plain OffsetCommit of a partition after a transactional one supersedes it: Kafka keeps
//!   the later of the two commit records when the transaction commits.
//! - Deleting a partition's offset (OffsetDelete) drops its pending offsets too.
//! - A marker that aborts with a bumped epoch fences the producer's older epochs: a
//!   TxnOffsetCommit of an older epoch that arrives after the marker is refused, so nothing is
//!   left pending with no transaction to end it.

use std::collections::{BTreeMap, HashMap};

use super::{OffsetAndMetadata, TopicPartition};
use crate::vocab::PendingOffset;

/// One pending offset, under its producer and partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    offset: OffsetAndMetadata,
    superseded: bool,
}

/// Every pending transactional offset of one group.
#[derive(Debug, Default, Clone)]
pub struct PendingOffsets {
    by_producer: BTreeMap<i64, BTreeMap<TopicPartition, Entry>>,
    /// The epoch of each producer's last marker: an older epoch is fenced.
    ended: HashMap<i64, i16>,
}

impl PendingOffsets {
    /// The offsets found in the store at start-up.
    pub fn from_stored(stored: Vec<PendingOffset>) -> PendingOffsets {
        let mut out = PendingOffsets::default();
        for p in stored {
            out.by_producer.entry(p.producer_id).or_default().insert(
                p.tp,
                Entry {
                    offset: p.offset,
                    superseded: p.superseded,
                },
            );
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.by_producer.is_empty()
    }

    /// How many offsets are pending, over every producer.
    pub fn len(&self) -> usize {
        self.by_producer.values().map(BTreeMap::len).sum()
    }

    /// Whether a marker has fenced `epoch` of the producer (a later marker had a newer epoch).
    pub fn is_fenced(&self, producer_id: i64, epoch: i16) -> bool {
        self.ended.get(&producer_id).is_some_and(|&e| epoch < e)
    }

    /// TxnOffsetCommit: `offset` is pending for `tp` under the producer, replacing what the
    /// producer had pending there.
    pub fn put(
        &mut self,
        producer_id: i64,
        tp: TopicPartition,
        offset: OffsetAndMetadata,
    ) -> PendingOffset {
        let entry = Entry {
            offset: offset.clone(),
            superseded: false,
        };
        self.by_producer
            .entry(producer_id)
            .or_default()
            .insert(tp.clone(), entry);
        PendingOffset {
            producer_id,
            tp,
            offset,
            superseded: false,
        }
    }

    /// Whether a transaction holds an offset for `tp`.
    pub fn is_pending(&self, tp: &TopicPartition) -> bool {
        self.by_producer.values().any(|m| m.contains_key(tp))
    }

    /// A plain OffsetCommit of `tp`: every pending offset of it is superseded. Returns those
    /// that changed, to store.
    pub fn supersede(&mut self, tp: &TopicPartition) -> Vec<PendingOffset> {
        let mut changed = Vec::new();
        for (&producer_id, offsets) in &mut self.by_producer {
            if let Some(entry) = offsets.get_mut(tp).filter(|e| !e.superseded) {
                entry.superseded = true;
                changed.push(PendingOffset {
                    producer_id,
                    tp: tp.clone(),
                    offset: entry.offset.clone(),
                    superseded: true,
                });
            }
        }
        changed
    }

    /// The producer's transaction ended with a marker of `epoch`: its pending offsets are
    /// taken out (see [`committed`] for what a commit applies).
    pub fn take(&mut self, producer_id: i64, epoch: i16) -> Vec<PendingOffset> {
        let last = self.ended.entry(producer_id).or_insert(epoch);
        *last = (*last).max(epoch);
        self.by_producer
            .remove(&producer_id)
            .unwrap_or_default()
            .into_iter()
            .map(|(tp, e)| PendingOffset {
                producer_id,
                tp,
                offset: e.offset,
                superseded: e.superseded,
            })
            .collect()
    }

    /// Puts back offsets taken by a marker whose write failed, except where the producer has
    /// pending offsets again since.
    pub fn restore(&mut self, taken: Vec<PendingOffset>) {
        for p in taken {
            self.by_producer
                .entry(p.producer_id)
                .or_default()
                .entry(p.tp)
                .or_insert(Entry {
                    offset: p.offset,
                    superseded: p.superseded,
                });
        }
    }

    /// Every partition with an offset pending, once each.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        let mut out: Vec<TopicPartition> = self
            .by_producer
            .values()
            .flat_map(|offsets| offsets.keys().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The offset of `tp` was deleted: its pending offsets go too. Returns the producers that
    /// had one.
    pub fn remove_partition(&mut self, tp: &TopicPartition) -> Vec<i64> {
        let mut producers = Vec::new();
        self.by_producer.retain(|&producer_id, offsets| {
            if offsets.remove(tp).is_some() {
                producers.push(producer_id);
            }
            !offsets.is_empty()
        });
        producers
    }
}

/// What a commit marker applies of the offsets it took: those not superseded.
pub fn committed(taken: &[PendingOffset]) -> Vec<(TopicPartition, OffsetAndMetadata)> {
    taken
        .iter()
        .filter(|p| !p.superseded)
        .map(|p| (p.tp.clone(), p.offset.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Timestamp;

    fn om(offset: i64) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            leader_epoch: None,
            metadata: String::new(),
            commit_timestamp: Timestamp(1),
            expire_timestamp: None,
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn a_commit_marker_applies_the_producers_offsets_and_leaves_the_others_pending() {
        let mut pending = PendingOffsets::default();
        pending.put(1, tp(0), om(10));
        pending.put(1, tp(1), om(11));
        pending.put(2, tp(0), om(20));
        assert!(pending.is_pending(&tp(0)) && pending.is_pending(&tp(1)));
        let taken = pending.take(1, 0);
        assert_eq!(committed(&taken), vec![(tp(0), om(10)), (tp(1), om(11))]);
        assert!(
            pending.is_pending(&tp(0)),
            "producer 2 still holds partition 0"
        );
        assert!(!pending.is_pending(&tp(1)));
        assert_eq!(pending.len(), 1);
    }

    #[test]
    fn a_later_put_of_the_same_producer_replaces_its_pending_offset() {
        let mut pending = PendingOffsets::default();
        pending.put(1, tp(0), om(10));
        pending.put(1, tp(0), om(15));
        assert_eq!(committed(&pending.take(1, 0)), vec![(tp(0), om(15))]);
    }

    #[test]
    fn a_plain_commit_after_a_transactional_one_wins_at_the_commit_marker() {
        let mut pending = PendingOffsets::default();
        pending.put(1, tp(0), om(10));
        pending.put(1, tp(1), om(11));
        let changed = pending.supersede(&tp(0));
        assert_eq!(changed.len(), 1);
        assert!(changed[0].superseded);
        assert!(pending.supersede(&tp(0)).is_empty(), "already superseded");
        assert!(
            pending.is_pending(&tp(0)),
            "still unstable until the marker"
        );
        assert_eq!(committed(&pending.take(1, 0)), vec![(tp(1), om(11))]);
    }

    #[test]
    fn an_offset_put_after_its_plain_commit_is_applied_again() {
        let mut pending = PendingOffsets::default();
        pending.put(1, tp(0), om(10));
        pending.supersede(&tp(0));
        pending.put(1, tp(0), om(12));
        assert_eq!(committed(&pending.take(1, 0)), vec![(tp(0), om(12))]);
    }

    #[test]
    fn a_marker_with_a_bumped_epoch_fences_the_older_epochs() {
        let mut pending = PendingOffsets::default();
        assert!(!pending.is_fenced(1, 0));
        pending.take(1, 3);
        assert!(pending.is_fenced(1, 2));
        assert!(
            !pending.is_fenced(1, 3),
            "the same epoch runs the next transaction"
        );
        assert!(!pending.is_fenced(2, 0), "other producers are untouched");
        pending.take(1, 1);
        assert!(
            pending.is_fenced(1, 2),
            "an older marker does not lower the fence"
        );
    }

    #[test]
    fn restored_offsets_do_not_overwrite_newer_ones() {
        let mut pending = PendingOffsets::default();
        pending.put(1, tp(0), om(10));
        pending.put(1, tp(1), om(11));
        let taken = pending.take(1, 0);
        pending.put(1, tp(0), om(13));
        pending.restore(taken);
        assert_eq!(
            committed(&pending.take(1, 0)),
            vec![(tp(0), om(13)), (tp(1), om(11))]
        );
    }

    #[test]
    fn deleting_a_partitions_offset_drops_its_pending_offsets() {
        let mut pending = PendingOffsets::default();
        pending.put(1, tp(0), om(10));
        pending.put(2, tp(0), om(20));
        pending.put(2, tp(1), om(21));
        assert_eq!(pending.remove_partition(&tp(0)), vec![1, 2]);
        assert!(!pending.is_pending(&tp(0)));
        assert_eq!(pending.len(), 1);
        assert!(pending.take(1, 0).is_empty());
    }

    #[test]
    fn stored_offsets_come_back_as_they_were() {
        let stored = vec![
            PendingOffset {
                producer_id: 1,
                tp: tp(0),
                offset: om(10),
                superseded: true,
            },
            PendingOffset {
                producer_id: 1,
                tp: tp(1),
                offset: om(11),
                superseded: false,
            },
        ];
        let mut pending = PendingOffsets::from_stored(stored.clone());
        assert!(pending.is_pending(&tp(0)));
        assert_eq!(pending.take(1, 0), stored);
    }
}
