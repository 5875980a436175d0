//! The state every API handler shares: configuration, cluster identity, topics, partition logs
//! (which also carry the appends' wake-ups for Fetch long-polls) and the producer id allocator.
//!
//! One `Arc<Broker>` is built at start-up and handed to every connection. Each part guards
//! itself (see each module); no lock is held across an `.await`.

use std::io;
use std::path::Path;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::backend::{Backend, Local, Standalone};
use crate::config::Config;
use crate::coordinator::ownership::Ownership;
use crate::coordinator::{Clock, Coordinator, Settings};
use crate::log::Logs;
use crate::metadata::group_config::{GroupConfigMap, GroupConfigs};
use crate::metadata::topic_config::{LogSettings, TopicConfigs};
use crate::metadata::{CreateError, Topic, Topics};
use crate::offsets_topic::{self, OffsetsTopic};
use crate::security::acl::AuthorizerSettings;
use crate::security::authorizer::Authorizer;
use crate::security::credentials::CredentialChange;
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::security::Credentials;
use crate::storage::{EmbeddedStore, Mutation, Router, Storage, Store, StoreError, Tap};
use crate::transactions::Transactions;

/// Iterations of the bootstrap admin's credentials (Kafka's default for kafka-configs).
const ADMIN_ITERATIONS: u32 = 8192;

/// Creates `sasl.admin.user` (both SCRAM mechanisms) when the store has no credential for it,
/// durably, before anything is served.
fn bootstrap_admin(
    config: &Config,
    store: &dyn Store,
    credentials: &Credentials,
) -> io::Result<()> {
    let user = &config.sasl_admin_user;
    if user.is_empty() || credentials.describe(user).is_some() {
        return Ok(());
    }
    let changes: Vec<CredentialChange> = [ScramMechanism::Sha256, ScramMechanism::Sha512]
        .into_iter()
        .map(|mechanism| CredentialChange::Put {
            user: user.clone(),
            mechanism,
            credential: ScramCredential::from_password(
                mechanism,
                &config.sasl_admin_password,
                ADMIN_ITERATIONS,
            ),
        })
        .collect();
    let batch: Vec<Mutation> = changes.iter().cloned().map(Mutation::Credential).collect();
    store.apply(&batch, true).map_err(io::Error::other)?;
    credentials.apply(&changes);
    tracing::info!(user = %user, "created the SASL admin user (sasl.admin.user)");
    Ok(())
}

/// File under the data dir that keeps the generated cluster id.
const CLUSTER_ID_FILE: &str = "cluster.id";

pub struct Broker {
    pub config: Config,
    /// Reported by Metadata (v2+) and DescribeCluster.
    pub cluster_id: String,
    pub topics: Arc<Topics>,
    /// Every group's configs (GROUP config resources) and the broker-level defaults: what a
    /// group kind reads with `group_configs.get(group_id)`.
    pub group_configs: Arc<GroupConfigs>,
    /// `host`, `port` clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Every partition's in-memory log, applying its topic's configs (retention, compaction).
    pub logs: Arc<Logs>,
    /// Standalone: `__consumer_offsets`, written from the store's writes (the storage lane's
    /// tap) and seeded with the stored groups when they load.
    offsets_topic: Option<Arc<OffsetsTopic>>,
    /// Producer ids handed out by InitProducerId.
    pub producer_ids: ProducerIds,
    /// The group directory: every consumer group and its offsets.
    pub coordinator: Arc<Coordinator>,
    /// The SCRAM users (SASL authentication), as stored.
    pub credentials: Arc<Credentials>,
    /// The transaction coordinator: every transactional id's state.
    pub txns: Transactions,
    /// The ACLs and whether they are enforced (`authorizer.class.name`).
    pub authorizer: Authorizer,
    /// The client quotas set (AlterClientQuotas) and the usage measured against them.
    pub quotas: crate::quota::Quotas,
    /// The metrics clients push (KIP-714).
    pub telemetry: crate::telemetry::Telemetry,
    /// The durable store (read at start-up; written through `storage`): the embedded one under
    /// the data dir, or in gateway mode the upstream cluster with the embedded one beside it.
    store: Arc<dyn Store>,
    /// What lies behind koord's own groups ([`Backend`]): nothing standalone, the upstream
    /// cluster in gateway mode.
    pub backend: Arc<dyn Backend>,
    /// The node's storage task: every durable write goes through it.
    pub storage: Storage,
    /// Held by each change of a topic's stored record (create, configs, partitions, delete)
    /// from reading the topic to applying the change: each writes the whole record, so two at
    /// once could store a stale count or stale configs last.
    topic_writes: tokio::sync::Mutex<()>,
    /// Held by each change of a group's configs from reading them to applying the change
    /// (IncrementalAlterConfigs computes the new set from the current one).
    group_config_writes: tokio::sync::Mutex<()>,
}

/// The right to change topic records, from [`Broker::topic_writes`]: whatever was read about
/// topics while it is held is still true when the change is applied.
pub struct TopicWrites<'a> {
    _guard: tokio::sync::MutexGuard<'a, ()>,
}

/// How many producer ids one reservation covers.
const PRODUCER_ID_BLOCK: i64 = 1000;

/// Producer ids handed out from blocks reserved ahead (PURE): an id is handed out only from a
/// block whose end the store already holds, so a restarted node, which starts at the stored
/// end, never hands out an id again (Kafka's producer id blocks). The next block is reserved
/// once half of the current one is gone; if it is not stored by the time the current one runs
/// out, no id is handed out (the client is told COORDINATOR_LOAD_IN_PROGRESS and retries, as
/// Kafka answers while its next block is on its way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdBlocks {
    next: i64,
    /// The end of the block ids come from.
    end: i64,
    /// The end of the next block, once stored.
    ready: Option<i64>,
    /// The next block's reservation is on its way to the store.
    reserving: bool,
}

impl IdBlocks {
    /// Ids from `next` up to `end`, which the store holds.
    pub fn new(next: i64, end: i64) -> IdBlocks {
        IdBlocks {
            next,
            end,
            ready: None,
            reserving: false,
        }
    }

    /// An id (`None` while no stored block has one left) and, when the next block is due, the
    /// end to store for it (then [`IdBlocks::reserved`] or [`IdBlocks::not_reserved`]).
    pub fn allocate(&mut self) -> (Option<i64>, Option<i64>) {
        if self.next >= self.end {
            if let Some(end) = self.ready.take() {
                self.end = end;
            }
        }
        let id = (self.next < self.end).then(|| {
            self.next += 1;
            self.next - 1
        });
        let due = self.ready.is_none()
            && !self.reserving
            && self.end.saturating_sub(self.next) <= PRODUCER_ID_BLOCK / 2;
        let reserve = due.then(|| {
            self.reserving = true;
            self.end.saturating_add(PRODUCER_ID_BLOCK)
        });
        (id, reserve)
    }

    /// The block up to `end` is stored.
    pub fn reserved(&mut self, end: i64) {
        self.reserving = false;
        self.ready = Some(end);
    }

    /// Its store write failed: the next allocation asks again.
    pub fn not_reserved(&mut self) {
        self.reserving = false;
    }
}

/// Allocates producer ids ([`IdBlocks`]), storing each block's end before its ids go out.
pub struct ProducerIds {
    blocks: Arc<std::sync::Mutex<IdBlocks>>,
    storage: Storage,
}

impl std::fmt::Debug for ProducerIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerIds")
            .field("blocks", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl ProducerIds {
    /// Reserves the first block in `store` (at its stored end; a store without one, written
    /// by a koord that counted from the wall clock, starts at the clock once) and hands ids
    /// out of it, storing the next ones through `storage`.
    ///
    /// # Errors
    /// The store cannot be read or written.
    pub fn open(store: &dyn Store, storage: Storage) -> Result<ProducerIds, StoreError> {
        let start = match store.load_producer_ids_end()? {
            Some(end) => end,
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0)),
        };
        let end = start.saturating_add(PRODUCER_ID_BLOCK);
        store.apply(&[Mutation::ReserveProducerIds { end }], true)?;
        Ok(ProducerIds {
            blocks: Arc::new(std::sync::Mutex::new(IdBlocks::new(start, end))),
            storage,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IdBlocks> {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A producer id never handed out before; `None` while the next block is being stored.
    pub fn allocate(&self) -> Option<i64> {
        let (id, reserve) = self.lock().allocate();
        if let Some(end) = reserve {
            let blocks = self.blocks.clone();
            let storage = self.storage.clone();
            let stored = async move {
                let written = storage
                    .write(vec![Mutation::ReserveProducerIds { end }])
                    .await;
                let mut b = blocks.lock().unwrap_or_else(|e| e.into_inner());
                match written {
                    Ok(()) => b.reserved(end),
                    Err(e) => {
                        tracing::warn!(error = %e, "producer id block not stored");
                        b.not_reserved();
                    }
                }
            };
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(stored)),
                Err(_) => self.lock().not_reserved(),
            }
        }
        id
    }
}

impl Broker {
    /// [`Broker::open`], then [`Broker::load_groups_blocking`]: every stored group is served at
    /// once. Spawns the groups' actors, so it must run in a tokio runtime unless the store has
    /// no groups.
    ///
    /// # Errors
    /// As [`Broker::open`] and [`Broker::load_groups_blocking`].
    pub fn new(config: Config) -> io::Result<Broker> {
        let broker = Broker::open(config)?;
        broker.load_groups_blocking().map_err(io::Error::other)?;
        Ok(broker)
    }

    /// Builds the node's state: creates the data dir if needed, settles the cluster id, opens
    /// the store, creates the stored and the configured topics, and starts the storage task.
    /// Groups are not loaded yet: group requests get COORDINATOR_LOAD_IN_PROGRESS until
    /// [`Broker::load_groups`].
    ///
    /// # Errors
    /// The data dir cannot be created, its cluster id file cannot be read or written, or the
    /// store is damaged (the message names the file and what is wrong).
    pub fn open(config: Config) -> io::Result<Broker> {
        let store = Arc::new(
            EmbeddedStore::open(&Self::prepare_data_dir(&config)?).map_err(io::Error::other)?,
        );
        Broker::assemble(
            config,
            store,
            Arc::new(Standalone),
            None,
            Arc::new(Ownership::single()),
        )
    }

    /// Creates the data dir if needed and returns it.
    pub fn prepare_data_dir(config: &Config) -> io::Result<std::path::PathBuf> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create data dir {}: {e}", config.data_dir.display()),
            )
        })?;
        Ok(config.data_dir.clone())
    }

    /// The node's state over `store` and `backend`: settles the cluster id, creates the
    /// stored and the configured topics, and starts the storage task (one lane, or `lanes`
    /// lanes the router picks from).
    pub fn assemble(
        config: Config,
        store: Arc<dyn Store>,
        backend: Arc<dyn Backend>,
        lanes: Option<(usize, Router)>,
        ownership: Arc<Ownership>,
    ) -> io::Result<Broker> {
        let cluster_id = if config.cluster_id.is_empty() {
            load_or_create_cluster_id(&config.data_dir)?
        } else {
            config.cluster_id.clone()
        };
        let topics = Arc::new(Topics::default());
        let logs = Arc::new(Logs::with_default(LogSettings::new(
            &TopicConfigs::new(),
            &config.topic_defaults(),
        )));
        for (topic, configs) in store.load_topics().map_err(io::Error::other)? {
            let name = topic.name.clone();
            let topic = topics
                .restore(topic)
                .map_err(|e| io::Error::other(format!("stored topic {name}: {e:?}")))?;
            if !configs.is_empty() {
                logs.configure(
                    topic.id,
                    LogSettings::new(&configs, &config.topic_defaults()),
                );
                topics.set_configs(&name, configs);
            }
        }
        let group_configs = Arc::new(GroupConfigs::new(config.group_defaults()));
        for (group, configs) in store.load_group_configs().map_err(io::Error::other)? {
            group_configs.set(&group, configs);
        }
        // A configured topic that is also stored keeps its stored id and partition count; one
        // that is not is created and stored before the node serves, so its id is the same
        // after a restart.
        let mut configured = Vec::new();
        for t in &config.topics {
            if topics.get(&t.name).is_some() {
                continue;
            }
            let topic = topics
                .create(&t.name, t.partitions)
                .map_err(|e| io::Error::other(format!("topic {}: {e:?}", t.name)))?;
            configured.push(Mutation::PutTopic {
                topic,
                configs: TopicConfigs::new(),
            });
        }
        // Standalone: Kafka's internal topics, koord's data plane serving them.
        let offsets_topic = if backend.keeps_logs() {
            None
        } else {
            let internal = [
                (
                    offsets_topic::NAME,
                    config.offsets_topic_num_partitions,
                    offsets_topic::configs(),
                ),
                (
                    offsets_topic::TRANSACTION_STATE,
                    config.transaction_state_log_num_partitions,
                    offsets_topic::transaction_state_configs(),
                ),
            ];
            for (name, partitions, configs) in internal {
                let topic = match topics.get(name) {
                    Some(topic) => topic,
                    None => {
                        let topic = topics
                            .create(name, partitions)
                            .map_err(|e| io::Error::other(format!("topic {name}: {e:?}")))?;
                        topics.set_configs(name, configs.clone());
                        configured.push(Mutation::PutTopic {
                            topic: topic.clone(),
                            configs,
                        });
                        topic
                    }
                };
                let settings = LogSettings::new(&topics.configs(name), &config.topic_defaults());
                logs.configure(topic.id, offsets_topic::log_settings(settings));
            }
            Some(Arc::new(OffsetsTopic::new(topics.clone(), logs.clone())))
        };
        if !configured.is_empty() {
            store.apply(&configured, true).map_err(io::Error::other)?;
        }
        let credentials = Arc::new(Credentials::new(
            store.load_credentials().map_err(io::Error::other)?,
        ));
        bootstrap_admin(&config, &*store, &credentials)?;
        let authorizer = if config.authorizer_class_name.is_empty() {
            Authorizer::disabled()
        } else {
            Authorizer::enabled(
                AuthorizerSettings {
                    super_users: config.super_users.clone(),
                    allow_if_no_acl: config.allow_everyone_if_no_acl_found,
                },
                store.load_acls().map_err(io::Error::other)?,
            )
        };
        let quotas = crate::quota::Quotas::new(
            store.load_client_quotas().map_err(io::Error::other)?,
            crate::quota::Window {
                samples: config.quota_window_num,
                window_ms: u64::from(config.quota_window_size_seconds) * 1000,
            },
        );
        let telemetry = crate::telemetry::Telemetry::new(crate::telemetry::Settings {
            metrics: config.telemetry_metrics.clone(),
            push_interval_ms: config.telemetry_push_interval_ms,
            max_bytes: config.telemetry_max_bytes,
        });
        let (advertised_host, advertised_port) = config.advertised();
        let storage = match lanes {
            Some((n, route)) => {
                Storage::start_lanes(store.clone(), config.offsets_commit_sync, n, route)
            }
            None => Storage::start_tapped(
                store.clone(),
                config.offsets_commit_sync,
                offsets_topic.clone().map(|t| t as Arc<dyn Tap>),
            ),
        };
        let mut settings = Settings {
            ownership,
            ..Settings::from_config(&config, topics.clone())
        };
        settings.offsets.kept_elsewhere = backend.keeps_offsets();
        settings.share.logs_kept = backend.keeps_logs();
        let coordinator =
            Coordinator::with_storage(settings, Clock::system(), storage.clone(), true);
        let txns = Transactions::new(config.transaction_max_timeout_ms, storage.clone());
        let producer_ids =
            ProducerIds::open(store.as_ref(), storage.clone()).map_err(io::Error::other)?;
        Ok(Broker {
            config,
            txns,
            authorizer,
            quotas,
            telemetry,
            cluster_id,
            topics,
            advertised_host,
            advertised_port,
            logs,
            offsets_topic,
            producer_ids,
            coordinator,
            credentials,
            store,
            storage,
            backend,
            topic_writes: tokio::sync::Mutex::new(()),
            group_config_writes: tokio::sync::Mutex::new(()),
            group_configs,
        })
    }

    /// Reads every stored group and its offsets and hands them to the coordinator, which then
    /// serves group requests. Both run on a blocking thread: rebuilding a million offsets takes
    /// the better part of a second, which must not hold a runtime worker (the listener already
    /// answers). The actors are spawned from there onto the runtime.
    ///
    /// # Errors
    /// The store is damaged ([`StoreError::Corrupt`] names the file and what is wrong).
    pub async fn load_groups(&self) -> Result<(), StoreError> {
        let store = self.store.clone();
        let coordinator = self.coordinator.clone();
        let started = std::time::Instant::now();
        // Cluster mode: a node loads the groups of the shards it is given, when it is. A store
        // whose groups are elsewhere (gateway mode) is read asynchronously first.
        let cluster = coordinator.ownership().is_cluster();
        let remote = match store.clone().as_async() {
            Some(remote) if !cluster => Some(remote.load_groups().await?),
            Some(_) => Some(Vec::new()),
            None => None,
        };
        let txns = tokio::task::spawn_blocking(move || -> Result<_, StoreError> {
            let groups = match remote {
                Some(groups) => groups,
                None if cluster => Vec::new(),
                None => store.load_groups()?,
            };
            coordinator.load(groups).map_err(|e| store.damaged(e))?;
            store.load_txns()
        })
        .await
        .map_err(|e| StoreError::Io(format!("loading groups: {e}")))??;
        self.txns.load(self, txns);
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "store loaded"
        );
        Ok(())
    }

    /// Whether koord keeps `__consumer_offsets` and has not written it yet: one atomic load.
    pub fn offsets_topic_cold(&self) -> bool {
        self.offsets_topic.as_ref().is_some_and(|t| !t.is_live())
    }

    /// Before a read of `__consumer_offsets` (ListOffsets, Fetch): standalone koord writes it
    /// from the first read on ([`OffsetsTopic::warm`]); returns once it shows every write
    /// applied so far. Nothing to do in gateway mode (upstream's own topic).
    pub async fn reading_offsets_topic(&self) {
        if let Some(topic) = &self.offsets_topic {
            topic.warm(&self.storage, &self.store).await;
        }
    }

    /// [`Broker::load_groups`] on the calling thread.
    ///
    /// # Errors
    /// As [`Broker::load_groups`].
    pub fn load_groups_blocking(&self) -> Result<(), StoreError> {
        let groups = self.store.load_groups()?;
        self.coordinator
            .load(groups)
            .map_err(|e| self.store.damaged(e))?;
        self.txns.load(self, self.store.load_txns()?);
        Ok(())
    }

    /// Creates a topic with `configs` (CreateTopics), applies them, and stores it; returns once
    /// the record is durable (the store error if it is not: the topic is served regardless).
    ///
    /// # Errors
    /// As [`Topics::create`].
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: TopicConfigs,
    ) -> Result<(Topic, Result<(), StoreError>), CreateError> {
        let _writes = self.topic_writes().await;
        let topic = self.topics.create(name, partitions)?;
        self.logs.configure(
            topic.id,
            LogSettings::new(&configs, &self.config.topic_defaults()),
        );
        self.topics.set_configs(name, configs.clone());
        let stored = self
            .storage
            .write(vec![Mutation::PutTopic {
                topic: topic.clone(),
                configs,
            }])
            .await;
        Ok((topic, stored))
    }

    /// Replaces a topic's explicitly set configs: stored first (durable when this returns Ok),
    /// then applied to its logs and described.
    ///
    /// # Errors
    /// The store's error; nothing changed then.
    pub async fn set_topic_configs(
        &self,
        topic: &Topic,
        configs: TopicConfigs,
    ) -> Result<(), StoreError> {
        let _writes = self.topic_writes().await;
        // The count as it is now: CreatePartitions may have raised it since `topic` was read.
        let partitions = self
            .topics
            .get(&topic.name)
            .map_or(topic.partitions, |t| t.partitions);
        self.storage
            .write(vec![Mutation::PutTopic {
                topic: Topic {
                    partitions,
                    ..topic.clone()
                },
                configs: configs.clone(),
            }])
            .await?;
        self.logs.configure(
            topic.id,
            LogSettings::new(&configs, &self.config.topic_defaults()),
        );
        self.topics.set_configs(&topic.name, configs);
        Ok(())
    }

    /// Changes group `group`'s configs: `change` gets the current ones and returns the new
    /// ones (or why not); they are stored first (durable when this returns Ok), then served.
    /// With `validate_only` nothing is stored.
    ///
    /// # Errors
    /// `change`'s error, or the store's (nothing changed then).
    pub async fn change_group_configs<E>(
        &self,
        group: &str,
        validate_only: bool,
        change: impl FnOnce(GroupConfigMap) -> Result<GroupConfigMap, E>,
        store_error: impl FnOnce(StoreError) -> E,
    ) -> Result<(), E> {
        let _writes = self.group_config_writes.lock().await;
        let configs = change(self.group_configs.configs(group))?;
        if validate_only {
            return Ok(());
        }
        self.storage
            .write(vec![Mutation::PutGroupConfigs {
                group: group.to_string(),
                configs: configs.clone(),
            }])
            .await
            .map_err(store_error)?;
        tracing::info!(group, ?configs, "group configs changed");
        self.group_configs.set(group, configs);
        Ok(())
    }

    /// Deletes a topic (DeleteTopics): its stored record goes first, durably, then the topic
    /// and its partition logs, then what groups kept of it (their committed offsets, share
    /// groups' states: [`Coordinator::topic_deleted`]), as Kafka 4.4 does. `Ok(None)`: no such
    /// topic (or a racing delete removed it first).
    ///
    /// # Errors
    /// The store could not delete the record; the topic is left as it was.
    pub async fn delete_topic(&self, name: &str) -> Result<Option<Topic>, StoreError> {
        let _writes = self.topic_writes().await;
        if self.topics.get(name).is_none() {
            return Ok(None);
        }
        self.storage
            .write(vec![Mutation::DeleteTopic {
                name: name.to_string(),
            }])
            .await?;
        let Some(topic) = self.topics.delete(name) else {
            return Ok(None);
        };
        self.logs.remove_topic(&topic);
        tracing::info!(topic = name, "deleted topic");
        self.coordinator.topic_deleted(&topic).await;
        Ok(Some(topic))
    }

    /// Stores SCRAM credential changes (AlterUserScramCredentials) and, once they are durable,
    /// serves them. The caller holds [`Credentials::writes`].
    ///
    /// # Errors
    /// The store's error; nothing changed then.
    pub async fn change_credentials(
        &self,
        changes: Vec<CredentialChange>,
    ) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        self.storage
            .write(changes.iter().cloned().map(Mutation::Credential).collect())
            .await?;
        self.credentials.apply(&changes);
        Ok(())
    }

    /// Stores client quota `changes` (each entity's new quotas), then enforces them.
    ///
    /// # Errors
    /// The store's error; nothing changed then.
    pub async fn change_client_quotas(
        &self,
        changes: Vec<(crate::quota::Entity, crate::quota::Values)>,
    ) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        self.storage
            .write(
                changes
                    .iter()
                    .map(|(entity, values)| Mutation::PutClientQuotas {
                        entity: entity.clone(),
                        values: values.clone(),
                    })
                    .collect(),
            )
            .await?;
        self.quotas.set(changes);
        Ok(())
    }

    /// Waits for the right to change topic records ([`TopicWrites`]).
    pub async fn topic_writes(&self) -> TopicWrites<'_> {
        TopicWrites {
            _guard: self.topic_writes.lock().await,
        }
    }

    /// Raises each `(topic, count)` of `grow` to `count` partitions (CreatePartitions): the new
    /// counts are stored first, in one write with each topic's configs, and served once that
    /// write is durable; the new partitions' logs start empty on first use. The caller read
    /// the topics and checked the counts while holding `_writes`.
    ///
    /// # Errors
    /// The store's error; no topic changed then.
    pub async fn add_partitions(
        &self,
        _writes: &TopicWrites<'_>,
        grow: &[(Topic, i32)],
    ) -> Result<(), StoreError> {
        let mutations = grow
            .iter()
            .map(|(topic, count)| Mutation::PutTopic {
                topic: Topic {
                    partitions: *count,
                    ..topic.clone()
                },
                configs: self.topics.configs(&topic.name),
            })
            .collect();
        self.storage.write(mutations).await?;
        for (topic, count) in grow {
            self.topics.add_partitions(&topic.name, *count);
            tracing::info!(
                topic = %topic.name,
                from = topic.partitions,
                to = count,
                "added partitions"
            );
        }
        Ok(())
    }

    /// What koord holds itself, as the [`Backend`] sees it.
    pub fn local(&self) -> Local<'_> {
        Local {
            coordinator: &self.coordinator,
            txns: &self.txns,
            storage: &self.storage,
            topics: self,
        }
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// Looks a topic up; creates it with `num.partitions` when `auto_create` is asked and
    /// `auto.create.topics.enable` allows it, and returns once it is stored (so that an id a
    /// client was told survives a crash).
    pub async fn topic_for_metadata(
        &self,
        name: &str,
        auto_create: bool,
    ) -> Result<Option<Topic>, CreateError> {
        if let Some(t) = self.topics.get(name) {
            return Ok(Some(t));
        }
        if !(auto_create && self.config.auto_create_topics_enable) {
            return Ok(None);
        }
        let partitions = self.config.num_partitions;
        let topic = match self
            .create_topic(name, partitions, TopicConfigs::new())
            .await
        {
            Ok((topic, stored)) => {
                if let Err(e) = stored {
                    tracing::error!(topic = name, "auto-created topic not stored: {e}");
                }
                topic
            }
            // A racing creator made it first (and stores it).
            Err(CreateError::AlreadyExists) => match self.topics.get(name) {
                Some(t) => t,
                None => return Err(CreateError::AlreadyExists),
            },
            Err(e) => return Err(e),
        };
        tracing::info!(
            topic = name,
            partitions = topic.partitions,
            "auto-created topic"
        );
        Ok(Some(topic))
    }
}

/// The transaction coordinator's view of the node: the group coordinator, producer ids, and
/// the partition logs its markers go into.
impl crate::backend::OwnTopics for Broker {
    fn create_own<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        configs: TopicConfigs,
    ) -> futures_util::future::BoxFuture<'a, crate::backend::OwnCreated> {
        Box::pin(self.create_topic(name, partitions, configs))
    }
}

impl crate::transactions::Host for Broker {
    fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    fn allocate_producer_id(&self) -> Option<i64> {
        self.producer_ids.allocate()
    }

    fn write_markers(&self, markers: &crate::txn::Markers) {
        for tp in &markers.partitions {
            let Some(topic) = self.topics.get(&tp.topic) else {
                continue;
            };
            let Some(partition) = self.logs.partition(&topic, tp.partition) else {
                continue;
            };
            if let Err(e) = partition.append_marker(
                markers.producer_id,
                markers.producer_epoch,
                markers.commit,
                crate::log::partition::COORDINATOR_EPOCH,
            ) {
                tracing::warn!(topic = %tp.topic, partition = tp.partition, "marker not written: {e}");
            }
        }
    }
}

/// Runs the coordinator's two periodic checks, as Kafka's scheduler does: timed-out
/// transactions every `transaction.abort.timed.out.transaction.cleanup.interval.ms`, expired
/// ids every `transaction.remove.expired.transaction.cleanup.interval.ms`. Ends when the broker
/// is dropped.
pub fn spawn_txn_timers(broker: &Arc<Broker>) {
    let weak = Arc::downgrade(broker);
    let abort_every = Duration::from_millis(broker.config.transaction_abort_check_interval_ms);
    let expire_every = Duration::from_millis(broker.config.transaction_expire_check_interval_ms);
    let expiration_ms = broker.config.transactional_id_expiration_ms;
    tokio::spawn(async move {
        let mut abort = tokio::time::interval(abort_every);
        let mut expire = tokio::time::interval(expire_every);
        abort.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        expire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        abort.tick().await;
        expire.tick().await;
        loop {
            tokio::select! {
                _ = abort.tick() => {
                    let Some(broker) = weak.upgrade() else { return };
                    broker.txns.abort_timed_out(broker.as_ref()).await;
                }
                _ = expire.tick() => {
                    let Some(broker) = weak.upgrade() else { return };
                    broker.txns.expire_ids(expiration_ms).await;
                }
            }
        }
    });
}

fn load_or_create_cluster_id(dir: &Path) -> io::Result<String> {
    let path = dir.join(CLUSTER_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is empty", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let id = base64url(uuid::Uuid::new_v4().as_bytes());
            let tmp = dir.join(format!("{CLUSTER_ID_FILE}.tmp"));
            std::fs::write(&tmp, format!("{id}\n"))?;
            std::fs::rename(&tmp, &path)?;
            Ok(id)
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// Kafka's cluster id format: URL-safe base64 of 16 random bytes, no padding (22 characters).
fn base64url(bytes: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    let mut acc = 0u32;
    let mut bits = 0;
    for &b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AlterConfigs holding a topic read before CreatePartitions raised it stores the raised
    /// count, not the one it read: the record is whole, so a stale count would win at restart.
    #[tokio::test]
    async fn a_configs_change_after_added_partitions_stores_the_new_count() {
        let dir = std::env::temp_dir().join(format!("koord-broker-grow-{}", uuid::Uuid::new_v4()));
        let config = Config {
            data_dir: dir.clone(),
            ..Config::default()
        };
        let broker = Broker::new(config).unwrap();
        let (read_before, stored) = broker
            .create_topic("g", 2, TopicConfigs::new())
            .await
            .unwrap();
        stored.unwrap();
        {
            let writes = broker.topic_writes().await;
            broker
                .add_partitions(&writes, &[(read_before.clone(), 5)])
                .await
                .unwrap();
        }
        let mut configs = TopicConfigs::new();
        configs.insert("retention.ms".into(), "1000".into());
        broker
            .set_topic_configs(&read_before, configs.clone())
            .await
            .unwrap();
        assert_eq!(broker.topics.get("g").map(|t| t.partitions), Some(5));
        let mut stored = broker.store.load_topics().unwrap();
        stored.retain(|(t, _)| !crate::metadata::is_internal(&t.name));
        let now = broker.topics.get("g").unwrap();
        assert_eq!(now.id, read_before.id);
        assert_eq!(stored, vec![(now, configs)]);
        drop(broker);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn cluster_id_is_22_url_safe_chars_and_kept() {
        let dir = std::env::temp_dir().join(format!("koord-broker-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = load_or_create_cluster_id(&dir).err();
        assert!(
            first.is_some(),
            "missing dir is an error here; Broker::new creates it"
        );
        std::fs::create_dir_all(&dir).unwrap();
        let id = load_or_create_cluster_id(&dir).unwrap();
        assert_eq!(id.len(), 22);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(load_or_create_cluster_id(&dir).unwrap(), id);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn id_blocks_hand_out_only_stored_ids_and_ask_for_the_next_block_at_half() {
        let mut b = IdBlocks::new(5, 5 + PRODUCER_ID_BLOCK);
        let half = PRODUCER_ID_BLOCK / 2;
        for i in 0..half - 1 {
            assert_eq!(b.allocate(), (Some(5 + i), None));
        }
        // Half gone: the next block's end is due, once.
        let end = 5 + 2 * PRODUCER_ID_BLOCK;
        assert_eq!(b.allocate(), (Some(5 + half - 1), Some(end)));
        for i in half..PRODUCER_ID_BLOCK {
            assert_eq!(b.allocate(), (Some(5 + i), None));
        }
        // The block is used up and the next one not stored yet: no id.
        assert_eq!(b.allocate(), (None, None));
        b.reserved(end);
        assert_eq!(b.allocate().0, Some(5 + PRODUCER_ID_BLOCK));
    }

    #[test]
    fn id_blocks_ask_again_after_a_failed_reservation() {
        let mut b = IdBlocks::new(0, 10);
        let (_, due) = b.allocate();
        assert_eq!(due, Some(10 + PRODUCER_ID_BLOCK));
        assert_eq!(b.allocate().1, None, "asked once while it is on its way");
        b.not_reserved();
        assert_eq!(b.allocate().1, Some(10 + PRODUCER_ID_BLOCK));
    }

    #[tokio::test]
    async fn producer_ids_never_repeat_across_restarts() {
        // One store across three runs, each with its own storage task, as a restarted node.
        let store: Arc<dyn Store> = Arc::new(crate::storage::MemoryStore::default());
        let mut seen = std::collections::BTreeSet::new();
        let mut highest = -1;
        for _ in 0..3 {
            let storage = Storage::start(store.clone(), crate::storage::SyncPolicy::Always);
            let ids = ProducerIds::open(store.as_ref(), storage.clone()).unwrap();
            // Ids while the next block is stored in the background: never one of before.
            let mut got = 0;
            while got < 700 {
                match ids.allocate() {
                    Some(id) => {
                        assert!(id > highest, "{id} after {highest}");
                        assert!(seen.insert(id));
                        highest = id;
                        got += 1;
                    }
                    None => tokio::task::yield_now().await,
                }
            }
            storage.shutdown().await;
        }
        assert!(store.load_producer_ids_end().unwrap() > Some(highest));
    }

    #[test]
    fn base64url_known_value() {
        assert_eq!(base64url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64url(&[0xff; 16]), "_____________________w");
    }
}
