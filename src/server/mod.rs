//! The async shell: the accept loop, connection limit and graceful shutdown.
//!
//! `run` takes its shutdown trigger from the caller (a signal in `main`, a channel in tests), as
//! mini-redis does. On shutdown it stops accepting, tells every connection to finish the request
//! it is serving (a request still waiting, such as a long-poll Fetch or a parked JoinGroup, is
//! dropped unanswered) and close, and returns once all of them have.

pub mod codec;
pub mod connection;
pub mod frame;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn, Instrument};

use crate::broker::Broker;

/// Serves `listener` until `shutdown` completes, then drains connections.
pub async fn run(listener: TcpListener, broker: Arc<Broker>, shutdown: impl Future<Output = ()>) {
    let limit = Arc::new(Semaphore::new(broker.config.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let next_id = AtomicU64::new(1);
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(10);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => { backoff = Duration::from_millis(10); x }
                    Err(e) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                        continue;
                    }
                };
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    debug!(%peer, "max.connections reached; closing new connection");
                    drop(stream);
                    continue;
                };
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let broker = broker.clone();
                let stop = stop_rx.clone();
                let span = tracing::debug_span!("conn", %peer, conn = id);
                conns.spawn(async move {
                    let metrics = crate::observe::metrics();
                    metrics.connection_opened();
                    if let Some(peer) = tcp_ready(&stream) {
                        connection::serve(stream, peer, broker, stop).await;
                    }
                    metrics.connection_closed();
                    drop(permit);
                }.instrument(span));
            }
            // Reap finished connection tasks so the set does not grow without bound.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    info!(open = conns.len(), "shutting down: no longer accepting");
    drop(listener);
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    info!("all connections closed");
}

/// An accepted socket's peer address (`None`, and the socket is closed, when the peer is
/// already gone), with Nagle off: the flush policy batches answers, so a flush should send.
fn tcp_ready(stream: &TcpStream) -> Option<SocketAddr> {
    let peer = match stream.peer_addr() {
        Ok(p) => p,
        Err(e) => {
            debug!(error = %e, "peer address unavailable; closing");
            return None;
        }
    };
    if let Err(e) = stream.set_nodelay(true) {
        debug!(error = %e, "set_nodelay failed");
    }
    Some(peer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use tokio::io::AsyncReadExt;

    fn broker(overrides: &[&str]) -> Arc<Broker> {
        let dir = std::env::temp_dir().join(format!(
            "koord-server-test-{}-{}",
            std::process::id(),
            overrides.join("_").replace(['/', '='], "-")
        ));
        let mut o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        o.push(format!("data.dir=\"{}\"", dir.display()));
        Arc::new(Broker::new(Config::load(None, &o).unwrap()).unwrap())
    }

    /// Paused time: the idle timeout fires without the test waiting for it.
    #[tokio::test(start_paused = true)]
    async fn idle_connection_is_closed_after_connections_max_idle_ms() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(run(
            listener,
            broker(&["connections.max.idle.ms=5000"]),
            async move {
                let _ = stop_rx.await;
            },
        ));
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let start = tokio::time::Instant::now();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0, "expected EOF");
        assert!(start.elapsed() >= std::time::Duration::from_millis(5000));
        stop_tx.send(()).unwrap();
        server.await.unwrap();
    }
}
