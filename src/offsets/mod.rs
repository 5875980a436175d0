//! Committed offsets: the pure per-partition rules of OffsetCommit and OffsetFetch (spec §3.1,
//! §3.2), retention (§3.3), and the [`OffsetStore`] trait the storage layer implements.
//!
//! The group checks of a commit (member, generation, state) belong to the group
//! ([`crate::group::ClassicGroup::validate_offset_commit`]); this module takes over once they
//! pass. Like the group core it does no I/O and reads no clock: `now` comes in.

mod pending;
mod retention;
mod store;

pub use pending::{committed, PendingOffsets};
pub use retention::{expired_offsets, ExpiredOffsets};
pub use store::{fetch, FetchedOffset, MemoryOffsetStore, OffsetStore};

// The records these rules read and write, re-exported for the layers above.
pub use crate::vocab::{ExpirationBase, OffsetAndMetadata, TopicPartition};
use crate::vocab::{GroupError, Timestamp};

/// The offset settings (Kafka broker configs of the same names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetConfig {
    /// `offset.metadata.max.bytes` (4096), compared with the Java string length.
    pub metadata_max_bytes: usize,
    /// `offsets.retention.minutes` (10080) in milliseconds.
    pub retention_ms: u64,
    /// `offsets.retention.check.interval.ms` (600000): how often the shell runs retention.
    pub retention_check_interval_ms: u64,
    /// The offsets are kept behind koord (gateway mode: upstream), with that retention
    /// ([`crate::backend`] says so at start-up). koord expires none, and an Empty group is forgotten (its records, never its offsets) once it has been
    /// Empty for `retention_ms`.
    pub kept_elsewhere: bool,
}

impl Default for OffsetConfig {
    fn default() -> Self {
        OffsetConfig {
            metadata_max_bytes: 4096,
            retention_ms: 10_080 * 60 * 1000,
            retention_check_interval_ms: 600_000,
            kept_elsewhere: false,
        }
    }
}

/// One partition of an OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionCommit {
    pub tp: TopicPartition,
    pub offset: i64,
    /// -1 on the wire is None.
    pub leader_epoch: Option<i32>,
    /// Nullable on the wire.
    pub metadata: Option<String>,
}

/// What a commit that passed the group checks turns into: an answer per partition and the
/// offsets to write (only the accepted partitions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PreparedCommit {
    /// In request order; None is NONE.
    pub results: Vec<(TopicPartition, Option<GroupError>)>,
    pub writes: Vec<(TopicPartition, OffsetAndMetadata)>,
}

/// Kafka's "no retention override" value of OffsetCommit v2-4 `RetentionTimeMs`.
pub const DEFAULT_RETENTION_TIME: i64 = -1;

/// The per-partition part of OffsetCommit (Kafka `OffsetMetadataManager.commitOffset`): a
/// partition whose metadata is longer than `offset.metadata.max.bytes` gets
/// OFFSET_METADATA_TOO_LARGE and is not written; the others are. `retention_time_ms` is the
/// v2-4 field ([`DEFAULT_RETENTION_TIME`] otherwise): an explicit value sets an expire
/// timestamp on each offset.
pub fn prepare_commit(
    config: &OffsetConfig,
    partitions: Vec<PartitionCommit>,
    retention_time_ms: i64,
    now: Timestamp,
) -> PreparedCommit {
    let expire_timestamp = if retention_time_ms == DEFAULT_RETENTION_TIME {
        None
    } else {
        // Kafka adds the value as is; a negative override other than -1 expires at once.
        Some(Timestamp(
            now.as_millis().saturating_add_signed(retention_time_ms),
        ))
    };
    let mut out = PreparedCommit::default();
    for p in partitions {
        let metadata = p.metadata.unwrap_or_default();
        if java_string_len(&metadata) > config.metadata_max_bytes {
            out.results
                .push((p.tp, Some(GroupError::OffsetMetadataTooLarge)));
            continue;
        }
        out.results.push((p.tp.clone(), None));
        out.writes.push((
            p.tp,
            OffsetAndMetadata {
                offset: p.offset,
                leader_epoch: p.leader_epoch,
                metadata,
                commit_timestamp: now,
                expire_timestamp,
            },
        ));
    }
    out
}

/// Java's `String.length()`: UTF-16 code units, which is what Kafka compares with
/// `offset.metadata.max.bytes` (despite the name, not bytes).
pub fn java_string_len(s: &str) -> usize {
    s.encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(topic: &str, metadata: Option<&str>) -> PartitionCommit {
        PartitionCommit {
            tp: TopicPartition::new(topic, 0),
            offset: 42,
            leader_epoch: Some(3),
            metadata: metadata.map(str::to_owned),
        }
    }

    #[test]
    fn metadata_too_large_fails_only_that_partition() {
        let config = OffsetConfig {
            metadata_max_bytes: 4,
            ..OffsetConfig::default()
        };
        let out = prepare_commit(
            &config,
            vec![
                commit("a", Some("1234")),
                commit("b", Some("12345")),
                commit("c", None),
            ],
            DEFAULT_RETENTION_TIME,
            Timestamp(10),
        );
        let errors: Vec<_> = out.results.iter().map(|(_, e)| *e).collect();
        assert_eq!(
            errors,
            vec![None, Some(GroupError::OffsetMetadataTooLarge), None]
        );
        let written: Vec<_> = out.writes.iter().map(|(tp, _)| tp.topic.as_str()).collect();
        assert_eq!(written, vec!["a", "c"]);
        assert_eq!(
            out.writes[1].1.metadata, "",
            "null metadata is stored as empty"
        );
        assert_eq!(out.writes[0].1.commit_timestamp, Timestamp(10));
        assert_eq!(out.writes[0].1.expire_timestamp, None);
    }

    #[test]
    fn metadata_length_is_counted_in_utf16_units_like_java() {
        // 4 chars, 12 UTF-8 bytes, 4 UTF-16 units.
        assert_eq!(java_string_len("日本語!"), 4);
        // An astral character is 2 units.
        assert_eq!(java_string_len("😀"), 2);
        let config = OffsetConfig {
            metadata_max_bytes: 4,
            ..OffsetConfig::default()
        };
        let out = prepare_commit(
            &config,
            vec![commit("a", Some("日本語!"))],
            -1,
            Timestamp(0),
        );
        assert_eq!(out.results[0].1, None);
    }

    #[test]
    fn v2_to_v4_retention_time_sets_an_expire_timestamp() {
        let out = prepare_commit(
            &OffsetConfig::default(),
            vec![commit("a", None)],
            5_000,
            Timestamp(1_000),
        );
        assert_eq!(out.writes[0].1.expire_timestamp, Some(Timestamp(6_000)));
    }
}
