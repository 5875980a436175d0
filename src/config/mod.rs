//! Typed configuration.
//!
//! Every setting has one entry in [`KEYS`]: its dotted name (Apache Kafka's name where the key
//! mirrors a broker setting), the Kafka setting it mirrors, a one-line description, and how it is
//! parsed and shown. The TOML file, `--set KEY=VALUE` overrides and `koord check-config` all go
//! through that table, so a key cannot be readable in one place and unknown in another.
//!
//! In the TOML file a dotted name may be written bare (`num.partitions = 3`, which TOML reads as
//! nested tables) or quoted (`"num.partitions" = 3`); both name the same key. Topics are an array
//! of tables (`[[topics]]` with `name` and `partitions`); on the command line
//! `--set topics=orders:12,events:3`.
//!
//! Here: [`Config`] with its defaults, loading, checks and rendering; the key table and the
//! parsing of each value in [`keys`].

mod keys;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use toml::Value;

use crate::assignor::policy::Override;
use crate::assignor::Registry;
use keys::{flatten, key};
pub use keys::{Key, KEYS};

/// A configuration error. Each variant names the key (or file) it is about.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("unknown config key `{0}`")]
    UnknownKey(String),
    #[error("invalid value for `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("`--set` expects KEY=VALUE, got `{0}`")]
    BadOverride(String),
}

/// A topic declared in the configuration: created at start-up with this many partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
}

/// The HTTP listener's default port (on 127.0.0.1).
pub const DEFAULT_HTTP_PORT: u16 = 9099;

/// The effective configuration of one koord node.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Address the listener binds.
    pub listen: SocketAddr,
    /// `host:port` clients are told to connect to (Metadata, FindCoordinator). Defaults to
    /// `listen`, which is right unless koord sits behind NAT or binds a wildcard address.
    pub advertised_listener: Option<String>,
    /// `listeners`: Kafka's `NAME://host:port` list. Empty: one PLAINTEXT listener on `listen`.
    pub listeners: Vec<crate::security::listener::Endpoint>,
    /// `advertised.listeners`: per listener name, what clients are told.
    pub advertised_listeners: Vec<crate::security::listener::Endpoint>,
    /// `listener.security.protocol.map`: each listener name's security protocol.
    pub listener_security_protocol_map: Vec<(String, crate::security::SecurityProtocol)>,
    /// `ssl.*`: the TLS listeners' certificate, key, truststore and client authentication.
    pub tls: crate::security::tls::TlsSettings,
    /// `sasl.enabled.mechanisms`: what SaslHandshake accepts.
    pub sasl_enabled_mechanisms: Vec<crate::security::SaslMechanism>,
    /// `connections.max.reauth.ms`: a SASL session's lifetime (0: unlimited).
    pub connections_max_reauth_ms: u64,
    /// `telemetry.metrics`, `telemetry.push.interval.ms`, `telemetry.max.bytes`: what clients
    /// are asked to push (KIP-714), how often, and the largest push taken.
    pub telemetry_metrics: Vec<String>,
    pub telemetry_push_interval_ms: u32,
    pub telemetry_max_bytes: u32,
    /// `quota.window.num` and `quota.window.size.seconds`: the samples client quotas measure
    /// usage over.
    pub quota_window_num: u32,
    pub quota_window_size_seconds: u32,
    /// `connection.failed.authentication.delay.ms`: how long a failed authentication waits
    /// before its answer and the close.
    pub connection_failed_authentication_delay_ms: u64,
    /// `sasl.admin.user` / `sasl.admin.password`: a SCRAM user (both mechanisms) created at
    /// start-up when the store has none of that name.
    pub sasl_admin_user: String,
    pub sasl_admin_password: String,
    /// `authorizer.class.name`: empty (no authorizer: everything is allowed, as in Kafka), or
    /// one of [`crate::security::authorizer::AUTHORIZER_NAMES`] (ACLs are enforced).
    pub authorizer_class_name: String,
    /// `super.users`: principals (`User:name`) the authorizer allows everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`: a resource without ACLs is open to all.
    pub allow_everyone_if_no_acl_found: bool,
    /// Address the HTTP listener (metrics, health, status page) binds; `None`: off.
    pub http_listen: Option<SocketAddr>,
    /// This node's broker id, as every response names it.
    pub node_id: i32,
    /// `upstream.bootstrap.servers`: the Kafka cluster a gateway fronts (`host:port` list).
    /// Empty: standalone, koord's own data plane. Set: gateway mode (src/gateway/).
    pub upstream_bootstrap_servers: Vec<String>,
    /// Gateway mode: the compacted upstream topic holding koord's group records.
    pub upstream_groups_topic: String,
    /// Its partition count when koord creates it (a group's records live in one partition,
    /// picked by a stable hash of the group id).
    pub upstream_groups_topic_partitions: i32,
    /// Where upstream brokers are presented: 0, on free ports picked at start-up; otherwise
    /// node id N on `base + N` (`base + 1000 * i + N` on koord's listener i), the same after
    /// every restart.
    pub upstream_broker_port_base: u16,
    /// Cluster mode (gateway mode): the nodes with the same name in front of the same upstream
    /// share the groups; empty, this node serves every group alone.
    pub cluster_name: String,
    /// Cluster mode: the session of this node in the nodes' upstream group; a node not heard
    /// from for this long loses its shards to the others.
    pub cluster_session_timeout_ms: u64,
    pub cluster_heartbeat_interval_ms: u64,
    /// Cluster mode: how long a rebalance of the nodes' group waits for every node to rejoin.
    pub cluster_rebalance_timeout_ms: u64,
    /// How long a group's operation upstream (its records, its offsets written or read, an
    /// upstream-only group described or deleted) may keep retrying while upstream moves or
    /// loads what it needs (a leader or coordinator re-elected after a broker died) before the
    /// client is told COORDINATOR_LOAD_IN_PROGRESS (REBALANCE_IN_PROGRESS for SyncGroup).
    pub upstream_write_timeout_ms: u64,
    /// `upstream.security.protocol`, `upstream.sasl.*`, `upstream.ssl.*`: how koord connects
    /// to the upstream cluster (Kafka's client settings).
    pub upstream_security: crate::security::client::ClientSettings,
    /// Where durable state lives.
    pub data_dir: PathBuf,
    /// Cluster id reported by Metadata and DescribeCluster. Empty: generated once and kept in
    /// the data dir.
    pub cluster_id: String,
    /// Connections accepted at once; further ones are closed right after accept.
    pub max_connections: usize,
    /// A connection with no request for this long is closed (Kafka: connections.max.idle.ms).
    pub connections_max_idle_ms: u64,
    /// Largest request frame accepted; a larger length prefix closes the connection before any
    /// byte of the frame is read.
    pub socket_request_max_bytes: usize,
    /// Metadata for an unknown topic creates it (when the request allows it).
    pub auto_create_topics_enable: bool,
    /// `errors.deadletterqueue.auto.create.topics.enable` (false): a share group's dead-letter
    /// queue topic that does not exist is created at its first record.
    pub errors_deadletterqueue_auto_create_topics_enable: bool,
    /// `errors.deadletterqueue.topic.name.prefix` ("dlq."): the prefix every dead-letter queue
    /// topic's name must have ("" for none).
    pub errors_deadletterqueue_topic_name_prefix: String,
    /// Partition count of auto-created topics and of CreateTopics without a count.
    pub num_partitions: i32,
    /// `offsets.topic.num.partitions` (50): partitions of `__consumer_offsets` when created
    /// (standalone; a stored topic keeps its count).
    pub offsets_topic_num_partitions: i32,
    /// `transaction.state.log.num.partitions` (50): partitions of `__transaction_state` when
    /// created (standalone).
    pub transaction_state_log_num_partitions: i32,
    /// Bytes kept per partition log before the oldest batches are dropped; -1 keeps all.
    pub log_retention_bytes: i64,
    /// Topics created at start-up.
    pub topics: Vec<TopicSpec>,
    /// Smallest session timeout a member may ask for in JoinGroup.
    pub group_min_session_timeout_ms: u64,
    /// Largest session timeout a member may ask for in JoinGroup.
    pub group_max_session_timeout_ms: u64,
    /// How long a rebalance out of Empty waits for more members.
    pub group_initial_rebalance_delay_ms: u64,
    /// Members a classic group may have.
    pub group_max_size: usize,
    /// How long committed offsets are kept once retention applies to them.
    pub offsets_retention_minutes: u64,
    /// How often offsets are checked for expiry.
    pub offsets_retention_check_interval_ms: u64,
    /// Longest transaction timeout InitProducerId accepts.
    pub transaction_max_timeout_ms: i32,
    /// How often open transactions are checked against their timeouts.
    pub transaction_abort_check_interval_ms: u64,
    /// An idle transactional id is forgotten this long after its last change.
    pub transactional_id_expiration_ms: u64,
    /// How often idle transactional ids are checked for expiry.
    pub transaction_expire_check_interval_ms: u64,
    /// Longest commit metadata accepted (in Java string length, UTF-16 units).
    pub offset_metadata_max_bytes: usize,
    /// Who assigns `consumer` groups by default: `client` (the leader, as in Kafka) or a
    /// server assignor's name.
    pub group_assignor: String,
    /// `group.assignment.fallback.rejoins`.
    pub group_assignment_fallback_rejoins: u32,
    /// `group.rebalance.storm.per.minute`.
    pub group_rebalance_storm_per_minute: u32,
    /// Per-group exceptions to `group_assignor`, first match wins.
    pub group_assignment_overrides: Vec<Override>,
    /// `group.assignment.protocols`: protocol names koord assigns on the server beyond
    /// Kafka's consumer assignors' and its own.
    pub group_assignment_protocols: Vec<String>,
    /// `group.consumer.heartbeat.interval.ms`: how often consumer-group members heartbeat.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a consumer-group member silent this long is removed.
    pub group_consumer_session_timeout_ms: u64,
    /// `group.consumer.{min,max}.session.timeout.ms`: the bounds the session timeout must lie in.
    pub group_consumer_min_session_timeout_ms: u64,
    pub group_consumer_max_session_timeout_ms: u64,
    /// `group.consumer.{min,max}.heartbeat.interval.ms`: the bounds of the heartbeat interval.
    pub group_consumer_min_heartbeat_interval_ms: i32,
    pub group_consumer_max_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`: members a consumer group may have.
    pub group_consumer_max_size: usize,
    /// `group.consumer.assignors`: the server assignors consumer groups may name; the first is
    /// the default.
    pub group_consumer_assignors: Vec<String>,
    /// `group.consumer.migration.policy`: online upgrades of classic groups to consumer groups
    /// and downgrades back (bidirectional, upgrade, downgrade, disabled).
    pub group_consumer_migration_policy: crate::group::consumer::MigrationPolicy,
    /// `group.streams.heartbeat.interval.ms`: how often streams-group members heartbeat.
    pub group_streams_heartbeat_interval_ms: i32,
    /// `group.streams.waiting.heartbeat.interval.ms`: how often a member waiting for tasks
    /// others still hold heartbeats.
    pub group_streams_waiting_heartbeat_interval_ms: i32,
    /// `group.streams.session.timeout.ms`: a streams-group member silent this long is removed.
    pub group_streams_session_timeout_ms: u64,
    /// `group.streams.max.size`: members a streams group may have.
    pub group_streams_max_size: usize,
    /// `group.streams.num.standby.replicas`: standby tasks per stateful task.
    pub group_streams_num_standby_replicas: usize,
    /// `group.streams.initial.rebalance.delay.ms`: a new streams group's first assignment
    /// waits this long for more members.
    pub group_streams_initial_rebalance_delay_ms: u64,
    /// `group.streams.assignor`: learner (warm-ups first) or sticky (Kafka's).
    pub group_streams_assignor: String,
    // Share groups (KIP-932) and the bounds of group configs (Kafka's GroupCoordinatorConfig
    // and ShareGroupConfig): the defaults and limits of each group's configs.
    /// `group.share.session.timeout.ms`.
    pub group_share_session_timeout_ms: i32,
    /// `group.share.min.session.timeout.ms`.
    pub group_share_min_session_timeout_ms: i32,
    /// `group.share.max.session.timeout.ms`.
    pub group_share_max_session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms`.
    pub group_share_heartbeat_interval_ms: i32,
    /// `group.share.min.heartbeat.interval.ms`.
    pub group_share_min_heartbeat_interval_ms: i32,
    /// `group.share.max.heartbeat.interval.ms`.
    pub group_share_max_heartbeat_interval_ms: i32,
    /// `group.share.record.lock.duration.ms`.
    pub group_share_record_lock_duration_ms: i32,
    /// `group.share.min.record.lock.duration.ms`.
    pub group_share_min_record_lock_duration_ms: i32,
    /// `group.share.max.record.lock.duration.ms`.
    pub group_share_max_record_lock_duration_ms: i32,
    /// `group.share.delivery.count.limit`.
    pub group_share_delivery_count_limit: i32,
    /// `group.share.min.delivery.count.limit`.
    pub group_share_min_delivery_count_limit: i32,
    /// `group.share.max.delivery.count.limit`.
    pub group_share_max_delivery_count_limit: i32,
    /// `group.share.partition.max.record.locks`.
    pub group_share_partition_max_record_locks: i32,
    /// `group.share.max.size`.
    pub group_share_max_size: usize,
    /// `group.share.min.partition.max.record.locks`.
    pub group_share_min_partition_max_record_locks: i32,
    /// `group.share.max.partition.max.record.locks`.
    pub group_share_max_partition_max_record_locks: i32,
    /// `group.streams.min.session.timeout.ms`.
    pub group_streams_min_session_timeout_ms: i32,
    /// `group.streams.max.session.timeout.ms`.
    pub group_streams_max_session_timeout_ms: i32,
    /// `group.streams.min.heartbeat.interval.ms`.
    pub group_streams_min_heartbeat_interval_ms: i32,
    /// `group.streams.max.heartbeat.interval.ms`.
    pub group_streams_max_heartbeat_interval_ms: i32,
    /// `group.streams.max.standby.replicas`.
    pub group_streams_max_standby_replicas: i32,
    /// Whether each group commit of the store syncs to disk before writes are acknowledged.
    pub offsets_commit_sync: crate::storage::SyncPolicy,
    /// The `learner.*` settings of the learner assignor.
    pub learner: crate::assignor::learner::Settings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_listener: None,
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            listener_security_protocol_map: crate::security::listener::default_protocol_map(),
            tls: crate::security::tls::TlsSettings::default(),
            sasl_enabled_mechanisms: crate::security::SaslMechanism::ALL.to_vec(),
            connections_max_reauth_ms: 0,
            connection_failed_authentication_delay_ms: 100,
            quota_window_num: 11,
            telemetry_metrics: crate::telemetry::DEFAULT_METRICS
                .iter()
                .map(|m| m.to_string())
                .collect(),
            telemetry_push_interval_ms: 30_000,
            telemetry_max_bytes: 1 << 20,
            quota_window_size_seconds: 1,
            sasl_admin_user: String::new(),
            sasl_admin_password: String::new(),
            authorizer_class_name: String::new(),
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_HTTP_PORT))),
            node_id: 1,
            upstream_bootstrap_servers: Vec::new(),
            upstream_groups_topic: "__koord_groups".into(),
            upstream_groups_topic_partitions: 50,
            upstream_write_timeout_ms: 10_000,
            upstream_broker_port_base: 0,
            cluster_name: String::new(),
            cluster_session_timeout_ms: 6_000,
            cluster_heartbeat_interval_ms: 1_000,
            cluster_rebalance_timeout_ms: 20_000,
            upstream_security: crate::security::client::ClientSettings::default(),
            data_dir: PathBuf::from("koord-data"),
            cluster_id: String::new(),
            max_connections: 10_000,
            connections_max_idle_ms: 600_000,
            socket_request_max_bytes: 104_857_600,
            auto_create_topics_enable: true,
            errors_deadletterqueue_auto_create_topics_enable: false,
            errors_deadletterqueue_topic_name_prefix: "dlq.".to_string(),
            num_partitions: 1,
            offsets_topic_num_partitions: 50,
            transaction_state_log_num_partitions: 50,
            log_retention_bytes: 268_435_456,
            topics: Vec::new(),
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX as usize,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_check_interval_ms: 10_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_expire_check_interval_ms: 3_600_000,
            offset_metadata_max_bytes: 4096,
            group_assignor: "uniform".to_owned(),
            group_assignment_fallback_rejoins: 5,
            group_rebalance_storm_per_minute: 20,
            group_assignment_overrides: Vec::new(),
            group_assignment_protocols: Vec::new(),
            group_consumer_heartbeat_interval_ms: 5_000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_min_session_timeout_ms: 45_000,
            group_consumer_max_session_timeout_ms: 60_000,
            group_consumer_min_heartbeat_interval_ms: 5_000,
            group_consumer_max_heartbeat_interval_ms: 15_000,
            group_consumer_max_size: i32::MAX as usize,
            group_consumer_assignors: vec!["uniform".to_owned(), "range".to_owned()],
            group_consumer_migration_policy: crate::group::consumer::MigrationPolicy::Bidirectional,
            group_streams_heartbeat_interval_ms: 5_000,
            group_streams_waiting_heartbeat_interval_ms: 500,
            group_streams_session_timeout_ms: 45_000,
            group_streams_max_size: i32::MAX as usize,
            group_streams_num_standby_replicas: 0,
            group_streams_initial_rebalance_delay_ms: 3_000,
            group_streams_assignor: "learner".to_owned(),
            group_share_session_timeout_ms: 45_000,
            group_share_min_session_timeout_ms: 45_000,
            group_share_max_session_timeout_ms: 60_000,
            group_share_heartbeat_interval_ms: 5_000,
            group_share_min_heartbeat_interval_ms: 5_000,
            group_share_max_heartbeat_interval_ms: 15_000,
            group_share_record_lock_duration_ms: 30_000,
            group_share_min_record_lock_duration_ms: 15_000,
            group_share_max_record_lock_duration_ms: 60_000,
            group_share_delivery_count_limit: 5,
            group_share_min_delivery_count_limit: 2,
            group_share_max_delivery_count_limit: 10,
            group_share_partition_max_record_locks: 2_000,
            group_share_max_size: 200,
            group_share_min_partition_max_record_locks: 100,
            group_share_max_partition_max_record_locks: 4_000,
            group_streams_min_session_timeout_ms: 45_000,
            group_streams_max_session_timeout_ms: 60_000,
            group_streams_min_heartbeat_interval_ms: 5_000,
            group_streams_max_heartbeat_interval_ms: 15_000,
            group_streams_max_standby_replicas: 2,
            offsets_commit_sync: crate::storage::SyncPolicy::Always,
            learner: crate::assignor::learner::Settings::default(),
        }
    }
}

impl Config {
    /// The broker-level settings group configs default to and are bounded by.
    pub fn group_defaults(&self) -> crate::metadata::group_config::GroupDefaults {
        let int = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
        crate::metadata::group_config::GroupDefaults {
            consumer_session_timeout_ms: int(self.group_consumer_session_timeout_ms),
            consumer_min_session_timeout_ms: int(self.group_consumer_min_session_timeout_ms),
            consumer_max_session_timeout_ms: int(self.group_consumer_max_session_timeout_ms),
            consumer_heartbeat_interval_ms: self.group_consumer_heartbeat_interval_ms,
            consumer_min_heartbeat_interval_ms: self.group_consumer_min_heartbeat_interval_ms,
            consumer_max_heartbeat_interval_ms: self.group_consumer_max_heartbeat_interval_ms,
            share_session_timeout_ms: self.group_share_session_timeout_ms,
            share_min_session_timeout_ms: self.group_share_min_session_timeout_ms,
            share_max_session_timeout_ms: self.group_share_max_session_timeout_ms,
            share_heartbeat_interval_ms: self.group_share_heartbeat_interval_ms,
            share_min_heartbeat_interval_ms: self.group_share_min_heartbeat_interval_ms,
            share_max_heartbeat_interval_ms: self.group_share_max_heartbeat_interval_ms,
            share_record_lock_duration_ms: self.group_share_record_lock_duration_ms,
            share_min_record_lock_duration_ms: self.group_share_min_record_lock_duration_ms,
            share_max_record_lock_duration_ms: self.group_share_max_record_lock_duration_ms,
            share_delivery_count_limit: self.group_share_delivery_count_limit,
            share_min_delivery_count_limit: self.group_share_min_delivery_count_limit,
            share_max_delivery_count_limit: self.group_share_max_delivery_count_limit,
            share_partition_max_record_locks: self.group_share_partition_max_record_locks,
            share_min_partition_max_record_locks: self.group_share_min_partition_max_record_locks,
            share_max_partition_max_record_locks: self.group_share_max_partition_max_record_locks,
            streams_session_timeout_ms: int(self.group_streams_session_timeout_ms),
            streams_min_session_timeout_ms: self.group_streams_min_session_timeout_ms,
            streams_max_session_timeout_ms: self.group_streams_max_session_timeout_ms,
            streams_heartbeat_interval_ms: self.group_streams_heartbeat_interval_ms,
            streams_min_heartbeat_interval_ms: self.group_streams_min_heartbeat_interval_ms,
            streams_max_heartbeat_interval_ms: self.group_streams_max_heartbeat_interval_ms,
            streams_num_standby_replicas: i32::try_from(self.group_streams_num_standby_replicas)
                .unwrap_or(i32::MAX),
            streams_max_standby_replicas: self.group_streams_max_standby_replicas,
            streams_initial_rebalance_delay_ms: int(self.group_streams_initial_rebalance_delay_ms),
            // koord's streams assignors, its configured one first (Kafka's
            // group.streams.assignors: the first is the default).
            streams_assignors: std::iter::once(self.group_streams_assignor.clone())
                .chain(
                    ["learner", "sticky"]
                        .into_iter()
                        .filter(|a| *a != self.group_streams_assignor)
                        .map(str::to_owned),
                )
                .collect(),
        }
    }

    /// What of this configuration sets topic configs' defaults (their broker synonyms).
    pub fn topic_defaults(&self) -> crate::metadata::topic_config::BrokerDefaults {
        crate::metadata::topic_config::BrokerDefaults {
            log_retention_bytes: self.log_retention_bytes,
        }
    }

    /// The assignors groups can be given, with their configured settings (`learner.*`).
    pub fn assignors(&self) -> Registry {
        let mut registry = Registry::builtin();
        registry.register(Arc::new(crate::assignor::learner::LearnerAssignor::new(
            self.learner.clone(),
        )));
        registry
    }

    /// Sets one key from a TOML value.
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] or [`ConfigError::Invalid`], naming the key.
    pub fn set(&mut self, name: &str, value: &Value) -> Result<(), ConfigError> {
        (key(name)?.apply)(self, value).map_err(|message| ConfigError::Invalid {
            key: name.to_string(),
            message,
        })
    }

    /// Applies a `KEY=VALUE` override. The value is read as a TOML scalar when it is one
    /// (`0`, `true`, `"x"`), otherwise as a bare string (`127.0.0.1:9092`).
    pub fn set_override(&mut self, kv: &str) -> Result<(), ConfigError> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| ConfigError::BadOverride(kv.to_string()))?;
        let k = k.trim();
        let value = format!("v = {v}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .filter(|v| !v.is_table())
            .unwrap_or_else(|| Value::String(v.to_string()));
        self.set(k, &value)
    }

    /// Applies every key of a TOML document.
    pub fn merge_toml(&mut self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse {
                path: path.to_path_buf(),
                message: e.message().to_string(),
            })?;
        let mut leaves = Vec::new();
        flatten("", &table, &mut leaves);
        for (name, value) in leaves {
            self.set(&name, value)?;
        }
        Ok(())
    }

    /// Defaults, then the file (if any), then the overrides in order.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            config.merge_toml(&text, path)?;
        }
        for kv in overrides {
            config.set_override(kv)?;
        }
        config.check()?;
        Ok(config)
    }

    /// The checks across keys (Kafka's `GroupCoordinatorConfig` requirements).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key out of its bounds.
    pub fn check(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.to_string(),
            message,
        };
        let (min, max, session) = (
            self.group_consumer_min_session_timeout_ms,
            self.group_consumer_max_session_timeout_ms,
            self.group_consumer_session_timeout_ms,
        );
        if !(min..=max).contains(&session) {
            return Err(invalid(
                "group.consumer.session.timeout.ms",
                format!("{session} is outside group.consumer.{{min,max}}.session.timeout.ms [{min}, {max}]"),
            ));
        }
        let (min, max, interval) = (
            self.group_consumer_min_heartbeat_interval_ms,
            self.group_consumer_max_heartbeat_interval_ms,
            self.group_consumer_heartbeat_interval_ms,
        );
        if !(min..=max).contains(&interval) {
            return Err(invalid(
                "group.consumer.heartbeat.interval.ms",
                format!("{interval} is outside group.consumer.{{min,max}}.heartbeat.interval.ms [{min}, {max}]"),
            ));
        }
        if u64::try_from(interval).unwrap_or(0) >= session {
            return Err(invalid(
                "group.consumer.heartbeat.interval.ms",
                format!(
                    "{interval} must be smaller than group.consumer.session.timeout.ms ({session})"
                ),
            ));
        }
        // Kafka's checks of the share groups' bounds (GroupCoordinatorConfig, ShareGroupConfig):
        // min <= default <= max, heartbeat below session. (The streams groups' bounds are not
        // checked against koord's group.streams.* defaults, which predate them: they bound
        // only what a group may set.)
        for (key, min, value, max) in [
            (
                "group.share.session.timeout.ms",
                self.group_share_min_session_timeout_ms,
                self.group_share_session_timeout_ms,
                self.group_share_max_session_timeout_ms,
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.group_share_min_heartbeat_interval_ms,
                self.group_share_heartbeat_interval_ms,
                self.group_share_max_heartbeat_interval_ms,
            ),
            (
                "group.share.record.lock.duration.ms",
                self.group_share_min_record_lock_duration_ms,
                self.group_share_record_lock_duration_ms,
                self.group_share_max_record_lock_duration_ms,
            ),
            (
                "group.share.delivery.count.limit",
                self.group_share_min_delivery_count_limit,
                self.group_share_delivery_count_limit,
                self.group_share_max_delivery_count_limit,
            ),
            (
                "group.share.partition.max.record.locks",
                self.group_share_min_partition_max_record_locks,
                self.group_share_partition_max_record_locks,
                self.group_share_max_partition_max_record_locks,
            ),
        ] {
            if !(min..=max).contains(&value) {
                return Err(invalid(
                    key,
                    format!("{value} is outside its min and max settings [{min}, {max}]"),
                ));
            }
        }
        if self.group_share_heartbeat_interval_ms >= self.group_share_session_timeout_ms {
            return Err(invalid(
                "group.share.heartbeat.interval.ms",
                format!(
                    "{} must be smaller than group.share.session.timeout.ms ({})",
                    self.group_share_heartbeat_interval_ms, self.group_share_session_timeout_ms
                ),
            ));
        }
        self.effective_listeners()
            .map_err(|message| invalid("listeners", message))?;
        self.upstream_security
            .check("upstream.")
            .map_err(|message| invalid("upstream.security.protocol", message))?;
        if self.sasl_admin_user.is_empty() != self.sasl_admin_password.is_empty() {
            return Err(invalid(
                "sasl.admin.user",
                "sasl.admin.user and sasl.admin.password go together".into(),
            ));
        }
        Ok(())
    }

    /// The listeners to bind, each with whether its advertised address was configured. Without
    /// `listeners`: one PLAINTEXT listener on `listen`, advertising `advertised.listener`.
    ///
    /// # Errors
    /// As [`crate::security::listener::resolve`], or a TLS listener without a keystore.
    pub fn effective_listeners(&self) -> Result<Vec<(crate::security::Listener, bool)>, String> {
        use crate::security::{Listener, SecurityProtocol};
        if self.listeners.is_empty() {
            let (host, port) = self.advertised();
            return Ok(vec![(
                Listener {
                    name: "PLAINTEXT".into(),
                    protocol: SecurityProtocol::Plaintext,
                    bind_host: self.listen.ip().to_string(),
                    bind_port: self.listen.port(),
                    advertised_host: host,
                    advertised_port: port,
                },
                true,
            )]);
        }
        let listeners = crate::security::listener::resolve(
            &self.listeners,
            &self.advertised_listeners,
            &self.listener_security_protocol_map,
        )?;
        if listeners.iter().any(|(l, _)| l.protocol.is_tls()) && self.tls.keystore.is_none() {
            return Err("an SSL or SASL_SSL listener needs ssl.keystore.location".into());
        }
        Ok(listeners)
    }

    /// The `host:port` clients are told to use.
    pub fn advertised(&self) -> (String, i32) {
        match &self.advertised_listener {
            Some(s) => {
                let (h, p) = s.rsplit_once(':').unwrap_or((s.as_str(), "9092"));
                (h.to_string(), p.parse().unwrap_or(9092))
            }
            None => (self.listen.ip().to_string(), self.listen.port() as i32),
        }
    }

    /// The effective settings as TOML, one `key = value` line each, with the Kafka setting it
    /// mirrors. Reading the output back gives the same configuration.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for k in KEYS {
            let value = (k.show)(self);
            let _ = write!(out, "{} = {}", k.name, value);
            match k.kafka {
                Some(kafka) => {
                    let _ = writeln!(out, "    # {} (Kafka: {kafka})", k.doc);
                }
                None => {
                    let _ = writeln!(out, "    # {}", k.doc);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_quoted_dotted_keys_are_the_same_key() {
        let mut a = Config::default();
        a.merge_toml("num.partitions = 3\n", Path::new("a"))
            .unwrap();
        let mut b = Config::default();
        b.merge_toml("\"num.partitions\" = 3\n", Path::new("b"))
            .unwrap();
        assert_eq!(a.num_partitions, 3);
        assert_eq!(a, b);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::default()
            .merge_toml("group.bogus.setting = 1\n", Path::new("x"))
            .unwrap_err();
        assert!(err.to_string().contains("group.bogus.setting"), "{err}");
    }

    #[test]
    fn invalid_value_names_the_key() {
        let err = Config::default()
            .set_override("num.partitions=0")
            .unwrap_err();
        assert!(err.to_string().contains("num.partitions"), "{err}");
        let err = Config::default()
            .set_override("auto.create.topics.enable=maybe")
            .unwrap_err();
        assert!(
            err.to_string().contains("auto.create.topics.enable"),
            "{err}"
        );
    }

    #[test]
    fn overrides_parse_scalars_and_bare_strings() {
        let mut c = Config::default();
        c.set_override("listen=127.0.0.1:0").unwrap();
        c.set_override("auto.create.topics.enable=false").unwrap();
        c.set_override("topics=orders:12,events").unwrap();
        assert_eq!(c.listen.port(), 0);
        assert!(!c.auto_create_topics_enable);
        assert_eq!(
            c.topics,
            vec![
                TopicSpec {
                    name: "orders".into(),
                    partitions: 12
                },
                TopicSpec {
                    name: "events".into(),
                    partitions: 1
                }
            ]
        );
        assert!(c.set_override("novalue").is_err());
    }

    #[test]
    fn topics_as_array_of_tables() {
        let mut c = Config::default();
        c.merge_toml(
            "[[topics]]\nname = \"a\"\npartitions = 4\n[[topics]]\nname = \"b\"\n",
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(c.topics.len(), 2);
        assert_eq!(c.topics[0].partitions, 4);
        let err = c
            .merge_toml("[[topics]]\nname = \"bad name\"\n", Path::new("t"))
            .unwrap_err();
        assert!(err.to_string().contains("topics"), "{err}");
        assert!(c
            .merge_toml("topics = [\"a\", \"a\"]\n", Path::new("t"))
            .is_err());
    }

    #[test]
    fn shipped_config_documents_every_key_at_its_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/koord.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut c = Config::default();
        c.merge_toml(&text, &path).unwrap();
        assert_eq!(
            c,
            Config::default(),
            "config/koord.toml must state the defaults"
        );
        for k in KEYS {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("{} = ", k.name))),
                "config/koord.toml does not document `{}`",
                k.name
            );
        }
    }

    #[test]
    fn upstream_security_keys_parse_and_check() {
        let load = |sets: &[&str]| {
            Config::load(
                None,
                &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        let c = load(&[
            "upstream.security.protocol=sasl_ssl",
            "upstream.sasl.mechanism=SCRAM-SHA-512",
            "upstream.sasl.username=koord",
            "upstream.sasl.password=pw",
            "upstream.ssl.truststore.location=/etc/ca.pem",
            "upstream.ssl.endpoint.identification.algorithm=",
        ])
        .unwrap();
        let u = &c.upstream_security;
        assert_eq!(u.protocol, crate::security::SecurityProtocol::SaslSsl);
        assert_eq!(u.mechanism.name(), "SCRAM-SHA-512");
        assert!(!u.verify_hostname);
        assert!(c.render().contains("upstream.sasl.password = \"[hidden]\""));
        for (sets, names) in [
            (
                &["upstream.security.protocol=TLS"][..],
                "upstream.security.protocol",
            ),
            (
                &["upstream.sasl.mechanism=GSSAPI"],
                "upstream.sasl.mechanism",
            ),
            (
                &["upstream.ssl.endpoint.identification.algorithm=http"],
                "upstream.ssl.endpoint",
            ),
            (
                &["upstream.security.protocol=SASL_PLAINTEXT"],
                "upstream.sasl.username",
            ),
            (
                &["upstream.security.protocol=SSL"],
                "upstream.ssl.truststore.location",
            ),
        ] {
            let e = load(sets).unwrap_err().to_string();
            assert!(e.contains(names), "{sets:?}: {e}");
        }
    }

    #[test]
    fn rendered_defaults_parse_back() {
        let c = Config::default();
        let mut back = Config::default();
        back.merge_toml(&c.render(), Path::new("r")).unwrap();
        assert_eq!(c, back);
    }
}
