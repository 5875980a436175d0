//! Client telemetry (KIP-714): koord as the receiver of the metrics clients push, so that what
//! a client sees of itself (its lag, the time between its polls, its commit latency) shows on
//! koord's `/metrics` and status page beside its group and member. GetTelemetrySubscriptions
//! and PushTelemetry are answered as Kafka 4.4's `ClientMetricsManager` answers them with one
//! subscription for every client: the metric prefixes of `telemetry.metrics`, pushed every
//! `telemetry.push.interval.ms`, cumulative (no delta temporality, so a sum reads as the client
//! reports it), at most `telemetry.max.bytes`.
//!
//! [`Clients`] is PURE (every call takes `now_ms`); [`Telemetry`] is the node's shared state
//! over it.

pub mod otlp;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use kafka_protocol::ResponseError;
use uuid::Uuid;

pub use otlp::{Point, Pushed};

/// What koord asks every client for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Metric name prefixes (`*`: all; none: nothing is pushed).
    pub metrics: Vec<String>,
    pub push_interval_ms: u32,
    pub max_bytes: u32,
}

/// What clients are asked for by default: how far behind a consumer is, how long between its
/// polls, its commits and rebalances as it sees them, and a producer's sends and errors.
pub const DEFAULT_METRICS: &[&str] = &[
    "org.apache.kafka.consumer.fetch.manager.records.lag",
    "org.apache.kafka.consumer.time.between.poll",
    "org.apache.kafka.consumer.last.poll.seconds.ago",
    "org.apache.kafka.consumer.poll.idle.ratio",
    "org.apache.kafka.consumer.coordinator.commit",
    "org.apache.kafka.consumer.coordinator.rebalance",
    "org.apache.kafka.consumer.coordinator.last.rebalance.seconds.ago",
    "org.apache.kafka.producer.record.send",
    "org.apache.kafka.producer.record.error",
    "org.apache.kafka.producer.request.latency",
];

/// The compression types a push may use, as Kafka lists them: zstd, lz4, gzip, snappy.
pub const ACCEPTED_COMPRESSION: [i8; 4] = [4, 3, 1, 2];

/// How long a client instance is remembered without a request, at least (Kafka's cache
/// expiry); three push intervals if longer.
const EXPIRY_MS: u64 = 60_000;
/// The most client instances kept (Kafka's cache size).
const MAX_INSTANCES: usize = 16_384;

/// Who a client instance is, from the request that created it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientMeta {
    pub client_id: String,
    pub software_name: String,
    pub software_version: String,
    pub address: String,
}

/// A subscription as GetTelemetrySubscriptions answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub push_interval_ms: i32,
    pub max_bytes: i32,
    pub metrics: Vec<String>,
}

/// A PushTelemetry request as checked: its instance and subscription ids, whether the client
/// is terminating, the payload's compression type and (compressed) length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Push {
    pub id: Uuid,
    pub subscription_id: i32,
    pub terminating: bool,
    pub compression: i8,
    pub len: usize,
}

/// A refusal: Kafka's error and message.
pub type Refused = (ResponseError, String);

#[derive(Debug, Clone)]
struct Instance {
    meta: ClientMeta,
    subscription_id: i32,
    last_get_ms: Option<u64>,
    last_push_ms: Option<u64>,
    terminating: bool,
    last_error: Option<ResponseError>,
    last_seen_ms: u64,
    /// The last push, and when it came.
    pushed: Option<(Pushed, u64)>,
}

/// Every client instance koord knows (PURE).
#[derive(Debug)]
pub struct Clients {
    settings: Settings,
    instances: HashMap<Uuid, Instance>,
}

/// One client's latest metrics, as `/metrics` and the status page show them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientView {
    pub client_instance_id: Uuid,
    pub meta: ClientMeta,
    pub group_id: Option<String>,
    pub member_id: Option<String>,
    pub points: Vec<Point>,
    /// Milliseconds since the push, at the time asked.
    pub age_ms: u64,
}

impl Clients {
    pub fn new(settings: Settings) -> Clients {
        Clients {
            settings,
            instances: HashMap::new(),
        }
    }

    fn expiry_ms(&self) -> u64 {
        EXPIRY_MS.max(3 * u64::from(self.settings.push_interval_ms))
    }

    /// The subscription id: a checksum of what is asked, with the instance id mixed in (as
    /// Kafka computes it).
    fn subscription_id(&self, id: Uuid) -> i32 {
        let text = format!(
            "[{}]{}",
            self.settings.metrics.join(", "),
            self.settings.push_interval_ms
        );
        let crc = crc32c::crc32c(text.as_bytes()) as i32;
        let (hi, lo) = id.as_u64_pair();
        let hash = hi ^ lo;
        crc ^ ((hash >> 32) as i32 ^ hash as i32)
    }

    fn instance(
        &mut self,
        id: Uuid,
        meta: impl FnOnce() -> ClientMeta,
        now_ms: u64,
    ) -> &mut Instance {
        self.expire(now_ms);
        let subscription_id = self.subscription_id(id);
        let i = self.instances.entry(id).or_insert_with(|| Instance {
            meta: meta(),
            subscription_id,
            last_get_ms: None,
            last_push_ms: None,
            terminating: false,
            last_error: None,
            last_seen_ms: now_ms,
            pushed: None,
        });
        i.last_seen_ms = now_ms;
        i
    }

    /// GetTelemetrySubscriptions: `id` is the client's instance id, `fresh` the one to give a
    /// client that has none yet (nil id).
    pub fn subscribe(
        &mut self,
        id: Uuid,
        fresh: Uuid,
        meta: impl FnOnce() -> ClientMeta,
        now_ms: u64,
    ) -> Result<Subscription, Refused> {
        let id = if id.is_nil() { fresh } else { id };
        let interval = u64::from(self.settings.push_interval_ms);
        let i = self.instance(id, meta, now_ms);
        // Kafka's `maybeUpdateGetRequestTimestamp`: one request per push interval, unless the
        // last push was refused for its subscription or compression.
        let last = i.last_get_ms.max(i.last_push_ms);
        let early = last.is_some_and(|t| now_ms.saturating_sub(t) < interval);
        if early
            && !matches!(
                i.last_error,
                Some(
                    ResponseError::UnknownSubscriptionId
                        | ResponseError::UnsupportedCompressionType
                )
            )
        {
            return Err((
                ResponseError::ThrottlingQuotaExceeded,
                format!(
                    "Request from the client [{id}] arrived before the next push interval time"
                ),
            ));
        }
        if !early {
            i.last_get_ms = Some(now_ms);
        }
        i.last_error = None;
        let subscription_id = i.subscription_id;
        Ok(Subscription {
            client_instance_id: id,
            subscription_id,
            push_interval_ms: i32::try_from(self.settings.push_interval_ms).unwrap_or(i32::MAX),
            max_bytes: i32::try_from(self.settings.max_bytes).unwrap_or(i32::MAX),
            metrics: self.settings.metrics.clone(),
        })
    }

    /// PushTelemetry, checked as Kafka's `validatePushRequest` does (the payload `len` bytes,
    /// still compressed). On success the caller decodes the payload and hands it to
    /// [`Clients::record`].
    pub fn push(
        &mut self,
        push: &Push,
        meta: impl FnOnce() -> ClientMeta,
        now_ms: u64,
    ) -> Result<(), Refused> {
        let Push {
            id,
            subscription_id,
            terminating,
            compression,
            len,
        } = *push;
        // Kafka's reserved ids: nil and the metadata topic's.
        if id.is_nil() || id == Uuid::from_u64_pair(0, 1) {
            return Err((
                ResponseError::InvalidRequest,
                format!("Invalid request from the client [{id}], invalid client instance id"),
            ));
        }
        let interval = u64::from(self.settings.push_interval_ms);
        let max = self.settings.max_bytes as usize;
        let i = self.instance(id, meta, now_ms);
        let refused = (|| {
            if i.terminating {
                return Err((ResponseError::InvalidRequest, format!("Client [{id}] sent the previous request with state terminating to TRUE, can not acceptany requests after that")));
            }
            let accept = i.last_get_ms > i.last_push_ms
                || i.last_push_ms
                    .is_none_or(|t| now_ms.saturating_sub(t) >= interval);
            if accept {
                i.last_push_ms = Some(now_ms);
            } else if !terminating {
                return Err((
                    ResponseError::ThrottlingQuotaExceeded,
                    format!(
                        "Request from the client [{id}] arrived before the next push interval time"
                    ),
                ));
            }
            if subscription_id != i.subscription_id {
                return Err((
                    ResponseError::UnknownSubscriptionId,
                    format!("Unknown client subscription id for the client [{id}]"),
                ));
            }
            if !(0..=4).contains(&compression) {
                return Err((ResponseError::UnsupportedCompressionType, format!("Unknown compression type [{compression}] is received in telemetry request from [{id}]")));
            }
            if len > max {
                return Err((ResponseError::TelemetryTooLarge, format!("Telemetry request from [{id}] is larger than the maximum allowed size [{max}]")));
            }
            Ok(())
        })();
        i.terminating = terminating;
        i.last_error = refused.as_ref().err().map(|(e, _)| *e);
        refused
    }

    /// Keeps `pushed` as the client's latest metrics (the payload of an accepted push), or
    /// notes that it could not be read (Kafka: INVALID_RECORD).
    pub fn record(&mut self, id: Uuid, pushed: Option<Pushed>, now_ms: u64) {
        if let Some(i) = self.instances.get_mut(&id) {
            match pushed {
                Some(p) => i.pushed = Some((p, now_ms)),
                None => i.last_error = Some(ResponseError::InvalidRecord),
            }
        }
    }

    /// Forgets instances not heard from for the expiry time, and the oldest beyond the most
    /// kept.
    pub fn expire(&mut self, now_ms: u64) {
        let expiry = self.expiry_ms();
        self.instances
            .retain(|_, i| now_ms.saturating_sub(i.last_seen_ms) < expiry);
        if self.instances.len() >= MAX_INSTANCES {
            let mut seen: Vec<u64> = self.instances.values().map(|i| i.last_seen_ms).collect();
            seen.sort_unstable();
            let cut = seen[self.instances.len() - MAX_INSTANCES / 2];
            self.instances.retain(|_, i| i.last_seen_ms >= cut);
        }
    }

    /// Every client that pushed metrics, in instance id order.
    pub fn views(&self, now_ms: u64) -> Vec<ClientView> {
        let mut out: Vec<ClientView> = self
            .instances
            .iter()
            .filter_map(|(id, i)| {
                let (pushed, at) = i.pushed.as_ref()?;
                let label = |k: &str| {
                    pushed
                        .resource
                        .iter()
                        .find(|(key, _)| key == k)
                        .map(|(_, v)| v.clone())
                };
                Some(ClientView {
                    client_instance_id: *id,
                    meta: i.meta.clone(),
                    group_id: label("group_id"),
                    member_id: label("group_member_id"),
                    points: pushed.points.clone(),
                    age_ms: now_ms.saturating_sub(*at),
                })
            })
            .collect();
        out.sort_by_key(|v| v.client_instance_id);
        out
    }
}

/// The clients' metrics in Prometheus' text format: one family, `koord_client_metric`, each
/// value labelled with the metric's name, the client (id, instance id), its group and member
/// when it said, and the data point's own attributes.
pub fn exposition(views: &[ClientView]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if views.iter().all(|v| v.points.is_empty()) {
        return out;
    }
    out.push_str(
        "# HELP koord_client_metric A metric a client pushed (KIP-714), as it reported it.\n",
    );
    out.push_str("# TYPE koord_client_metric gauge\n");
    for v in views {
        let mut fixed: Vec<(String, String)> = vec![
            ("client_id".into(), v.meta.client_id.clone()),
            (
                "client_instance_id".into(),
                v.client_instance_id.to_string(),
            ),
        ];
        if let Some(g) = &v.group_id {
            fixed.push(("group_id".into(), g.clone()));
        }
        if let Some(m) = &v.member_id {
            fixed.push(("member_id".into(), m.clone()));
        }
        for p in &v.points {
            let mut labels = vec![("name".to_string(), p.name.clone())];
            labels.extend(fixed.iter().cloned());
            for (k, val) in &p.attributes {
                let k = label_name(k);
                if !labels.iter().any(|(l, _)| *l == k) {
                    labels.push((k, val.clone()));
                }
            }
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, val)| format!("{k}=\"{}\"", escape_label(val)))
                .collect();
            let _ = writeln!(
                out,
                "koord_client_metric{{{}}} {}",
                labels.join(","),
                p.value
            );
        }
    }
    out
}

/// A Prometheus label name for an attribute key: what is not a letter, digit or `_` becomes `_`.
fn label_name(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The node's client telemetry.
#[derive(Debug)]
pub struct Telemetry {
    clients: Mutex<Clients>,
    epoch: Instant,
}

impl Telemetry {
    pub fn new(settings: Settings) -> Telemetry {
        Telemetry {
            clients: Mutex::new(Clients::new(settings)),
            epoch: Instant::now(),
        }
    }

    /// Milliseconds on the telemetry clock now.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn clients(&self) -> std::sync::MutexGuard<'_, Clients> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clients() -> Clients {
        Clients::new(Settings {
            metrics: vec!["org.apache.kafka.consumer.".into()],
            push_interval_ms: 1000,
            max_bytes: 100,
        })
    }

    fn push(
        id: Uuid,
        subscription_id: i32,
        terminating: bool,
        compression: i8,
        len: usize,
    ) -> Push {
        Push {
            id,
            subscription_id,
            terminating,
            compression,
            len,
        }
    }

    fn meta() -> ClientMeta {
        ClientMeta {
            client_id: "c".into(),
            ..ClientMeta::default()
        }
    }

    #[test]
    fn a_new_client_gets_an_id_and_a_subscription() {
        let mut c = clients();
        let fresh = Uuid::from_u64_pair(7, 7);
        let s = c.subscribe(Uuid::nil(), fresh, meta, 0).unwrap();
        assert_eq!(s.client_instance_id, fresh);
        assert_eq!(s.push_interval_ms, 1000);
        assert_eq!(s.metrics, vec!["org.apache.kafka.consumer.".to_string()]);
        // The same id, the same subscription id; another id, another.
        let again = c.subscribe(fresh, Uuid::nil(), meta, 1000).unwrap();
        assert_eq!(again.subscription_id, s.subscription_id);
        let other = c
            .subscribe(Uuid::from_u64_pair(8, 1), Uuid::nil(), meta, 0)
            .unwrap();
        assert_ne!(other.subscription_id, s.subscription_id);
    }

    #[test]
    fn pushes_are_checked_as_kafka_checks_them() {
        let mut c = clients();
        let id = Uuid::from_u64_pair(1, 2);
        let s = c.subscribe(id, Uuid::nil(), meta, 0).unwrap();
        let sub = s.subscription_id;
        let code = |r: Result<(), Refused>| r.err().map(|(e, _)| e);
        // Asking again before the interval: throttled.
        assert_eq!(
            c.subscribe(id, Uuid::nil(), meta, 10).unwrap_err().0,
            ResponseError::ThrottlingQuotaExceeded
        );
        // The first push after a subscription is taken at once; the next only an interval on.
        assert_eq!(code(c.push(&push(id, sub, false, 0, 10), meta, 20)), None);
        assert_eq!(
            code(c.push(&push(id, sub, false, 0, 10), meta, 500)),
            Some(ResponseError::ThrottlingQuotaExceeded)
        );
        assert_eq!(
            code(c.push(&push(id, sub + 1, false, 0, 10), meta, 1100)),
            Some(ResponseError::UnknownSubscriptionId)
        );
        // After an unknown subscription the client may ask again at once (and push an
        // interval after its last push).
        assert!(c.subscribe(id, Uuid::nil(), meta, 1101).is_ok());
        assert_eq!(
            code(c.push(&push(id, sub, false, 9, 10), meta, 2200)),
            Some(ResponseError::UnsupportedCompressionType)
        );
        assert!(c.subscribe(id, Uuid::nil(), meta, 2201).is_ok());
        assert_eq!(
            code(c.push(&push(id, sub, false, 0, 101), meta, 3300)),
            Some(ResponseError::TelemetryTooLarge)
        );
        assert_eq!(
            code(c.push(&push(Uuid::nil(), sub, false, 0, 1), meta, 5000)),
            Some(ResponseError::InvalidRequest)
        );
        // A terminating push is taken even early; nothing after it.
        assert_eq!(code(c.push(&push(id, sub, true, 0, 10), meta, 3301)), None);
        assert_eq!(
            code(c.push(&push(id, sub, true, 0, 10), meta, 5001)),
            Some(ResponseError::InvalidRequest)
        );
    }

    #[test]
    fn pushed_metrics_are_kept_with_the_group_and_member_and_expire() {
        let mut c = clients();
        let id = Uuid::from_u64_pair(3, 4);
        let sub = c
            .subscribe(id, Uuid::nil(), meta, 0)
            .unwrap()
            .subscription_id;
        c.push(&push(id, sub, false, 0, 10), meta, 1).unwrap();
        let pushed = otlp::decode(&otlp::tests::sample("g", "m-1")).unwrap();
        c.record(id, Some(pushed), 1);
        let views = c.views(11);
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].group_id.as_deref(), Some("g"));
        assert_eq!(views[0].member_id.as_deref(), Some("m-1"));
        assert_eq!(views[0].meta.client_id, "c");
        assert_eq!(views[0].age_ms, 10);
        assert_eq!(views[0].points.len(), 2);
        let text = exposition(&views);
        assert!(
            text.contains("koord_client_metric{name=\"org.apache.kafka.consumer.fetch.manager.records.lag.max\",client_id=\"c\",client_instance_id=\"00000000-0000-0003-0000-000000000004\",group_id=\"g\",member_id=\"m-1\"} 42"),
            "{text}"
        );
        assert_eq!(label_name("a.b-c"), "a_b_c");
        assert_eq!(escape_label("x\"y\\"), "x\\\"y\\\\");
        c.expire(1 + 60_000);
        assert!(c.views(1 + 60_000).is_empty());
    }
}
