//! The durable store: committed offsets (and pending transactional ones), groups' records
//! (opaque here: each group kind encodes its own, see [`crate::vocab::stored`]), topics created
//! at run time and transactional ids' states survive restarts and `kill -9`.
//!
//! - [`Store`] is the seam: a replicated store can replace the embedded one. [`EmbeddedStore`]
//!   keeps everything in one redb file under the data dir; [`MemoryStore`] is for tests (and
//!   can be told to fail writes).
//! - [`Storage`] is the one storage task per node. Writers submit batches of [`Mutation`]s with a
//!   completion callback; the task takes every batch that arrived while the previous sync ran and
//!   applies them all in one transaction with one sync (group commit), then completes each.
//!   Callers act on a write (reply to a client) only in its completion, so what a client is told
//!   is durable (with `offsets.commit.sync = always`).
//! - Values carry a format version and are decoded with checked lengths ([`codec`]): a damaged
//!   store is an error naming the file, never a silent empty start.

pub mod codec;
mod embedded;
mod memory;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

pub use embedded::EmbeddedStore;
pub use memory::MemoryStore;

use crate::metadata::group_config::GroupConfigMap;
use crate::metadata::topic_config::TopicConfigs;
use crate::vocab::stored::{GroupKind, RecordChange, StoredRecord};
use crate::vocab::{GroupError, GroupId};
use crate::vocab::{OffsetAndMetadata, PendingOffset, TopicPartition, TxnRecord};

/// Why the store failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be opened or read: damaged, truncated, locked by another process, or an
    /// unknown format. koord refuses to start.
    #[error("store {path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// A write or sync failed.
    #[error("store write failed: {0}")]
    Io(String),
    /// Gateway mode: upstream did not take the write in time (its leader or coordinator moving
    /// or loading, or unreachable); a later write may well succeed.
    #[error("upstream did not take the write: {0}")]
    Unavailable(String),
    /// The storage task has stopped (shutdown).
    #[error("store is closed")]
    Closed,
}

impl StoreError {
    /// The error a client gets for a failed write (Kafka's append-error remap, spec §0): a
    /// storage error (KAFKA_STORAGE_ERROR) and an unloading coordinator both read as
    /// NOT_COORDINATOR, which clients answer by finding the coordinator again and retrying.
    /// An upstream that did not take a write in time (gateway mode) is not a coordinator that
    /// moved (koord still is the group's): COORDINATOR_LOAD_IN_PROGRESS, which clients retry
    /// on the same coordinator (SyncGroup turns it into REBALANCE_IN_PROGRESS, as Kafka does).
    pub fn group_error(&self) -> GroupError {
        match self {
            StoreError::Unavailable(_) => GroupError::CoordinatorLoadInProgress,
            _ => GroupError::NotCoordinator,
        }
    }
}

/// One change to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    PutOffset {
        group: GroupId,
        tp: TopicPartition,
        offset: OffsetAndMetadata,
    },
    DeleteOffset {
        group: GroupId,
        tp: TopicPartition,
    },
    /// One of the group's records, opaque to the store (replaces the one of its kind and key).
    PutGroupRecord {
        group: GroupId,
        record: StoredRecord,
    },
    /// One of the group's records gone (a member that left).
    DeleteGroupRecord {
        group: GroupId,
        kind: GroupKind,
        key: String,
    },
    /// The group's records and every offset of it.
    DeleteGroup {
        group: GroupId,
    },
    /// The group's records of every kind, not its offsets: an Empty group changed kind.
    ClearGroupRecords {
        group: GroupId,
    },
    /// A topic created at run time, or its configs or partition count changed (replaces the
    /// previous record, keyed by name).
    PutTopic {
        topic: crate::metadata::Topic,
        configs: TopicConfigs,
    },
    /// A deleted topic (DeleteTopics); groups' offsets of it are deleted by their own
    /// mutations.
    DeleteTopic {
        name: String,
    },
    /// The configs set on a group (IncrementalAlterConfigs or AlterConfigs on a GROUP
    /// resource), replacing the previous ones; empty removes them. Not a group record: they
    /// outlive the group's deletion, as in Kafka.
    PutGroupConfigs {
        group: String,
        configs: GroupConfigMap,
    },
    /// Producer ids below `end` may have been handed out: a restarted node starts at the
    /// highest `end` stored ([`crate::broker::ProducerIds`]), so no id is handed out twice.
    ReserveProducerIds {
        end: i64,
    },
    /// A SCRAM user's credential for one mechanism (AlterUserScramCredentials), or its
    /// deletion.
    Credential(crate::security::credentials::CredentialChange),
    /// A client quota entity's quotas (AlterClientQuotas), replacing the previous ones; none
    /// removes the entity.
    PutClientQuotas {
        entity: crate::quota::Entity,
        values: crate::quota::Values,
    },
    /// An ACL binding (CreateAcls); storing one that exists changes nothing.
    PutAcl(crate::security::acl::Acl),
    /// An ACL binding deleted (DeleteAcls).
    DeleteAcl(crate::security::acl::Acl),
    /// A transactional id's state (replaces the previous one).
    PutTxn(Box<TxnRecord>),
    /// A transactional id forgotten (`transactional.id.expiration.ms`).
    DeleteTxn {
        transactional_id: String,
    },
    /// A group's pending transactional offset (replaces the previous one of its producer and
    /// partition).
    PutPendingOffset {
        group: GroupId,
        pending: Box<PendingOffset>,
    },
    /// The producer's pending offsets in the group: every one (its transaction ended), or
    /// those of one partition (the partition's offset was deleted).
    DeletePendingOffsets {
        group: GroupId,
        producer_id: i64,
        tp: Option<TopicPartition>,
    },
    /// Nothing stored. Cluster mode: succeeds only while this node still owns the group's
    /// shard (the shard's fence record taken upstream with this node's producer epoch, and
    /// its lease holding), before something is done for the group outside the store (the
    /// deletion of a group only upstream has). Every other store: nothing to do.
    Fence {
        group: GroupId,
    },
}

/// A stored SCRAM credential: user, mechanism, credential.
pub type StoredCredential = (
    String,
    crate::security::scram::ScramMechanism,
    crate::security::scram::ScramCredential,
);

/// A topic as stored: name, id and partition count, and its explicitly set configs.
pub type StoredTopic = (crate::metadata::Topic, TopicConfigs);

/// A group as stored: its records (those of its kind; none for offsets written without a
/// group record), offsets and pending transactional offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedGroup {
    pub id: GroupId,
    pub records: Vec<StoredRecord>,
    pub offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
    /// Transactional offsets waiting for their transaction's marker.
    pub pending: Vec<PendingOffset>,
}

impl LoadedGroup {
    /// A group with nothing stored yet (filled in by the loader).
    pub fn new(id: GroupId) -> LoadedGroup {
        LoadedGroup {
            id,
            records: Vec::new(),
            offsets: Vec::new(),
            pending: Vec::new(),
        }
    }
}

impl Mutation {
    /// The mutation that makes `change` of `group`'s records.
    pub fn group_record(group: GroupId, change: RecordChange) -> Mutation {
        match change {
            RecordChange::Put(record) => Mutation::PutGroupRecord { group, record },
            RecordChange::Delete { kind, key } => Mutation::DeleteGroupRecord { group, kind, key },
            RecordChange::Clear => Mutation::ClearGroupRecords { group },
        }
    }
}

/// The asynchronous face of a store whose group writes and reads wait on a network peer
/// (gateway mode's upstream). Its storage lanes are tasks on the runtime that await each
/// group-committed batch, so no thread blocks on the peer and nothing blocks a runtime thread;
/// its [`Store`] methods then serve only what it keeps locally.
pub trait AsyncStore: Send + Sync + 'static {
    /// As [`Store::apply_writes`].
    fn apply_writes(
        &self,
        writes: Vec<Vec<Mutation>>,
        durable: bool,
    ) -> BoxFuture<'_, Vec<Result<(), StoreError>>>;
    /// As [`Store::load_groups`].
    fn load_groups(&self) -> BoxFuture<'_, Result<Vec<LoadedGroup>, StoreError>>;
}

/// What sees a lane's writes as they are applied (standalone koord's `__consumer_offsets`,
/// [`crate::offsets_topic`]): each round's writes before they are applied, then how each
/// went, before any writer is told. Runs on the storage thread: it must not block.
pub trait Tap: Send + Sync {
    /// The round's `writes`, about to be applied; the closure returned (if any) is called with
    /// each write's result, in the same order.
    fn round<'a>(&'a self, writes: &[Vec<Mutation>]) -> Option<Applied<'a>>;
}

/// What a [`Tap`] does once a round's writes are applied: called with each write's result.
pub type Applied<'a> = Box<dyn FnOnce(&[Result<(), StoreError>]) + Send + 'a>;

/// A durable key-value home for koord's state. Implementations are internally synchronised:
/// the storage task writes while start-up reads.
pub trait Store: Send + Sync + 'static {
    /// Applies `batch` atomically, in order. When `durable`, it is on disk when this returns;
    /// otherwise at the next durable apply or [`Store::sync`].
    ///
    /// # Errors
    /// [`StoreError::Io`]: nothing of the batch was applied.
    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError>;
    /// Applies several writers' batches, in order, and says how each went. The default applies
    /// them as one batch, so they succeed or fail together; a store whose writes can fail one
    /// by one (gateway mode: upstream refusing one group's commit) keeps the others' apart.
    fn apply_writes(
        &self,
        writes: Vec<Vec<Mutation>>,
        durable: bool,
    ) -> Vec<Result<(), StoreError>> {
        let n = writes.len();
        let batch: Vec<Mutation> = if n == 1 {
            writes.into_iter().next().unwrap_or_default()
        } else {
            writes.into_iter().flatten().collect()
        };
        let result = if batch.is_empty() {
            Ok(())
        } else {
            self.apply(&batch, durable)
        };
        vec![result; n]
    }
    /// Makes every applied batch durable.
    fn sync(&self) -> Result<(), StoreError>;
    /// The store's asynchronous face, if its writes wait on a network peer ([`AsyncStore`]).
    fn as_async(self: Arc<Self>) -> Option<Arc<dyn AsyncStore>> {
        None
    }
    /// Where the store keeps its data (its file, or gateway mode's topic), for errors.
    fn location(&self) -> PathBuf {
        PathBuf::from("the store")
    }
    /// The error for stored data that does not decode (a group record, read by its kind).
    fn damaged(&self, e: crate::vocab::codec::DecodeError) -> StoreError {
        StoreError::Corrupt {
            path: self.location(),
            message: e.0,
        }
    }
    /// Every stored topic: name, id, partition count and explicitly set configs.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_topics(&self) -> Result<Vec<StoredTopic>, StoreError>;
    /// Every stored group with its offsets, ordered by group id.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_groups(&self) -> Result<Vec<LoadedGroup>, StoreError>;
    /// Every stored SCRAM credential.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_credentials(&self) -> Result<Vec<StoredCredential>, StoreError>;
    /// Every stored ACL binding.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_acls(&self) -> Result<Vec<crate::security::acl::Acl>, StoreError>;
    /// Every stored client quota entity with its quotas; none by default.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_client_quotas(
        &self,
    ) -> Result<Vec<(crate::quota::Entity, crate::quota::Values)>, StoreError> {
        Ok(Vec::new())
    }
    /// Every stored transactional id's state.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_txns(&self) -> Result<Vec<TxnRecord>, StoreError>;
    /// The highest producer id block end stored ([`Mutation::ReserveProducerIds`]); `None` in
    /// a store that has none.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_producer_ids_end(&self) -> Result<Option<i64>, StoreError> {
        Ok(None)
    }
    /// Every group's stored configs ([`Mutation::PutGroupConfigs`]); none by default.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming what cannot be read.
    fn load_group_configs(&self) -> Result<Vec<(String, GroupConfigMap)>, StoreError> {
        Ok(Vec::new())
    }
}

/// `offsets.commit.sync`: whether a write is on disk before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Every group commit ends with a sync (Kafka's acks=all promise on one node).
    #[default]
    Always,
    /// Writes reach the disk when the OS gets to them, and at shutdown: for tests that do not
    /// care about crashes.
    Never,
}

impl SyncPolicy {
    pub fn name(self) -> &'static str {
        match self {
            SyncPolicy::Always => "always",
            SyncPolicy::Never => "never",
        }
    }

    pub fn parse(s: &str) -> Option<SyncPolicy> {
        match s {
            "always" => Some(SyncPolicy::Always),
            "never" => Some(SyncPolicy::Never),
            _ => None,
        }
    }
}

/// What a writer is told once its batch is applied (and synced, per the policy).
pub type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

enum Request {
    Write(Vec<Mutation>, Done),
    /// Apply everything queued before this, sync, answer, stop.
    Shutdown(oneshot::Sender<()>),
}

/// Group-commit counters, for logs and benchmarks.
#[derive(Debug, Default)]
pub struct StorageStats {
    /// Transactions applied (one sync each under `always`).
    pub commits: AtomicU64,
    /// Write requests covered by them.
    pub writes: AtomicU64,
}

/// Most mutations applied in one transaction; a longer queue is taken in several.
const MAX_BATCH: usize = 100_000;

/// The handle to the storage task. Cheap to clone; every clone submits to the same task.
#[derive(Clone)]
pub struct Storage {
    target: Target,
    stats: Arc<StorageStats>,
}

#[derive(Clone)]
enum Target {
    /// The storage thread.
    Task(mpsc::UnboundedSender<Request>),
    /// Storage threads, each with its own queue, and which one takes a write (all of one
    /// group's writes in one lane, so they stay in order).
    Lanes(Arc<[mpsc::UnboundedSender<Request>]>, Router),
    /// Applied on the caller's thread, completion included (tests: with tokio's paused clock a
    /// write never leaves the runtime idle, which would let it jump to the next timer).
    Inline(Arc<dyn Store>),
}

/// The lane of a write: `(write, lanes) -> 0..lanes`.
pub type Router = Arc<dyn Fn(&[Mutation], usize) -> usize + Send + Sync>;

impl Mutation {
    /// The group the mutation belongs to, if any.
    pub fn group(&self) -> Option<&GroupId> {
        match self {
            Mutation::PutOffset { group, .. }
            | Mutation::DeleteOffset { group, .. }
            | Mutation::PutGroupRecord { group, .. }
            | Mutation::DeleteGroupRecord { group, .. }
            | Mutation::DeleteGroup { group }
            | Mutation::ClearGroupRecords { group }
            | Mutation::PutPendingOffset { group, .. }
            | Mutation::DeletePendingOffsets { group, .. }
            | Mutation::Fence { group } => Some(group),
            Mutation::PutTopic { .. }
            | Mutation::DeleteTopic { .. }
            | Mutation::PutGroupConfigs { .. }
            | Mutation::ReserveProducerIds { .. }
            | Mutation::Credential(_)
            | Mutation::PutClientQuotas { .. }
            | Mutation::PutAcl(_)
            | Mutation::DeleteAcl(_)
            | Mutation::PutTxn(_)
            | Mutation::DeleteTxn { .. } => None,
        }
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage").finish_non_exhaustive()
    }
}

impl Storage {
    /// Starts the storage task over `store`: a thread of its own, as the store's calls block
    /// (a task on the current runtime for an [`AsyncStore`]).
    pub fn start(store: Arc<dyn Store>, policy: SyncPolicy) -> Storage {
        Storage::start_tapped(store, policy, None)
    }

    /// [`Storage::start`], its writes shown to `tap` as they are applied (a store with an
    /// [`AsyncStore`] face takes no tap).
    pub fn start_tapped(
        store: Arc<dyn Store>,
        policy: SyncPolicy,
        tap: Option<Arc<dyn Tap>>,
    ) -> Storage {
        let stats = Arc::new(StorageStats::default());
        let lane = match store.clone().as_async() {
            Some(remote) => spawn_async_lane(remote, store, policy, &stats),
            None => spawn_lane("koord-storage".into(), store, policy, tap, &stats),
        };
        Storage {
            target: Target::Task(lane),
            stats,
        }
    }

    /// Starts `lanes` storage lanes over `store`, each applying its own writes in order and
    /// group-committing them as [`Storage::start`]'s one does; `route` picks a write's lane.
    /// For a store whose writes wait on others (gateway mode: upstream partitions), so a write
    /// held by one (its leader being re-elected) holds only the writes routed with it. The
    /// lanes of an [`AsyncStore`] are tasks on the current runtime (so this must run inside
    /// one), the others threads.
    pub fn start_lanes(
        store: Arc<dyn Store>,
        policy: SyncPolicy,
        lanes: usize,
        route: Router,
    ) -> Storage {
        let stats = Arc::new(StorageStats::default());
        let remote = store.clone().as_async();
        let senders = (0..lanes.max(1))
            .map(|i| match &remote {
                Some(remote) => spawn_async_lane(remote.clone(), store.clone(), policy, &stats),
                None => spawn_lane(
                    format!("koord-storage-{i}"),
                    store.clone(),
                    policy,
                    None,
                    &stats,
                ),
            })
            .collect();
        Storage {
            target: Target::Lanes(senders, route),
            stats,
        }
    }

    /// Writes applied to `store` on the caller's thread, each at once (tests).
    pub fn inline(store: Arc<dyn Store>) -> Storage {
        Storage {
            target: Target::Inline(store),
            stats: Arc::default(),
        }
    }

    /// Inline writes to a fresh [`MemoryStore`] (tests, and the coordinator's default).
    pub fn memory() -> Storage {
        Storage::inline(Arc::new(MemoryStore::default()))
    }

    /// Queues `batch`; `done` runs on the storage thread once it is applied (durable under
    /// `always`) or failed. Batches are applied in submission order.
    pub fn submit(&self, batch: Vec<Mutation>, done: Done) {
        let tx = match &self.target {
            Target::Task(tx) => tx,
            Target::Lanes(lanes, route) => &lanes[route(&batch, lanes.len()).min(lanes.len() - 1)],
            Target::Inline(store) => {
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                self.stats.writes.fetch_add(1, Ordering::Relaxed);
                done(store.apply(&batch, true));
                return;
            }
        };
        if let Err(mpsc::error::SendError(Request::Write(_, done))) =
            tx.send(Request::Write(batch, done))
        {
            done(Err(StoreError::Closed));
        }
    }

    /// Writes `batch` and waits until it is applied.
    ///
    /// # Errors
    /// What the store reported, or [`StoreError::Closed`].
    pub async fn write(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.submit(
            batch,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Waits until every write submitted so far to lane `lane` (of [`Storage::start_lanes`];
    /// the one task otherwise) is applied or failed.
    pub async fn drained(&self, lane: usize) {
        let tx = match &self.target {
            Target::Task(tx) => tx,
            Target::Lanes(lanes, _) => &lanes[lane.min(lanes.len() - 1)],
            Target::Inline(_) => return,
        };
        let (done_tx, done_rx) = oneshot::channel();
        let done: Done = Box::new(move |_| {
            let _ = done_tx.send(());
        });
        if tx.send(Request::Write(Vec::new(), done)).is_ok() {
            let _ = done_rx.await;
        }
    }

    /// Applies and syncs everything submitted so far, then stops the task; later writes fail
    /// with [`StoreError::Closed`].
    pub async fn shutdown(&self) {
        let lanes = match &self.target {
            Target::Task(task) => std::slice::from_ref(task),
            Target::Lanes(lanes, _) => &lanes[..],
            Target::Inline(_) => return,
        };
        let acks = lanes.iter().filter_map(|lane| {
            let (tx, rx) = oneshot::channel();
            lane.send(Request::Shutdown(tx)).ok().map(|()| rx)
        });
        futures_util::future::join_all(acks).await;
    }

    pub fn stats(&self) -> &StorageStats {
        &self.stats
    }
}

/// Starts one storage thread (named `name`) over `store` and returns its queue.
fn spawn_lane(
    name: String,
    store: Arc<dyn Store>,
    policy: SyncPolicy,
    tap: Option<Arc<dyn Tap>>,
    stats: &Arc<StorageStats>,
) -> mpsc::UnboundedSender<Request> {
    let (tx, rx) = mpsc::unbounded_channel();
    let stats = stats.clone();
    let spawned = std::thread::Builder::new()
        .name(name)
        .spawn(move || run(store, policy, tap.as_deref(), rx, &stats));
    if let Err(e) = spawned {
        // Without the thread every write fails with Closed (rx was dropped with it).
        tracing::error!("cannot start a storage thread: {e}");
    }
    tx
}

/// Starts one storage lane over an [`AsyncStore`]: a task on the current runtime.
fn spawn_async_lane(
    remote: Arc<dyn AsyncStore>,
    store: Arc<dyn Store>,
    policy: SyncPolicy,
    stats: &Arc<StorageStats>,
) -> mpsc::UnboundedSender<Request> {
    let (tx, rx) = mpsc::unbounded_channel();
    let stats = stats.clone();
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(run_async(remote, store, policy, rx, stats));
        }
        // Without the task every write fails with Closed (rx was dropped with it).
        Err(e) => tracing::error!("cannot start a storage lane: {e}"),
    }
    tx
}

/// The writes a lane takes at once: the first, and every one queued behind it (up to
/// [`MAX_BATCH`] mutations), then the shutdown if one came.
struct Round {
    writes: Vec<Vec<Mutation>>,
    dones: Vec<Done>,
    mutations: usize,
    stop: Option<oneshot::Sender<()>>,
}

impl Round {
    /// Takes `first` and what queued behind it; a request past the batch's end is left in
    /// `pending` for the next round.
    fn gather(
        first: Request,
        rx: &mut mpsc::UnboundedReceiver<Request>,
        pending: &mut Option<Request>,
    ) -> Round {
        let mut round = Round {
            writes: Vec::new(),
            dones: Vec::new(),
            mutations: 0,
            stop: None,
        };
        let mut next = Some(first);
        // Everything that queued up while the previous transaction ran joins this one.
        while let Some(request) = next.take() {
            match request {
                Request::Write(batch, done) => {
                    round.mutations += batch.len();
                    round.writes.push(batch);
                    round.dones.push(done);
                }
                Request::Shutdown(ack) => {
                    round.stop = Some(ack);
                    break;
                }
            }
            if round.mutations >= MAX_BATCH {
                break;
            }
            match rx.try_recv() {
                Ok(r) => next = Some(r),
                Err(_) => break,
            }
        }
        *pending = next;
        round
    }

    /// Completes the round's writes with `results` (applied from `started`).
    fn complete(
        self,
        results: Vec<Result<(), StoreError>>,
        started: std::time::Instant,
        stats: &StorageStats,
    ) -> Option<oneshot::Sender<()>> {
        if self.mutations > 0 {
            crate::metrics::metrics().store_batch(self.dones.len(), started.elapsed());
        }
        let failed = results.iter().filter(|r| r.is_err()).count();
        if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
            tracing::error!(writes = self.dones.len(), failed, "{e}");
        }
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats
            .writes
            .fetch_add(self.dones.len() as u64, Ordering::Relaxed);
        let mut results = results.into_iter();
        for done in self.dones {
            done(results.next().unwrap_or(Err(StoreError::Closed)));
        }
        self.stop
    }
}

/// After a shutdown request: syncs, fails what is still queued, acknowledges.
fn close(store: &dyn Store, mut rx: mpsc::UnboundedReceiver<Request>, ack: oneshot::Sender<()>) {
    if let Err(e) = store.sync() {
        tracing::error!("final sync: {e}");
    }
    rx.close();
    while let Ok(r) = rx.try_recv() {
        match r {
            Request::Write(_, done) => done(Err(StoreError::Closed)),
            Request::Shutdown(ack) => {
                let _ = ack.send(());
            }
        }
    }
    let _ = ack.send(());
    tracing::info!("store flushed and closed");
}

fn run(
    store: Arc<dyn Store>,
    policy: SyncPolicy,
    tap: Option<&dyn Tap>,
    mut rx: mpsc::UnboundedReceiver<Request>,
    stats: &StorageStats,
) {
    let durable = policy == SyncPolicy::Always;
    let mut pending: Option<Request> = None;
    loop {
        let first = match pending.take() {
            Some(r) => r,
            None => match rx.blocking_recv() {
                Some(r) => r,
                None => break,
            },
        };
        let mut round = Round::gather(first, &mut rx, &mut pending);
        let started = std::time::Instant::now();
        let applied = tap.and_then(|t| t.round(&round.writes));
        let results = if round.writes.is_empty() {
            Vec::new()
        } else {
            store.apply_writes(std::mem::take(&mut round.writes), durable)
        };
        if let Some(applied) = applied {
            applied(&results);
        }
        if let Some(ack) = round.complete(results, started, stats) {
            close(&*store, rx, ack);
            return;
        }
    }
    // Every handle is gone without a shutdown: still leave nothing unsynced.
    let _ = store.sync();
}

/// [`run`] over an [`AsyncStore`], as a task: each round is awaited, not blocked on.
async fn run_async(
    remote: Arc<dyn AsyncStore>,
    store: Arc<dyn Store>,
    policy: SyncPolicy,
    mut rx: mpsc::UnboundedReceiver<Request>,
    stats: Arc<StorageStats>,
) {
    let durable = policy == SyncPolicy::Always;
    let mut pending: Option<Request> = None;
    loop {
        let first = match pending.take() {
            Some(r) => r,
            None => match rx.recv().await {
                Some(r) => r,
                None => break,
            },
        };
        let mut round = Round::gather(first, &mut rx, &mut pending);
        let started = std::time::Instant::now();
        let results = if round.writes.is_empty() {
            Vec::new()
        } else {
            remote
                .apply_writes(std::mem::take(&mut round.writes), durable)
                .await
        };
        if let Some(ack) = round.complete(results, started, &stats) {
            close(&*store, rx, ack);
            return;
        }
    }
    let _ = store.sync();
}

#[cfg(test)]
mod tests;
