//! Gateway mode's [`Store`]: what a group needs lives in the upstream cluster, not on the
//! gateway's disk.
//!
//! - Committed offsets go to the upstream's `__consumer_offsets` as standalone commits
//!   (generation -1, no member: koord has already checked the committer against its group),
//!   so upstream replicates them and its tools and lag monitors see them; an offset deletion is
//!   an upstream OffsetDelete, a group deletion an upstream DeleteGroups.
//! - Group records (classic group metadata, consumer and streams groups and their members) go
//!   to a compacted topic of koord's own (`upstream.groups.topic.name`, `__koord_groups`), written
//!   with acks=all. Start-up reads it back whole.
//! - Group configs (IncrementalAlterConfigs and AlterConfigs on GROUP resources) go to a
//!   compacted topic of one partition beside it (`<upstream.groups.topic.name>-configs`), one
//!   key per group, written with acks=all by whichever node was asked: every node reads it
//!   back at start-up and follows it while running ([`UpstreamStore::follow_group_configs`]), so
//!   in cluster mode the node that serves a group (and the one that takes it over) uses the
//!   configs set through any node, as every Kafka broker learns a group config from the
//!   metadata log.
//! - Everything else (topics created at run time, SCRAM credentials, ACLs, transactional ids,
//!   which gateway mode does not keep itself) stays in the embedded store.
//!
//! A write is done when upstream has acknowledged it; a write upstream refused (or that did not
//! succeed within the client's deadline) fails, and only the writes that had a part in the
//! failed request fail with it: another group's commit in the same batch is not touched.
//!
//! ## The topic's records
//! One partition per group (a stable hash of the id, as Kafka places a group in
//! `__consumer_offsets`), one key per group record and per member:
//! - key: version 0, a tag (`G` the group's own record, else the member tag of the member's
//!   group kind: `C` consumer, `S` streams, see [`crate::vocab::stored::KINDS`]), the group id's length
//!   (u16) and bytes, then the member id's bytes;
//! - value: version 0, then for `G` the group's kind (`c` classic, `k` consumer, `s` streams),
//!   then the record in its kind's encoding (opaque here); a null value deletes the key.
//!
//! Deleting a group writes a tombstone for every key it has, so compaction leaves nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::BoxFuture;
use tracing::{error, warn};

use super::client::{KeyValue, Upstream, UpstreamError};
use crate::metadata::group_config::GroupConfigMap;
use crate::storage::{
    AsyncStore, LoadedGroup, MemoryStore, Mutation, Store, StoreError, StoredCredential,
    StoredTopic,
};
use crate::vocab::partition_of;
use crate::vocab::stored::StoredRecord;
use crate::vocab::{GroupId, OffsetAndMetadata, TopicPartition, TxnRecord};

const VERSION: u8 = 0;
const GROUP: u8 = b'G';
/// Cluster mode: the key of a shard's fence record, written by each new owner of the shard
/// with its newer producer epoch (value: version 0, the owner's node id).
const FENCE: u8 = b'F';

fn key(kind: u8, group: &str, member: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + group.len() + member.len());
    b.put_u8(VERSION);
    b.put_u8(kind);
    b.put_u16(u16::try_from(group.len()).unwrap_or(u16::MAX));
    b.put_slice(group.as_bytes());
    b.put_slice(member.as_bytes());
    b.freeze()
}

fn value(tag: Option<u8>, record: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + record.len());
    b.put_u8(VERSION);
    if let Some(tag) = tag {
        b.put_u8(tag);
    }
    b.put_slice(record);
    b.freeze()
}

/// The record for a group-record mutation: (group, key, value); `None` for other mutations.
fn record_of(m: &Mutation) -> Option<(&GroupId, Bytes, Option<Bytes>)> {
    Some(match m {
        Mutation::PutGroupRecord { group, record } if record.is_group() => (
            group,
            key(GROUP, group.as_str(), ""),
            Some(value(Some(record.kind.id), &record.value)),
        ),
        Mutation::PutGroupRecord { group, record } => (
            group,
            key(record.kind.member_tag, group.as_str(), &record.key),
            Some(value(None, &record.value)),
        ),
        Mutation::DeleteGroupRecord {
            group,
            kind,
            key: k,
        } => {
            let tag = if k.is_empty() { GROUP } else { kind.member_tag };
            (group, key(tag, group.as_str(), k), None)
        }
        _ => return None,
    })
}

/// The group and record a stored key and (live) value stand for.
fn decode(k: &[u8], v: &[u8]) -> Result<(GroupId, StoredRecord), String> {
    let (&[VERSION, tag, l0, l1], rest) = k.split_at_checked(4).ok_or("short key")? else {
        return Err("unknown key version".into());
    };
    let len = usize::from(u16::from_be_bytes([l0, l1]));
    let (group, member) = rest.split_at_checked(len).ok_or("short key")?;
    let group = GroupId::new(std::str::from_utf8(group).map_err(|_| "group id not UTF-8")?);
    let member = std::str::from_utf8(member).map_err(|_| "member id not UTF-8")?;
    let Some((&VERSION, v)) = v.split_first() else {
        return Err("unknown value version".into());
    };
    let (kind, key, v) = if tag == GROUP {
        let (&id, v) = v
            .split_first()
            .ok_or_else(|| format!("group {group}: unknown group kind"))?;
        let kind = crate::vocab::stored::kind_of(id)
            .ok_or_else(|| format!("group {group}: unknown group kind"))?;
        (kind, "", v)
    } else {
        let kind = crate::vocab::stored::kind_of_member_tag(tag).ok_or("unknown key kind")?;
        (kind, member, v)
    };
    let record = StoredRecord {
        kind,
        key: key.to_owned(),
        value: Bytes::copy_from_slice(v),
    };
    Ok((group, record))
}

/// What one group asks of upstream's group coordinator, in order.
#[derive(Debug)]
enum GroupOp {
    /// The offsets of every write of a run of commits (one upstream OffsetCommit for them all;
    /// a partition committed twice keeps the later offset).
    Commit(BTreeMap<TopicPartition, OffsetAndMetadata>),
    DeleteOffsets(Vec<TopicPartition>),
    Delete,
}

/// Cluster mode: each held shard's producer. Its transactional id is the shard's, so the
/// InitProducerId of the shard's next owner bumps the epoch; the next owner then writes a
/// fence record with it, and from then on upstream refuses any write to the shard's partition
/// under an older epoch (INVALID_PRODUCER_EPOCH): a former owner that was paused or cut off
/// cannot write its groups any more, and gives the shard up. Every write of a shard goes
/// through its partition first (a fence record if it has no record of its own), and a group's
/// offsets go upstream only after that succeeded.
struct Fencing {
    /// `koord-<cluster.name>-shard-`: the shard's number completes it.
    prefix: String,
    node: i32,
    producers: Mutex<HashMap<i32, ShardProducer>>,
    /// Shards whose writes upstream refused as fenced, until [`UpstreamStore::take_fenced`].
    fenced: Mutex<Vec<i32>>,
    /// Whether the node's lease still holds ([`crate::coordinator::ownership::Ownership`]): checked just
    /// before a shard's offsets go upstream, which its producer epoch does not fence.
    lease: std::sync::OnceLock<LeaseCheck>,
}

/// Whether this node may still write its shards.
pub type LeaseCheck = Box<dyn Fn() -> bool + Send + Sync>;

impl std::fmt::Debug for Fencing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fencing")
            .field("prefix", &self.prefix)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
struct ShardProducer {
    id: i64,
    epoch: i16,
    /// The next batch's base sequence.
    next: i32,
    /// A write's outcome is unknown (its sequence may or may not have been used): the next
    /// write asks for a new epoch first.
    stale: bool,
}

/// Whether an upstream error says another producer holds a newer epoch.
fn is_fenced(e: &UpstreamError) -> bool {
    use kafka_protocol::ResponseError as R;
    e.code()
        .is_some_and(|c| c == R::InvalidProducerEpoch.code() || c == R::ProducerFenced.code())
}

/// The store of a gateway: group records and offsets upstream, the rest in `local`.
pub struct UpstreamStore {
    /// Cluster mode: the shards' producers.
    fencing: Option<Fencing>,
    local: Arc<dyn Store>,
    up: Arc<Upstream>,
    topic: String,
    partitions: i32,
    /// Every key each group has in the topic (a deleted group tombstones them all).
    keys: Mutex<HashMap<GroupId, HashSet<Bytes>>>,
    /// `upstream.write.timeout.ms`.
    write_timeout: Duration,
    /// The group configs' topic, and where its reader goes on after start-up's read.
    configs_topic: String,
    configs_read: Mutex<(Vec<(String, GroupConfigMap)>, i64)>,
}

/// A group config record's key: version 0, then the group id.
fn config_key(group: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(1 + group.len());
    b.put_u8(VERSION);
    b.put_slice(group.as_bytes());
    b.freeze()
}

/// A group config record: the group and its configs (none: a tombstone, or configs removed).
fn decode_config(k: &[u8], v: Option<&[u8]>) -> Result<(String, GroupConfigMap), String> {
    let Some((&VERSION, group)) = k.split_first() else {
        return Err("unknown group config key version".into());
    };
    let group = std::str::from_utf8(group).map_err(|_| "group id not UTF-8")?;
    let configs = match v {
        Some(v) => crate::storage::codec::decode_group_configs(v).map_err(|e| e.to_string())?,
        None => GroupConfigMap::new(),
    };
    Ok((group.to_string(), configs))
}

/// Every group config in `topic` (one partition) as of now, the last of each group, and the
/// offset after them.
async fn read_configs(
    up: &Upstream,
    topic: &str,
) -> Result<(Vec<(String, GroupConfigMap)>, i64), UpstreamError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut latest: BTreeMap<String, GroupConfigMap> = BTreeMap::new();
    let partition = [(topic.to_string(), 0)];
    // Where it starts and ends now: an empty topic (a new koord's) needs no read.
    let (mut next, end) = loop {
        let start = up.offsets_at(&partition, -2).await.pop();
        let end = up.offsets_at(&partition, -1).await.pop();
        match (start, end) {
            (Some(Ok(start)), Some(Ok(end))) => break (start, end),
            _ if tokio::time::Instant::now() > deadline => {
                return Err(UpstreamError::Unreachable(format!("{topic}: no offsets")))
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    if next >= end {
        return Ok((Vec::new(), next));
    }
    loop {
        match up.follow(topic, 0, next, Duration::ZERO).await {
            Ok((records, after, _)) => {
                for (k, v) in records {
                    match decode_config(&k, v.as_deref()) {
                        Ok((group, configs)) => {
                            latest.insert(group, configs);
                        }
                        Err(e) => warn!(topic, error = %e, "a group config record skipped"),
                    }
                }
                next = after;
                if next >= end {
                    return Ok((latest.into_iter().collect(), next));
                }
            }
            Err(e) if tokio::time::Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

impl std::fmt::Debug for UpstreamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamStore")
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl UpstreamStore {
    /// Creates `topic` upstream unless it exists (with `partitions`; an existing topic keeps
    /// its count) and returns the store.
    ///
    /// # Errors
    /// Upstream refused the topic or could not be reached.
    pub async fn open(
        up: Arc<Upstream>,
        local: Arc<dyn Store>,
        topic: &str,
        partitions: i32,
        write_timeout: Duration,
    ) -> Result<UpstreamStore, UpstreamError> {
        let partitions = up.ensure_compacted_topic(topic, partitions).await?;
        let configs_topic = format!("{topic}-configs");
        up.ensure_compacted_topic(&configs_topic, 1).await?;
        let configs_read = read_configs(&up, &configs_topic).await?;
        Ok(UpstreamStore {
            fencing: None,
            local,
            up,
            topic: topic.to_string(),
            partitions,
            keys: Mutex::new(HashMap::new()),
            write_timeout,
            configs_topic,
            configs_read: Mutex::new(configs_read),
        })
    }

    /// Follows the group configs' topic from where start-up's read ended, setting each
    /// group's configs in `configs` as they come (those set through another node, and this
    /// node's own again, in the order upstream took them), until the task is dropped.
    pub async fn follow_group_configs(
        self: Arc<Self>,
        configs: Arc<crate::metadata::group_config::GroupConfigs>,
    ) {
        let mut next = self
            .configs_read
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1;
        loop {
            match self
                .up
                .follow(&self.configs_topic, 0, next, Duration::from_millis(500))
                .await
            {
                Ok((records, after, _)) => {
                    for (k, v) in records {
                        match decode_config(&k, v.as_deref()) {
                            Ok((group, c)) => configs.set(&group, c),
                            Err(e) => warn!(error = %e, "a group config record skipped"),
                        }
                    }
                    next = after;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "following the group configs upstream");
                    // Upstream is moving the partition, or unreachable: ask again shortly.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Partitions of koord's topic upstream.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// Cluster mode (`cluster.name`): every write of a shard is fenced by the shard's producer
    /// ([`UpstreamStore::claim`]); a shard not claimed is not written at all.
    pub fn with_fencing(mut self, cluster: &str, node: i32) -> UpstreamStore {
        self.fencing = Some(Fencing {
            prefix: format!("koord-{cluster}-shard-"),
            node,
            producers: Mutex::new(HashMap::new()),
            fenced: Mutex::new(Vec::new()),
            lease: std::sync::OnceLock::new(),
        });
        self
    }

    /// Cluster mode: how the store asks whether the node's lease still holds.
    pub fn set_lease_check(&self, check: LeaseCheck) {
        if let Some(f) = &self.fencing {
            let _ = f.lease.set(check);
        }
    }

    /// What a write that failed upstream with `e` reports: the group moved to another node
    /// (cluster mode: fenced by its next owner, or this node's lease ran out) is
    /// [`StoreError::Io`] (NOT_COORDINATOR); anything else (upstream moving, loading,
    /// unreachable, or refusing koord's write) is [`StoreError::Unavailable`]: koord still
    /// serves the group, and its client retries here.
    fn failed(&self, e: &UpstreamError) -> StoreError {
        if self.fencing.is_some() && (is_fenced(e) || !self.leased()) {
            StoreError::Io(e.to_string())
        } else {
            StoreError::Unavailable(e.to_string())
        }
    }

    /// Whether the node's lease holds (always, outside a cluster or before it is set).
    fn leased(&self) -> bool {
        self.fencing
            .as_ref()
            .and_then(|f| f.lease.get())
            .is_none_or(|check| check())
    }

    fn producers(&self) -> Option<std::sync::MutexGuard<'_, HashMap<i32, ShardProducer>>> {
        self.fencing
            .as_ref()
            .map(|f| f.producers.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Cluster mode: makes `shard` this node's to write: a new epoch of the shard's producer
    /// (which fences the former owner's), and the fence record written with it, before the
    /// shard is read. Outside a cluster, nothing to do.
    ///
    /// # Errors
    /// Upstream refused or did not answer within `upstream.write.timeout.ms`.
    pub async fn claim(&self, shard: i32) -> Result<(), UpstreamError> {
        let Some(f) = &self.fencing else {
            return Ok(());
        };
        let limit = self.write_timeout;
        let txn_id = format!("{}{shard}", f.prefix);
        let (id, epoch) = within(limit, self.up.init_producer_id(&txn_id, None, limit)).await?;
        let fence = (key(FENCE, "", ""), Some(value(None, &f.node.to_be_bytes())));
        let records = BTreeMap::from([(shard, vec![fence])]);
        let stamps = BTreeMap::from([(shard, (id, epoch, 0))]);
        within(
            limit,
            self.up.produce(&self.topic, &records, &stamps, limit),
        )
        .await?;
        if let Some(mut producers) = self.producers() {
            producers.insert(
                shard,
                ShardProducer {
                    id,
                    epoch,
                    next: 1,
                    stale: false,
                },
            );
        }
        Ok(())
    }

    /// Cluster mode: `shards` are no longer this node's to write.
    pub fn unclaim(&self, shards: &[i32]) {
        if let Some(mut producers) = self.producers() {
            producers.retain(|s, _| !shards.contains(s));
        }
    }

    /// The shards whose writes upstream refused as fenced since the last call (another node
    /// owns them now).
    pub fn take_fenced(&self) -> Vec<i32> {
        self.fencing.as_ref().map_or_else(Vec::new, |f| {
            std::mem::take(&mut *f.fenced.lock().unwrap_or_else(|e| e.into_inner()))
        })
    }

    /// The producer stamp each partition of `records` is written with (cluster mode), a new
    /// epoch asked first where the last write's outcome is unknown; partitions this node holds
    /// no producer for are left out (and their writes fail).
    async fn stamps(
        &self,
        partitions: &[i32],
    ) -> BTreeMap<i32, crate::gateway::client::ProducerStamp> {
        let Some(f) = &self.fencing else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for &p in partitions {
            let held = self.producers().and_then(|m| m.get(&p).copied());
            let Some(mut producer) = held else { continue };
            if producer.stale {
                let txn_id = format!("{}{p}", f.prefix);
                let limit = self.write_timeout;
                let current = Some((producer.id, producer.epoch));
                match within(limit, self.up.init_producer_id(&txn_id, current, limit)).await {
                    Ok((id, epoch)) => {
                        producer = ShardProducer {
                            id,
                            epoch,
                            next: 0,
                            stale: false,
                        };
                        if let Some(mut m) = self.producers() {
                            m.insert(p, producer);
                        }
                    }
                    Err(e) => {
                        // Fenced: another node took the shard. Otherwise tried again next time.
                        self.written(&BTreeMap::from([(p, 0)]), &Err(e));
                        continue;
                    }
                }
            }
            out.insert(p, (producer.id, producer.epoch, producer.next));
        }
        out
    }

    /// After a fenced write of `partitions`: the sequences used, or the outcome unknown, or
    /// (refused as fenced) the shards lost.
    fn written(&self, stamped: &BTreeMap<i32, usize>, result: &Result<(), UpstreamError>) {
        let Some(f) = &self.fencing else { return };
        let Some(mut producers) = self.producers() else {
            return;
        };
        for (p, n) in stamped {
            match result {
                Ok(()) => {
                    if let Some(producer) = producers.get_mut(p) {
                        producer.next = producer.next.saturating_add(*n as i32);
                        // Far from where sequences wrap: a new epoch starts them at 0 again.
                        producer.stale |= producer.next > i32::MAX / 2;
                    }
                }
                Err(e) if is_fenced(e) => {
                    producers.remove(p);
                    error!(shard = p, error = %e, "fenced: another koord node owns this shard now");
                    f.fenced.lock().unwrap_or_else(|e| e.into_inner()).push(*p);
                }
                Err(_) => {
                    if let Some(producer) = producers.get_mut(p) {
                        producer.stale = true;
                    }
                }
            }
        }
    }

    /// The groups of `shards` (partitions of koord's topic), read back whole: the last value
    /// of each key, tombstones applied. The keys each group has are remembered (a deleted
    /// group tombstones them all); those of other partitions are left as they are.
    ///
    /// # Errors
    /// A partition could not be read, or holds a record that does not decode.
    pub async fn load_shards(&self, shards: &[i32]) -> Result<Vec<LoadedGroup>, StoreError> {
        let read = self
            .up
            .read_partitions(&self.topic, shards)
            .await
            .map_err(|e| StoreError::Io(format!("reading {}: {e}", self.topic)))?;
        let replay = MemoryStore::default();
        let mut keys = self.keys();
        keys.retain(|g, _| !shards.contains(&partition_of(g.as_str(), self.partitions)));
        for (p, records) in read {
            let mut latest: BTreeMap<Bytes, Option<Bytes>> = BTreeMap::new();
            for (k, v) in records {
                latest.insert(k, v);
            }
            let mut live: Vec<Mutation> = Vec::new();
            for (k, v) in latest {
                let Some(v) = v else { continue };
                if k.get(1) == Some(&FENCE) {
                    continue;
                }
                let (group, record) = decode(&k, &v).map_err(|message| StoreError::Corrupt {
                    path: format!("{}-{p}", self.topic).into(),
                    message,
                })?;
                if partition_of(group.as_str(), self.partitions) != p {
                    warn!(group = %group, partition = p, "a group record in another group's partition; skipped");
                    continue;
                }
                keys.entry(group.clone()).or_default().insert(k);
                live.push(Mutation::PutGroupRecord { group, record });
            }
            replay.apply(&live, true)?;
        }
        drop(keys);
        replay.load_groups()
    }

    /// Forgets the keys of the groups of `shards` (cluster mode: no longer this node's).
    pub fn forget_shards(&self, shards: &[i32]) {
        self.keys()
            .retain(|g, _| !shards.contains(&partition_of(g.as_str(), self.partitions)));
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<GroupId, HashSet<Bytes>>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a tombstone for every key `group` has, for write `i`.
    fn tombstone_all(
        &self,
        group: &GroupId,
        i: usize,
        records: &mut BTreeMap<i32, Vec<KeyValue>>,
        record_writes: &mut BTreeMap<i32, HashSet<usize>>,
        forgotten: &mut Vec<(GroupId, Bytes)>,
    ) {
        let keys: Vec<Bytes> = self
            .keys()
            .get(group)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default();
        if keys.is_empty() {
            return;
        }
        let p = partition_of(group.as_str(), self.partitions);
        for k in keys {
            forgotten.push((group.clone(), k.clone()));
            records.entry(p).or_default().push((k, None));
        }
        record_writes.entry(p).or_default().insert(i);
    }
}

/// `op`, failed as unreachable if upstream has not answered within `limit`, the write's budget
/// (`upstream.write.timeout.ms`; its retries stop by then too). Its outcome upstream is then
/// unknown, as a timed-out produce's is to any Kafka client: the writer is told it failed, and
/// the next write of the same key settles it.
///
/// The budget is what a group's write may wait while upstream moves the partition it needs
/// (a broker died: its leaderships move once the controller fences it, broker.session.timeout.ms,
/// 9 s by default). Kafka holds an offset commit for its replicas up to offsets.commit.timeout.ms
/// the same way. Meanwhile only the writes of the groups in the same storage lane (the same
/// partition of koord's topic) wait; a member's session was renewed by the commit it sent.
async fn within<T>(
    limit: Duration,
    op: impl std::future::Future<Output = Result<T, UpstreamError>>,
) -> Result<T, UpstreamError> {
    tokio::time::timeout(limit, op).await.unwrap_or_else(|_| {
        Err(UpstreamError::Unreachable(format!(
            "no answer within {} ms",
            limit.as_millis()
        )))
    })
}

impl UpstreamStore {
    /// Applies several writers' batches ([`Store::apply_writes`]): group records to koord's
    /// topic, offsets and deletions to upstream's group coordinator, the rest to the local
    /// store; each write's result says how its own parts went.
    pub async fn write(
        &self,
        writes: Vec<Vec<Mutation>>,
        durable: bool,
    ) -> Vec<Result<(), StoreError>> {
        let mut results: Vec<Result<(), StoreError>> = vec![Ok(()); writes.len()];
        let mut local: Vec<Mutation> = Vec::new();
        let mut local_writes: Vec<usize> = Vec::new();
        // Partition -> records, and which writes they belong to.
        let mut records: BTreeMap<i32, Vec<KeyValue>> = BTreeMap::new();
        let mut record_writes: BTreeMap<i32, HashSet<usize>> = BTreeMap::new();
        // Keys that go once their partition's records are acknowledged.
        let mut forgotten: Vec<(GroupId, Bytes)> = Vec::new();
        // A group's upstream operations in order, each with the writes it carries.
        let mut ops: BTreeMap<GroupId, Vec<(GroupOp, Vec<usize>)>> = BTreeMap::new();
        // Cluster mode: the shards writes confirm this node still owns (partition, write).
        let mut fences: Vec<(i32, usize)> = Vec::new();
        // Group configs, for their own topic, and the writes they belong to.
        let mut config_records: Vec<KeyValue> = Vec::new();
        let mut config_writes: Vec<usize> = Vec::new();
        for (i, write) in writes.into_iter().enumerate() {
            for m in write {
                if let Some((group, k, v)) = record_of(&m) {
                    let p = partition_of(group.as_str(), self.partitions);
                    if v.is_some() {
                        self.keys()
                            .entry(group.clone())
                            .or_default()
                            .insert(k.clone());
                    } else {
                        forgotten.push((group.clone(), k.clone()));
                    }
                    records.entry(p).or_default().push((k, v));
                    record_writes.entry(p).or_default().insert(i);
                    continue;
                }
                match m {
                    Mutation::PutOffset { group, tp, offset } => {
                        let list = ops.entry(group).or_default();
                        // Commits of one group in a batch, one after another, go upstream
                        // as one OffsetCommit: one round trip, not one per member.
                        match list.last_mut() {
                            Some((GroupOp::Commit(c), w)) => {
                                c.insert(tp, offset);
                                if w.last() != Some(&i) {
                                    w.push(i);
                                }
                            }
                            _ => list
                                .push((GroupOp::Commit(BTreeMap::from([(tp, offset)])), vec![i])),
                        }
                    }
                    Mutation::DeleteOffset { group, tp } => {
                        let list = ops.entry(group).or_default();
                        match list.last_mut() {
                            Some((GroupOp::DeleteOffsets(d), w)) if w == &[i] => d.push(tp),
                            _ => list.push((GroupOp::DeleteOffsets(vec![tp]), vec![i])),
                        }
                    }
                    Mutation::DeleteGroup { group } => {
                        self.tombstone_all(
                            &group,
                            i,
                            &mut records,
                            &mut record_writes,
                            &mut forgotten,
                        );
                        ops.entry(group)
                            .or_default()
                            .push((GroupOp::Delete, vec![i]));
                    }
                    Mutation::Fence { group } => {
                        if self.fencing.is_some() {
                            fences.push((partition_of(group.as_str(), self.partitions), i));
                        }
                    }
                    Mutation::ClearGroupRecords { group } => {
                        self.tombstone_all(
                            &group,
                            i,
                            &mut records,
                            &mut record_writes,
                            &mut forgotten,
                        );
                    }
                    Mutation::PutGroupConfigs { group, configs } => {
                        let v = (!configs.is_empty()).then(|| {
                            Bytes::from(crate::storage::codec::encode_group_configs(&configs))
                        });
                        config_records.push((config_key(&group), v));
                        config_writes.push(i);
                    }
                    other => {
                        local.push(other);
                        if local_writes.last() != Some(&i) {
                            local_writes.push(i);
                        }
                    }
                }
            }
        }
        if !local.is_empty() {
            // The local store's writes block on its file: off the runtime's threads.
            let store = self.local.clone();
            let applied = tokio::task::spawn_blocking(move || store.apply(&local, durable))
                .await
                .unwrap_or_else(|e| Err(StoreError::Io(format!("local store: {e}"))));
            if let Err(e) = applied {
                for i in &local_writes {
                    results[*i] = Err(e.clone());
                }
            }
        }
        if !config_records.is_empty() {
            // Any node writes them (no shard's producer): the last one upstream took wins.
            let written = within(
                self.write_timeout,
                self.up.produce(
                    &self.configs_topic,
                    &BTreeMap::from([(0, config_records)]),
                    &BTreeMap::new(),
                    self.write_timeout,
                ),
            )
            .await;
            if let Err(e) = written {
                for i in config_writes {
                    results[i] = Err(StoreError::Io(format!("{}: {e}", self.configs_topic)));
                }
            }
        }
        // Cluster mode: a shard's writes go only under its producer, through its partition
        // first; a shard not held here is not written at all.
        let mut stamped: BTreeMap<i32, usize> = BTreeMap::new();
        let mut stamps = BTreeMap::new();
        if let Some(f) = &self.fencing {
            let n = self.partitions;
            let mut parts: BTreeSet<i32> = records.keys().copied().collect();
            parts.extend(ops.keys().map(|g| partition_of(g.as_str(), n)));
            parts.extend(fences.iter().map(|(p, _)| *p));
            let parts: Vec<i32> = parts.into_iter().collect();
            stamps = self.stamps(&parts).await;
            for p in parts.iter().filter(|p| !stamps.contains_key(p)) {
                let refused = || StoreError::Io(format!("shard {p} is not this koord node's"));
                for i in record_writes.remove(p).into_iter().flatten() {
                    results[i] = Err(refused());
                }
                for (_, i) in fences.iter().filter(|(fp, _)| fp == p) {
                    results[*i] = Err(refused());
                }
                fences.retain(|(fp, _)| fp != p);
                records.remove(p);
                ops.retain(|g, list| {
                    if partition_of(g.as_str(), n) != *p {
                        return true;
                    }
                    for i in list.iter().flat_map(|(_, w)| w) {
                        results[*i] = Err(refused());
                    }
                    false
                });
            }
            // Offsets of a shard with no record of its own: its fence record goes first, so
            // they go upstream only once the shard's epoch is confirmed the newest. A fence
            // write is done once its shard's partition took a record under that epoch.
            let fenced_parts = ops
                .keys()
                .map(|g| partition_of(g.as_str(), n))
                .chain(fences.iter().map(|(p, _)| *p));
            for p in fenced_parts {
                records.entry(p).or_insert_with(|| {
                    let fence = value(None, &f.node.to_be_bytes());
                    vec![(key(FENCE, "", ""), Some(fence))]
                });
            }
            for (p, i) in &fences {
                record_writes.entry(*p).or_default().insert(*i);
            }
            stamped = records.iter().map(|(p, r)| (*p, r.len())).collect();
        }
        // Nothing for upstream (koord's users, ACLs, topic configs: its local store).
        if records.is_empty() && ops.is_empty() {
            return results;
        }
        let up = &self.up;
        let topic = self.topic.as_str();
        let limit = self.write_timeout;
        let started = std::time::Instant::now();
        let (produced, done) = async {
            let produce = async {
                if records.is_empty() {
                    Ok(())
                } else {
                    within(limit, up.produce(topic, &records, &stamps, limit)).await
                }
            };
            let groups =
                futures_util::future::join_all(ops.iter().map(|(group, list)| async move {
                    for (at, (op, _)) in list.iter().enumerate() {
                        let r = match op {
                            GroupOp::Commit(offsets) => {
                                within(limit, up.commit_offsets(group.as_str(), offsets, limit))
                                    .await
                            }
                            GroupOp::DeleteOffsets(tps) => {
                                within(limit, up.delete_offsets(group.as_str(), tps, limit)).await
                            }
                            GroupOp::Delete => {
                                within(limit, up.delete_group(group.as_str(), limit))
                                    .await
                                    .map(|_existed| ())
                            }
                        };
                        if let Err(e) = r {
                            let answered = self.failed(&e).group_error().code();
                            error!(group = %group, error = %e, answered, "upstream refused a group write");
                            // This op's writes and every later one of the group fail.
                            return Err((at, e));
                        }
                    }
                    Ok(())
                }));
            if self.fencing.is_none() {
                return tokio::join!(produce, groups);
            }
            // Cluster mode: the offsets only after the shard's partition took the write (so
            // the epoch is still the newest), and only while the lease holds (so no newer
            // owner can have taken the shard since).
            match produce.await {
                Ok(()) if self.leased() => (Ok(()), groups.await),
                Ok(()) => {
                    let e = UpstreamError::Unreachable("this node's lease ran out".into());
                    let skipped = ops.iter().map(|_| Err((0, e.clone()))).collect();
                    (Ok(()), skipped)
                }
                Err(e) => {
                    let skipped = ops.iter().map(|_| Err((0, e.clone()))).collect();
                    (Err(e), skipped)
                }
            }
        }
        .await;
        self.written(&stamped, &produced);
        if produced.is_ok() && !fences.is_empty() && !self.leased() {
            for (_, i) in &fences {
                results[*i] = Err(StoreError::Io("this node's lease ran out".into()));
            }
        }
        let waited = started.elapsed();
        if waited > Duration::from_secs(1) {
            warn!(
                waited_ms = waited.as_millis() as u64,
                ok = produced.is_ok() && done.iter().all(Result::is_ok),
                "upstream writes waited (a leader being elected upstream?)"
            );
        }
        match produced {
            Ok(()) => {
                let mut keys = self.keys();
                for (group, k) in forgotten {
                    if let Some(set) = keys.get_mut(&group) {
                        set.remove(&k);
                        if set.is_empty() {
                            keys.remove(&group);
                        }
                    }
                }
            }
            Err(e) => {
                error!(topic, error = %e, "group records not written upstream");
                for i in record_writes.values().flatten() {
                    results[*i] = Err(self.failed(&e));
                }
            }
        }
        for ((_, list), outcome) in ops.iter().zip(done) {
            if let Err((failed_at, e)) = outcome {
                for i in list[failed_at..].iter().flat_map(|(_, w)| w) {
                    results[*i] = Err(self.failed(&e));
                }
            }
        }
        results
    }
}

impl AsyncStore for UpstreamStore {
    fn apply_writes(
        &self,
        writes: Vec<Vec<Mutation>>,
        durable: bool,
    ) -> BoxFuture<'_, Vec<Result<(), StoreError>>> {
        Box::pin(self.write(writes, durable))
    }

    /// Reads the whole topic: the last value of each key, tombstones applied. Offsets are not
    /// loaded: OffsetFetch reads them from upstream.
    fn load_groups(&self) -> BoxFuture<'_, Result<Vec<LoadedGroup>, StoreError>> {
        Box::pin(async move {
            self.keys().clear();
            let all: Vec<i32> = (0..self.partitions).collect();
            self.load_shards(&all).await
        })
    }
}

/// Whether `m` goes upstream (a group record, an offset, a group's deletion or fence), not to
/// the local store.
fn goes_upstream(m: &Mutation) -> bool {
    record_of(m).is_some()
        || matches!(
            m,
            Mutation::PutOffset { .. }
                | Mutation::DeleteOffset { .. }
                | Mutation::DeleteGroup { .. }
                | Mutation::ClearGroupRecords { .. }
                | Mutation::Fence { .. }
                | Mutation::PutGroupConfigs { .. }
        )
}

/// The synchronous face serves only the local store (users, ACLs, topics, transactional ids):
/// what goes upstream is written and read through [`AsyncStore`], by the storage lanes.
impl Store for UpstreamStore {
    fn location(&self) -> std::path::PathBuf {
        self.topic.clone().into()
    }

    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        Store::apply_writes(self, vec![batch.to_vec()], durable)
            .pop()
            .unwrap_or(Ok(()))
    }

    fn as_async(self: Arc<Self>) -> Option<Arc<dyn AsyncStore>> {
        Some(self)
    }

    fn apply_writes(
        &self,
        writes: Vec<Vec<Mutation>>,
        durable: bool,
    ) -> Vec<Result<(), StoreError>> {
        writes
            .into_iter()
            .map(|w| {
                if w.iter().any(goes_upstream) {
                    Err(StoreError::Io(
                        "gateway mode writes group records and offsets through its storage lanes"
                            .into(),
                    ))
                } else {
                    self.local.apply(&w, durable)
                }
            })
            .collect()
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.local.sync()
    }

    fn load_topics(&self) -> Result<Vec<StoredTopic>, StoreError> {
        self.local.load_topics()
    }

    fn load_groups(&self) -> Result<Vec<LoadedGroup>, StoreError> {
        Err(StoreError::Io(
            "gateway mode reads its groups from upstream through AsyncStore::load_groups".into(),
        ))
    }

    fn load_credentials(&self) -> Result<Vec<StoredCredential>, StoreError> {
        self.local.load_credentials()
    }

    fn load_acls(&self) -> Result<Vec<crate::security::acl::Acl>, StoreError> {
        self.local.load_acls()
    }

    fn load_txns(&self) -> Result<Vec<TxnRecord>, StoreError> {
        self.local.load_txns()
    }

    fn load_producer_ids_end(&self) -> Result<Option<i64>, StoreError> {
        self.local.load_producer_ids_end()
    }

    /// Those read from upstream at start-up, over those an older koord kept in its local
    /// store.
    fn load_group_configs(&self) -> Result<Vec<(String, GroupConfigMap)>, StoreError> {
        let mut all: BTreeMap<String, GroupConfigMap> =
            self.local.load_group_configs()?.into_iter().collect();
        let read = self.configs_read.lock().unwrap_or_else(|e| e.into_inner());
        all.extend(read.0.iter().cloned());
        Ok(all.into_iter().filter(|(_, c)| !c.is_empty()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::GroupError;

    #[test]
    fn group_config_records_decode_back_and_garbage_is_an_error() {
        let configs: GroupConfigMap = [(
            "share.auto.offset.reset".to_string(),
            "earliest".to_string(),
        )]
        .into_iter()
        .collect();
        let v = crate::storage::codec::encode_group_configs(&configs);
        let k = config_key("g1");
        assert_eq!(
            decode_config(&k, Some(&v)).unwrap(),
            ("g1".to_string(), configs)
        );
        // A tombstone: the group's configs removed.
        assert_eq!(
            decode_config(&k, None).unwrap(),
            ("g1".to_string(), GroupConfigMap::new())
        );
        assert!(decode_config(&[], None).is_err());
        assert!(decode_config(&[1, b'g'], None).is_err());
        assert!(decode_config(&[0, 0xff], None).is_err());
        assert!(decode_config(&k, Some(&[9, 9])).is_err());
    }

    #[test]
    fn records_decode_back_to_the_mutation_that_wrote_them_in_the_topic_s_layout() {
        use crate::group::{classic, consumer};
        let g = GroupId::new("g");
        let member = StoredRecord::member(consumer::codec::KIND, "m-1", vec![1, 2]);
        let own = StoredRecord::group(classic::codec::KIND, vec![3]);
        for (record, key, value) in [
            (member, &b"\0C\0\x01gm-1"[..], &b"\0\x01\x02"[..]),
            (own, &b"\0G\0\x01g"[..], &b"\0c\x03"[..]),
        ] {
            let m = Mutation::PutGroupRecord {
                group: g.clone(),
                record: record.clone(),
            };
            let (_, k, v) = record_of(&m).unwrap();
            let v = v.unwrap();
            assert_eq!((&k[..], &v[..]), (key, value));
            assert_eq!(decode(&k, &v).unwrap(), (g.clone(), record.clone()));
            let gone = Mutation::DeleteGroupRecord {
                group: g.clone(),
                kind: record.kind,
                key: record.key.clone(),
            };
            assert_eq!(record_of(&gone).unwrap(), (&g, k, None));
        }
    }

    /// The OffsetCommits [`offsets_broker`] received for group "merged".
    static MERGED_COMMITS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// A fake upstream broker (node 7) for offsets only: FindCoordinator names itself,
    /// OffsetCommit is refused with GROUP_AUTHORIZATION_FAILED for group "refused" and
    /// accepted for every other.
    async fn offsets_broker() -> String {
        use kafka_protocol::messages::find_coordinator_response::Coordinator;
        use kafka_protocol::messages::offset_commit_response::{
            OffsetCommitResponsePartition, OffsetCommitResponseTopic,
        };
        use kafka_protocol::messages::{
            ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, OffsetCommitRequest,
            OffsetCommitResponse, RequestHeader, ResponseHeader,
        };
        use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    while let Ok(len) = s.read_i32().await {
                        let mut f = vec![0; len as usize];
                        s.read_exact(&mut f).await.unwrap();
                        let mut b = Bytes::from(f);
                        let key = ApiKey::try_from(i16::from_be_bytes([b[0], b[1]])).unwrap();
                        let v = i16::from_be_bytes([b[2], b[3]]);
                        let h =
                            RequestHeader::decode(&mut b, key.request_header_version(v)).unwrap();
                        let mut out = BytesMut::new();
                        out.put_i32(0);
                        ResponseHeader::default()
                            .with_correlation_id(h.correlation_id)
                            .encode(&mut out, key.response_header_version(v))
                            .unwrap();
                        match key {
                            ApiKey::FindCoordinator => {
                                let req = FindCoordinatorRequest::decode(&mut b, v).unwrap();
                                FindCoordinatorResponse::default()
                                    .with_coordinators(
                                        req.coordinator_keys
                                            .into_iter()
                                            .map(|k| {
                                                Coordinator::default()
                                                    .with_key(k)
                                                    .with_node_id(7.into())
                                                    .with_host(StrBytes::from(
                                                        addr.ip().to_string(),
                                                    ))
                                                    .with_port(i32::from(addr.port()))
                                            })
                                            .collect(),
                                    )
                                    .encode(&mut out, v)
                                    .unwrap();
                            }
                            ApiKey::OffsetCommit => {
                                let req = OffsetCommitRequest::decode(&mut b, v).unwrap();
                                if req.group_id.as_str() == "merged" {
                                    MERGED_COMMITS
                                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                }
                                let code = if req.group_id.as_str() == "refused" {
                                    30
                                } else {
                                    0
                                };
                                OffsetCommitResponse::default()
                                    .with_topics(
                                        req.topics
                                            .into_iter()
                                            .map(|t| {
                                                OffsetCommitResponseTopic::default()
                                                    .with_name(t.name)
                                                    .with_partitions(
                                                        t.partitions
                                                            .iter()
                                                            .map(|p| {
                                                                OffsetCommitResponsePartition::default()
                                                                    .with_partition_index(p.partition_index)
                                                                    .with_error_code(code)
                                                            })
                                                            .collect(),
                                                    )
                                            })
                                            .collect(),
                                    )
                                    .encode(&mut out, v)
                                    .unwrap();
                            }
                            _ => return,
                        }
                        let n = (out.len() - 4) as i32;
                        out[..4].copy_from_slice(&n.to_be_bytes());
                        s.write_all(&out).await.unwrap();
                    }
                });
            }
        });
        addr.to_string()
    }

    #[test]
    fn a_group_upstream_refuses_fails_alone() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let addr = rt.block_on(offsets_broker());
        let up = Arc::new(Upstream::new(
            vec![addr.clone()],
            [(7, addr)].into_iter().collect(),
        ));
        let store = UpstreamStore {
            fencing: None,
            local: Arc::new(MemoryStore::default()),
            up,
            topic: "__koord_groups".into(),
            partitions: 1,
            keys: Mutex::new(HashMap::new()),
            write_timeout: Duration::from_secs(2),
            configs_topic: "__koord_groups-configs".into(),
            configs_read: Mutex::new((Vec::new(), 0)),
        };
        let commit = |group: &str| {
            vec![Mutation::PutOffset {
                group: GroupId::new(group),
                tp: TopicPartition::new("t", 0),
                offset: OffsetAndMetadata {
                    offset: 5,
                    leader_epoch: None,
                    metadata: String::new(),
                    commit_timestamp: crate::vocab::Timestamp(0),
                    expire_timestamp: None,
                },
            }]
        };
        let writes = vec![
            commit("a"),
            commit("refused"),
            commit("b"),
            commit("refused"),
            commit("merged"),
            commit("merged"),
            commit("merged"),
        ];
        // The synchronous face takes none of it: offsets go upstream, through the lanes.
        let refused = Store::apply_writes(&store, writes.clone(), true);
        assert!(
            refused
                .iter()
                .all(|r| matches!(r, Err(StoreError::Io(m)) if m.contains("storage lanes"))),
            "{refused:?}"
        );
        let results = rt.block_on(store.write(writes, true));
        assert!(results[0].is_ok(), "{results:?}");
        for i in [1, 3] {
            assert!(
                matches!(&results[i], Err(e @ StoreError::Unavailable(m))
                    if m.contains("30") && e.group_error() == GroupError::CoordinatorLoadInProgress),
                "every write of the refused group fails, and koord, its coordinator still, \
                 tells its clients to retry (not NOT_COORDINATOR): {results:?}"
            );
        }
        assert!(
            results[2].is_ok(),
            "another group's commit is not touched: {results:?}"
        );
        assert!(results[4..].iter().all(Result::is_ok), "{results:?}");
        assert_eq!(
            MERGED_COMMITS.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "a group's commits in one batch go upstream as one OffsetCommit"
        );
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        assert!(decode(b"", b"").is_err());
        assert!(
            decode(&[0, b'G', 0, 9, b'g'], &[0, b'c']).is_err(),
            "short group id"
        );
        assert!(
            decode(&[7, b'G', 0, 1, b'g'], &[0, b'c']).is_err(),
            "unknown key version"
        );
        assert!(
            decode(&[0, b'G', 0, 1, b'g'], &[9]).is_err(),
            "unknown value version"
        );
        assert!(
            decode(&[0, b'G', 0, 1, b'g'], &[0, b'x', 1]).is_err(),
            "unknown kind"
        );
        assert!(
            decode(&[0, b'Z', 0, 1, b'g'], &[0]).is_err(),
            "unknown key kind"
        );
        // A record's value is its kind's to read (the coordinator, at load): carried as is.
        let (_, r) = decode(&[0, b'C', 0, 1, b'g', b'm'], &[0, 1, 2, 3]).unwrap();
        assert_eq!(
            (r.kind, &r.key[..], &r.value[..]),
            (crate::group::consumer::codec::KIND, "m", &[1, 2, 3][..])
        );
    }
}
