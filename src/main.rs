//! The `koord` binary: `koord serve` (the default) and `koord check-config`.

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
        None => serve(cli.serve),
    }
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
        let broker = match Broker::open(config) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let listener = match tokio::net::TcpListener::bind(broker.config.listen).await {
            Ok(l) => l,
            Err(e) => {
                error!(listen = %broker.config.listen, "cannot listen: {e}");
                return ExitCode::FAILURE;
            }
        };
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        info!(
            listen = %local,
            advertised = %format!("{}:{}", broker.advertised_host, broker.advertised_port),
            node_id = broker.node_id(),
            cluster_id = %broker.cluster_id,
            "koord listening"
        );
        if broker.config.advertised_listener.is_none() && broker.config.listen.ip().is_unspecified() {
            tracing::warn!(
                "listening on an unspecified address without advertised.listener: clients will be told to connect to {}; set --advertised-listener",
                broker.config.listen
            );
        }
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
        broker.coordinator.spawn_retention();
        let mut load_failed = false;
        let stop = async {
            tokio::select! {
                _ = shutdown_signal() => {}
                // A dropped sender (the load succeeded) disables this branch.
                Ok(()) = load_failed_rx => load_failed = true,
            }
        };
        koord::server::run(listener, broker.clone(), stop).await;
        // Every write accepted before this point reaches the disk before we exit.
        broker.storage.shutdown().await;
        if load_failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
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
