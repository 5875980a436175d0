//! `__consumer_offsets` in standalone mode: the internal topic Kafka keeps its groups in, served
//! from koord's own data plane so that what reads it (lag monitors, `kafka-console-consumer`
//! with Kafka's `OffsetsMessageFormatter`) sees every commit and classic group change in
//! Kafka's record format ([`crate::vocab::offsets_log`]), in the partition Kafka would put the
//! group in (`Utils.abs(groupId.hashCode()) % partitions`).
//!
//! koord's store stays the source of truth; the topic is written from it, from the moment a
//! client first reads it (ListOffsets or Fetch on it: [`OffsetsTopic::warm`]): then every
//! stored group's records are written (what Kafka's log shows once compacted), and from then
//! on [`OffsetsTopic`], the storage lane's [`Tap`], sees each round of writes before they are
//! applied, encodes their records, and appends those of the writes that were applied before
//! any writer is told (so a commit is in the topic when its OffsetCommit is answered). Until a
//! client reads it, keeping it costs nothing (no record is encoded, no memory is held). The
//! log is compacted (cleanup.policy=compact, as Kafka's), so memory follows the live keys; it
//! lives in memory like every koord log, and after a restart it is written again from the
//! store when first read. A deleted group's keys get tombstones, as in Kafka.
//!
//! Written: offset commits and deletions (any group kind), classic groups' metadata. Not
//! written: the records of KIP-848 consumer, streams and share groups (Kafka's record types
//! 3 and up: koord keeps those groups in its own encoding), and transactional offsets before
//! their transaction commits (Kafka writes them at once in a transactional batch; a
//! read_committed reader sees the same either way).
//!
//! `__transaction_state` is written the same way, from the same first read of either topic:
//! every transactional id's state change (Kafka's `TransactionLog` records, in the partition
//! of the transactional id), a forgotten id's tombstone.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::group::classic::codec::{decode_group, KIND as CLASSIC};
use crate::log::batch::{decode_records, keyed_batch, BatchHeader, ValidBatch};
use crate::log::{now_ms, Logs};
use crate::metadata::topic_config::{LogSettings, TopicConfigs};
use crate::metadata::{Topic, Topics, LEADER_EPOCH};
use crate::storage::{Applied, LoadedGroup, Mutation, Storage, Store, StoreError, Tap};
use crate::vocab::offsets_log::{
    group_metadata_key, group_metadata_value, group_of_key, offset_commit_key, offset_commit_value,
    transaction_log_key, transaction_log_value,
};
use crate::vocab::txn::TxnRecord;
use crate::vocab::{partition_of, GroupId, OffsetAndMetadata, TopicPartition};

/// Kafka's default partition count of its internal topics.
const DEFAULT_PARTITIONS: i32 = 50;

/// Kafka's name for the groups' internal topic.
pub const NAME: &str = "__consumer_offsets";

/// Kafka's name for the transactions' internal topic, written as `__consumer_offsets` is.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// Whether a topic of that name is one this writer keeps (a read of it warms them both).
pub fn is_written(name: &str) -> bool {
    name == NAME || name == TRANSACTION_STATE
}

/// A record's key and value (`None`: a tombstone).
type KeyValue = (Bytes, Option<Bytes>);

/// Which internal topic a record goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Internal {
    Offsets,
    Transactions,
}

impl Internal {
    fn name(self) -> &'static str {
        match self {
            Internal::Offsets => NAME,
            Internal::Transactions => TRANSACTION_STATE,
        }
    }
}

/// How much is appended before the in-memory log compacts (when the dirty ratio allows):
/// Kafka's 100 MiB `offsets.topic.segment.bytes` would keep that much per partition in memory.
const ROLL_BYTES: u64 = 1 << 20;

/// The configs `__consumer_offsets` describes with, as Kafka 4.4 creates it.
pub fn configs() -> TopicConfigs {
    compacted("producer")
}

/// A compacted internal topic's configs with `compression` (Kafka's internal topics roll at
/// 100 MiB).
fn compacted(compression: &str) -> TopicConfigs {
    [
        ("cleanup.policy", "compact"),
        ("compression.type", compression),
        ("segment.bytes", "104857600"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The configs `__transaction_state` describes with, as Kafka 4.4 creates it.
pub fn transaction_state_configs() -> TopicConfigs {
    compacted("uncompressed")
}

/// What its in-memory log applies: compacted, rolled at [`ROLL_BYTES`], any record size (only
/// koord writes it, and a large classic group's record must never be refused).
pub fn log_settings(settings: LogSettings) -> LogSettings {
    LogSettings {
        segment_bytes: ROLL_BYTES,
        max_message_bytes: usize::MAX,
        ..settings
    }
}

/// One record for a topic, partitioned by its `owner` (a group, a transactional id), or every
/// live record of a group to tombstone.
enum Change {
    Record {
        topic: Internal,
        owner: String,
        key: Bytes,
        value: Option<Bytes>,
    },
    Tombstones(GroupId),
}

/// Whether the topic is written: not yet (nobody read it), being written (the stored groups'
/// records; what rounds apply meanwhile waits in [`Written::Warming`]), or kept up to date.
const COLD: u8 = 0;
const WARMING: u8 = 1;
const LIVE: u8 = 2;

enum Written {
    Cold,
    Warming(Vec<Change>),
    Live,
}

/// The writer of `__consumer_offsets`; see the module documentation.
pub struct OffsetsTopic {
    topics: Arc<Topics>,
    logs: Arc<Logs>,
    /// [`COLD`], [`WARMING`] or [`LIVE`]: what `written` holds, read without its lock by every
    /// round while the topic is cold.
    state: AtomicU8,
    written: Mutex<Written>,
    /// Held by the one warm-up at a time.
    warming: tokio::sync::Mutex<()>,
}

impl OffsetsTopic {
    pub fn new(topics: Arc<Topics>, logs: Arc<Logs>) -> OffsetsTopic {
        OffsetsTopic {
            topics,
            logs,
            state: AtomicU8::new(COLD),
            written: Mutex::new(Written::Cold),
            warming: tokio::sync::Mutex::new(()),
        }
    }

    fn written(&self) -> MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, written: &mut Written, to: Written) {
        self.state.store(
            match to {
                Written::Cold => COLD,
                Written::Warming(_) => WARMING,
                Written::Live => LIVE,
            },
            Ordering::Release,
        );
        *written = to;
    }

    /// Whether the topic is written (every applied round appends to it).
    pub fn is_live(&self) -> bool {
        self.state.load(Ordering::Acquire) == LIVE
    }

    /// Makes the topic written, if it is not yet: from now on every applied round is kept (in a
    /// buffer until the stored groups' records are in), the writes already queued are applied,
    /// the stored groups are read and written, then the buffer. Returns once the topic shows
    /// every write applied before the call. If the store cannot be read, the topic stays cold
    /// (logged) and the next read tries again.
    pub async fn warm(self: &Arc<Self>, storage: &Storage, store: &Arc<dyn Store>) {
        if self.state.load(Ordering::Acquire) == LIVE {
            return;
        }
        let _one = self.warming.lock().await;
        if self.state.load(Ordering::Acquire) == LIVE {
            return;
        }
        {
            let mut written = self.written();
            self.set(&mut written, Written::Warming(Vec::new()));
        }
        // Every round that began while the topic was cold (and kept nothing) is applied once
        // this returns: the store read below sees it.
        storage.drained(0).await;
        let (this, store) = (self.clone(), store.clone());
        let loaded = tokio::task::spawn_blocking(move || {
            let groups = store.load_groups()?;
            let txns = store.load_txns()?;
            this.seed(&groups, &txns);
            let mut written = this.written();
            if let Written::Warming(kept) = std::mem::replace(&mut *written, Written::Live) {
                this.append(kept);
            }
            this.set(&mut written, Written::Live);
            Ok::<usize, StoreError>(groups.len())
        })
        .await;
        match loaded {
            Ok(Ok(groups)) => {
                tracing::info!(
                    groups,
                    "{NAME} and {TRANSACTION_STATE} written: a client reads them"
                )
            }
            failed => {
                let mut written = self.written();
                self.set(&mut written, Written::Cold);
                tracing::warn!("{NAME} not written, the store cannot be read: {failed:?}");
            }
        }
    }

    /// The partition count of `__consumer_offsets`, which a transaction's groups are listed by
    /// (Kafka's default when the topic is gone).
    fn offsets_partitions(&self) -> i32 {
        self.topics
            .id_and_partitions(NAME)
            .map_or(DEFAULT_PARTITIONS, |(_, n)| n)
    }

    /// Writes every stored group's and transactional id's records.
    fn seed(&self, groups: &[LoadedGroup], txns: &[TxnRecord]) {
        let partitions = self.offsets_partitions();
        let txns = txns.iter().map(|t| txn_change(t, partitions));
        let changes = groups.iter().flat_map(|g| {
            let metadata = g.records.iter().filter_map(|record| {
                change(
                    &Mutation::PutGroupRecord {
                        group: g.id.clone(),
                        record: record.clone(),
                    },
                    partitions,
                )
            });
            let offsets = g
                .offsets
                .iter()
                .map(|(tp, offset)| offset_change(&g.id, tp, offset));
            metadata.chain(offsets).collect::<Vec<_>>()
        });
        self.append(changes.chain(txns));
    }

    /// Appends `changes` in order, one batch per partition.
    fn append(&self, changes: impl IntoIterator<Item = Change>) {
        // Looked up each time: a topic may have been deleted (it is then not written) or
        // created again with another partition count.
        let mut topics: HashMap<Internal, Option<Topic>> = HashMap::new();
        let mut topic_of = |t: Internal| {
            topics
                .entry(t)
                .or_insert_with(|| self.topics.get(t.name()))
                .clone()
        };
        let mut pending: HashMap<(Internal, i32), Vec<KeyValue>> = HashMap::new();
        for change in changes {
            match change {
                Change::Record {
                    topic,
                    owner,
                    key,
                    value,
                } => {
                    let Some(t) = topic_of(topic) else { continue };
                    pending
                        .entry((topic, partition_of(&owner, t.partitions)))
                        .or_default()
                        .push((key, value));
                }
                Change::Tombstones(group) => {
                    let Some(t) = topic_of(Internal::Offsets) else {
                        continue;
                    };
                    let index = partition_of(group.as_str(), t.partitions);
                    let queued = pending.entry((Internal::Offsets, index)).or_default();
                    for key in self.live_keys(&t, index, group.as_str(), queued) {
                        queued.push((key, None));
                    }
                }
            }
        }
        let now = now_ms();
        for ((internal, index), records) in pending {
            let Some(topic) = topic_of(internal).filter(|_| !records.is_empty()) else {
                continue;
            };
            if let Err(e) = self.append_to(&topic, index, records, now) {
                tracing::warn!(partition = index, "{} not written: {e}", internal.name());
            }
        }
    }

    fn append_to(
        &self,
        topic: &Topic,
        index: i32,
        records: Vec<(Bytes, Option<Bytes>)>,
        now: i64,
    ) -> Result<(), String> {
        let partition = self
            .logs
            .partition(topic, index)
            .ok_or("no such partition")?;
        let bytes = keyed_batch(&records, None, LEADER_EPOCH, now)?;
        let header = BatchHeader::parse(&bytes).ok_or("short batch")?;
        partition
            .append(&ValidBatch {
                header,
                bytes: &bytes,
            })
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// The keys of `group` with a value in partition `index`, counting the records `queued`
    /// for it and not appended yet.
    fn live_keys(
        &self,
        topic: &Topic,
        index: i32,
        group: &str,
        queued: &[(Bytes, Option<Bytes>)],
    ) -> BTreeSet<Bytes> {
        let mut live = BTreeSet::new();
        let mut apply = |key: &Bytes, has_value: bool| {
            if group_of_key(key) == Some(group) {
                if has_value {
                    live.insert(key.clone());
                } else {
                    live.remove(key);
                }
            }
        };
        if let Some(partition) = self.logs.partition(topic, index) {
            // The batches are cheap clones; they are decoded with the lock released.
            let read = {
                let log = partition.lock();
                log.read(log.log_start_offset(), usize::MAX, true)
            };
            for batch in read.map(|r| r.batches).unwrap_or_default() {
                for record in decode_records(&batch).unwrap_or_default() {
                    if let Some(key) = &record.key {
                        apply(key, record.value.is_some());
                    }
                }
            }
        }
        for (key, value) in queued {
            apply(key, value.is_some());
        }
        live
    }
}

impl Tap for OffsetsTopic {
    fn round<'a>(&'a self, writes: &[Vec<Mutation>]) -> Option<Applied<'a>> {
        if self.state.load(Ordering::Acquire) == COLD {
            return None;
        }
        let partitions = self.offsets_partitions();
        let changes: Vec<Vec<Change>> = writes
            .iter()
            .map(|w| w.iter().filter_map(|m| change(m, partitions)).collect())
            .collect();
        if changes.iter().all(Vec::is_empty) {
            return None;
        }
        Some(Box::new(move |results: &[Result<(), StoreError>]| {
            let applied = changes
                .into_iter()
                .zip(results)
                .filter(|(_, r)| r.is_ok())
                .flat_map(|(c, _)| c);
            // Appended under the lock: the warm-up's buffer goes in before anything after it.
            match &mut *self.written() {
                Written::Live => self.append(applied),
                Written::Warming(kept) => kept.extend(applied),
                Written::Cold => {}
            }
        }))
    }
}

fn offset_change(group: &GroupId, tp: &TopicPartition, offset: &OffsetAndMetadata) -> Change {
    Change::Record {
        topic: Internal::Offsets,
        owner: group.as_str().to_owned(),
        key: offset_commit_key(group.as_str(), &tp.topic, tp.partition),
        value: Some(offset_commit_value(offset)),
    }
}

/// A transactional id's record; its groups listed by `offsets_partitions`.
fn txn_change(txn: &TxnRecord, offsets_partitions: i32) -> Change {
    Change::Record {
        topic: Internal::Transactions,
        owner: txn.transactional_id.clone(),
        key: transaction_log_key(&txn.transactional_id),
        value: Some(transaction_log_value(txn, offsets_partitions)),
    }
}

/// What a store mutation writes to the topics, if anything; `offsets_partitions`: the
/// partition count of `__consumer_offsets`.
fn change(m: &Mutation, offsets_partitions: i32) -> Option<Change> {
    let tombstone = |group: &GroupId, key: Bytes| Change::Record {
        topic: Internal::Offsets,
        owner: group.as_str().to_owned(),
        key,
        value: None,
    };
    match m {
        Mutation::PutOffset { group, tp, offset } => Some(offset_change(group, tp, offset)),
        Mutation::DeleteOffset { group, tp } => Some(tombstone(
            group,
            offset_commit_key(group.as_str(), &tp.topic, tp.partition),
        )),
        Mutation::PutGroupRecord { group, record }
            if record.kind == CLASSIC && record.is_group() =>
        {
            match decode_group(&record.value) {
                Ok(metadata) => Some(Change::Record {
                    topic: Internal::Offsets,
                    owner: group.as_str().to_owned(),
                    key: group_metadata_key(group.as_str()),
                    value: Some(group_metadata_value(&metadata)),
                }),
                Err(e) => {
                    tracing::warn!(
                        group = group.as_str(),
                        "{NAME}: group record not written: {e:?}"
                    );
                    None
                }
            }
        }
        Mutation::DeleteGroupRecord { group, kind, key } if *kind == CLASSIC && key.is_empty() => {
            Some(tombstone(group, group_metadata_key(group.as_str())))
        }
        Mutation::ClearGroupRecords { group } => {
            Some(tombstone(group, group_metadata_key(group.as_str())))
        }
        Mutation::DeleteGroup { group } => Some(Change::Tombstones(group.clone())),
        Mutation::PutTxn(txn) => Some(txn_change(txn, offsets_partitions)),
        Mutation::DeleteTxn { transactional_id } => Some(Change::Record {
            topic: Internal::Transactions,
            owner: transactional_id.clone(),
            key: transaction_log_key(transactional_id),
            value: None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::topic_config::LogSettings;
    use crate::vocab::offsets_log::{GROUP_METADATA, OFFSET_COMMIT};
    use crate::vocab::{Generation, GroupMetadataRecord, Timestamp};

    /// The topic, written (as once a client read it).
    fn topic() -> (OffsetsTopic, Topic) {
        let (t, topic) = cold_topic();
        let mut written = t.written();
        t.set(&mut written, Written::Live);
        drop(written);
        (t, topic)
    }

    fn cold_topic() -> (OffsetsTopic, Topic) {
        let topics = Arc::new(Topics::default());
        let logs = Arc::new(Logs::new(-1));
        for name in [TRANSACTION_STATE, NAME] {
            let topic = topics.create(name, 50).unwrap();
            logs.configure(
                topic.id,
                log_settings(LogSettings {
                    compact: true,
                    delete: false,
                    ..LogSettings::with_retention_bytes(-1)
                }),
            );
        }
        let topic = topics.get(NAME).unwrap();
        (OffsetsTopic::new(topics, logs), topic)
    }

    /// Every record of the group's partition: (key type, key, value).
    fn records(t: &OffsetsTopic, topic: &Topic, group: &str) -> Vec<(i16, Bytes, Option<Bytes>)> {
        let partition = t.logs.partition(topic, partition_of(group, 50)).unwrap();
        let read = partition.lock().read(0, usize::MAX, true).unwrap();
        read.batches
            .iter()
            .flat_map(|b| decode_records(b).unwrap())
            .map(|r| {
                let key = r.key.unwrap();
                (i16::from_be_bytes([key[0], key[1]]), key, r.value)
            })
            .collect()
    }

    fn commit(group: &str, topic: &str, offset: i64) -> Mutation {
        Mutation::PutOffset {
            group: GroupId::new(group),
            tp: TopicPartition::new(topic, 0),
            offset: OffsetAndMetadata {
                offset,
                leader_epoch: None,
                metadata: String::new(),
                commit_timestamp: Timestamp(1),
                expire_timestamp: None,
            },
        }
    }

    fn apply(t: &OffsetsTopic, writes: Vec<Vec<Mutation>>, results: &[Result<(), StoreError>]) {
        if let Some(applied) = t.round(&writes) {
            applied(results);
        }
    }

    #[test]
    fn applied_writes_reach_the_groups_partition_and_failed_ones_do_not() {
        let (t, topic) = topic();
        apply(
            &t,
            vec![vec![commit("g", "a", 5)], vec![commit("g", "b", 6)]],
            &[Ok(()), Err(StoreError::Io("disk".into()))],
        );
        let got = records(&t, &topic, "g");
        assert_eq!(got.len(), 1, "only the applied write: {got:?}");
        assert_eq!(got[0].0, OFFSET_COMMIT);
        assert_eq!(got[0].1, offset_commit_key("g", "a", 0));
        // Nothing to write: no closure.
        assert!(t
            .round(&[vec![Mutation::ReserveProducerIds { end: 1 }]])
            .is_none());
    }

    #[test]
    fn transactional_ids_go_to_the_transaction_log_and_a_forgotten_one_is_tombstoned() {
        let (t, _) = topic();
        let txn = TxnRecord {
            transactional_id: "tx".into(),
            producer_id: 7,
            previous_producer_id: -1,
            producer_epoch: 0,
            last_producer_epoch: -1,
            next_producer_id: -1,
            timeout_ms: 60_000,
            state: crate::vocab::txn::TxnState::Empty,
            partitions: Default::default(),
            groups: Default::default(),
            started: Timestamp(0),
            updated: Timestamp(5),
        };
        apply(
            &t,
            vec![
                vec![Mutation::PutTxn(Box::new(txn.clone()))],
                vec![Mutation::DeleteTxn {
                    transactional_id: "tx".into(),
                }],
            ],
            &[Ok(()), Ok(())],
        );
        let log = t.topics.get(TRANSACTION_STATE).unwrap();
        let got = records(&t, &log, "tx");
        let key = transaction_log_key("tx");
        assert_eq!(
            got,
            vec![
                (0, key.clone(), Some(transaction_log_value(&txn, 50))),
                (0, key, None)
            ]
        );
        assert!(records(&t, &t.topics.get(NAME).unwrap(), "tx").is_empty());
    }

    #[test]
    fn a_deleted_group_leaves_tombstones_for_its_live_keys_only() {
        let (t, topic) = topic();
        let group = GroupMetadataRecord {
            protocol_type: Some("consumer".into()),
            generation: Generation(1),
            protocol_name: Some("range".into()),
            leader: None,
            state_timestamp: Timestamp(1),
            members: Vec::new(),
            assignor_state: Bytes::new(),
            follow_up: None,
        };
        let put_group = Mutation::PutGroupRecord {
            group: GroupId::new("g"),
            record: crate::group::classic::codec::stored(&group),
        };
        let deleted = Mutation::DeleteOffset {
            group: GroupId::new("g"),
            tp: TopicPartition::new("b", 0),
        };
        apply(
            &t,
            vec![
                vec![put_group, commit("g", "a", 5), commit("g", "b", 6)],
                vec![deleted],
            ],
            &[Ok(()), Ok(())],
        );
        // Same round as the commit it tombstones: the queued records count.
        apply(
            &t,
            vec![vec![
                commit("g", "c", 1),
                Mutation::DeleteGroup {
                    group: GroupId::new("g"),
                },
            ]],
            &[Ok(())],
        );
        let got = records(&t, &topic, "g");
        // The group's record, a, b, b's tombstone; c, then the three live keys' tombstones.
        assert_eq!(got.len(), 8, "{got:?}");
        let tombstoned: BTreeSet<Bytes> = got[got.len() - 3..]
            .iter()
            .map(|(_, k, v)| {
                assert!(v.is_none());
                k.clone()
            })
            .collect();
        let want: BTreeSet<Bytes> = [
            group_metadata_key("g"),
            offset_commit_key("g", "a", 0),
            offset_commit_key("g", "c", 0),
        ]
        .into();
        assert_eq!(tombstoned, want, "{got:?}");
        assert_eq!(got[0].0, GROUP_METADATA);
    }

    #[tokio::test]
    async fn nothing_is_written_until_a_read_warms_it_with_every_stored_group() {
        let (t, topic) = cold_topic();
        let t = Arc::new(t);
        let store: Arc<dyn Store> = Arc::new(crate::storage::MemoryStore::default());
        store
            .apply(
                &[Mutation::PutOffset {
                    group: GroupId::new("stored"),
                    tp: TopicPartition::new("t", 2),
                    offset: OffsetAndMetadata {
                        offset: 9,
                        leader_epoch: Some(0),
                        metadata: "m".into(),
                        commit_timestamp: Timestamp(5),
                        expire_timestamp: None,
                    },
                }],
                true,
            )
            .unwrap();
        // Cold: a round keeps nothing, costs nothing.
        assert!(t.round(&[vec![commit("stored", "t", 1)]]).is_none());
        assert!(records(&t, &topic, "stored").is_empty());
        t.warm(&Storage::inline(store.clone()), &store).await;
        let got = records(&t, &topic, "stored");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, offset_commit_key("stored", "t", 2));
        // Live: rounds append.
        apply(&t, vec![vec![commit("stored", "u", 3)]], &[Ok(())]);
        assert_eq!(records(&t, &topic, "stored").len(), 2);
        // Warm once only: a second read writes nothing again.
        t.warm(&Storage::inline(store.clone()), &store).await;
        assert_eq!(records(&t, &topic, "stored").len(), 2);
    }
}
