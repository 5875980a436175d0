//! The group directory and the shard tasks that own the groups.
//!
//! [`Coordinator`] maps group ids to their groups (a `DashMap`). Each group's [`ClassicGroup`]
//! and committed offsets are owned by one shard task (the one its id hashes to), which is the
//! only code that touches them, so group state needs no locks; requests reach it through the
//! shard's queue and are handled one at a time, in the order they were sent.
//! JoinGroup and SyncGroup replies are parked as oneshot senders keyed by [`crate::group::RequestToken`] and
//! completed when the pure core emits a reply for that token, often while handling another
//! member's request or a timer. Timers are not tasks: the actor sleeps until the core's
//! [`ClassicGroup::next_deadline`] (the earliest over the shard's groups) and calls
//! [`ClassicGroup::handle_timeout`], which re-checks every deadline, so a stale wake-up does
//! nothing.
//!
//! A request for a group that does not exist is answered from [`crate::group::missing`] without
//! spawning anything, except those that create a group: a JoinGroup without a member id, and an
//! OffsetCommit outside group management (a *simple* group). A group that becomes Dead (deleted,
//! or Empty with every offset expired) leaves the directory; requests already queued for it get
//! Kafka's answers for a Dead group, and the next request finds the group missing.
//!
//! Offsets and group records are written through the node's [`Storage`] task; the actor answers
//! what depends on a write only once it is durable (see `actor`). At start-up the directory is
//! *loading* until [`Coordinator::load`] has rebuilt every stored group: meanwhile group
//! requests get COORDINATOR_LOAD_IN_PROGRESS (Heartbeat gets NONE, as in Kafka), so no group
//! is created over one that is still to be loaded.

mod actor;
mod clock;
mod core;
pub mod ownership;
mod registry;
pub mod status;

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use tokio::sync::{mpsc, oneshot};

pub use clock::Clock;

use crate::assignor::policy::AssignmentPolicy;
use crate::config::Config;
use crate::coordinator::status::GroupSnapshot;
use crate::group::consumer::{
    ConsumerGroupConfig, ConsumerGroupState, ConsumerHeartbeat, ConsumerHeartbeatReply, Refusal,
    TopicImage,
};
use crate::group::core::Kind;
use crate::group::share::ShareSettings;
use crate::group::streams::learner::LearnerSettings;
use crate::group::streams::{StreamsAssignor, StreamsGroupConfig};
use crate::group::{
    missing, ClassicGroup, GroupConfig, GroupError, GroupId, GroupState, Heartbeat, InstanceId,
    JoinGroup, JoinReply, LeaveGroup, LeaveOutcome, MemberId, OffsetCommitAuth, SyncGroup,
    SyncReply,
};
use crate::metadata::Topics;
use crate::metrics::GroupCount;
use crate::offsets::{
    self, FetchedOffset, MemoryOffsetStore, OffsetConfig, PartitionCommit, PendingOffsets,
    TopicPartition,
};
use crate::storage::{LoadedGroup, Storage};
use crate::vocab::codec::DecodeError;
use crate::vocab::IdHasher;
use crate::vocab::Timestamp;
use ownership::Ownership;

use self::core::Core;
use actor::{Command, Ctx, Envelope, NewGroup, Shard};
use registry::KindEntry;

/// What every group actor is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The group settings; `assignment` is set per group from `assignment`.
    pub group: GroupConfig,
    pub offsets: OffsetConfig,
    /// Who assigns each group (`group.assignor`, `group.assignment.overrides`).
    pub assignment: AssignmentPolicy,
    /// The settings of consumer groups (KIP-848).
    pub consumer: Arc<ConsumerGroupConfig>,
    /// The settings of streams groups (KIP-1071).
    pub streams: Arc<StreamsGroupConfig>,
    /// The broker's settings of share groups (KIP-932); a group's own configs go over them
    /// at each request.
    pub share: ShareSettings,
    /// The topics consumer groups subscribe to.
    pub image: Arc<dyn TopicImage + Send + Sync>,
    /// Which groups this node serves (all of them outside a cluster).
    pub ownership: Arc<Ownership>,
}

impl Settings {
    /// `topics` gives server assignors the partition counts of subscribed topics.
    pub fn from_config(c: &Config, topics: Arc<Topics>) -> Settings {
        let registry = c.assignors();
        Settings {
            consumer: Arc::new(ConsumerGroupConfig {
                heartbeat_interval_ms: c.group_consumer_heartbeat_interval_ms,
                session_timeout_ms: c.group_consumer_session_timeout_ms,
                max_size: c.group_consumer_max_size,
                assignors: c
                    .group_consumer_assignors
                    .iter()
                    .filter_map(|n| registry.get(n))
                    .collect(),
                migration: c.group_consumer_migration_policy,
                classic_max_size: c.group_max_size,
            }),
            streams: Arc::new(StreamsGroupConfig {
                heartbeat_interval_ms: c.group_streams_heartbeat_interval_ms,
                waiting_heartbeat_interval_ms: c.group_streams_waiting_heartbeat_interval_ms,
                session_timeout_ms: c.group_streams_session_timeout_ms,
                max_size: c.group_streams_max_size,
                num_standby_replicas: c.group_streams_num_standby_replicas,
                initial_rebalance_delay_ms: c.group_streams_initial_rebalance_delay_ms,
                assignor: if c.group_streams_assignor == "sticky" {
                    StreamsAssignor::Sticky
                } else {
                    StreamsAssignor::Learner(LearnerSettings {
                        max_learners: c.learner.max_learners,
                        acceptable_recovery_lag: c.learner.acceptable_recovery_lag,
                    })
                },
                ..StreamsGroupConfig::default()
            }),
            share: ShareSettings {
                session_timeout_ms: u64::try_from(c.group_share_session_timeout_ms).unwrap_or(0),
                heartbeat_interval_ms: c.group_share_heartbeat_interval_ms,
                max_size: c.group_share_max_size,
                partition: crate::group::share::partition::PartitionConfig {
                    lock_duration_ms: u64::try_from(c.group_share_record_lock_duration_ms)
                        .unwrap_or(0),
                    delivery_count_limit: u16::try_from(c.group_share_delivery_count_limit)
                        .unwrap_or(u16::MAX),
                    max_in_flight: u32::try_from(c.group_share_partition_max_record_locks)
                        .unwrap_or(0),
                    dead_letter: false,
                },
                ..ShareSettings::default()
            },
            image: topics.clone(),
            ownership: Arc::new(Ownership::single()),
            assignment: AssignmentPolicy::new(
                &c.group_assignor,
                &c.group_assignment_overrides,
                registry,
                topics,
            )
            .with_protocols(&c.group_assignment_protocols),
            group: GroupConfig {
                max_size: c.group_max_size,
                initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
                assignment_fallback_rejoins: c.group_assignment_fallback_rejoins,
                rebalance_storm_per_minute: c.group_rebalance_storm_per_minute,
                ..GroupConfig::default()
            },
            offsets: OffsetConfig {
                metadata_max_bytes: c.offset_metadata_max_bytes,
                retention_ms: c.offsets_retention_minutes.saturating_mul(60_000),
                retention_check_interval_ms: c.offsets_retention_check_interval_ms,
                ..OffsetConfig::default()
            },
        }
    }
}

impl Settings {
    /// The core's settings for one group, with its assignment mode. The shards sleep until the
    /// earliest deadline and mirror no timer, so the core reports no timer changes.
    pub fn group_config(&self, id: &GroupId) -> GroupConfig {
        GroupConfig {
            assignment: self.assignment.mode_for(id),
            timer_outputs: false,
            ..self.group.clone()
        }
    }
}

/// A group's state as ListGroups shows it: its kind's name (ListGroups v5's `GroupType`) and
/// its state in Kafka's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedState {
    group_type: &'static str,
    state: &'static str,
    dead: bool,
}

impl ListedState {
    /// Kafka's spelling of the state.
    pub fn as_str(self) -> &'static str {
        self.state
    }

    /// ListGroups v5's `GroupType`.
    pub fn group_type(self) -> &'static str {
        self.group_type
    }

    pub fn is_dead(self) -> bool {
        self.dead
    }

    /// A classic group's listed state (tests).
    #[cfg(test)]
    fn classic(state: GroupState) -> ListedState {
        ListedState {
            group_type: crate::group::classic::codec::KIND.name,
            state: state.as_str(),
            dead: state == GroupState::Dead,
        }
    }
}

/// ListGroups' view of a group, kept current by its actor so listing never waits on actors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: GroupId,
    pub state: ListedState,
    /// Empty for a simple group (created by an offset commit).
    pub protocol_type: String,
    /// Members (for metrics; ListGroups does not show it).
    pub members: usize,
}

/// One member in a DescribeGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub client_id: String,
    pub client_host: String,
    /// The member's metadata for the group's protocol; empty unless the group is Stable.
    pub metadata: Bytes,
    /// The assignment the member last received (shown in every state, as Kafka does).
    pub assignment: Bytes,
}

/// A DescribeGroups answer for an existing group (Kafka's `ClassicGroup.describe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol while Stable; empty otherwise.
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// An OffsetCommit that passed `api/` checks, in domain terms.
#[derive(Debug, Clone)]
pub struct OffsetCommit {
    pub auth: OffsetCommitAuth,
    pub partitions: Vec<PartitionCommit>,
    /// v2-4 `RetentionTimeMs`; -1 otherwise.
    pub retention_time_ms: i64,
    /// v9+: a commit naming a generation of a missing group is GROUP_ID_NOT_FOUND (before:
    /// ILLEGAL_GENERATION).
    pub group_id_not_found_supported: bool,
    /// The request's version: consumer-group members must commit with v9+.
    pub api_version: i16,
}

/// A TxnOffsetCommit that passed `api/` checks (the producer is in a transaction that
/// includes the group).
#[derive(Debug, Clone)]
pub struct TxnOffsetCommit {
    /// The committer (v3+: member, instance and generation; before: none, generation -1).
    pub auth: OffsetCommitAuth,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<PartitionCommit>,
    pub api_version: i16,
    /// Gateway mode: the group checks only, nothing kept pending here (the offsets go into
    /// the producer's upstream transaction; upstream keeps them pending until its marker).
    pub validate_only: bool,
}

/// A transaction that committed offsets to a group ended: its marker for the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

/// Per-partition results of a commit or an offset delete, in request order.
pub type PartitionResults = Vec<(TopicPartition, Option<GroupError>)>;

/// A group's directory entry. Its commands go to the shard its id hashes to.
struct Handle {
    listing: Arc<Mutex<GroupListing>>,
    /// Notified when records of a share group became available again (released, their locks
    /// expired, their member gone): a ShareFetch waiting for records wakes for them.
    available: Arc<tokio::sync::Notify>,
}

/// The group directory: every group by id (ids are client-chosen, so the hasher is seeded).
type Directory = DashMap<GroupId, Handle, IdHasher>;

/// How a request that may create its group creates it.
#[derive(Clone, Copy)]
enum Create {
    /// A new, Empty group of a kind (a JoinGroup without a member id: classic; a modern
    /// kind's heartbeat at epoch 0: its own).
    Kind(&'static KindEntry),
    /// A simple group (OffsetCommit outside group management): no protocol type.
    Simple,
}

/// Why [`Coordinator::with_kind`] did not run on the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindRefusal {
    /// No group has the id (and the call creates none).
    Missing,
    /// The group is of another kind (one with members keeps its kind).
    OtherKind,
    /// The group is not served here now (loading, another node's, shut down), or the write
    /// the answer depends on failed.
    Error(GroupError),
}

impl From<GroupError> for KindRefusal {
    fn from(e: GroupError) -> KindRefusal {
        KindRefusal::Error(e)
    }
}

/// The group directory. Cheap to share (`Arc`); every method can be called from any task.
pub struct Coordinator {
    groups: Arc<Directory>,
    settings: Arc<Settings>,
    clock: Clock,
    storage: Storage,
    /// Set until [`Coordinator::load`] has rebuilt the stored groups.
    loading: AtomicBool,
    /// The shards' queues; a group's shard is `shard_hasher(id) % shards.len()`.
    shards: Vec<mpsc::UnboundedSender<Envelope>>,
    shard_hasher: IdHasher,
    /// The shard tasks, until the first command spawns them (a directory may be built
    /// outside the runtime).
    unstarted: Mutex<Vec<Shard>>,
    started: Once,
    /// Where the share groups' records for their dead-letter queues go, until the shell takes
    /// it ([`Coordinator::take_dead_letters`]).
    dead_letters: Mutex<Option<mpsc::UnboundedReceiver<DeadLetterJob>>>,
}

/// A share group's records for its dead-letter queue (KIP-1191): the shell writes them, then
/// reports each range with [`crate::group::share::ShareGroup::dead_lettered`].
#[derive(Debug, Clone)]
pub struct DeadLetterJob {
    pub group: GroupId,
    pub letters: crate::group::share::DeadLetters,
}

/// A heartbeat [`Coordinator::submit_heartbeat`] took: answered already, or queued with its
/// group.
#[derive(Debug)]
pub enum HeartbeatSent {
    Answered(Result<(), GroupError>),
    Queued(oneshot::Receiver<Result<(), GroupError>>),
}

impl HeartbeatSent {
    /// The group's answer.
    pub async fn answer(self) -> Result<(), GroupError> {
        match self {
            HeartbeatSent::Answered(result) => result,
            HeartbeatSent::Queued(rx) => {
                Coordinator::answer(rx, || Err(GroupError::CoordinatorNotAvailable)).await
            }
        }
    }
}

/// How many shard tasks own the groups: a few per CPU, so that groups on different shards
/// are served in parallel and a busy group delays few others.
fn shard_count() -> usize {
    let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
    (cpus * 8).clamp(8, 256)
}

impl Coordinator {
    /// A directory with no groups. Must be called inside a tokio runtime if
    /// [`Coordinator::spawn_retention`] is to be used.
    /// Writes go to an in-memory store (tests).
    pub fn new(settings: Settings, clock: Clock) -> Arc<Coordinator> {
        Coordinator::with_storage(settings, clock, Storage::memory(), false)
    }

    /// The share groups' dead-letter records, for the one task that writes them (`None` once
    /// taken). Until it is taken they wait; a directory whose shell never takes it has no
    /// group with a dead-letter queue to serve.
    pub fn take_dead_letters(&self) -> Option<mpsc::UnboundedReceiver<DeadLetterJob>> {
        self.dead_letters.lock().ok()?.take()
    }

    /// A directory writing through `storage`; with `loading`, group requests are answered
    /// COORDINATOR_LOAD_IN_PROGRESS until [`Coordinator::load`] ran.
    pub fn with_storage(
        settings: Settings,
        clock: Clock,
        storage: Storage,
        loading: bool,
    ) -> Arc<Coordinator> {
        if loading {
            crate::metrics::metrics().set_store_loading(true);
        }
        let groups = Arc::new(Directory::default());
        let settings = Arc::new(settings);
        let (dead_letters, dead_letters_rx) = mpsc::unbounded_channel();
        let (shards, unstarted) = (0..shard_count())
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                let ctx = Ctx {
                    settings: settings.clone(),
                    clock: clock.clone(),
                    storage: storage.clone(),
                    directory: groups.clone(),
                    tx: tx.downgrade(),
                    dead_letters: dead_letters.clone(),
                };
                (tx, Shard::new(rx, ctx))
            })
            .unzip();
        Arc::new(Coordinator {
            groups,
            settings,
            clock,
            storage,
            loading: AtomicBool::new(loading),
            shards,
            shard_hasher: IdHasher::default(),
            unstarted: Mutex::new(unstarted),
            started: Once::new(),
            dead_letters: Mutex::new(Some(dead_letters_rx)),
        })
    }

    /// Rebuilds the stored groups (Kafka's coordinator load): a group with members comes back
    /// Stable in its generation with every member's session starting now; offsets come back
    /// with it. Then the directory serves requests. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A group's record does not decode: nothing is loaded, and the directory keeps loading.
    pub fn load(&self, groups: Vec<LoadedGroup>) -> Result<(), DecodeError> {
        let (count, offsets, pending) = self.insert_loaded(groups)?;
        self.loading.store(false, Ordering::Release);
        crate::metrics::metrics().set_store_loading(false);
        tracing::info!(
            groups = count,
            offsets,
            pending_transactional_offsets = pending,
            "groups loaded"
        );
        Ok(())
    }

    /// Adds loaded groups (cluster mode: those of a shard this node gained) to a directory
    /// that already serves others. A group already here keeps its state (cannot happen: its
    /// shard was not this node's). Returns how many groups were added.
    ///
    /// # Errors
    /// A group's record does not decode: none of `groups` is added.
    pub fn load_more(&self, groups: Vec<LoadedGroup>) -> Result<usize, DecodeError> {
        let groups = groups
            .into_iter()
            .filter(|g| !self.groups.contains_key(&g.id))
            .collect();
        Ok(self.insert_loaded(groups)?.0)
    }

    /// Spawns an actor for each loaded group, once every one has been rebuilt: (groups,
    /// offsets, pending offsets) counts.
    fn insert_loaded(
        &self,
        groups: Vec<LoadedGroup>,
    ) -> Result<(usize, usize, usize), DecodeError> {
        let now = self.clock.now();
        let cores = groups
            .iter()
            .map(|g| {
                registry::restore(&g.id, &self.settings, &g.records, now)
                    .map_err(|e| DecodeError(format!("group {}: {e}", g.id)))
            })
            .collect::<Result<Vec<Core>, DecodeError>>()?;
        let (mut count, mut offsets, mut pending) = (0usize, 0usize, 0usize);
        for (loaded, group) in groups.into_iter().zip(cores) {
            offsets += loaded.offsets.len();
            pending += loaded.pending.len();
            let store = MemoryOffsetStore::from_group(&loaded.id, loaded.offsets);
            let handle =
                self.spawn_actor(group, store, PendingOffsets::from_stored(loaded.pending));
            self.groups.insert(loaded.id, handle);
            count += 1;
        }
        Ok((count, offsets, pending))
    }

    /// Whether the stored groups are still being loaded.
    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    /// Whether this node serves group `id` now: COORDINATOR_LOAD_IN_PROGRESS while the store
    /// (or, in a cluster, the group's shard) loads, NOT_COORDINATOR when another node of the
    /// cluster serves it ([`Ownership::admit`]).
    ///
    /// # Errors
    /// Those two.
    pub fn admit(&self, id: &GroupId) -> Result<(), GroupError> {
        if self.is_loading() {
            return Err(GroupError::CoordinatorLoadInProgress);
        }
        self.settings.ownership.admit(id.as_str(), self.clock.now())
    }

    /// Which node serves which group (one node outside a cluster).
    pub fn ownership(&self) -> &Arc<Ownership> {
        &self.settings.ownership
    }

    /// Drops every group of `shards` (cluster mode: they are no longer this node's). Each
    /// leaves the directory first, so no command reaches it after its unload; its parked
    /// JoinGroup and SyncGroup replies are answered NOT_COORDINATOR and it is gone from memory.
    /// Returns how many groups were dropped.
    pub fn unload(&self, shards: &[i32]) -> usize {
        let ownership = &self.settings.ownership;
        let ids: Vec<GroupId> = self
            .groups
            .iter()
            .filter(|e| shards.contains(&ownership.shard_of(e.key().as_str())))
            .map(|e| e.key().clone())
            .collect();
        let mut n = 0;
        for id in ids {
            if self.groups.remove(&id).is_some() {
                let _ = self.shard(&id).send(Envelope {
                    group: id,
                    cmd: Command::Unload,
                });
                n += 1;
            }
        }
        n
    }

    /// The storage task every actor writes through.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Starts the periodic offset-retention pass (`offsets.retention.check.interval.ms`). The
    /// task stops when the coordinator is dropped.
    pub fn spawn_retention(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let every = Duration::from_millis(self.settings.offsets.retention_check_interval_ms);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(coordinator) = weak.upgrade() else {
                    return;
                };
                coordinator.expire_offsets();
            }
        });
    }

    /// Asks every group to drop its expired offsets now (and to delete itself if it is Empty
    /// with no offsets left).
    pub fn expire_offsets(&self) {
        for entry in self.groups.iter() {
            let _ = self.shard(entry.key()).send(Envelope {
                group: entry.key().clone(),
                cmd: Command::ExpireOffsets,
            });
        }
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    fn spawn(&self, id: &GroupId, create: Create) -> Handle {
        let now = self.clock.now();
        let group = match create {
            Create::Kind(entry) => (entry.create)(id, &self.settings, now),
            Create::Simple => {
                let config = self.settings.group_config(id);
                Core::new(ClassicGroup::new_simple(id.clone(), config, now))
            }
        };
        tracing::debug!(group = %id, kind = group.listed_state().group_type(), "group created");
        self.spawn_actor(
            group,
            MemoryOffsetStore::default(),
            PendingOffsets::default(),
        )
    }

    /// Hands a new group to its shard. The caller inserts the returned entry in the directory
    /// (the group's first command can only follow that).
    fn spawn_actor(
        &self,
        group: Core,
        offsets: MemoryOffsetStore,
        pending_offsets: PendingOffsets,
    ) -> Handle {
        let listing = Arc::new(Mutex::new(GroupListing {
            group_id: group.id().clone(),
            state: group.listed_state(),
            protocol_type: group.protocol_type().to_string(),
            members: group.num_members(),
        }));
        let available = Arc::new(tokio::sync::Notify::new());
        let id = group.id().clone();
        let _ = self.shard(&id).send(Envelope {
            group: id,
            cmd: Command::Create(Box::new(NewGroup {
                group,
                offsets,
                pending_offsets,
                listing: listing.clone(),
                available: available.clone(),
            })),
        });
        Handle { listing, available }
    }

    /// The queue of the shard that owns `id` (spawning the shards on first use).
    fn shard(&self, id: &GroupId) -> &mpsc::UnboundedSender<Envelope> {
        self.started.call_once(|| {
            let shards =
                std::mem::take(&mut *self.unstarted.lock().unwrap_or_else(|p| p.into_inner()));
            for shard in shards {
                tokio::spawn(shard.run());
            }
        });
        let n = self.shard_hasher.hash_one(id) as usize % self.shards.len();
        &self.shards[n]
    }

    /// Sends a command to the group's shard, creating the group when `create` says how and it
    /// does not exist. Returns the command back when the group does not exist (and was not
    /// created), so the caller can answer from what it carried.
    ///
    /// The command is queued while the directory entry is held, so a group that retires
    /// (leaving the directory first) has every command sent to it ahead of its retirement in
    /// the shard's queue, and answers them as a Dead group.
    #[allow(clippy::result_large_err)]
    fn send(&self, id: GroupId, create: Option<Create>, cmd: Command) -> Result<(), Command> {
        let shard = self.shard(&id);
        let queue = |id: GroupId, cmd: Command| {
            shard
                .send(Envelope { group: id, cmd })
                .map_err(|mpsc::error::SendError(env)| env.cmd)
        };
        // Checked again while the entry is held: a group whose shard was just given up has
        // left the directory (Coordinator::unload) or is refused here; never created again.
        let served = || {
            self.settings
                .ownership
                .admit(id.as_str(), self.clock.now())
                .is_ok()
        };
        if let Some(_entry) = self.groups.get(&id) {
            if !served() {
                // Dropping the reply sender answers COORDINATOR_NOT_AVAILABLE: find it again.
                return Ok(());
            }
            return queue(id.clone(), cmd);
        }
        let Some(how) = create else {
            return Err(cmd);
        };
        if !served() {
            return Ok(());
        }
        let _entry = self
            .groups
            .entry(id.clone())
            .or_insert_with(|| self.spawn(&id, how));
        queue(id, cmd)
    }

    /// Awaits an actor's answer. An actor that is gone without answering (it cannot panic on
    /// peer input; this covers shutdown) reads as COORDINATOR_NOT_AVAILABLE, which clients retry.
    async fn answer<T>(rx: oneshot::Receiver<T>, gone: impl FnOnce() -> T) -> T {
        rx.await.unwrap_or_else(|_| gone())
    }

    /// JoinGroup. Parks until the join phase completes.
    pub async fn join(&self, id: GroupId, req: JoinGroup) -> JoinReply {
        if let Err(e) = self.admit(&id) {
            return JoinReply::error(e, req.member_id);
        }
        let member = req.member_id.clone();
        let create = missing::join(&req)
            .is_none()
            .then_some(Create::Kind(&registry::CLASSIC));
        let (tx, rx) = oneshot::channel();
        match self.send(id, create, Command::Join(Box::new(req), tx)) {
            Ok(()) => {
                Self::answer(rx, || {
                    JoinReply::error(GroupError::CoordinatorNotAvailable, member)
                })
                .await
            }
            Err(Command::Join(req, _)) => missing::join(&req)
                .unwrap_or_else(|| JoinReply::error(GroupError::CoordinatorNotAvailable, member)),
            Err(_) => JoinReply::error(GroupError::CoordinatorNotAvailable, member),
        }
    }

    /// SyncGroup. Parks until the leader's assignment is installed.
    pub async fn sync(&self, id: GroupId, req: SyncGroup) -> SyncReply {
        if let Err(e) = self.admit(&id) {
            return SyncReply::error(e);
        }
        let (tx, rx) = oneshot::channel();
        match self.send(id, None, Command::Sync(Box::new(req), tx)) {
            Ok(()) => {
                Self::answer(rx, || SyncReply::error(GroupError::CoordinatorNotAvailable)).await
            }
            Err(_) => SyncReply::error(missing::sync_or_heartbeat()),
        }
    }

    pub async fn heartbeat(&self, id: GroupId, req: Heartbeat) -> Result<(), GroupError> {
        self.submit_heartbeat(id, req).answer().await
    }

    /// The first half of [`Self::heartbeat`]: queues the heartbeat with its group and returns
    /// at once, so that a connection can queue the heartbeats a client pipelined together and
    /// then await their answers in order (one wake-up of the connection for many heartbeats).
    pub fn submit_heartbeat(&self, id: GroupId, req: Heartbeat) -> HeartbeatSent {
        // Kafka answers NONE while loading (GroupCoordinatorService.heartbeat).
        match self.admit(&id) {
            Ok(()) => {}
            Err(GroupError::CoordinatorLoadInProgress) => return HeartbeatSent::Answered(Ok(())),
            Err(e) => return HeartbeatSent::Answered(Err(e)),
        }
        let (tx, rx) = oneshot::channel();
        match self.send(id, None, Command::Heartbeat(req, tx)) {
            Ok(()) => HeartbeatSent::Queued(rx),
            Err(_) => HeartbeatSent::Answered(Err(missing::sync_or_heartbeat())),
        }
    }

    pub async fn leave(&self, id: GroupId, req: LeaveGroup) -> LeaveOutcome {
        if let Err(e) = self.admit(&id) {
            return LeaveOutcome {
                error: Some(e),
                members: Vec::new(),
            };
        }
        let (tx, rx) = oneshot::channel();
        match self.send(id, None, Command::Leave(req, tx)) {
            Ok(()) => {
                Self::answer(rx, || LeaveOutcome {
                    error: Some(GroupError::CoordinatorNotAvailable),
                    members: Vec::new(),
                })
                .await
            }
            Err(Command::Leave(req, _)) => missing::leave(&req),
            Err(_) => LeaveOutcome {
                error: Some(GroupError::CoordinatorNotAvailable),
                members: Vec::new(),
            },
        }
    }

    /// OffsetCommit: `Err` is the error every partition gets; `Ok` has one result per partition.
    pub async fn commit_offsets(
        &self,
        id: GroupId,
        commit: OffsetCommit,
    ) -> Result<PartitionResults, GroupError> {
        self.admit(&id)?;
        let create = missing::offset_commit(&commit.auth, commit.group_id_not_found_supported)
            .is_ok()
            .then_some(Create::Simple);
        let (tx, rx) = oneshot::channel();
        match self.send(id, create, Command::Commit(Box::new(commit), tx)) {
            Ok(()) => Self::answer(rx, || Err(GroupError::CoordinatorNotAvailable)).await,
            Err(Command::Commit(c, _)) => {
                missing::offset_commit(&c.auth, c.group_id_not_found_supported)?;
                Err(GroupError::CoordinatorNotAvailable)
            }
            Err(_) => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// TxnOffsetCommit: `Err` is the error every partition gets; `Ok` has one result per
    /// partition. The offsets are pending until [`Coordinator::txn_marker`].
    pub async fn commit_txn_offsets(
        &self,
        id: GroupId,
        commit: TxnOffsetCommit,
    ) -> Result<PartitionResults, GroupError> {
        self.admit(&id)?;
        // A missing group: generation -1 creates a simple group, any other is
        // ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v6, KIP-1319), as Kafka's
        // validateTransactionalOffsetCommit.
        let not_found_supported = commit.api_version >= 6;
        let create = missing::offset_commit(&commit.auth, not_found_supported)
            .is_ok()
            .then_some(Create::Simple);
        let (tx, rx) = oneshot::channel();
        match self.send(id, create, Command::TxnCommit(Box::new(commit), tx)) {
            Ok(()) => Self::answer(rx, || Err(GroupError::CoordinatorNotAvailable)).await,
            Err(Command::TxnCommit(c, _)) => {
                missing::offset_commit(&c.auth, not_found_supported)?;
                Err(GroupError::CoordinatorNotAvailable)
            }
            Err(_) => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// A transaction that added the group ended: its pending offsets are committed or
    /// dropped, durably, before this returns. A group that does not exist has none.
    ///
    /// # Errors
    /// The write failed (NOT_COORDINATOR) or the group is gone mid-way.
    pub async fn txn_marker(&self, id: GroupId, marker: TxnMarker) -> Result<(), GroupError> {
        let (tx, rx) = oneshot::channel();
        match self.send(id, None, Command::TxnMarker(marker, tx)) {
            Ok(()) => Self::answer(rx, || Err(GroupError::CoordinatorNotAvailable)).await,
            Err(_) => Ok(()),
        }
    }

    /// OffsetFetch for one group. `partitions: None` asks for every committed offset. A missing
    /// or Dead group answers -1 for every requested partition (and nothing for "all").
    pub async fn fetch_offsets(
        &self,
        id: GroupId,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Vec<FetchedOffset> {
        self.fetch_offsets_as(id, None, partitions, false)
            .await
            .unwrap_or_default()
    }

    /// OffsetFetch for one group by a consumer-group member (v9+ `MemberId` and
    /// `MemberEpoch`; `None` for admin tools and classic members). `Err` is the group-level
    /// error (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). With `require_stable` a partition a
    /// transaction holds an offset for answers UNSTABLE_OFFSET_COMMIT.
    pub async fn fetch_offsets_as(
        &self,
        id: GroupId,
        member: Option<(MemberId, i32)>,
        partitions: Option<Vec<TopicPartition>>,
        require_stable: bool,
    ) -> Result<Vec<FetchedOffset>, GroupError> {
        let (tx, rx) = oneshot::channel();
        let missing_answer = |partitions: Option<Vec<TopicPartition>>| {
            offsets::fetch(
                &offsets::MemoryOffsetStore::default(),
                &GroupId::new(""),
                false,
                partitions.as_deref(),
            )
        };
        match self.send(
            id,
            None,
            Command::Fetch(member, partitions, require_stable, tx),
        ) {
            Ok(()) => Self::answer(rx, || Ok(Vec::new())).await,
            Err(Command::Fetch(_, partitions, _, _)) => Ok(missing_answer(partitions)),
            Err(_) => Ok(Vec::new()),
        }
    }

    /// OffsetDelete: `Err` is the top-level error; `Ok` has one result per partition.
    pub async fn delete_offsets(
        &self,
        id: GroupId,
        partitions: Vec<TopicPartition>,
    ) -> Result<PartitionResults, GroupError> {
        self.admit(&id)?;
        let (tx, rx) = oneshot::channel();
        match self.send(id, None, Command::DeleteOffsets(partitions, tx)) {
            Ok(()) => Self::answer(rx, || Err(GroupError::CoordinatorNotAvailable)).await,
            Err(_) => Err(GroupError::GroupIdNotFound),
        }
    }

    /// A topic was deleted (DeleteTopics): every group here forgets it, each once durable:
    /// its committed offsets of the topic, whatever the group's state (Kafka 4.4's
    /// `onTopicsDeleted`), the transactional offsets pending for it, and a share group's
    /// share-partition states (its `maybeCleanupShareGroupState`). A group that cannot be
    /// reached now (another node's, loading) is left as it is.
    pub async fn topic_deleted(&self, topic: &crate::metadata::Topic) {
        let ids: Vec<GroupId> = self.groups.iter().map(|e| e.key().clone()).collect();
        let forgets = ids.into_iter().map(|id| async move {
            self.admit(&id).ok()?;
            let (tx, rx) = oneshot::channel();
            self.send(id, None, Command::ForgetTopic(topic.clone(), tx))
                .ok()?;
            rx.await.ok()
        });
        futures_util::future::join_all(forgets).await;
    }

    /// ConsumerGroupHeartbeat. A heartbeat at epoch 0 creates the group (or turns an Empty
    /// classic group into a consumer group); any other heartbeat for a group that does not
    /// exist is GROUP_ID_NOT_FOUND, as in Kafka.
    pub async fn consumer_heartbeat(
        &self,
        id: GroupId,
        req: ConsumerHeartbeat,
    ) -> Result<ConsumerHeartbeatReply, Refusal> {
        self.admit(&id)?;
        let create = (req.member_epoch == 0).then_some(Create::Kind(&registry::CONSUMER));
        let leaving = req.member_epoch < 0;
        let (tx, rx) = oneshot::channel();
        match self.send(
            id.clone(),
            create,
            Command::ConsumerHeartbeat(Box::new(req), tx),
        ) {
            Ok(()) => Self::answer(rx, || Err(GroupError::CoordinatorNotAvailable.into())).await,
            // Kafka's two wordings (a leave looks the group up differently).
            Err(_) if leaving => Err(Refusal::new(
                GroupError::GroupIdNotFound,
                format!("Group {id} not found."),
            )),
            Err(_) => Err(Refusal::new(
                GroupError::GroupIdNotFound,
                format!("Consumer group {id} not found."),
            )),
        }
    }

    /// A request of kind `K`'s own (its heartbeat, its description): `f` runs on the group as
    /// a `K` in its shard, with the topics and the time, and its answer goes out once the
    /// records `f` made the group write (and every write of the group's before them) are
    /// durable. With `create`, a missing group is created as a `K`, and an Empty group of
    /// another kind becomes one (keeping its offsets), as Kafka converts an empty group,
    /// where `K` [converts](Kind::CONVERTS).
    ///
    /// # Errors
    /// See [`KindRefusal`].
    pub async fn with_kind<K, R>(
        &self,
        id: GroupId,
        create: bool,
        f: impl FnOnce(&mut K, &dyn TopicImage, Timestamp) -> R + Send + 'static,
    ) -> Result<R, KindRefusal>
    where
        K: Kind,
        R: Send + 'static,
    {
        self.admit(&id)?;
        let entry = registry::entry(K::KIND).filter(|_| create);
        let (tx, rx) = oneshot::channel();
        let call: actor::KindCall = Box::new(move |actor, ctx| actor.run_as(ctx, entry, f, tx));
        match self.send(id, entry.map(Create::Kind), Command::Kind(call)) {
            Ok(()) => {
                Self::answer(rx, || {
                    Err(KindRefusal::Error(GroupError::CoordinatorNotAvailable))
                })
                .await
            }
            Err(_) => Err(KindRefusal::Missing),
        }
    }

    /// The settings of consumer groups.
    pub fn consumer_config(&self) -> Arc<ConsumerGroupConfig> {
        self.settings.consumer.clone()
    }

    /// The broker's share-group settings (a group's own configs go over them).
    pub fn share_settings(&self) -> &ShareSettings {
        &self.settings.share
    }

    /// What a ShareFetch waiting on share group `id` wakes for besides appends: records of the
    /// group available again (released, lock expired, their member gone). `None` when no group
    /// has the id.
    pub fn share_available(&self, id: &GroupId) -> Option<Arc<tokio::sync::Notify>> {
        self.groups.get(id).map(|h| h.available.clone())
    }

    /// ListGroups' view of one group, if it exists.
    pub fn listing(&self, id: &GroupId) -> Option<GroupListing> {
        self.groups
            .get(id)
            .map(|h| h.listing.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// DescribeGroups for one group; `None` when it does not exist.
    pub async fn describe(&self, id: GroupId) -> Option<GroupDescription> {
        let (tx, rx) = oneshot::channel();
        self.send(id, None, Command::Describe(tx)).ok()?;
        rx.await.ok().flatten()
    }

    /// What the status page shows of one group; `None` when it does not exist.
    pub async fn snapshot(&self, id: GroupId) -> Option<GroupSnapshot> {
        let (tx, rx) = oneshot::channel();
        self.send(id, None, Command::Snapshot(tx)).ok()?;
        rx.await.ok().flatten()
    }

    /// [`Coordinator::snapshot`] of every group, sorted by id.
    pub async fn snapshots(&self) -> Vec<GroupSnapshot> {
        let mut out = Vec::new();
        for id in self.group_ids() {
            if let Some(s) = self.snapshot(id).await {
                out.push(s);
            }
        }
        out
    }

    /// Groups and members by kind and state, for `/metrics`.
    pub fn group_counts(&self) -> Vec<GroupCount> {
        let mut counts: std::collections::BTreeMap<(&'static str, String), (i64, i64)> =
            std::collections::BTreeMap::new();
        // Every state of the classic kind is exported, zero or not.
        for state in [
            GroupState::Empty,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Stable,
        ] {
            counts.insert(("classic", state.to_string()), (0, 0));
        }
        for state in [
            ConsumerGroupState::Empty,
            ConsumerGroupState::Assigning,
            ConsumerGroupState::Reconciling,
            ConsumerGroupState::Stable,
        ] {
            counts.insert(("consumer", state.as_str().to_string()), (0, 0));
        }
        for l in self.list() {
            let kind = l.state.group_type();
            let c = counts
                .entry((kind, l.state.as_str().to_string()))
                .or_default();
            c.0 += 1;
            c.1 += l.members as i64;
        }
        counts
            .into_iter()
            .map(|((kind, state), (groups, members))| GroupCount {
                kind,
                state,
                groups,
                members,
            })
            .collect()
    }

    /// DeleteGroups for one group: GROUP_ID_NOT_FOUND when missing or Dead, NON_EMPTY_GROUP
    /// unless Empty.
    pub async fn delete_group(&self, id: GroupId) -> Result<(), GroupError> {
        self.admit(&id)?;
        let (tx, rx) = oneshot::channel();
        match self.send(id, None, Command::Delete(tx)) {
            Ok(()) => Self::answer(rx, || Err(GroupError::GroupIdNotFound)).await,
            Err(_) => Err(GroupError::GroupIdNotFound),
        }
    }

    /// Every group that exists, with its state and protocol type (ListGroups), sorted by id.
    pub fn list(&self) -> Vec<GroupListing> {
        let mut out: Vec<GroupListing> = self
            .groups
            .iter()
            .map(|e| {
                e.value()
                    .listing
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            })
            .filter(|l| !l.state.is_dead())
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Group ids currently in the directory.
    pub fn group_ids(&self) -> BTreeSet<GroupId> {
        self.groups.iter().map(|e| e.key().clone()).collect()
    }
}

/// The group cores see topics through [`TopicImage`], which the pure layers define; the
/// broker's topic table is the image they get.
impl TopicImage for crate::metadata::Topics {
    fn version(&self) -> u64 {
        crate::metadata::Topics::version(self)
    }

    fn topic(&self, name: &str) -> Option<(crate::vocab::TopicId, u32)> {
        let (id, partitions) = self.id_and_partitions(name)?;
        Some((id, u32::try_from(partitions).ok()?))
    }

    fn names(&self) -> Vec<String> {
        crate::metadata::Topics::names(self)
    }

    fn name_of(&self, id: crate::vocab::TopicId) -> Option<String> {
        crate::metadata::Topics::name_of(self, id)
    }
}

#[cfg(test)]
mod tests;
