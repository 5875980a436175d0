//! The node's one metrics registry (prometheus-client) and what every layer records into it.
//!
//! Recorded where things happen, never inside the pure group cores: the connection records each
//! request (count per API and version, errors per error code, latency per API), the accept loop
//! the connections, the storage task its group commits, and the group actors what their cores'
//! outputs say (rebalances completed and how long they took, offsets committed and expired,
//! learners and their warm-ups, assignor run time). Group counts by kind and state and member
//! counts are read from the directory at scrape time, so they cannot drift.
//!
//! The request path holds its counter and histogram handles in per-(API, version) slots filled
//! on first use, so a heartbeat costs two atomic adds and one uncontended lock, no label hashing.
//! Recording is on only while the HTTP listener is (`http.listen`); `none` turns both off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ResponseKind};
use kafka_protocol::ResponseError;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Highest API key and version with a slot of their own (Kafka's keys stay below 100, versions
/// below 32); anything above is counted through the label families directly.
const KEYS: usize = 96;
const VERSIONS: usize = 32;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiVersionLabels {
    api: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    api: String,
    version: String,
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    api: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// What happened to share-group records (KIP-932), the `outcome` of
/// `koord_share_records_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareOutcome {
    /// Delivered to a member (acquired), first time or again.
    Acquired,
    /// Delivered again (delivery count above 1).
    Redelivered,
    /// Acknowledged ACCEPT.
    Accepted,
    /// Acknowledged RELEASE.
    Released,
    /// Acknowledged REJECT.
    Rejected,
    /// Their acquisition lock ran out.
    LockExpired,
    /// Given back when their member left or its share session ended.
    Returned,
    /// Archived at the delivery-count limit (by a lock running out, a release or a member
    /// leaving).
    Archived,
    /// Written to the group's dead-letter queue (KIP-1191).
    DeadLettered,
    /// Archived without reaching the dead-letter queue (its topic refused or unreachable).
    DeadLetterFailed,
}

impl ShareOutcome {
    const ALL: [ShareOutcome; 10] = [
        ShareOutcome::Acquired,
        ShareOutcome::Redelivered,
        ShareOutcome::Accepted,
        ShareOutcome::Released,
        ShareOutcome::Rejected,
        ShareOutcome::LockExpired,
        ShareOutcome::Returned,
        ShareOutcome::Archived,
        ShareOutcome::DeadLettered,
        ShareOutcome::DeadLetterFailed,
    ];

    fn label(self) -> &'static str {
        match self {
            ShareOutcome::Acquired => "acquired",
            ShareOutcome::Redelivered => "redelivered",
            ShareOutcome::Accepted => "accepted",
            ShareOutcome::Released => "released",
            ShareOutcome::Rejected => "rejected",
            ShareOutcome::LockExpired => "lock_expired",
            ShareOutcome::Returned => "returned",
            ShareOutcome::Archived => "archived",
            ShareOutcome::DeadLettered => "dead_lettered",
            ShareOutcome::DeadLetterFailed => "dead_letter_failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AssignorLabels {
    assignor: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Request latencies: 50 µs to about 27 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// Durations of rebalances and warm-ups: 1 ms to about 16 min.
fn long_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 21))
}

/// Store syncs and assignor runs: 10 µs to about 10 s.
fn short_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_01, 2.0, 21))
}

/// Every metric koord exports. One per process: [`metrics`].
pub struct Metrics {
    enabled: AtomicBool,
    registry: Registry,
    requests: Family<ApiVersionLabels, Counter>,
    request_errors: Family<ErrorLabels, Counter>,
    request_latency: HistogramFamily<ApiLabels>,
    /// `KEYS * VERSIONS` request counters and `KEYS` latency histograms, filled on first use.
    request_slots: Box<[OnceLock<Counter>]>,
    latency_slots: Box<[OnceLock<Histogram>]>,
    connections: Gauge,
    connections_accepted: Counter,
    group_count: Family<KindLabels, Gauge>,
    classic_group_count: Family<StateLabels, Gauge>,
    group_members: Family<KindLabels, Gauge>,
    rebalances: Family<KindLabels, Counter>,
    rebalance_duration: HistogramFamily<KindLabels>,
    offset_commits: Counter,
    offset_expirations: Counter,
    store_batches: Counter,
    store_writes: Counter,
    store_sync: Histogram,
    store_loading: Gauge,
    learners: Gauge,
    learner_warmup: Histogram,
    assignor_run: HistogramFamily<AssignorLabels>,
    /// `koord_share_records_total`, one counter per [`ShareOutcome`], in `ShareOutcome::ALL`'s
    /// order.
    share_records: Vec<Counter>,
    share_in_flight: Gauge,
    /// Serialises scrapes: the group gauges are refilled before each encoding.
    scrape: Mutex<()>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Groups of one kind and state, as the directory lists them at scrape time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCount {
    /// `classic` (later `consumer`, `streams`).
    pub kind: &'static str,
    /// Kafka's state name (`Stable`, `PreparingRebalance`, ...).
    pub state: String,
    pub groups: i64,
    pub members: i64,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("koord");
        let requests = Family::<ApiVersionLabels, Counter>::default();
        registry.register(
            "requests",
            "Kafka requests served, per API and version",
            requests.clone(),
        );
        let request_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "request_errors",
            "Error codes in responses, per API, version and error (Kafka's ErrorsPerSec)",
            request_errors.clone(),
        );
        let request_latency: HistogramFamily<ApiLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "request_duration_seconds",
            "Time from a request decoded to its response built, per API (parked JoinGroup and SyncGroup included)",
            request_latency.clone(),
        );
        let connections = Gauge::default();
        registry.register(
            "connections",
            "Open Kafka client connections",
            connections.clone(),
        );
        let connections_accepted = Counter::default();
        registry.register(
            "connections_accepted",
            "Kafka client connections accepted",
            connections_accepted.clone(),
        );
        let group_count = Family::<KindLabels, Gauge>::default();
        registry.register(
            "group_count",
            "Groups by kind (Kafka's group-count by protocol)",
            group_count.clone(),
        );
        let classic_group_count = Family::<StateLabels, Gauge>::default();
        registry.register(
            "classic_group_count",
            "Classic groups by state (Kafka's classic-group-count)",
            classic_group_count.clone(),
        );
        let group_members = Family::<KindLabels, Gauge>::default();
        registry.register(
            "group_members",
            "Members of all groups, by group kind",
            group_members.clone(),
        );
        let rebalances = Family::<KindLabels, Counter>::default();
        registry.register(
            "group_rebalances",
            "Rebalances completed: a new generation installed and the group Stable (Kafka's classic-group-completed-rebalance-count)",
            rebalances.clone(),
        );
        let rebalance_duration: HistogramFamily<KindLabels> =
            Family::new_with_constructor(long_histogram);
        registry.register(
            "group_rebalance_duration_seconds",
            "From a rebalance starting (PreparingRebalance) to the group Stable again",
            rebalance_duration.clone(),
        );
        let offset_commits = Counter::default();
        registry.register(
            "offset_commits",
            "Offsets committed (durable), one per partition (Kafka's offset-commit-count)",
            offset_commits.clone(),
        );
        let offset_expirations = Counter::default();
        registry.register(
            "offset_expirations",
            "Committed offsets removed by retention (Kafka's offset-expiration-count)",
            offset_expirations.clone(),
        );
        let store_batches = Counter::default();
        registry.register(
            "store_write_batches",
            "Group commits of the store: one transaction (and one sync) each",
            store_batches.clone(),
        );
        let store_writes = Counter::default();
        registry.register(
            "store_writes",
            "Write requests covered by the store's group commits",
            store_writes.clone(),
        );
        let store_sync = short_histogram();
        registry.register(
            "store_sync_duration_seconds",
            "Time to apply (and sync) one group commit",
            store_sync.clone(),
        );
        let store_loading = Gauge::default();
        registry.register(
            "store_loading",
            "1 while the stored groups are being loaded (readyz answers 503)",
            store_loading.clone(),
        );
        let learners = Gauge::default();
        registry.register(
            "learners_in_flight",
            "Tasks being learned (restored by their next owner) over all groups",
            learners.clone(),
        );
        let learner_warmup = long_histogram();
        registry.register(
            "learner_warmup_duration_seconds",
            "From a learner planned to its task moving to it (or the learner dropped)",
            learner_warmup.clone(),
        );
        let assignor_run: HistogramFamily<AssignorLabels> =
            Family::new_with_constructor(short_histogram);
        registry.register(
            "assignor_run_duration_seconds",
            "Time of the group core's call that ran a server assignor, per assignor",
            assignor_run.clone(),
        );
        let share_family = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "share_records",
            "Share-group records (KIP-932) by outcome: acquired (delivered), redelivered, \
             accepted, released, rejected, lock_expired, returned (their member left), archived \
             (at the delivery-count limit)",
            share_family.clone(),
        );
        let share_records = ShareOutcome::ALL
            .iter()
            .map(|o| {
                share_family
                    .get_or_create(&OutcomeLabels {
                        outcome: o.label().to_string(),
                    })
                    .clone()
            })
            .collect();
        let share_in_flight = Gauge::default();
        registry.register(
            "share_records_in_flight",
            "Records in the share partitions' in-flight windows over all share groups (from \
             the start offset to the last record acquired, whatever their state)",
            share_in_flight.clone(),
        );
        Metrics {
            enabled: AtomicBool::new(true),
            registry,
            requests,
            request_errors,
            request_latency,
            request_slots: (0..KEYS * VERSIONS).map(|_| OnceLock::new()).collect(),
            latency_slots: (0..KEYS).map(|_| OnceLock::new()).collect(),
            connections,
            connections_accepted,
            group_count,
            classic_group_count,
            group_members,
            rebalances,
            rebalance_duration,
            offset_commits,
            offset_expirations,
            store_batches,
            store_writes,
            store_sync,
            store_loading,
            learners,
            learner_warmup,
            assignor_run,
            share_records,
            share_in_flight,
            scrape: Mutex::new(()),
        }
    }

    /// Whether recording is on (`http.listen` is not `none`).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns recording on or off (at start-up, from `http.listen`).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// One request served: `response` is what it answered (`None`: nothing, or the connection
    /// was closed).
    pub fn request(
        &self,
        key: i16,
        version: i16,
        elapsed: Duration,
        response: Option<&ResponseKind>,
    ) {
        if !self.enabled() {
            return;
        }
        let (k, v) = (key as usize, version as usize);
        if key >= 0 && version >= 0 && k < KEYS && v < VERSIONS {
            self.request_slots[k * VERSIONS + v]
                .get_or_init(|| {
                    self.requests
                        .get_or_create_owned(&api_version(key, version))
                })
                .inc();
            self.latency_slots[k]
                .get_or_init(|| {
                    self.request_latency
                        .get_or_create_owned(&ApiLabels { api: api_name(key) })
                })
                .observe(elapsed.as_secs_f64());
        } else {
            self.requests
                .get_or_create(&api_version(key, version))
                .inc();
            self.request_latency
                .get_or_create(&ApiLabels { api: api_name(key) })
                .observe(elapsed.as_secs_f64());
        }
        if let Some(response) = response {
            response_errors(response, |code| {
                let labels = ErrorLabels {
                    api: api_name(key),
                    version: version.to_string(),
                    error: error_name(code),
                };
                self.request_errors.get_or_create(&labels).inc();
            });
        }
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
        self.connections_accepted.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    /// A rebalance of a `kind` group completed after `took`.
    pub fn rebalance_completed(&self, kind: &str, took: Duration) {
        if !self.enabled() {
            return;
        }
        let labels = KindLabels {
            kind: kind.to_string(),
        };
        self.rebalances.get_or_create(&labels).inc();
        self.rebalance_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    pub fn offsets_committed(&self, n: usize) {
        self.offset_commits.inc_by(n as u64);
    }

    pub fn offsets_expired(&self, n: usize) {
        self.offset_expirations.inc_by(n as u64);
    }

    /// One group commit of `writes` write requests, applied (and synced) in `took`.
    pub fn store_batch(&self, writes: usize, took: Duration) {
        self.store_batches.inc();
        self.store_writes.inc_by(writes as u64);
        self.store_sync.observe(took.as_secs_f64());
    }

    pub fn set_store_loading(&self, loading: bool) {
        self.store_loading.set(i64::from(loading));
    }

    /// A group's learners went from `before` to `after`.
    pub fn learners_changed(&self, before: usize, after: usize) {
        self.learners.inc_by(after as i64 - before as i64);
    }

    /// A learner ended (its task moved to it, or it was dropped) after `took`.
    pub fn learner_finished(&self, took: Duration) {
        self.learner_warmup.observe(took.as_secs_f64());
    }

    /// `n` share-group records had `outcome`.
    pub fn share_records(&self, outcome: ShareOutcome, n: u64) {
        if n > 0 {
            if let Some(c) = self.share_records.get(outcome as usize) {
                c.inc_by(n);
            }
        }
    }

    /// A share group's in-flight records changed by `delta`.
    pub fn share_in_flight_changed(&self, delta: i64) {
        if delta != 0 {
            self.share_in_flight.inc_by(delta);
        }
    }

    /// A core call that ran `assignor` took `took`.
    pub fn assignor_ran(&self, assignor: &str, took: Duration) {
        self.assignor_run
            .get_or_create(&AssignorLabels {
                assignor: assignor.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// The Prometheus text format of every metric, with the group gauges set from `groups`.
    pub fn render(&self, groups: &[GroupCount]) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        self.group_count.clear();
        self.classic_group_count.clear();
        self.group_members.clear();
        for g in groups {
            let kind = KindLabels {
                kind: g.kind.to_string(),
            };
            self.group_count.get_or_create(&kind).inc_by(g.groups);
            self.group_members.get_or_create(&kind).inc_by(g.members);
            if g.kind == "classic" {
                self.classic_group_count
                    .get_or_create(&StateLabels {
                        state: g.state.clone(),
                    })
                    .inc_by(g.groups);
            }
        }
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }
}

fn api_version(key: i16, version: i16) -> ApiVersionLabels {
    ApiVersionLabels {
        api: api_name(key),
        version: version.to_string(),
    }
}

/// Kafka's request name (`Heartbeat`, `OffsetCommit`), or the key's number.
fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|_| key.to_string(), |k| format!("{k:?}"))
}

/// Kafka's error name (`REBALANCE_IN_PROGRESS`), or the code's number.
fn error_name(code: i16) -> String {
    let Some(e) = ResponseError::try_from_code(code) else {
        return code.to_string();
    };
    let camel = format!("{e:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Calls `f` with every non-zero error code of the group APIs' responses (the top-level code,
/// and each group's or partition's), as Kafka's `errorCounts` does. Other APIs count requests
/// and latency only.
fn response_errors(response: &ResponseKind, mut f: impl FnMut(i16)) {
    let mut code = |c: i16| {
        if c != 0 {
            f(c)
        }
    };
    match response {
        ResponseKind::Heartbeat(r) => code(r.error_code),
        ResponseKind::JoinGroup(r) => code(r.error_code),
        ResponseKind::SyncGroup(r) => code(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            code(r.error_code);
            for m in &r.members {
                code(m.error_code);
            }
        }
        ResponseKind::FindCoordinator(r) => {
            code(r.error_code);
            for c in &r.coordinators {
                code(c.error_code);
            }
        }
        ResponseKind::OffsetCommit(r) => {
            for t in &r.topics {
                for p in &t.partitions {
                    code(p.error_code);
                }
            }
        }
        ResponseKind::OffsetFetch(r) => {
            code(r.error_code);
            for g in &r.groups {
                code(g.error_code);
            }
        }
        ResponseKind::DescribeGroups(r) => {
            for g in &r.groups {
                code(g.error_code);
            }
        }
        ResponseKind::ListGroups(r) => code(r.error_code),
        ResponseKind::DeleteGroups(r) => {
            for g in &r.results {
                code(g.error_code);
            }
        }
        ResponseKind::OffsetDelete(r) => {
            code(r.error_code);
            for t in &r.topics {
                for p in &t.partitions {
                    code(p.error_code);
                }
            }
        }
        ResponseKind::ApiVersions(r) => code(r.error_code),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(27), "REBALANCE_IN_PROGRESS");
        assert_eq!(error_name(-999), "UNKNOWN(-999)");
        assert_eq!(api_name(12), "Heartbeat");
        assert_eq!(api_name(999), "999");
    }

    #[test]
    fn out_of_range_keys_and_versions_do_not_panic() {
        let m = Metrics::new();
        for (k, v) in [(-1, 0), (0, -1), (200, 3), (12, 200), (i16::MAX, i16::MAX)] {
            m.request(k, v, Duration::from_micros(5), None);
        }
        m.request(12, 4, Duration::from_micros(5), None);
        let text = m.render(&[]);
        assert!(text.contains("koord_requests_total{api=\"Heartbeat\",version=\"4\"} 1"));
    }
}
