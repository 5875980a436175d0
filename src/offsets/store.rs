//! The [`OffsetStore`] trait, an in-memory implementation, and OffsetFetch over it.

use std::collections::BTreeMap;

use super::{OffsetAndMetadata, TopicPartition};
use crate::vocab::GroupId;

/// Where committed offsets live. The durable store (next milestone) implements it; the rules in
/// this module only need these calls. Writes here are applied after they are durable.
pub trait OffsetStore {
    fn get(&self, group: &GroupId, tp: &TopicPartition) -> Option<OffsetAndMetadata>;
    fn put(&mut self, group: &GroupId, tp: TopicPartition, offset: OffsetAndMetadata);
    /// Returns whether there was an offset.
    fn remove(&mut self, group: &GroupId, tp: &TopicPartition) -> bool;
    /// Every offset of the group, ordered by topic and partition.
    fn group_offsets(&self, group: &GroupId) -> Vec<(TopicPartition, OffsetAndMetadata)>;
    /// Drops every offset of the group (DeleteGroups); returns how many.
    fn remove_group(&mut self, group: &GroupId) -> usize;
}

/// Offsets in memory, ordered (for tests, and as the cache in front of a durable store).
#[derive(Debug, Default, Clone)]
pub struct MemoryOffsetStore {
    groups: BTreeMap<GroupId, BTreeMap<TopicPartition, OffsetAndMetadata>>,
}

impl MemoryOffsetStore {
    /// The offsets of one group, built in one pass (start-up loads a million this way).
    pub fn from_group(
        group: &GroupId,
        offsets: impl IntoIterator<Item = (TopicPartition, OffsetAndMetadata)>,
    ) -> MemoryOffsetStore {
        let offsets: BTreeMap<TopicPartition, OffsetAndMetadata> = offsets.into_iter().collect();
        let mut groups = BTreeMap::new();
        if !offsets.is_empty() {
            groups.insert(group.clone(), offsets);
        }
        MemoryOffsetStore { groups }
    }

    /// How many offsets `group` has committed.
    pub fn count(&self, group: &GroupId) -> usize {
        self.groups.get(group).map_or(0, BTreeMap::len)
    }
}

impl OffsetStore for MemoryOffsetStore {
    fn get(&self, group: &GroupId, tp: &TopicPartition) -> Option<OffsetAndMetadata> {
        self.groups.get(group)?.get(tp).cloned()
    }

    fn put(&mut self, group: &GroupId, tp: TopicPartition, offset: OffsetAndMetadata) {
        // The group's map usually exists: no copy of its id for the lookup.
        match self.groups.get_mut(group) {
            Some(offsets) => {
                offsets.insert(tp, offset);
            }
            None => {
                self.groups
                    .insert(group.clone(), BTreeMap::from([(tp, offset)]));
            }
        }
    }

    fn remove(&mut self, group: &GroupId, tp: &TopicPartition) -> bool {
        let Some(offsets) = self.groups.get_mut(group) else {
            return false;
        };
        let removed = offsets.remove(tp).is_some();
        if offsets.is_empty() {
            self.groups.remove(group);
        }
        removed
    }

    fn group_offsets(&self, group: &GroupId) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        self.groups
            .get(group)
            .map(|o| o.iter().map(|(tp, om)| (tp.clone(), om.clone())).collect())
            .unwrap_or_default()
    }

    fn remove_group(&mut self, group: &GroupId) -> usize {
        self.groups.remove(group).map_or(0, |o| o.len())
    }
}

/// One partition of an OffsetFetch answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub tp: TopicPartition,
    /// -1 when nothing is committed.
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    /// UNSTABLE_OFFSET_COMMIT: asked with `require_stable` while a transaction holds an offset
    /// for the partition.
    pub error: Option<crate::vocab::GroupError>,
}

impl FetchedOffset {
    /// The answer for a partition a transaction holds an offset for (Kafka answers -1, no
    /// leader epoch, empty metadata, UNSTABLE_OFFSET_COMMIT).
    pub fn mark_unstable(&mut self) {
        self.offset = -1;
        self.leader_epoch = -1;
        self.metadata.clear();
        self.error = Some(crate::vocab::GroupError::UnstableOffsetCommit);
    }
}

/// OffsetFetch for one group (Kafka `fetchOffsets`/`fetchAllOffsets`). `group_readable` is
/// false for a missing or Dead group: every requested partition is then -1/-1/"" with no
/// error (spec §3.2), and "all offsets" is an empty list. `partitions: None` asks for every
/// committed offset of the group.
pub fn fetch(
    store: &dyn OffsetStore,
    group: &GroupId,
    group_readable: bool,
    partitions: Option<&[TopicPartition]>,
) -> Vec<FetchedOffset> {
    let present = |tp: TopicPartition, om: &OffsetAndMetadata| FetchedOffset {
        tp,
        offset: om.offset,
        leader_epoch: om.leader_epoch.unwrap_or(-1),
        metadata: om.metadata.clone(),
        error: None,
    };
    match partitions {
        None if !group_readable => Vec::new(),
        None => store
            .group_offsets(group)
            .into_iter()
            .map(|(tp, om)| present(tp, &om))
            .collect(),
        Some(tps) => tps
            .iter()
            .map(|tp| {
                let found = if group_readable {
                    store.get(group, tp)
                } else {
                    None
                };
                match found {
                    Some(om) => present(tp.clone(), &om),
                    None => FetchedOffset {
                        tp: tp.clone(),
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                        error: None,
                    },
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Timestamp;

    fn om(offset: i64) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            leader_epoch: None,
            metadata: "m".into(),
            commit_timestamp: Timestamp(0),
            expire_timestamp: None,
        }
    }

    #[test]
    fn fetch_returns_committed_offsets_and_minus_one_for_the_rest() {
        let mut store = MemoryOffsetStore::default();
        let g = GroupId::new("g");
        store.put(&g, TopicPartition::new("t", 0), om(5));
        let asked = [TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
        let got = fetch(&store, &g, true, Some(&asked));
        assert_eq!(
            (got[0].offset, got[0].leader_epoch, got[0].metadata.as_str()),
            (5, -1, "m")
        );
        assert_eq!((got[1].offset, got[1].metadata.as_str()), (-1, ""));
        assert_eq!(fetch(&store, &g, true, None).len(), 1);
    }

    #[test]
    fn fetch_on_a_missing_or_dead_group_is_minus_one_everywhere() {
        let mut store = MemoryOffsetStore::default();
        let g = GroupId::new("g");
        store.put(&g, TopicPartition::new("t", 0), om(5));
        let asked = [TopicPartition::new("t", 0)];
        let got = fetch(&store, &g, false, Some(&asked));
        assert_eq!(got[0].offset, -1);
        assert!(fetch(&store, &g, false, None).is_empty());
        assert!(store.remove(&g, &TopicPartition::new("t", 0)));
        assert_eq!(store.remove_group(&g), 0);
    }
}
