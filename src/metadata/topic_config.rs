//! Topic configuration: every topic config Apache Kafka 4.4 defines (`TopicConfig`/`LogConfig`),
//! with its default, type, validator and the broker setting that supplies the default, validated
//! as Kafka's `ConfigDef` does (same messages), and [`LogSettings`], the part the in-memory log
//! applies.

use std::collections::BTreeMap;

/// A topic's explicitly set configs (Kafka's dynamic topic configs), by name.
pub type TopicConfigs = BTreeMap<String, String>;

/// Kafka's `ConfigDef.Type`, with the `ConfigType` code DescribeConfigs v3+ reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Boolean,
    /// String, one of these (empty: any).
    Str(&'static [&'static str]),
    Int(i64, i64),
    Long(i64, i64),
    Double(f64, f64),
    /// Comma-separated list, each item one of these (empty: any).
    List(&'static [&'static str]),
    /// A compression level: `-1` or `min..=max`.
    Level(i64, i64),
}

impl Kind {
    /// DescribeConfigs' `config_type` (`DescribeConfigsResponse.ConfigType`).
    pub fn code(self) -> i8 {
        match self {
            Kind::Boolean => 1,
            Kind::Str(_) => 2,
            Kind::Int(..) | Kind::Level(..) => 3,
            Kind::Long(..) => 5,
            Kind::Double(..) => 6,
            Kind::List(_) => 7,
        }
    }

    fn is_list(self) -> bool {
        matches!(self, Kind::List(_))
    }
}

/// One topic config.
#[derive(Debug)]
pub struct Def {
    pub name: &'static str,
    /// Kafka's default, as DescribeConfigs shows it.
    pub default: &'static str,
    pub kind: Kind,
    /// The broker setting that supplies the default (Kafka's first synonym).
    pub broker: Option<&'static str>,
    pub doc: &'static str,
}

const LMAX: i64 = i64::MAX;
const IMAX: i64 = i32::MAX as i64;

macro_rules! def {
    ($name:literal, $default:literal, $kind:expr, $broker:expr, $doc:literal) => {
        Def {
            name: $name,
            default: $default,
            kind: $kind,
            broker: $broker,
            doc: $doc,
        }
    };
}

/// Every topic config of Kafka 4.4, sorted by name (DescribeConfigs lists them in this order).
pub static DEFS: &[Def] = &[
    def!("cleanup.policy", "delete", Kind::List(&["compact", "delete"]), Some("log.cleanup.policy"), "The retention policy on old log segments: delete, compact, or both."),
    def!("compression.gzip.level", "-1", Kind::Level(1, 9), Some("compression.gzip.level"), "The compression level to use if compression.type is set to gzip."),
    def!("compression.lz4.level", "9", Kind::Int(1, 17), Some("compression.lz4.level"), "The compression level to use if compression.type is set to lz4."),
    def!("compression.type", "producer", Kind::Str(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), Some("compression.type"), "The final compression type for a given topic."),
    def!("compression.zstd.level", "3", Kind::Int(-131_072, 22), Some("compression.zstd.level"), "The compression level to use if compression.type is set to zstd."),
    def!("delete.retention.ms", "86400000", Kind::Long(0, LMAX), Some("log.cleaner.delete.retention.ms"), "The amount of time to retain tombstone markers for log compacted topics."),
    def!("errors.deadletterqueue.group.enable", "false", Kind::Boolean, None, "Whether share groups may use this topic as a dead-letter queue (Kafka 4.4)."),
    def!("file.delete.delay.ms", "60000", Kind::Long(0, LMAX), Some("log.segment.delete.delay.ms"), "The time to wait before deleting a file from the filesystem."),
    def!("flush.messages", "9223372036854775807", Kind::Long(1, LMAX), Some("log.flush.interval.messages"), "The number of messages accumulated before a fsync is forced."),
    def!("flush.ms", "9223372036854775807", Kind::Long(0, LMAX), Some("log.flush.interval.ms"), "The time interval after which a fsync is forced."),
    def!("follower.replication.throttled.replicas", "", Kind::List(&[]), Some("follower.replication.throttled.replicas"), "A list of replicas for which log replication should be throttled on the follower side."),
    def!("index.interval.bytes", "4096", Kind::Int(0, IMAX), Some("log.index.interval.bytes"), "How frequently Kafka adds an index entry to its offset index."),
    def!("leader.replication.throttled.replicas", "", Kind::List(&[]), Some("leader.replication.throttled.replicas"), "A list of replicas for which log replication should be throttled on the leader side."),
    def!("local.retention.bytes", "-2", Kind::Long(-2, LMAX), Some("log.local.retention.bytes"), "The maximum size of local log segments before they are eligible for deletion (tiered storage)."),
    def!("local.retention.ms", "-2", Kind::Long(-2, LMAX), Some("log.local.retention.ms"), "The time to retain local log segments before they are eligible for deletion (tiered storage)."),
    def!("max.compaction.lag.ms", "9223372036854775807", Kind::Long(1, LMAX), Some("log.cleaner.max.compaction.lag.ms"), "The maximum time a message will remain ineligible for compaction in the log."),
    def!("max.decompressed.message.bytes", "2147483639", Kind::Int(0, IMAX), None, "The largest size a record batch may decompress to (Kafka 4.4)."),
    def!("max.message.bytes", "1048588", Kind::Int(0, IMAX), Some("message.max.bytes"), "The largest record batch size allowed by Kafka (after compression if compression is enabled)."),
    def!("message.timestamp.after.max.ms", "3600000", Kind::Long(0, LMAX), Some("log.message.timestamp.after.max.ms"), "The maximum allowed time a message timestamp may be ahead of the broker's timestamp."),
    def!("message.timestamp.before.max.ms", "9223372036854775807", Kind::Long(0, LMAX), Some("log.message.timestamp.before.max.ms"), "The maximum allowed time a message timestamp may be behind the broker's timestamp."),
    def!("message.timestamp.type", "CreateTime", Kind::Str(&["CreateTime", "LogAppendTime"]), Some("log.message.timestamp.type"), "Define whether the timestamp in the message is message create time or log append time."),
    def!("min.cleanable.dirty.ratio", "0.5", Kind::Double(0.0, 1.0), Some("log.cleaner.min.cleanable.ratio"), "How frequently the log compactor will attempt to clean the log."),
    def!("min.compaction.lag.ms", "0", Kind::Long(0, LMAX), Some("log.cleaner.min.compaction.lag.ms"), "The minimum time a message will remain uncompacted in the log."),
    def!("min.insync.replicas", "1", Kind::Int(1, IMAX), Some("min.insync.replicas"), "The minimum number of replicas that must acknowledge a write with acks=all."),
    def!("preallocate", "false", Kind::Boolean, Some("log.preallocate"), "True if we should preallocate the file on disk when creating a new log segment."),
    def!("remote.copy.lag.bytes", "-1", Kind::Long(-1, LMAX), None, "How far the local log may run ahead of the remote copy, in bytes (tiered storage)."),
    def!("remote.copy.lag.ms", "0", Kind::Long(0, LMAX), None, "How far the local log may run ahead of the remote copy, in time (tiered storage)."),
    def!("remote.log.copy.disable", "false", Kind::Boolean, None, "Disables copying of log segments to remote storage (tiered storage)."),
    def!("remote.log.delete.on.disable", "false", Kind::Boolean, None, "Deletes remote data when tiered storage is disabled for the topic."),
    def!("remote.storage.enable", "false", Kind::Boolean, None, "Enables tiered storage for the topic."),
    def!("retention.bytes", "-1", Kind::Long(i64::MIN, LMAX), Some("log.retention.bytes"), "The maximum size a partition can grow to before old log segments are discarded (delete policy)."),
    def!("retention.ms", "604800000", Kind::Long(-1, LMAX), Some("log.retention.ms"), "The maximum time a log is retained before old log segments are discarded (delete policy)."),
    def!("segment.bytes", "1073741824", Kind::Int(1_048_576, IMAX), Some("log.segment.bytes"), "The segment file size for the log."),
    def!("segment.index.bytes", "10485760", Kind::Int(4, IMAX), Some("log.index.size.max.bytes"), "The size of the index that maps offsets to file positions."),
    def!("segment.jitter.ms", "0", Kind::Long(0, LMAX), Some("log.roll.jitter.ms"), "The maximum random jitter subtracted from the scheduled segment roll time."),
    def!("segment.ms", "604800000", Kind::Long(1, LMAX), Some("log.roll.ms"), "The period of time after which Kafka will force the log to roll."),
    def!("unclean.leader.election.enable", "false", Kind::Boolean, Some("unclean.leader.election.enable"), "Indicates whether to enable replicas not in the ISR set to be elected as leader."),
];

/// The definition of config `name`.
pub fn def(name: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.name == name)
}

/// Where an effective value comes from, as DescribeConfigs' `config_source` codes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Set on the topic (DYNAMIC_TOPIC_CONFIG).
    Topic = 1,
    /// koord's own configuration file sets the broker synonym (STATIC_BROKER_CONFIG).
    StaticBroker = 4,
    /// Kafka's default (DEFAULT_CONFIG).
    Default = 5,
}

/// What of koord's own configuration sets topic configs' defaults (their broker synonyms):
/// [`crate::config::Config::topic_defaults`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerDefaults {
    /// `log.retention.bytes`.
    pub log_retention_bytes: i64,
}

impl Default for BrokerDefaults {
    fn default() -> Self {
        BrokerDefaults {
            log_retention_bytes: -1,
        }
    }
}

/// The broker-level default of a topic config: koord's own setting where it has one.
pub fn broker_default(d: &Def, broker: &BrokerDefaults) -> (String, Source) {
    if d.name == "retention.bytes" && broker.log_retention_bytes != -1 {
        return (broker.log_retention_bytes.to_string(), Source::StaticBroker);
    }
    (d.default.to_string(), Source::Default)
}

/// The effective value of `d` for a topic with `configs`.
pub fn effective(d: &Def, configs: &TopicConfigs, broker: &BrokerDefaults) -> (String, Source) {
    match configs.get(d.name) {
        Some(v) => (v.clone(), Source::Topic),
        None => broker_default(d, broker),
    }
}

/// Kafka's `ConfigException` message for a bad value.
fn invalid(name: &str, value: &str, why: impl std::fmt::Display) -> String {
    format!("Invalid value {value} for configuration {name}: {why}")
}

fn range(name: &str, value: &str, v: i64, min: i64, max: i64) -> Result<(), String> {
    if v < min {
        Err(invalid(
            name,
            value,
            format!("Value must be at least {min}"),
        ))
    } else if v > max {
        Err(invalid(
            name,
            value,
            format!("Value must be no more than {max}"),
        ))
    } else {
        Ok(())
    }
}

/// Validates one config as Kafka does: the name must be a topic config, the value must parse as
/// its type and pass its validator.
///
/// # Errors
/// Kafka's message: `Unknown topic config name: x`, or `Invalid value v for configuration x: ...`.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let d = def(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    check_value(name, value, d.kind)
}

/// Validates `value` as a config of type `kind` (Kafka's `ConfigDef` parse and validator);
/// group configs share it ([`super::group_config`]).
///
/// # Errors
/// Kafka's message: `Invalid value v for configuration x: ...`.
pub fn check_value(name: &str, value: &str, kind: Kind) -> Result<(), String> {
    let t = value.trim();
    match kind {
        Kind::Boolean => {
            if !(t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false")) {
                return Err(invalid(
                    name,
                    value,
                    "Expected value to be either true or false",
                ));
            }
        }
        Kind::Str(choices) => {
            if !choices.is_empty() && !choices.contains(&t) {
                return Err(invalid(
                    name,
                    value,
                    format!("String must be one of: {}", choices.join(", ")),
                ));
            }
        }
        Kind::Int(min, max) => {
            let v: i32 = t
                .parse()
                .map_err(|_| invalid(name, value, "Not a number of type INT"))?;
            range(name, value, v.into(), min, max)?;
        }
        Kind::Level(min, max) => {
            let v: i32 = t
                .parse()
                .map_err(|_| invalid(name, value, "Not a number of type INT"))?;
            if v != -1 && !(min..=max).contains(&i64::from(v)) {
                return Err(invalid(
                    name,
                    value,
                    format!("Value must be between {min} and {max} or -1"),
                ));
            }
        }
        Kind::Long(min, max) => {
            let v: i64 = t
                .parse()
                .map_err(|_| invalid(name, value, "Not a number of type LONG"))?;
            range(name, value, v, min, max)?;
        }
        Kind::Double(min, max) => {
            let v: f64 = t
                .parse()
                .map_err(|_| invalid(name, value, "Not a number of type DOUBLE"))?;
            if v < min {
                return Err(invalid(
                    name,
                    value,
                    format!("Value must be at least {min}"),
                ));
            }
            if v > max {
                return Err(invalid(
                    name,
                    value,
                    format!("Value must be no more than {max}"),
                ));
            }
        }
        Kind::List(choices) => {
            for item in list_items(t) {
                if !choices.is_empty() && !choices.contains(&item) {
                    return Err(invalid(
                        name,
                        value,
                        format!("String must be one of: {}", choices.join(", ")),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The items of a list config value.
pub fn list_items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Whether `name` is a list config (IncrementalAlterConfigs APPEND and SUBTRACT apply to it).
pub fn is_list(name: &str) -> bool {
    def(name).is_some_and(|d| d.kind.is_list())
}

/// What the in-memory log applies of a topic's configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSettings {
    /// `retention.bytes`: bytes kept per partition; `None` unbounded.
    pub retention_bytes: Option<u64>,
    /// `retention.ms` when set on the topic: batches whose max timestamp is older are dropped;
    /// `None` forever.
    pub retention_ms: Option<i64>,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `cleanup.policy` includes `compact`.
    pub compact: bool,
    /// `cleanup.policy` includes `delete` (size and time retention apply).
    pub delete: bool,
    /// `segment.bytes`: how much is appended before the log rolls (and compacts).
    pub segment_bytes: u64,
    /// `min.cleanable.dirty.ratio` in thousandths: a rolled compacted log compacts only once
    /// the bytes appended since its last compaction are at least this share of it (Kafka's
    /// cleaner rule), so compacting costs a bounded multiple of what was appended.
    pub min_dirty_permille: u64,
    /// `delete.retention.ms`: how long a compacted log keeps a tombstone.
    pub delete_retention_ms: i64,
    /// `message.timestamp.type` is `LogAppendTime`.
    pub log_append_time: bool,
}

impl LogSettings {
    /// The settings of a topic with `configs` on a broker configured as `broker`.
    pub fn new(configs: &TopicConfigs, broker: &BrokerDefaults) -> LogSettings {
        let get = |name: &str| def(name).map(|d| effective(d, configs, broker).0);
        let long = |name: &str, fallback: i64| {
            get(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(fallback)
        };
        let policy = get("cleanup.policy").unwrap_or_default();
        let items: Vec<&str> = list_items(&policy).collect();
        LogSettings {
            retention_bytes: u64::try_from(long("retention.bytes", -1)).ok(),
            // Only a topic's own retention.ms applies: koord's memory-only logs are bounded by
            // size, and a 7-day default would drop records clients stamp with old timestamps.
            retention_ms: configs
                .get("retention.ms")
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|ms| *ms >= 0),
            max_message_bytes: usize::try_from(long("max.message.bytes", 1_048_588)).unwrap_or(0),
            compact: items.contains(&"compact"),
            delete: items.contains(&"delete"),
            segment_bytes: u64::try_from(long("segment.bytes", 1 << 30)).unwrap_or(1 << 30),
            min_dirty_permille: get("min.cleanable.dirty.ratio")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map_or(500, |r| (r.clamp(0.0, 1.0) * 1000.0).round() as u64),
            delete_retention_ms: long("delete.retention.ms", 86_400_000),
            log_append_time: get("message.timestamp.type").as_deref() == Some("LogAppendTime"),
        }
    }

    /// Kafka's defaults with `log.retention.bytes` = `retention_bytes` (negative: unbounded).
    pub fn with_retention_bytes(retention_bytes: i64) -> LogSettings {
        LogSettings {
            retention_bytes: u64::try_from(retention_bytes).ok(),
            retention_ms: None,
            max_message_bytes: usize::MAX,
            compact: false,
            delete: true,
            segment_bytes: 1 << 30,
            min_dirty_permille: 500,
            delete_retention_ms: 86_400_000,
            log_append_time: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_and_unique() {
        assert!(DEFS.windows(2).all(|w| w[0].name < w[1].name));
    }

    #[test]
    fn every_default_is_valid() {
        for d in DEFS {
            assert_eq!(validate(d.name, d.default), Ok(()), "{}", d.name);
        }
    }

    #[test]
    fn validation_messages_are_kafkas() {
        assert_eq!(
            validate("no.such.config", "1"),
            Err("Unknown topic config name: no.such.config".into())
        );
        assert_eq!(
            validate("retention.ms", "abc"),
            Err(
                "Invalid value abc for configuration retention.ms: Not a number of type LONG"
                    .into()
            )
        );
        assert_eq!(
            validate("retention.ms", "-5"),
            Err(
                "Invalid value -5 for configuration retention.ms: Value must be at least -1".into()
            )
        );
        assert_eq!(
            validate("cleanup.policy", "compact,bogus"),
            Err("Invalid value compact,bogus for configuration cleanup.policy: String must be one of: compact, delete".into())
        );
        assert!(validate("cleanup.policy", "compact, delete").is_ok());
        assert!(validate("preallocate", "TRUE").is_ok());
        assert!(validate("preallocate", "yes").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("max.message.bytes", "99999999999").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(validate("compression.gzip.level", "0").is_err());
    }

    #[test]
    fn settings_follow_configs_and_broker_defaults() {
        let broker = BrokerDefaults {
            log_retention_bytes: 5000,
        };
        let s = LogSettings::new(&TopicConfigs::new(), &broker);
        assert_eq!(s.retention_bytes, Some(5000));
        assert_eq!(s.retention_ms, None);
        assert!(s.delete && !s.compact && !s.log_append_time);
        let c: TopicConfigs = [
            ("retention.bytes", "-1"),
            ("retention.ms", "-1"),
            ("cleanup.policy", "compact"),
            ("message.timestamp.type", "LogAppendTime"),
            ("max.message.bytes", "100"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = LogSettings::new(&c, &broker);
        assert_eq!((s.retention_bytes, s.retention_ms), (None, None));
        assert!(s.compact && !s.delete && s.log_append_time);
        assert_eq!(s.max_message_bytes, 100);
    }
}
