//! Offset retention (spec §3.3; Kafka `OffsetMetadataManager.cleanupExpiredOffsets`,
//! `OffsetExpirationConditionImpl`). The shell runs it every
//! `offsets.retention.check.interval.ms` per group and writes tombstones for what it returns.

use crate::vocab::{ExpirationBase, OffsetAndMetadata, Timestamp, TopicPartition};

impl ExpirationBase {
    /// Kafka `isOffsetExpired`: an explicit (v2-4) expire timestamp wins; otherwise the offset
    /// expires `retention_ms` after the base.
    pub fn is_expired(
        &self,
        offset: &OffsetAndMetadata,
        now: Timestamp,
        retention_ms: u64,
    ) -> bool {
        if let Some(expire) = offset.expire_timestamp {
            return now >= expire;
        }
        let base = match self {
            ExpirationBase::StateTimestamp(t) => *t,
            ExpirationBase::CommitTimestamp => offset.commit_timestamp,
        };
        now.as_millis().saturating_sub(base.as_millis()) >= retention_ms
    }
}

/// The result of one retention pass over a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExpiredOffsets {
    /// Offsets to delete (tombstone).
    pub expired: Vec<TopicPartition>,
    /// Every offset of the group expired: an Empty group can then be deleted too.
    pub all_expired: bool,
}

/// Which of a group's offsets expire now. Only offsets of topics the group is not subscribed
/// to are eligible, and never one with a pending transactional commit.
pub fn expired_offsets(
    offsets: &[(TopicPartition, OffsetAndMetadata)],
    base: Option<ExpirationBase>,
    is_subscribed: impl Fn(&str) -> bool,
    has_pending_transaction: impl Fn(&TopicPartition) -> bool,
    now: Timestamp,
    retention_ms: u64,
) -> ExpiredOffsets {
    let Some(base) = base else {
        return ExpiredOffsets {
            expired: Vec::new(),
            all_expired: offsets.is_empty(),
        };
    };
    let expired: Vec<TopicPartition> = offsets
        .iter()
        .filter(|(tp, om)| {
            !is_subscribed(&tp.topic)
                && !has_pending_transaction(tp)
                && base.is_expired(om, now, retention_ms)
        })
        .map(|(tp, _)| tp.clone())
        .collect();
    ExpiredOffsets {
        all_expired: expired.len() == offsets.len(),
        expired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn om(commit: u64, expire: Option<u64>) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset: 1,
            leader_epoch: None,
            metadata: String::new(),
            commit_timestamp: Timestamp(commit),
            expire_timestamp: expire.map(Timestamp),
        }
    }

    #[test]
    fn offsets_of_an_empty_group_age_from_when_it_became_empty() {
        let base = ExpirationBase::StateTimestamp(Timestamp(1_000));
        let offsets = vec![(TopicPartition::new("t", 0), om(0, None))];
        let none = expired_offsets(
            &offsets,
            Some(base),
            |_| false,
            |_| false,
            Timestamp(1_099),
            100,
        );
        assert!(none.expired.is_empty() && !none.all_expired);
        let all = expired_offsets(
            &offsets,
            Some(base),
            |_| false,
            |_| false,
            Timestamp(1_100),
            100,
        );
        assert_eq!(all.expired.len(), 1);
        assert!(all.all_expired);
    }

    #[test]
    fn subscribed_topics_and_pending_transactions_never_expire() {
        let offsets = vec![
            (TopicPartition::new("subscribed", 0), om(0, None)),
            (TopicPartition::new("txn", 0), om(0, None)),
            (TopicPartition::new("old", 0), om(0, None)),
        ];
        let out = expired_offsets(
            &offsets,
            Some(ExpirationBase::CommitTimestamp),
            |t| t == "subscribed",
            |tp| tp.topic == "txn",
            Timestamp(10_000),
            100,
        );
        assert_eq!(out.expired, vec![TopicPartition::new("old", 0)]);
        assert!(!out.all_expired);
    }

    #[test]
    fn an_explicit_expire_timestamp_wins_and_no_base_means_never() {
        let offsets = vec![(TopicPartition::new("t", 0), om(0, Some(50)))];
        let out = expired_offsets(
            &offsets,
            Some(ExpirationBase::CommitTimestamp),
            |_| false,
            |_| false,
            Timestamp(50),
            1_000_000,
        );
        assert_eq!(out.expired.len(), 1);
        let out = expired_offsets(&offsets, None, |_| false, |_| false, Timestamp(u64::MAX), 0);
        assert!(out.expired.is_empty());
    }
}
