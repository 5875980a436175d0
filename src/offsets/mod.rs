//! Committed offsets of one group, and Kafka's rules for them (pure: no clock reads, no I/O).
//!
//! A group's actor owns its [`GroupOffsets`] beside the group state machine, so a commit is
//! checked against the group (member, generation, state: `group::ClassicGroup`) and stored in the
//! same step. What lives here is what Kafka's `OffsetMetadataManager` does per partition:
//! - the metadata size limit (`offset.metadata.max.bytes`, counted as Java counts string length,
//!   in UTF-16 code units), failing only the partitions over it;
//! - the per-offset expire timestamp of OffsetCommit v2-4 (`retention_time_ms`);
//! - fetch answers for partitions without a committed offset (offset -1, epoch -1, "");
//! - retention: which offsets expire at `now` for a group in a given condition (spec §3.3).
//!
//! Durability is not here: the shell persists the commit records the actor produces.

use std::collections::BTreeMap;

/// Kafka's `offset.metadata.max.bytes` default.
pub const DEFAULT_METADATA_MAX_BYTES: usize = 4096;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// -1 when the client did not send one.
    pub leader_epoch: i32,
    pub metadata: String,
    /// When it was committed (shell's wall clock, ms since the Unix epoch).
    pub commit_timestamp_ms: u64,
    /// OffsetCommit v2-4 with `retention_time_ms` set: expires at this time, whatever the group.
    pub expire_timestamp_ms: Option<u64>,
}

/// What a fetch answers for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

impl FetchedOffset {
    /// The answer for a partition without a committed offset (and for any partition of an
    /// unknown or dead group).
    pub fn none() -> FetchedOffset {
        FetchedOffset {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
        }
    }
}

impl From<&CommittedOffset> for FetchedOffset {
    fn from(c: &CommittedOffset) -> Self {
        FetchedOffset {
            offset: c.offset,
            leader_epoch: c.leader_epoch,
            metadata: c.metadata.clone(),
        }
    }
}

/// Whether `metadata` exceeds the limit, counting as Java's `String.length()` does (UTF-16 code
/// units), which is what Kafka compares with `offset.metadata.max.bytes`.
pub fn metadata_too_large(metadata: &str, max: usize) -> bool {
    // A UTF-8 string never has more UTF-16 units than bytes; skip the count when it cannot matter.
    metadata.len() > max && metadata.encode_utf16().count() > max
}

/// From when an offset's retention runs, by group condition (Kafka's
/// `ClassicGroup.offsetExpirationCondition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpirationBase {
    /// No offset expires now, not even one with an expire timestamp (a classic group
    /// rebalancing, or Stable without known subscriptions: Kafka skips such groups entirely).
    Never,
    /// Each offset's own commit time: simple groups (no protocol type), and Stable consumer
    /// groups for the topics they are not subscribed to.
    CommitTime,
    /// A fixed time: an Empty group's offsets age from when it became Empty.
    Since(u64),
}

/// The committed offsets of one group, by topic and partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupOffsets {
    offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
}

impl GroupOffsets {
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Number of committed partitions.
    pub fn len(&self) -> usize {
        self.offsets.values().map(BTreeMap::len).sum()
    }

    /// Stores (or replaces) the offset of one partition.
    pub fn commit(&mut self, topic: &str, partition: i32, offset: CommittedOffset) {
        self.offsets
            .entry(topic.to_string())
            .or_default()
            .insert(partition, offset);
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.offsets.get(topic)?.get(&partition)
    }

    /// The answer for one partition: its committed offset, or [`FetchedOffset::none`].
    pub fn fetch(&self, topic: &str, partition: i32) -> FetchedOffset {
        self.get(topic, partition)
            .map(FetchedOffset::from)
            .unwrap_or_else(FetchedOffset::none)
    }

    /// Every committed offset, by topic then partition (OffsetFetch with topics = null).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &CommittedOffset)> {
        self.offsets
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| (t.as_str(), *p, o)))
    }

    /// Topics with at least one committed offset.
    pub fn topics(&self) -> impl Iterator<Item = &str> {
        self.offsets.keys().map(String::as_str)
    }

    /// Removes one partition's offset; true if there was one.
    pub fn delete(&mut self, topic: &str, partition: i32) -> bool {
        let Some(parts) = self.offsets.get_mut(topic) else {
            return false;
        };
        let removed = parts.remove(&partition).is_some();
        if parts.is_empty() {
            self.offsets.remove(topic);
        }
        removed
    }

    /// Removes and returns the offsets that have expired at `now_ms` (Kafka's
    /// `OffsetMetadataManager.cleanupExpiredOffsets`): only topics the group is not subscribed
    /// to are eligible, and none while the base is [`ExpirationBase::Never`]; an offset with an
    /// expire timestamp expires at it; otherwise it expires once `retention_ms` has passed since
    /// the group's base.
    pub fn expire(
        &mut self,
        now_ms: u64,
        retention_ms: u64,
        base: ExpirationBase,
        is_subscribed: impl Fn(&str) -> bool,
    ) -> Vec<(String, i32)> {
        let mut expired = Vec::new();
        if base == ExpirationBase::Never {
            return expired;
        }
        for (topic, parts) in &self.offsets {
            if is_subscribed(topic) {
                continue;
            }
            for (partition, o) in parts {
                let aged_from = match base {
                    ExpirationBase::CommitTime => o.commit_timestamp_ms,
                    ExpirationBase::Since(t) => t,
                    ExpirationBase::Never => continue,
                };
                let gone = match o.expire_timestamp_ms {
                    Some(at) => now_ms >= at,
                    None => now_ms.saturating_sub(aged_from) >= retention_ms,
                };
                if gone {
                    expired.push((topic.clone(), *partition));
                }
            }
        }
        for (topic, partition) in &expired {
            self.delete(topic, *partition);
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64, commit: u64, expire: Option<u64>) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: 0,
            metadata: String::new(),
            commit_timestamp_ms: commit,
            expire_timestamp_ms: expire,
        }
    }

    #[test]
    fn metadata_size_counts_utf16_units_like_java() {
        assert!(!metadata_too_large(&"a".repeat(4096), 4096));
        assert!(metadata_too_large(&"a".repeat(4097), 4096));
        // 'é' is 2 UTF-8 bytes but 1 UTF-16 unit: 4096 of them fit.
        assert!(!metadata_too_large(&"é".repeat(4096), 4096));
        // '😀' is 2 UTF-16 units.
        assert!(metadata_too_large(&"😀".repeat(2049), 4096));
        assert!(!metadata_too_large(&"😀".repeat(2048), 4096));
    }

    #[test]
    fn fetch_of_an_uncommitted_partition_is_minus_one() {
        let mut g = GroupOffsets::default();
        g.commit("t", 0, at(5, 0, None));
        assert_eq!(g.fetch("t", 0).offset, 5);
        assert_eq!(g.fetch("t", 1), FetchedOffset::none());
        assert_eq!(g.fetch("u", 0), FetchedOffset::none());
    }

    #[test]
    fn commit_replaces_and_delete_removes() {
        let mut g = GroupOffsets::default();
        g.commit("t", 0, at(5, 0, None));
        g.commit("t", 0, at(9, 1, None));
        g.commit("t", 1, at(1, 1, None));
        assert_eq!(g.len(), 2);
        assert_eq!(g.get("t", 0).map(|o| o.offset), Some(9));
        assert!(g.delete("t", 0));
        assert!(!g.delete("t", 0));
        assert!(g.delete("t", 1));
        assert!(g.is_empty());
        assert_eq!(g.topics().count(), 0);
    }

    #[test]
    fn retention_of_an_empty_group_runs_from_when_it_became_empty() {
        let mut g = GroupOffsets::default();
        g.commit("t", 0, at(1, 0, None));
        let base = ExpirationBase::Since(1_000);
        assert!(g.expire(10_999, 10_000, base, |_| false).is_empty());
        assert_eq!(
            g.expire(11_000, 10_000, base, |_| false),
            vec![("t".to_string(), 0)]
        );
        assert!(g.is_empty());
    }

    #[test]
    fn retention_by_commit_time_skips_subscribed_topics() {
        let mut g = GroupOffsets::default();
        g.commit("subscribed", 0, at(1, 0, None));
        g.commit("old", 0, at(1, 0, None));
        g.commit("fresh", 0, at(1, 9_000, None));
        let expired = g.expire(10_000, 10_000, ExpirationBase::CommitTime, |t| {
            t == "subscribed"
        });
        assert_eq!(expired, vec![("old".to_string(), 0)]);
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn nothing_expires_while_the_group_has_no_expiration_condition() {
        let mut g = GroupOffsets::default();
        g.commit("t", 0, at(1, 0, None));
        g.commit("t", 1, at(1, 0, Some(500)));
        assert!(g
            .expire(u64::MAX / 2, 10, ExpirationBase::Never, |_| false)
            .is_empty());
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn explicit_expire_timestamp_wins_over_age() {
        let mut g = GroupOffsets::default();
        g.commit("t", 0, at(1, 0, Some(100_000)));
        assert!(g
            .expire(50_000, 10_000, ExpirationBase::CommitTime, |_| false)
            .is_empty());
        assert_eq!(
            g.expire(100_000, 10_000, ExpirationBase::CommitTime, |_| false)
                .len(),
            1
        );
    }
}
