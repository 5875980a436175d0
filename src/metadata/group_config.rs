//! Group configuration (Kafka's `ConfigResource.Type.GROUP`, KIP-848/KIP-932 dynamic group
//! configs): every group config Apache Kafka 4.4 defines (`GroupConfig`), its type, default,
//! broker synonym and validation (same messages, same bounds from the broker-level
//! `group.{consumer,share,streams}.{min,max}.*` settings), the per-group overrides this node
//! holds ([`GroupConfigs`]) and each group's effective settings ([`GroupConfigValues`]), which
//! the group kinds' handlers read with [`GroupConfigs::get`].
//!
//! Pure but for the map's lock: no I/O here; the overrides are made durable by the broker
//! before they are served.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::topic_config::{check_value, list_items, Kind};

/// One group's explicitly set configs (Kafka's dynamic group configs), by name.
pub type GroupConfigMap = BTreeMap<String, String>;

/// One group config.
#[derive(Debug)]
pub struct GroupDef {
    pub name: &'static str,
    /// Kafka's `GroupConfig` default (`None`: Kafka's default is null, `streams.assignor.name`).
    pub default: Option<&'static str>,
    pub kind: Kind,
    /// The broker setting that supplies the default (`GroupConfig.ALL_GROUP_CONFIG_SYNONYMS`).
    pub broker: Option<&'static str>,
    /// Kafka's default of that broker setting (its DEFAULT_CONFIG synonym).
    pub broker_default: &'static str,
    /// Kafka's internal configs: described only when set, on the group or on the broker.
    pub internal: bool,
    pub doc: &'static str,
}

const IMAX: i64 = i32::MAX as i64;
const LMAX: i64 = i64::MAX;

macro_rules! g {
    ($name:literal, $default:expr, $kind:expr, $broker:expr, $bdefault:literal, $internal:literal, $doc:literal) => {
        GroupDef {
            name: $name,
            default: $default,
            kind: $kind,
            broker: $broker,
            broker_default: $bdefault,
            internal: $internal,
            doc: $doc,
        }
    };
}

/// Every group config of Kafka 4.4, sorted by name (DescribeConfigs lists them in this order).
#[rustfmt::skip]
pub static GROUP_DEFS: &[GroupDef] = &[
    g!("consumer.assignment.interval.ms", Some("1000"), Kind::Int(0, IMAX), Some("group.consumer.assignment.interval.ms"), "1000", false, "The interval between assignment updates for a consumer group."),
    g!("consumer.assignor.offload.enable", Some("true"), Kind::Boolean, Some("group.consumer.assignor.offload.enable"), "true", true, "Whether to offload consumer group assignment to a group coordinator background thread."),
    g!("consumer.heartbeat.interval.ms", Some("5000"), Kind::Int(1, IMAX), Some("group.consumer.heartbeat.interval.ms"), "5000", false, "The heartbeat interval given to the members of a consumer group."),
    g!("consumer.session.timeout.ms", Some("45000"), Kind::Int(1, IMAX), Some("group.consumer.session.timeout.ms"), "45000", false, "The timeout to detect client failures when using the consumer group protocol."),
    g!("errors.deadletterqueue.copy.record.enable", Some("false"), Kind::Boolean, None, "false", false, "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or just write a record containing the context information headers."),
    g!("errors.deadletterqueue.topic.name", Some(""), Kind::Str(&[]), None, "", false, "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic."),
    g!("share.assignment.interval.ms", Some("1000"), Kind::Int(0, IMAX), Some("group.share.assignment.interval.ms"), "1000", false, "The interval between assignment updates for a share group."),
    g!("share.assignor.offload.enable", Some("true"), Kind::Boolean, Some("group.share.assignor.offload.enable"), "true", true, "Whether to offload share group assignment to a group coordinator background thread."),
    g!("share.auto.offset.reset", Some("latest"), Kind::Str(&[]), None, "latest", false, "The strategy to initialize the share-partition start offset."),
    g!("share.delivery.count.limit", Some("5"), Kind::Int(2, IMAX), Some("group.share.delivery.count.limit"), "5", false, "The maximum number of delivery attempts for a record delivered to a share group."),
    g!("share.heartbeat.interval.ms", Some("5000"), Kind::Int(1, IMAX), Some("group.share.heartbeat.interval.ms"), "5000", false, "The heartbeat interval given to the members of a share group."),
    g!("share.isolation.level", Some("read_uncommitted"), Kind::Str(&["read_committed", "read_uncommitted"]), None, "read_uncommitted", false, "Controls how to read records written transactionally."),
    g!("share.partition.max.record.locks", Some("2000"), Kind::Int(100, IMAX), Some("group.share.partition.max.record.locks"), "2000", false, "Share-group record lock limit per share-partition."),
    g!("share.record.lock.duration.ms", Some("30000"), Kind::Int(1000, IMAX), Some("group.share.record.lock.duration.ms"), "30000", false, "The record acquisition lock duration in milliseconds for share groups."),
    g!("share.renew.acknowledge.enable", Some("true"), Kind::Boolean, None, "true", false, "Whether the renew acknowledge type is enabled for the share group."),
    g!("share.session.timeout.ms", Some("45000"), Kind::Int(1, IMAX), Some("group.share.session.timeout.ms"), "45000", false, "The timeout to detect client failures when using the share group protocol."),
    g!("streams.acceptable.recovery.lag", Some("10000"), Kind::Long(0, LMAX), Some("group.streams.acceptable.recovery.lag"), "10000", true, "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough to receive an active task assignment."),
    g!("streams.assignment.interval.ms", Some("1000"), Kind::Int(0, IMAX), Some("group.streams.assignment.interval.ms"), "1000", false, "The interval between assignment updates for a streams group."),
    g!("streams.assignor.name", None, Kind::Str(&[]), Some("group.streams.assignors"), "sticky", false, "The task assignor to use for this streams group, selected by short name from the assignors registered via the broker configuration group.streams.assignors."),
    g!("streams.assignor.offload.enable", Some("true"), Kind::Boolean, Some("group.streams.assignor.offload.enable"), "true", true, "Whether to offload streams group assignment to a group coordinator background thread."),
    g!("streams.heartbeat.interval.ms", Some("5000"), Kind::Int(1, IMAX), Some("group.streams.heartbeat.interval.ms"), "5000", false, "The heartbeat interval given to the members."),
    g!("streams.initial.rebalance.delay.ms", Some("3000"), Kind::Int(0, IMAX), Some("group.streams.initial.rebalance.delay.ms"), "3000", false, "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance."),
    g!("streams.num.standby.replicas", Some("0"), Kind::Int(0, IMAX), Some("group.streams.num.standby.replicas"), "0", false, "The number of standby replicas for each task."),
    g!("streams.num.warmup.replicas", Some("2"), Kind::Int(0, IMAX), Some("group.streams.num.warmup.replicas"), "2", true, "The maximum number of warmup task replicas."),
    g!("streams.rack.aware.assignment.tags", Some(""), Kind::List(&[]), Some("group.streams.rack.aware.assignment.tags"), "", false, "List of client tag keys used to distribute standby replicas across Kafka Streams instances."),
    g!("streams.session.timeout.ms", Some("45000"), Kind::Int(1, IMAX), Some("group.streams.session.timeout.ms"), "45000", false, "The timeout to detect client failures when using the streams group protocol."),
    g!("streams.task.offset.interval.ms", Some("60000"), Kind::Int(1, IMAX), Some("group.streams.task.offset.interval.ms"), "60000", true, "The interval in which the warmup task changelog offsets on a client are updated on the broker."),
];

/// The definition of group config `name`.
pub fn group_def(name: &str) -> Option<&'static GroupDef> {
    GROUP_DEFS.iter().find(|d| d.name == name)
}

/// The broker-level settings group configs default to and are bounded by (Kafka's
/// `GroupCoordinatorConfig` and `ShareGroupConfig`), as this node is configured:
/// [`crate::config::Config::group_defaults`]. Settings koord has no key for keep Kafka's
/// defaults ([`GroupDefaults::default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDefaults {
    pub consumer_session_timeout_ms: i32,
    pub consumer_min_session_timeout_ms: i32,
    pub consumer_max_session_timeout_ms: i32,
    pub consumer_heartbeat_interval_ms: i32,
    pub consumer_min_heartbeat_interval_ms: i32,
    pub consumer_max_heartbeat_interval_ms: i32,
    pub share_session_timeout_ms: i32,
    pub share_min_session_timeout_ms: i32,
    pub share_max_session_timeout_ms: i32,
    pub share_heartbeat_interval_ms: i32,
    pub share_min_heartbeat_interval_ms: i32,
    pub share_max_heartbeat_interval_ms: i32,
    pub share_record_lock_duration_ms: i32,
    pub share_min_record_lock_duration_ms: i32,
    pub share_max_record_lock_duration_ms: i32,
    pub share_delivery_count_limit: i32,
    pub share_min_delivery_count_limit: i32,
    pub share_max_delivery_count_limit: i32,
    pub share_partition_max_record_locks: i32,
    pub share_min_partition_max_record_locks: i32,
    pub share_max_partition_max_record_locks: i32,
    pub streams_session_timeout_ms: i32,
    pub streams_min_session_timeout_ms: i32,
    pub streams_max_session_timeout_ms: i32,
    pub streams_heartbeat_interval_ms: i32,
    pub streams_min_heartbeat_interval_ms: i32,
    pub streams_max_heartbeat_interval_ms: i32,
    pub streams_num_standby_replicas: i32,
    pub streams_max_standby_replicas: i32,
    pub streams_initial_rebalance_delay_ms: i32,
    /// The streams task assignors groups may name; the first is the default.
    pub streams_assignors: Vec<String>,
}

impl Default for GroupDefaults {
    /// Kafka 4.4's defaults.
    fn default() -> Self {
        GroupDefaults {
            consumer_session_timeout_ms: 45_000,
            consumer_min_session_timeout_ms: 45_000,
            consumer_max_session_timeout_ms: 60_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_min_heartbeat_interval_ms: 5_000,
            consumer_max_heartbeat_interval_ms: 15_000,
            share_session_timeout_ms: 45_000,
            share_min_session_timeout_ms: 45_000,
            share_max_session_timeout_ms: 60_000,
            share_heartbeat_interval_ms: 5_000,
            share_min_heartbeat_interval_ms: 5_000,
            share_max_heartbeat_interval_ms: 15_000,
            share_record_lock_duration_ms: 30_000,
            share_min_record_lock_duration_ms: 15_000,
            share_max_record_lock_duration_ms: 60_000,
            share_delivery_count_limit: 5,
            share_min_delivery_count_limit: 2,
            share_max_delivery_count_limit: 10,
            share_partition_max_record_locks: 2_000,
            share_min_partition_max_record_locks: 100,
            share_max_partition_max_record_locks: 4_000,
            streams_session_timeout_ms: 45_000,
            streams_min_session_timeout_ms: 45_000,
            streams_max_session_timeout_ms: 60_000,
            streams_heartbeat_interval_ms: 5_000,
            streams_min_heartbeat_interval_ms: 5_000,
            streams_max_heartbeat_interval_ms: 15_000,
            streams_num_standby_replicas: 0,
            streams_max_standby_replicas: 2,
            streams_initial_rebalance_delay_ms: 3_000,
            streams_assignors: vec!["sticky".to_owned()],
        }
    }
}

/// Kafka's fixed bounds for settings koord has no key for (their broker defaults).
const ASSIGNMENT_INTERVAL: (i32, i32) = (0, 15_000);
const STREAMS_MIN_TASK_OFFSET_INTERVAL_MS: i32 = 15_000;
const STREAMS_MAX_WARMUP_REPLICAS: i32 = 20;

impl GroupDefaults {
    /// This node's value of broker setting `key`, as DescribeConfigs shows it; `None` for a
    /// setting koord has no key for (Kafka's default applies).
    pub fn broker_value(&self, key: &str) -> Option<String> {
        let v = match key {
            "group.consumer.session.timeout.ms" => self.consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms" => self.consumer_heartbeat_interval_ms,
            "group.share.session.timeout.ms" => self.share_session_timeout_ms,
            "group.share.heartbeat.interval.ms" => self.share_heartbeat_interval_ms,
            "group.share.record.lock.duration.ms" => self.share_record_lock_duration_ms,
            "group.share.delivery.count.limit" => self.share_delivery_count_limit,
            "group.share.partition.max.record.locks" => self.share_partition_max_record_locks,
            "group.streams.session.timeout.ms" => self.streams_session_timeout_ms,
            "group.streams.heartbeat.interval.ms" => self.streams_heartbeat_interval_ms,
            "group.streams.num.standby.replicas" => self.streams_num_standby_replicas,
            "group.streams.initial.rebalance.delay.ms" => self.streams_initial_rebalance_delay_ms,
            "group.streams.assignors" => return Some(self.streams_assignors.join(",")),
            _ => return None,
        };
        Some(v.to_string())
    }

    /// The `[min, max]` Kafka holds a group's `key` to (validation and clamping), if bounded.
    fn bounds(&self, key: &str) -> Option<(i32, i32)> {
        Some(match key {
            "consumer.session.timeout.ms" => (
                self.consumer_min_session_timeout_ms,
                self.consumer_max_session_timeout_ms,
            ),
            "consumer.heartbeat.interval.ms" => (
                self.consumer_min_heartbeat_interval_ms,
                self.consumer_max_heartbeat_interval_ms,
            ),
            "consumer.assignment.interval.ms"
            | "share.assignment.interval.ms"
            | "streams.assignment.interval.ms" => ASSIGNMENT_INTERVAL,
            "share.heartbeat.interval.ms" => (
                self.share_min_heartbeat_interval_ms,
                self.share_max_heartbeat_interval_ms,
            ),
            "share.session.timeout.ms" => (
                self.share_min_session_timeout_ms,
                self.share_max_session_timeout_ms,
            ),
            "share.record.lock.duration.ms" => (
                self.share_min_record_lock_duration_ms,
                self.share_max_record_lock_duration_ms,
            ),
            "share.delivery.count.limit" => (
                self.share_min_delivery_count_limit,
                self.share_max_delivery_count_limit,
            ),
            "share.partition.max.record.locks" => (
                self.share_min_partition_max_record_locks,
                self.share_max_partition_max_record_locks,
            ),
            "streams.heartbeat.interval.ms" => (
                self.streams_min_heartbeat_interval_ms,
                self.streams_max_heartbeat_interval_ms,
            ),
            "streams.session.timeout.ms" => (
                self.streams_min_session_timeout_ms,
                self.streams_max_session_timeout_ms,
            ),
            _ => return None,
        })
    }

    /// Kafka's one-sided bounds: `(key, max)` checks "less than or equal", `min` "greater".
    fn max_of(&self, key: &str) -> Option<i32> {
        match key {
            "streams.num.standby.replicas" => Some(self.streams_max_standby_replicas),
            "streams.num.warmup.replicas" => Some(STREAMS_MAX_WARMUP_REPLICAS),
            _ => None,
        }
    }

    fn min_of(key: &str) -> Option<i32> {
        (key == "streams.task.offset.interval.ms").then_some(STREAMS_MIN_TASK_OFFSET_INTERVAL_MS)
    }

    /// The session/heartbeat pairs Kafka checks, with the broker's values of each.
    fn pairs(&self) -> [(&'static str, i32, &'static str, i32); 3] {
        [
            (
                "consumer.session.timeout.ms",
                self.consumer_session_timeout_ms,
                "consumer.heartbeat.interval.ms",
                self.consumer_heartbeat_interval_ms,
            ),
            (
                "share.session.timeout.ms",
                self.share_session_timeout_ms,
                "share.heartbeat.interval.ms",
                self.share_heartbeat_interval_ms,
            ),
            (
                "streams.session.timeout.ms",
                self.streams_session_timeout_ms,
                "streams.heartbeat.interval.ms",
                self.streams_heartbeat_interval_ms,
            ),
        ]
    }

    /// The effective value of `d` for a group with `configs`, and whether it is set on the
    /// group. A set value outside the broker's current bounds is clamped to them, as Kafka's
    /// `GroupConfig.evaluate` does (the bounds may have changed since it was set).
    pub fn effective(&self, d: &GroupDef, configs: &GroupConfigMap) -> (Option<String>, bool) {
        if let Some(v) = configs.get(d.name) {
            return (Some(v.clone()), true);
        }
        let value = match d.broker {
            Some("group.streams.assignors") => self.streams_assignors.first().cloned(),
            Some(b) => Some(
                self.broker_value(b)
                    .unwrap_or_else(|| d.broker_default.to_string()),
            ),
            None => d.default.map(str::to_string),
        };
        (value, false)
    }

    /// The value of integer config `name` for `configs`, clamped as Kafka's `evaluate` does.
    fn int(&self, configs: &GroupConfigMap, name: &str) -> i32 {
        let Some(d) = group_def(name) else {
            return 0;
        };
        let (v, set) = self.effective(d, configs);
        let v: i32 = v
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| d.default.and_then(|v| v.parse().ok()).unwrap_or_default());
        if !set {
            return v;
        }
        let v = match self.bounds(name) {
            Some((min, max)) => v.clamp(min, max.max(min)),
            None => v,
        };
        let v = self.max_of(name).map_or(v, |max| v.min(max));
        Self::min_of(name).map_or(v, |min| v.max(min))
    }

    fn text(&self, configs: &GroupConfigMap, name: &str) -> String {
        group_def(name)
            .and_then(|d| self.effective(d, configs).0)
            .unwrap_or_default()
    }

    fn boolean(&self, configs: &GroupConfigMap, name: &str) -> bool {
        self.text(configs, name).trim().eq_ignore_ascii_case("true")
    }

    /// Every group config of a group with `configs`, resolved.
    pub fn resolve(&self, configs: &GroupConfigMap) -> GroupConfigValues {
        GroupConfigValues {
            consumer_session_timeout_ms: self.int(configs, "consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms: self.int(configs, "consumer.heartbeat.interval.ms"),
            consumer_assignment_interval_ms: self.int(configs, "consumer.assignment.interval.ms"),
            consumer_assignor_offload_enable: self
                .boolean(configs, "consumer.assignor.offload.enable"),
            share_session_timeout_ms: self.int(configs, "share.session.timeout.ms"),
            share_heartbeat_interval_ms: self.int(configs, "share.heartbeat.interval.ms"),
            share_record_lock_duration_ms: self.int(configs, "share.record.lock.duration.ms"),
            share_delivery_count_limit: self.int(configs, "share.delivery.count.limit"),
            share_partition_max_record_locks: self.int(configs, "share.partition.max.record.locks"),
            share_auto_offset_reset: ShareAutoOffsetReset::parse(
                &self.text(configs, "share.auto.offset.reset"),
            )
            .unwrap_or(ShareAutoOffsetReset::Latest),
            share_isolation_level: if self.text(configs, "share.isolation.level")
                == "read_committed"
            {
                IsolationLevel::ReadCommitted
            } else {
                IsolationLevel::ReadUncommitted
            },
            share_renew_acknowledge_enable: self.boolean(configs, "share.renew.acknowledge.enable"),
            share_assignment_interval_ms: self.int(configs, "share.assignment.interval.ms"),
            share_assignor_offload_enable: self.boolean(configs, "share.assignor.offload.enable"),
            streams_session_timeout_ms: self.int(configs, "streams.session.timeout.ms"),
            streams_heartbeat_interval_ms: self.int(configs, "streams.heartbeat.interval.ms"),
            streams_num_standby_replicas: self.int(configs, "streams.num.standby.replicas"),
            streams_initial_rebalance_delay_ms: self
                .int(configs, "streams.initial.rebalance.delay.ms"),
            streams_assignment_interval_ms: self.int(configs, "streams.assignment.interval.ms"),
            streams_assignor_offload_enable: self
                .boolean(configs, "streams.assignor.offload.enable"),
            streams_task_offset_interval_ms: self.int(configs, "streams.task.offset.interval.ms"),
            streams_num_warmup_replicas: self.int(configs, "streams.num.warmup.replicas"),
            streams_rack_aware_assignment_tags: list_items(
                &self.text(configs, "streams.rack.aware.assignment.tags"),
            )
            .map(str::to_owned)
            .collect(),
            streams_acceptable_recovery_lag: self
                .text(configs, "streams.acceptable.recovery.lag")
                .trim()
                .parse()
                .unwrap_or(10_000),
            streams_assignor_name: self.text(configs, "streams.assignor.name"),
            errors_deadletterqueue_topic_name: self
                .text(configs, "errors.deadletterqueue.topic.name"),
            errors_deadletterqueue_copy_record_enable: self
                .boolean(configs, "errors.deadletterqueue.copy.record.enable"),
        }
    }

    /// Validates a group's whole new set of configs as Kafka's `GroupConfig.validate` does:
    /// known names, no duplicate rack tags, each value's type and range, then the broker's
    /// bounds, the registered streams assignors, session above heartbeat, the DLQ topic name.
    ///
    /// # Errors
    /// Kafka's message (INVALID_CONFIG).
    pub fn validate(&self, configs: &GroupConfigMap) -> Result<(), String> {
        for name in configs.keys() {
            if group_def(name).is_none() {
                return Err(format!("Unknown group config name: {name}"));
            }
        }
        if let Some(tags) = configs.get("streams.rack.aware.assignment.tags") {
            let t = tags.trim();
            let items: Vec<&str> = if t.is_empty() {
                Vec::new()
            } else {
                t.split(',').map(str::trim).collect()
            };
            let unique: std::collections::BTreeSet<&&str> = items.iter().collect();
            if unique.len() != items.len() {
                return Err(
                    "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
                        .into(),
                );
            }
        }
        // ConfigDef.parse: each value's type and range; the first failure wins (Kafka checks
        // in its definition order, this in name order: they differ only with two bad values).
        for d in GROUP_DEFS {
            let Some(v) = configs.get(d.name) else {
                continue;
            };
            if d.name == "share.auto.offset.reset" {
                if ShareAutoOffsetReset::parse(v.trim()).is_none() {
                    return Err(format!(
                        "Invalid value {v} for configuration {n}: Invalid value `{v}` for configuration {n}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
                        n = d.name
                    ));
                }
                continue;
            }
            check_value(d.name, v, d.kind)?;
        }
        let parsed = |name: &str| -> Option<i64> { configs.get(name)?.trim().parse().ok() };
        for name in [
            "consumer.heartbeat.interval.ms",
            "consumer.session.timeout.ms",
            "consumer.assignment.interval.ms",
            "share.heartbeat.interval.ms",
            "share.session.timeout.ms",
            "share.record.lock.duration.ms",
            "share.delivery.count.limit",
            "share.partition.max.record.locks",
            "share.assignment.interval.ms",
            "streams.heartbeat.interval.ms",
            "streams.session.timeout.ms",
            "streams.num.standby.replicas",
            "streams.assignment.interval.ms",
            "streams.task.offset.interval.ms",
            "streams.num.warmup.replicas",
        ] {
            let Some(v) = parsed(name) else { continue };
            if let Some((min, max)) = self.bounds(name) {
                if v < i64::from(min) || v > i64::from(max) {
                    return Err(format!(
                        "{name} must be in the range {min} to {max} inclusive."
                    ));
                }
            }
            if let Some(max) = self.max_of(name) {
                if v > i64::from(max) {
                    return Err(format!("{name} must be less than or equal to {max}"));
                }
            }
            if let Some(min) = Self::min_of(name) {
                if v < i64::from(min) {
                    return Err(format!("{name} must be greater than or equal to {min}"));
                }
            }
        }
        if let Some(name) = configs.get("streams.assignor.name") {
            if !self.streams_assignors.iter().any(|a| a == name) {
                return Err(format!(
                    "streams.assignor.name '{name}' is not a registered task assignor. Registered assignors are: [{}].",
                    self.streams_assignors.join(", ")
                ));
            }
        }
        for (session_key, session, heartbeat_key, heartbeat) in self.pairs() {
            if configs.contains_key(session_key) || configs.contains_key(heartbeat_key) {
                let s = parsed(session_key).unwrap_or(i64::from(session));
                let h = parsed(heartbeat_key).unwrap_or(i64::from(heartbeat));
                if s <= h {
                    return Err(format!(
                        "{session_key} must be greater than {heartbeat_key}"
                    ));
                }
            }
        }
        if let Some(dlq) = configs.get("errors.deadletterqueue.topic.name") {
            if dlq.starts_with("__") {
                return Err(
                    "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

/// `share.auto.offset.reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareAutoOffsetReset {
    Earliest,
    Latest,
    /// `by_duration:<ISO-8601 duration>`: the offset of the records this long before now.
    ByDuration {
        ms: i64,
    },
}

impl ShareAutoOffsetReset {
    /// Kafka's `ShareGroupAutoOffsetResetStrategy.fromString` (`none` is not a share
    /// strategy).
    pub fn parse(s: &str) -> Option<ShareAutoOffsetReset> {
        match s {
            "earliest" => Some(ShareAutoOffsetReset::Earliest),
            "latest" => Some(ShareAutoOffsetReset::Latest),
            _ => {
                let d = s.strip_prefix("by_duration:")?;
                let ms = iso_duration_ms(d.trim())?;
                (ms >= 0).then_some(ShareAutoOffsetReset::ByDuration { ms })
            }
        }
    }
}

/// Java's `Duration.parse` for `PnDTnHnMn.nS` (optional signs), in milliseconds.
fn iso_duration_ms(s: &str) -> Option<i64> {
    let (negate, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let s = s.strip_prefix(['P', 'p'])?;
    let (date, time) = match s.find(['T', 't']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut total: f64 = 0.0;
    let mut parts = 0;
    let mut take = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut rest = part;
        let mut next_unit = 0;
        while !rest.is_empty() {
            let end = rest.find(|c: char| c.is_ascii_alphabetic())?;
            let (num, unit) = (&rest[..end], rest[end..].chars().next()?);
            let i = units
                .iter()
                .skip(next_unit)
                .position(|(u, _)| u.eq_ignore_ascii_case(&unit))?
                + next_unit;
            let is_seconds = units[i].0 == 'S';
            let n: f64 = if is_seconds {
                num.replace(',', ".").parse().ok()?
            } else {
                num.parse::<i64>().ok()? as f64
            };
            total += n * units[i].1;
            next_unit = i + 1;
            parts += 1;
            rest = &rest[end + 1..];
        }
        Some(())
    };
    take(date, &[('D', 86_400_000.0)])?;
    if let Some(t) = time {
        if t.is_empty() {
            return None;
        }
        take(t, &[('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)])?;
    }
    if parts == 0 || !total.is_finite() {
        return None;
    }
    let ms = total.round() as i64;
    Some(if negate { -ms } else { ms })
}

/// `share.isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    ReadUncommitted,
    ReadCommitted,
}

/// A group's effective settings: each group config as set on the group (clamped to the
/// broker's current bounds, as Kafka does), else the broker-level default. What the group
/// kinds' handlers read ([`GroupConfigs::get`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfigValues {
    pub consumer_session_timeout_ms: i32,
    pub consumer_heartbeat_interval_ms: i32,
    pub consumer_assignment_interval_ms: i32,
    pub consumer_assignor_offload_enable: bool,
    pub share_session_timeout_ms: i32,
    pub share_heartbeat_interval_ms: i32,
    pub share_record_lock_duration_ms: i32,
    pub share_delivery_count_limit: i32,
    pub share_partition_max_record_locks: i32,
    pub share_auto_offset_reset: ShareAutoOffsetReset,
    pub share_isolation_level: IsolationLevel,
    pub share_renew_acknowledge_enable: bool,
    pub share_assignment_interval_ms: i32,
    pub share_assignor_offload_enable: bool,
    pub streams_session_timeout_ms: i32,
    pub streams_heartbeat_interval_ms: i32,
    pub streams_num_standby_replicas: i32,
    pub streams_initial_rebalance_delay_ms: i32,
    pub streams_assignment_interval_ms: i32,
    pub streams_assignor_offload_enable: bool,
    pub streams_task_offset_interval_ms: i32,
    pub streams_num_warmup_replicas: i32,
    pub streams_rack_aware_assignment_tags: Vec<String>,
    pub streams_acceptable_recovery_lag: i64,
    /// The streams task assignor: set on the group, else the first of the broker's.
    pub streams_assignor_name: String,
    /// Empty: the group has no dead-letter queue.
    pub errors_deadletterqueue_topic_name: String,
    pub errors_deadletterqueue_copy_record_enable: bool,
}

/// Every group's explicitly set configs on this node, and the broker-level defaults they are
/// resolved against. Reads vastly outnumber changes, hence the `RwLock`; no lock is held
/// across an `.await`.
#[derive(Debug, Default)]
pub struct GroupConfigs {
    defaults: GroupDefaults,
    by_group: RwLock<BTreeMap<String, GroupConfigMap>>,
}

impl GroupConfigs {
    /// No group configs yet, resolved against `defaults`.
    pub fn new(defaults: GroupDefaults) -> GroupConfigs {
        GroupConfigs {
            defaults,
            by_group: RwLock::default(),
        }
    }

    pub fn defaults(&self) -> &GroupDefaults {
        &self.defaults
    }

    /// Group `group_id`'s effective settings (the broker's defaults for a group with none
    /// set, or no such group).
    pub fn get(&self, group_id: &str) -> GroupConfigValues {
        let inner = self.read();
        match inner.get(group_id) {
            Some(c) => self.defaults.resolve(c),
            None => self.defaults.resolve(&GroupConfigMap::new()),
        }
    }

    /// The configs explicitly set on group `group_id` (empty if none).
    pub fn configs(&self, group_id: &str) -> GroupConfigMap {
        self.read().get(group_id).cloned().unwrap_or_default()
    }

    /// Replaces the configs set on group `group_id` (empty: none).
    pub fn set(&self, group_id: &str, configs: GroupConfigMap) {
        let mut inner = self.by_group.write().unwrap_or_else(|e| e.into_inner());
        if configs.is_empty() {
            inner.remove(group_id);
        } else {
            inner.insert(group_id.to_string(), configs);
        }
    }

    /// Every group with configs set, sorted (Kafka's ListConfigResources for GROUP).
    pub fn groups(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, GroupConfigMap>> {
        // A poisoned lock only means another thread panicked; each write is one insert.
        self.by_group.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> GroupConfigMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_are_sorted_and_unique_and_defaults_valid() {
        assert!(GROUP_DEFS.windows(2).all(|w| w[0].name < w[1].name));
        let d = GroupDefaults::default();
        for def in GROUP_DEFS {
            if let Some(v) = def.default {
                // Kafka's static defaults hold against its own broker defaults.
                if def.name != "streams.assignor.name" {
                    assert_eq!(d.validate(&map(&[(def.name, v)])), Ok(()), "{}", def.name);
                }
            }
        }
    }

    #[test]
    fn validation_messages_are_kafkas() {
        let d = GroupDefaults::default();
        assert_eq!(
            d.validate(&map(&[("no.such", "1")])),
            Err("Unknown group config name: no.such".into())
        );
        assert_eq!(
            d.validate(&map(&[("share.session.timeout.ms", "1000")])),
            Err("share.session.timeout.ms must be in the range 45000 to 60000 inclusive.".into())
        );
        assert_eq!(
            d.validate(&map(&[("share.record.lock.duration.ms", "999")])),
            Err("Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000".into())
        );
        assert_eq!(
            d.validate(&map(&[("share.isolation.level", "x")])),
            Err("Invalid value x for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted".into())
        );
        assert!(d
            .validate(&map(&[("share.auto.offset.reset", "none")]))
            .is_err());
        assert!(d
            .validate(&map(&[("share.auto.offset.reset", "by_duration:PT1H30M")]))
            .is_ok());
        assert!(d
            .validate(&map(&[("share.auto.offset.reset", "by_duration:-PT1H")]))
            .is_err());
        assert_eq!(
            d.validate(&map(&[("streams.num.standby.replicas", "3")])),
            Err("streams.num.standby.replicas must be less than or equal to 2".into())
        );
        assert_eq!(
            d.validate(&map(&[
                ("share.session.timeout.ms", "50000"),
                ("share.heartbeat.interval.ms", "15000")
            ])),
            Ok(())
        );
        assert_eq!(
            d.validate(&map(&[("streams.assignor.name", "learner")])),
            Err("streams.assignor.name 'learner' is not a registered task assignor. Registered assignors are: [sticky].".into())
        );
    }

    #[test]
    fn get_resolves_against_defaults_and_clamps() {
        let configs = GroupConfigs::new(GroupDefaults::default());
        let v = configs.get("g");
        assert_eq!(v.share_record_lock_duration_ms, 30_000);
        assert_eq!(v.share_auto_offset_reset, ShareAutoOffsetReset::Latest);
        assert_eq!(v.streams_assignor_name, "sticky");
        configs.set(
            "g",
            map(&[
                ("share.auto.offset.reset", "earliest"),
                ("share.record.lock.duration.ms", "90000"),
                ("share.isolation.level", "read_committed"),
            ]),
        );
        let v = configs.get("g");
        assert_eq!(v.share_auto_offset_reset, ShareAutoOffsetReset::Earliest);
        assert_eq!(
            v.share_record_lock_duration_ms, 60_000,
            "clamped to the max"
        );
        assert_eq!(v.share_isolation_level, IsolationLevel::ReadCommitted);
        assert_eq!(configs.groups(), vec!["g".to_string()]);
        configs.set("g", GroupConfigMap::new());
        assert!(configs.groups().is_empty());
    }

    #[test]
    fn iso_durations() {
        assert_eq!(iso_duration_ms("PT1H"), Some(3_600_000));
        assert_eq!(iso_duration_ms("P1DT0.5S"), Some(86_400_500));
        assert_eq!(iso_duration_ms("P"), None);
        assert_eq!(iso_duration_ms("PT"), None);
        assert_eq!(iso_duration_ms("1H"), None);
    }
}
