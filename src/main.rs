//! The `koord` binary: `koord serve` (the default), `koord check-config` and `koord simulate`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use koord::broker::Broker;
use koord::config::Config;
use tracing::{error, info};

/// See Cargo.toml: glibc's per-thread arenas grow one mprotect at a time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "koord",
    version,
    about = "A standalone Kafka group coordinator"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Kafka protocol (what `koord` does without a subcommand).
    Serve(ServeArgs),
    /// Validate a configuration file and print the effective settings.
    CheckConfig {
        /// The TOML file to check.
        file: PathBuf,
        /// Override a key, as `serve` would: KEY=VALUE (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Simulate rebalances of one group (no sockets, simulated clock; deterministic) and print,
    /// per assignor and mode, rebalances, per-task downtime and the time until balanced.
    Simulate(SimulateArgs),
}

#[derive(Args)]
struct SimulateArgs {
    /// Members of the settled group the scenario starts from; 0 is a cold start (the group
    /// starts empty and members join one after another, every --interval-ms).
    #[arg(long, default_value_t = 3)]
    before: usize,
    /// Members after the scale-out (more than --before) or scale-in (fewer).
    #[arg(long, default_value_t = 5)]
    after: usize,
    /// Tasks (partitions of the one topic).
    #[arg(long, default_value_t = 60)]
    tasks: u32,
    /// Restore time of one task, ms; a comma-separated list runs each.
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    restore_ms: Vec<u64>,
    /// Rebalance barrier: from a rebalance starting to members receiving their assignment, ms.
    #[arg(long, default_value_t = 2000)]
    barrier_ms: u64,
    /// Time between successive members joining or leaving, ms.
    #[arg(long, default_value_t = 0)]
    interval_ms: u64,
    /// Explicit membership changes instead of --after: AT_MS:+N (N members start) or
    /// AT_MS:-N (the N newest stop), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "AT_MS:+-N")]
    schedule: Vec<String>,
    /// Assignors to run: range (eager clients), uniform (cooperative clients), learner
    /// (learner-capable clients).
    #[arg(long, value_delimiter = ',', default_value = "range,uniform,learner")]
    assignor: Vec<String>,
    /// Modes of the learner assignor to run: seed, ready-gated.
    #[arg(long, value_delimiter = ',', default_value = "seed,ready-gated")]
    mode: Vec<String>,
    /// learner.max.learners: concurrent learners group-wide.
    #[arg(long, default_value_t = 2)]
    max_learners: usize,
    /// learner.warmup.ms: an owner that got a task cold less than this long ago is cold for it
    /// (the task moves without a learner).
    #[arg(long, default_value_t = 0)]
    warmup_ms: u64,
    /// Stop a run this long after the first change if it has not settled, ms.
    #[arg(long, default_value_t = 86_400_000)]
    horizon_ms: u64,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the timeline of the run as SVG (needs exactly one run).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

#[derive(Args, Default)]
struct ServeArgs {
    /// TOML configuration file (see config/koord.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on (key `listen`).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// host:port clients are told to connect to (key `advertised.listener`).
    #[arg(long, value_name = "HOST:PORT")]
    advertised_listener: Option<String>,
    /// Broker id of this node (key `node.id`).
    #[arg(long, value_name = "ID")]
    node_id: Option<i32>,
    /// Directory for durable state (key `data.dir`).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Gateway mode: the Kafka cluster to front, host:port,... (key `upstream.bootstrap.servers`).
    #[arg(long, value_name = "HOST:PORT,...")]
    upstream_bootstrap_servers: Option<String>,
    /// Override any configuration key: KEY=VALUE (repeatable), applied after the file.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

impl ServeArgs {
    /// The flags as `--set` overrides, so every path goes through the one key table.
    fn overrides(&self) -> Vec<String> {
        let mut o = Vec::new();
        if let Some(v) = &self.listen {
            o.push(format!("listen={v}"));
        }
        if let Some(v) = &self.advertised_listener {
            o.push(format!("advertised.listener={v}"));
        }
        if let Some(v) = self.node_id {
            o.push(format!("node.id={v}"));
        }
        if let Some(v) = &self.upstream_bootstrap_servers {
            o.push(format!("upstream.bootstrap.servers=\"{v}\""));
        }
        if let Some(v) = &self.data_dir {
            o.push(format!(
                "data.dir=\"{}\"",
                v.display()
                    .to_string()
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
            ));
        }
        o.extend(self.set.iter().cloned());
        o
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KOORD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::CheckConfig { file, set }) => match Config::load(Some(&file), &set) {
            Ok(config) => {
                print!("{}", config.render());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("koord: {e}");
                ExitCode::from(2)
            }
        },
        Some(Command::Serve(args)) => serve(args),
        Some(Command::Simulate(args)) => simulate(args),
        None => serve(cli.serve),
    }
}

fn simulate(args: SimulateArgs) -> ExitCode {
    use koord::simulate::{self, Scenario, Strategy};
    let fail = |e: String| {
        eprintln!("koord: {e}");
        ExitCode::from(2)
    };
    let mut schedule = Vec::new();
    for entry in &args.schedule {
        let parsed = entry.split_once(':').and_then(|(at, d)| {
            Some((
                at.trim().parse::<u64>().ok()?,
                d.trim().parse::<i32>().ok()?,
            ))
        });
        match parsed {
            Some((at, d)) if d != 0 => schedule.push((at, d)),
            _ => {
                return fail(format!(
                    "bad --schedule entry `{entry}` (expected AT_MS:+N or AT_MS:-N)"
                ))
            }
        }
    }
    let mut strategies = Vec::new();
    for a in &args.assignor {
        if a == "learner" {
            for m in &args.mode {
                match Strategy::parse(a, Some(m)) {
                    Ok(s) => strategies.push(s),
                    Err(e) => return fail(e),
                }
            }
        } else {
            match Strategy::parse(a, None) {
                Ok(s) => strategies.push(s),
                Err(e) => return fail(e),
            }
        }
    }
    let base = Scenario {
        tasks: args.tasks,
        before: args.before,
        after: args.after,
        interval_ms: args.interval_ms,
        schedule: (!schedule.is_empty()).then_some(schedule),
        barrier_ms: args.barrier_ms,
        max_learners: args.max_learners,
        warmup_ms: args.warmup_ms,
        horizon_ms: args.horizon_ms,
        ..Scenario::default()
    };
    let runs: Vec<Scenario> = args
        .restore_ms
        .iter()
        .flat_map(|&restore_ms| {
            strategies.iter().map({
                let base = base.clone();
                move |&strategy| Scenario {
                    restore_ms,
                    strategy,
                    ..base.clone()
                }
            })
        })
        .collect();
    if args.svg.is_some() && runs.len() != 1 {
        return fail(format!(
            "--svg draws one run, and these flags make {}: pick one --assignor, --mode and --restore-ms",
            runs.len()
        ));
    }
    let mut reports = Vec::new();
    for scenario in &runs {
        match simulate::run(scenario) {
            Ok(r) => reports.push(r),
            Err(e) => {
                return fail(format!(
                    "{} ({}): {e}",
                    scenario.strategy.assignor(),
                    scenario.strategy.mode()
                ))
            }
        }
    }
    if let (Some(path), Some(report)) = (&args.svg, reports.first()) {
        if let Err(e) = std::fs::write(path, simulate::svg::render(&runs[0], report)) {
            eprintln!("koord: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if args.json {
        print!("{}", simulate::json(&base, &reports));
    } else {
        println!("{}", base.describe());
        print!("{}", simulate::table(&reports));
    }
    ExitCode::SUCCESS
}

fn serve(args: ServeArgs) -> ExitCode {
    let config = match Config::load(args.config.as_deref(), &args.overrides()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("koord: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("koord: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let mut config = config;
        // Gateway mode: how koord reaches upstream (TLS, SASL), one for every connection.
        let upstream_security = match koord::security::client::ClientSecurity::new(&config.upstream_security, "upstream.") {
            Ok(s) => Arc::new(s),
            Err(e) => {
                error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        // Gateway mode: the upstream's brokers and versions first, so koord's coordinator id
        // is chosen clear of every upstream broker id.
        let upstream = if config.upstream_bootstrap_servers.is_empty() {
            None
        } else {
            match koord::gateway::discover(&config.upstream_bootstrap_servers, &upstream_security, std::time::Duration::from_secs(120)).await {
                Ok(view) => {
                    let id = koord::gateway::coordinator_node_id(config.node_id, &view);
                    if id != config.node_id {
                        info!(configured = config.node_id, node_id = id, "node.id is an upstream broker's; the gateway's coordinator takes another id");
                        config.node_id = id;
                    }
                    Some(view)
                }
                Err(e) => {
                    error!("{e}");
                    return ExitCode::FAILURE;
                }
            }
        };
        let opened = match &upstream {
            None => Broker::open(config).map(|b| (b, None)),
            Some(view) => {
                let client = Arc::new(koord::gateway::client::Upstream::new(
                    config.upstream_bootstrap_servers.clone(),
                    view.brokers.clone(),
                ).with_security(upstream_security.clone())
                .with_retry_for(std::time::Duration::from_millis(config.upstream_write_timeout_ms)));
                koord::gateway::open_broker(config, client)
                    .await
                    .map(|(b, upstreams)| (b, Some(upstreams)))
            }
        };
        let (broker, upstreams) = match opened {
            Ok((b, upstreams)) => (Arc::new(b), upstreams),
            Err(e) => {
                error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let bound = match bind_listeners(&broker.config).await {
            Ok(b) => b,
            Err(e) => {
                error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let shown: Vec<String> = bound
            .iter()
            .map(|b| {
                let local = b.tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
                format!(
                    "{}://{local} ({}, advertised {}:{})",
                    b.listener.name,
                    b.listener.protocol,
                    b.listener.advertised_host,
                    b.listener.advertised_port
                )
            })
            .collect();
        let local = bound
            .first()
            .and_then(|b| b.tcp.local_addr().ok())
            .map(|a| a.to_string())
            .unwrap_or_default();
        info!(
            listen = %local,
            listeners = %shown.join(", "),
            node_id = broker.node_id(),
            cluster_id = %broker.cluster_id,
            "koord listening"
        );
        if broker.config.listeners.is_empty() && broker.config.advertised_listener.is_none() && broker.config.listen.ip().is_unspecified() {
            tracing::warn!(
                "listening on an unspecified address without advertised.listener: clients will be told to connect to {}; set --advertised-listener",
                broker.config.listen
            );
        }
        // The HTTP listener (metrics, health, status page) comes up before the store loads,
        // so /readyz can say it is not ready yet. One that cannot bind is reported and left
        // off: the Kafka listener is what clients need.
        koord::metrics::metrics().set_enabled(broker.config.http_listen.is_some());
        let (http_stop_tx, http_stop_rx) = tokio::sync::oneshot::channel::<()>();
        let http = match broker.config.http_listen {
            Some(addr) => match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => {
                    info!(
                        http = %l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                        "http listening (/metrics, /healthz, /readyz, status page at /)"
                    );
                    Some(tokio::spawn(koord::observe::http::run(l, broker.clone(), async move {
                        let _ = http_stop_rx.await;
                    })))
                }
                Err(e) => {
                    error!(http = %addr, "cannot listen for HTTP (http.listen): {e}; serving Kafka without it");
                    None
                }
            },
            None => None,
        };
        // Groups load while the listener already answers: group requests get
        // COORDINATOR_LOAD_IN_PROGRESS meanwhile, as in Kafka. A damaged store stops koord.
        let (load_failed_tx, load_failed_rx) = tokio::sync::oneshot::channel::<()>();
        let loader = broker.clone();
        tokio::spawn(async move {
            if let Err(e) = loader.load_groups().await {
                error!("cannot load the store: {e}");
                let _ = load_failed_tx.send(());
            }
        });
        // In gateway mode the offsets are upstream's, and so is their retention: the task
        // only forgets groups long Empty (`OffsetConfig::kept_elsewhere`).
        broker.coordinator.spawn_retention();
        koord::broker::spawn_txn_timers(&broker);
        koord::dead_letter::spawn(&broker);
        let mut load_failed = false;
        let stop = async {
            tokio::select! {
                _ = shutdown_signal() => {}
                // A dropped sender (the load succeeded) disables this branch.
                Ok(()) = load_failed_rx => load_failed = true,
            }
        };
        match upstream.zip(upstreams) {
            None => koord::server::run_listeners(bound, broker.clone(), stop).await,
            Some((view, upstreams)) => {
                if let Err(e) = koord::gateway::Gateway::run(bound, broker.clone(), upstreams, view, upstream_security, stop).await {
                    error!("{e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        let _ = http_stop_tx.send(());
        if let Some(http) = http {
            let _ = http.await;
        }
        // Every write accepted before this point reaches the disk before we exit.
        broker.storage.shutdown().await;
        if load_failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// Binds every listener of the configuration; TLS listeners share one TLS configuration, which
/// SIGHUP reloads from its files.
async fn bind_listeners(config: &Config) -> Result<Vec<koord::server::Bound>, String> {
    let listeners = config.effective_listeners()?;
    let tls = if listeners.iter().any(|(l, _)| l.protocol.is_tls()) {
        let tls = Arc::new(koord::security::tls::Tls::new(config.tls.clone())?);
        spawn_tls_reload(tls.clone());
        Some(tls)
    } else {
        None
    };
    let mut bound = Vec::new();
    for (listener, advertised_given) in listeners {
        let addr = listener.bind_addr();
        let tcp = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| format!("cannot listen on {addr} ({}): {e}", listener.name))?;
        let local = tcp.local_addr().map_err(|e| e.to_string())?;
        let listener = listener.bound(local, advertised_given);
        bound.push(koord::server::Bound {
            tcp,
            tls: listener.protocol.is_tls().then(|| tls.clone()).flatten(),
            listener: Arc::new(listener),
            stands_for: None,
        });
    }
    Ok(bound)
}

/// Reloads the TLS certificate files on each SIGHUP; a failed reload keeps the old ones.
fn spawn_tls_reload(tls: Arc<koord::security::tls::Tls>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot watch SIGHUP: TLS files are not reloaded");
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                match tls.reload() {
                    Ok(()) => info!("SIGHUP: TLS certificate and key reloaded"),
                    Err(e) => error!("SIGHUP: TLS files not reloaded, the old ones stay: {e}"),
                }
            }
        });
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    info!("shutdown signal received");
}
