//! koord-load: simulates consumer groups against any Kafka group coordinator (koord or Apache
//! Kafka, unchanged) and reports how it coped.
//!
//! G groups of M members each join (FindCoordinator, JoinGroup with the MEMBER_ID_REQUIRED step,
//! SyncGroup with a round-robin assignment from the leader), then heartbeat every H ms (or back
//! to back) and optionally commit offsets, for a measured window. Reported: the time until every
//! group is Stable, requests per second and latency percentiles per API, responses by error
//! code, and, given the server's PID, its CPU seconds in the window and its memory.
//!
//! With `--protocol consumer` the members speak the consumer group protocol of KIP-848 instead
//! (ConsumerGroupHeartbeat, server-side assignment; see consumer.rs) and the time reported is the
//! time until every group is reconciled.
//!
//! With `--txn-producers N` it runs the transactional producer scenario instead (txn.rs): N
//! transactional producers committing transactions back to back.
//!
//! It shares no code with the server: the wire format is the `kafka-protocol` crate's.

mod conn;
mod consumer;
mod member;
mod security;
mod stats;
mod txn;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::{watch, Semaphore};

use member::{Plan, Run};
use stats::{quantile_ms, Api, ProcSample, Stats};

#[derive(Debug, Parser)]
#[command(name = "koord-load", version, about)]
struct Args {
    /// The server: host:port of koord or of a Kafka broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Number of groups.
    #[arg(long, default_value_t = 20)]
    groups: usize,
    /// Members per group.
    #[arg(long, default_value_t = 5)]
    members: usize,
    /// Connections shared by heartbeats and commits.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Join connections open at once (one per joining member; a group joins when all of its
    /// members have one). Keep it under the process's open-file limit.
    #[arg(long, default_value_t = 8000)]
    join_connections: usize,
    /// The group protocol members speak: `classic` (JoinGroup, SyncGroup, Heartbeat) or
    /// `consumer` (KIP-848's ConsumerGroupHeartbeat, assigned by the server).
    #[arg(long, value_enum, default_value_t = Protocol::Classic)]
    protocol: Protocol,
    /// Heartbeat interval in ms; 0 sends the next heartbeat as soon as the previous is answered.
    /// Default: 3000 for classic members; for consumer members, the interval the server gives.
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Consumer protocol: the server assignor members ask for (`ServerAssignor`).
    #[arg(long, default_value = "uniform")]
    assignor: String,
    /// Commit interval per member in ms; 0 = back to back. Omit for no commits.
    #[arg(long)]
    commit_ms: Option<u64>,
    /// Partitions per OffsetCommit.
    #[arg(long, default_value_t = 10)]
    commit_partitions: i32,
    /// The topic the members subscribe to (and commit to; created when committing).
    #[arg(long, default_value = "koord-load")]
    topic: String,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 100)]
    partitions: i32,
    /// Seconds of steady load measured once every group is Stable.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Give up on groups not Stable after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    join_timeout: f64,
    #[arg(long, default_value_t = 30_000)]
    session_timeout_ms: i32,
    #[arg(long, default_value_t = 60_000)]
    rebalance_timeout_ms: i32,
    /// Group ids are PREFIX-0, PREFIX-1, ...; default: a fresh prefix per run.
    #[arg(long)]
    group_prefix: Option<String>,
    /// The server's process id: report its CPU time and memory from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Also write the figures as one JSON object to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Exit non-zero unless every group reached Stable and no request failed.
    #[arg(long)]
    check: bool,
    /// Run the transactional producer scenario (txn.rs) with this many producers instead of
    /// groups: transactions committed back to back for `--duration` seconds.
    #[arg(long)]
    txn_producers: Option<usize>,
    /// Records per transaction (one batch), for `--txn-producers`.
    #[arg(long, default_value_t = 100)]
    txn_records: usize,
    /// Value bytes per record, for `--txn-producers`.
    #[arg(long, default_value_t = 100)]
    txn_record_bytes: usize,
    /// The wait before a retried transactional request (CONCURRENT_TRANSACTIONS, a loading
    /// coordinator), for `--txn-producers`; the Java producer's is 20 ms.
    #[arg(long, default_value_t = txn::DEFAULT_RETRY_BACKOFF_MS)]
    txn_retry_backoff_ms: u64,
    /// Worker threads (default: the number of CPUs).
    #[arg(long)]
    threads: Option<usize>,
    /// Kafka's `security.protocol` of the listener at --bootstrap: every connection is
    /// encrypted (SSL, SASL_SSL) and authenticated (SASL_*) before its first request.
    #[arg(long, value_enum, default_value_t = security::Protocol::Plaintext)]
    security_protocol: security::Protocol,
    /// The CA certificate (PEM) the server's certificate must be signed by, for SSL and
    /// SASL_SSL.
    #[arg(long)]
    ssl_ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry; default: --bootstrap's host.
    #[arg(long)]
    ssl_server_name: Option<String>,
    /// The SASL mechanism, for SASL_*.
    #[arg(long, value_enum, default_value_t = security::Mechanism::ScramSha512)]
    sasl_mechanism: security::Mechanism,
    #[arg(long)]
    sasl_user: Option<String>,
    #[arg(long)]
    sasl_password: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Protocol {
    Classic,
    Consumer,
}

impl Args {
    fn consumer(&self) -> bool {
        self.protocol == Protocol::Consumer
    }

    /// The fixed heartbeat interval in ms, if any (0 = back to back).
    fn heartbeat_ms(&self) -> Option<u64> {
        match self.heartbeat_ms {
            Some(ms) => Some(ms),
            None if self.consumer() => None,
            None => Some(3000),
        }
    }

    /// "Stable" (classic) or "reconciled" (consumer protocol).
    fn settled(&self) -> &'static str {
        if self.consumer() {
            "reconciled"
        } else {
            "Stable"
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.security_protocol != security::Protocol::Plaintext {
        let host = args
            .bootstrap
            .rsplit_once(':')
            .map_or(args.bootstrap.as_str(), |(h, _)| h);
        security::configure(
            args.security_protocol,
            args.ssl_ca.as_deref(),
            args.ssl_server_name.as_deref().unwrap_or(host),
            args.sasl_mechanism,
            args.sasl_user.as_deref(),
            args.sasl_password.as_deref(),
        )?;
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = args.threads {
        rt.worker_threads(t.max(1));
    }
    let rt = rt.enable_all().build()?;
    if let Some(producers) = args.txn_producers {
        return run_txn(&args, producers, &rt);
    }
    let report = rt.block_on(run(&args))?;
    print!("{}", report.text(&args));
    if let Some(path) = &args.json {
        std::fs::write(path, report.json(&args))
            .with_context(|| format!("write {}", path.display()))?;
    }
    if args.check {
        if report.groups_stable < args.groups {
            bail!(
                "only {} of {} groups {}",
                report.groups_stable,
                args.groups,
                args.settled()
            );
        }
        if report.stats.failures > 0 {
            bail!("{} requests failed", report.stats.failures);
        }
    }
    Ok(())
}

/// The transactional producer scenario, reported as text and optionally JSON.
fn run_txn(args: &Args, producers: usize, rt: &tokio::runtime::Runtime) -> Result<()> {
    let report = rt.block_on(async {
        let addr: SocketAddr = tokio::net::lookup_host(&args.bootstrap)
            .await?
            .next()
            .with_context(|| format!("resolve {}", args.bootstrap))?;
        txn::run(txn::TxnPlan {
            addr,
            producers,
            records: args.txn_records,
            record_bytes: args.txn_record_bytes,
            topic: args.topic.clone(),
            duration: Duration::from_secs_f64(args.duration),
            server_pid: args.server_pid,
            retry_backoff: Duration::from_millis(args.txn_retry_backoff_ms),
        })
        .await
    })?;
    print!("{}", report.text());
    if let Some(path) = &args.json {
        std::fs::write(path, report.json()).with_context(|| format!("write {}", path.display()))?;
    }
    if args.check && report.failures > 0 {
        bail!("{} transactional producers failed", report.failures);
    }
    Ok(())
}

struct Report {
    stats: Stats,
    groups_stable: usize,
    /// Time from the first request until the last group became Stable.
    stable_after: Option<Duration>,
    /// The measured steady window.
    window: Duration,
    heartbeats: u64,
    offsets: u64,
    /// Server samples: before the run, at the window's start and end.
    server: Option<(ProcSample, ProcSample, ProcSample)>,
}

async fn run(args: &Args) -> Result<Report> {
    let addr: SocketAddr = tokio::net::lookup_host(&args.bootstrap)
        .await?
        .next()
        .with_context(|| format!("resolve {}", args.bootstrap))?;
    if args.groups == 0 || args.members == 0 {
        bail!("--groups and --members must be at least 1");
    }
    if args.members > args.join_connections {
        bail!("--join-connections must be at least --members");
    }
    let before = args.server_pid.map(stats::sample).transpose()?;
    if args.commit_ms.is_some() && args.consumer() {
        bail!("--commit-ms is for classic members only");
    }
    if args.commit_ms.is_some() || args.consumer() {
        create_topic(addr, &args.topic, args.partitions).await?;
    }
    let mut shared = Vec::with_capacity(args.connections.max(1));
    for _ in 0..args.connections.max(1) {
        shared.push(crate::security::connect(addr, "koord-load").await?);
    }
    let prefix = args.group_prefix.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("load-{:x}", nanos & 0xffff_ffff)
    });
    let (stop_tx, stop) = watch::channel(false);
    let run = Arc::new(Run {
        plan: Plan {
            coordinator: addr,
            group_prefix: prefix,
            members: args.members,
            topic: args.topic.clone(),
            partitions: args.partitions,
            session_timeout_ms: args.session_timeout_ms,
            rebalance_timeout_ms: args.rebalance_timeout_ms,
            heartbeat_every: args
                .heartbeat_ms()
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis),
            server_heartbeat: args.heartbeat_ms().is_none(),
            assignor: args.assignor.clone(),
            commit_every: args
                .commit_ms
                .map(|ms| (ms > 0).then(|| Duration::from_millis(ms))),
            commit_partitions: args.commit_partitions,
        },
        shared,
        join_slots: Arc::new(Semaphore::new(args.join_connections)),
        started: Instant::now(),
        window_open: AtomicBool::new(false),
        stop,
        groups_stable: AtomicUsize::new(0),
        last_stable: Mutex::new(None),
        all_stable: tokio::sync::Notify::new(),
        groups: args.groups,
        heartbeats_ok: AtomicU64::new(0),
        offsets_ok: AtomicU64::new(0),
    });
    let tasks: Vec<_> = (0..args.groups)
        .map(|g| {
            if args.consumer() {
                tokio::spawn(consumer::run_group(run.clone(), g))
            } else {
                tokio::spawn(member::run_group(run.clone(), g))
            }
        })
        .collect();

    let all = run.all_stable.notified();
    let joined = tokio::time::timeout(Duration::from_secs_f64(args.join_timeout), all)
        .await
        .is_ok();
    if !joined {
        eprintln!(
            "koord-load: {} of {} groups {} after {} s",
            run.groups_stable.load(Ordering::Acquire),
            args.groups,
            args.settled(),
            args.join_timeout
        );
    }
    let stable_after = if joined {
        *member_lock(&run.last_stable)
    } else {
        None
    };
    let at_start = args.server_pid.map(stats::sample).transpose()?;
    let (hb0, off0) = (
        run.heartbeats_ok.load(Ordering::Relaxed),
        run.offsets_ok.load(Ordering::Relaxed),
    );
    run.window_open.store(true, Ordering::Relaxed);
    let window_start = Instant::now();
    if joined {
        tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
    }
    run.window_open.store(false, Ordering::Relaxed);
    let window = window_start.elapsed();
    let heartbeats = run.heartbeats_ok.load(Ordering::Relaxed) - hb0;
    let offsets = run.offsets_ok.load(Ordering::Relaxed) - off0;
    let at_end = args.server_pid.map(stats::sample).transpose()?;
    let _ = stop_tx.send(true);
    let mut total = Stats::default();
    for t in tasks {
        if let Ok(s) = t.await {
            total.merge(s);
        }
    }
    for v in total.latencies.values_mut() {
        v.sort_unstable();
    }
    Ok(Report {
        stats: total,
        groups_stable: run.groups_stable.load(Ordering::Acquire),
        stable_after,
        window,
        heartbeats,
        offsets,
        server: match (before, at_start, at_end) {
            (Some(a), Some(b), Some(c)) => Some((a, b, c)),
            _ => None,
        },
    })
}

/// Creates the commit topic (an existing one is fine) and waits until Metadata shows every
/// partition with a leader: Kafka's metadata is eventually consistent and OffsetCommit checks it.
async fn create_topic(addr: SocketAddr, topic: &str, partitions: i32) -> Result<()> {
    let conn = crate::security::connect(addr, "koord-load").await?;
    let name = TopicName(StrBytes::from_string(topic.to_owned()));
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name.clone())
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(30_000);
    let resp = conn.call(5, &req).await?;
    for t in &resp.topics {
        match t.error_code.err() {
            None | Some(ResponseError::TopicAlreadyExists) => {}
            Some(e) => bail!("create topic {topic}: {e:?}"),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let req = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name.clone())),
        ]));
        let resp = conn.call(12, &req).await?;
        let ready = resp.topics.iter().any(|t| {
            t.error_code == 0
                && t.partitions.len() >= partitions as usize
                && t.partitions
                    .iter()
                    .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
        });
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("topic {topic} has no leaders after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn member_lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Report {
    fn requests(&self, api: Api) -> usize {
        self.stats.latencies.get(&api).map_or(0, Vec::len)
    }

    /// Server CPU seconds in the window, per 1,000 heartbeats answered.
    fn cpu_per_1000_heartbeats(&self) -> Option<f64> {
        let (_, a, b) = self.server?;
        (self.heartbeats > 0).then(|| (b.cpu_secs - a.cpu_secs) / (self.heartbeats as f64 / 1000.0))
    }

    fn text(&self, args: &Args) -> String {
        let mut out = String::new();
        let members = args.groups * args.members;
        let heartbeat = match args.heartbeat_ms() {
            Some(0) => "back to back".to_owned(),
            Some(ms) => format!("every {ms} ms"),
            None => "at the server's interval".to_owned(),
        };
        let _ = writeln!(
            out,
            "koord-load: {} groups x {} {} members ({members}) on {}, heartbeats {heartbeat}{}",
            args.groups,
            args.members,
            if args.consumer() {
                "consumer-protocol"
            } else {
                "classic"
            },
            args.bootstrap,
            match args.commit_ms {
                None => String::new(),
                Some(0) => format!(
                    ", commits of {} partitions back to back",
                    args.commit_partitions
                ),
                Some(ms) => format!(
                    ", commits of {} partitions every {ms} ms",
                    args.commit_partitions
                ),
            }
        );
        match self.stable_after {
            Some(t) => {
                let _ = writeln!(
                    out,
                    "all {} groups {} after {:.3} s",
                    args.groups,
                    args.settled(),
                    t.as_secs_f64()
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "NOT all groups {}: {} of {}",
                    args.settled(),
                    self.groups_stable,
                    args.groups
                );
            }
        }
        let secs = self.window.as_secs_f64();
        let _ = writeln!(
            out,
            "steady window {secs:.1} s: {:.0} heartbeats/s, {:.0} offsets committed/s",
            self.heartbeats as f64 / secs,
            self.offsets as f64 / secs
        );
        let _ = writeln!(
            out,
            "{:<22} {:>10} {:>10} {:>10} {:>10}",
            "api", "requests", "p50 ms", "p99 ms", "p99.9 ms"
        );
        for api in Api::ALL {
            let Some(v) = self.stats.latencies.get(&api).filter(|v| !v.is_empty()) else {
                continue;
            };
            let _ = writeln!(
                out,
                "{:<22} {:>10} {:>10.3} {:>10.3} {:>10.3}",
                api.name(),
                v.len(),
                quantile_ms(v, 0.5),
                quantile_ms(v, 0.99),
                quantile_ms(v, 0.999)
            );
        }
        let _ = writeln!(out, "responses by code:");
        for ((api, code), n) in &self.stats.codes {
            let _ = writeln!(out, "  {:<22} {code:<28} {n}", api.name());
        }
        let _ = writeln!(out, "failed requests: {}", self.stats.failures);
        if let Some((base, a, b)) = self.server {
            let _ = writeln!(
                out,
                "server: {:.2} CPU s in the window, peak RSS {:.1} MiB, RSS {:.1} MiB (before the run {:.1} MiB, {:.0} B per member)",
                b.cpu_secs - a.cpu_secs,
                mib(b.peak_rss),
                mib(b.rss),
                mib(base.rss),
                (b.rss as f64 - base.rss as f64) / members as f64
            );
            if let Some(c) = self.cpu_per_1000_heartbeats() {
                let _ = writeln!(out, "server CPU per 1000 heartbeats: {:.2} ms", c * 1000.0);
            }
        }
        out
    }

    fn json(&self, args: &Args) -> String {
        let mut fields: Vec<(String, String)> = vec![
            (
                "protocol".into(),
                format!(
                    "\"{}\"",
                    if args.consumer() {
                        "consumer"
                    } else {
                        "classic"
                    }
                ),
            ),
            ("groups".into(), args.groups.to_string()),
            ("members".into(), (args.groups * args.members).to_string()),
            ("groups_stable".into(), self.groups_stable.to_string()),
            (
                "stable_after_s".into(),
                self.stable_after
                    .map_or("null".into(), |t| format!("{:.6}", t.as_secs_f64())),
            ),
            (
                "window_s".into(),
                format!("{:.3}", self.window.as_secs_f64()),
            ),
            ("heartbeats".into(), self.heartbeats.to_string()),
            ("offsets".into(), self.offsets.to_string()),
            ("failures".into(), self.stats.failures.to_string()),
        ];
        for api in Api::ALL {
            if let Some(v) = self.stats.latencies.get(&api).filter(|v| !v.is_empty()) {
                let n = api.name();
                fields.push((format!("{n}_requests"), self.requests(api).to_string()));
                fields.push((format!("{n}_p50_ms"), format!("{:.3}", quantile_ms(v, 0.5))));
                fields.push((
                    format!("{n}_p99_ms"),
                    format!("{:.3}", quantile_ms(v, 0.99)),
                ));
                fields.push((
                    format!("{n}_p999_ms"),
                    format!("{:.3}", quantile_ms(v, 0.999)),
                ));
            }
        }
        if let Some((base, a, b)) = self.server {
            fields.push((
                "server_cpu_s".into(),
                format!("{:.3}", b.cpu_secs - a.cpu_secs),
            ));
            fields.push(("server_rss_before".into(), base.rss.to_string()));
            fields.push(("server_rss".into(), b.rss.to_string()));
            fields.push(("server_peak_rss".into(), b.peak_rss.to_string()));
        }
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("  \"{k}\": {v}"))
            .collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
