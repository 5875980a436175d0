//! The async shell of both modes: the accept loops of the listeners, the connection limit and
//! graceful shutdown. In gateway mode a [`Front`] puts a layer in front of each connection's
//! dispatch ([`connection::Layer`]) and hands over the sockets of the upstream brokers it
//! presents as they appear; everything else is the same code.
//!
//! `run_listeners` takes its shutdown trigger from the caller (a signal in `main`, a channel in
//! tests), as mini-redis does. Each listener accepts on a task of its own and hands its sockets
//! to the one loop that counts connections (`max.connections` over all listeners) and spawns
//! them; a TLS listener's connection starts with its handshake. On shutdown it stops accepting,
//! tells every connection to finish the request it is serving (a request still waiting, such as
//! a long-poll Fetch or a parked JoinGroup, is dropped unanswered) and close, and returns once
//! all of them have.

pub mod codec;
pub mod connection;
pub mod frame;
mod throttle;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn, Instrument};

use crate::broker::Broker;
use crate::security::tls::{self, Tls};
use crate::security::{Listener, SecurityProtocol};
use connection::Conn;

/// A bound listener: its socket, what it is, and for TLS listeners the node's TLS
/// configuration.
pub struct Bound {
    pub tcp: TcpListener,
    pub listener: Arc<Listener>,
    pub tls: Option<Arc<Tls>>,
    /// Gateway mode: the upstream broker this socket stands for (`None`: the listener's own
    /// port).
    pub stands_for: Option<i32>,
}

/// An accepted socket, with where it came in.
struct Accepted {
    stream: TcpStream,
    peer: SocketAddr,
    listener: Arc<Listener>,
    tls: Option<Arc<Tls>>,
    stands_for: Option<i32>,
}

/// What stands in front of every connection's dispatch (gateway mode's layer maker).
pub trait Front: Send + Sync + 'static {
    /// The layer of a connection `conn` accepted on a socket standing for `stands_for`.
    fn layer(&self, conn: &Conn, stands_for: Option<i32>) -> Option<Box<dyn connection::Layer>>;
}

/// Serves one PLAINTEXT `listener`, advertising the broker's address, until `shutdown`
/// completes, then drains connections.
pub async fn run(listener: TcpListener, broker: Arc<Broker>, shutdown: impl Future<Output = ()>) {
    let local = listener.local_addr().ok();
    let info = Listener {
        name: "PLAINTEXT".into(),
        protocol: SecurityProtocol::Plaintext,
        bind_host: local.map(|a| a.ip().to_string()).unwrap_or_default(),
        bind_port: local.map_or(0, |a| a.port()),
        advertised_host: broker.advertised_host.clone(),
        advertised_port: broker.advertised_port,
    };
    let bound = Bound {
        tcp: listener,
        listener: Arc::new(info),
        tls: None,
        stands_for: None,
    };
    run_listeners(vec![bound], broker, shutdown).await;
}

/// Serves every listener of `bound` until `shutdown` completes, then drains connections.
pub async fn run_listeners(
    bound: Vec<Bound>,
    broker: Arc<Broker>,
    shutdown: impl Future<Output = ()>,
) {
    serve(bound, broker, None, None, shutdown).await;
}

/// Serves `bound` (and in gateway mode the sockets `more` brings as upstream brokers are
/// presented) until `shutdown` completes, each connection behind `front`'s layer if there is
/// one; then stops accepting, tells every connection to close and returns once all have.
pub async fn serve(
    bound: Vec<Bound>,
    broker: Arc<Broker>,
    front: Option<Arc<dyn Front>>,
    mut more: Option<mpsc::UnboundedReceiver<Bound>>,
    shutdown: impl Future<Output = ()>,
) {
    let limit = Arc::new(Semaphore::new(broker.config.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (accepted_tx, mut accepted) = mpsc::channel::<Accepted>(64);
    let mut accepting = JoinSet::new();
    for b in bound {
        accepting.spawn(accept_loop(b, accepted_tx.clone()));
    }
    let mut conns = JoinSet::new();
    let next_id = AtomicU64::new(1);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(b) = async { more.as_mut()?.recv().await }, if more.is_some() => {
                accepting.spawn(accept_loop(b, accepted_tx.clone()));
            }
            Some(a) = accepted.recv() => {
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    debug!(peer = %a.peer, "max.connections reached; closing new connection");
                    drop(a);
                    continue;
                };
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let broker = broker.clone();
                let stop = stop_rx.clone();
                let front = front.clone();
                let span = tracing::debug_span!("conn", peer = %a.peer, conn = id,
                    listener = %a.listener.name, node = ?a.stands_for);
                conns.spawn(async move {
                    let metrics = crate::metrics::metrics();
                    metrics.connection_opened();
                    serve_socket(a, broker, front, stop).await;
                    metrics.connection_closed();
                    drop(permit);
                }.instrument(span));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(accepted_tx);
    info!(open = conns.len(), "shutting down: no longer accepting");
    accepting.abort_all();
    while accepting.join_next().await.is_some() {}
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    info!("all connections closed");
}

/// One accepted socket: on a TLS listener the handshake first, then the connection, behind
/// `front`'s layer if there is one.
async fn serve_socket(
    a: Accepted,
    broker: Arc<Broker>,
    front: Option<Arc<dyn Front>>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(peer) = tcp_ready(&a.stream) else {
        return;
    };
    let mut conn = Conn {
        peer,
        listener: a.listener,
        tls_principal: None,
        stands_for: a.stands_for,
    };
    let layer = |conn: &Conn| front.as_ref().and_then(|f| f.layer(conn, a.stands_for));
    match a.tls {
        None => {
            let layer = layer(&conn);
            connection::serve(a.stream, conn, broker, stop, layer).await;
        }
        Some(tls) => {
            let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
            let Some((stream, principal)) = tls_accept(a.stream, &tls, idle, &mut stop).await
            else {
                return;
            };
            conn.tls_principal = Some(principal);
            let layer = layer(&conn);
            connection::serve(stream, conn, broker, stop, layer).await;
        }
    }
}

/// Accepts on one listener and hands the sockets over until the receiver is gone.
async fn accept_loop(b: Bound, out: mpsc::Sender<Accepted>) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let (stream, peer) = match b.tcp.accept().await {
            Ok(x) => {
                backoff = Duration::from_millis(10);
                x
            }
            Err(e) => {
                // Out of file descriptors and the like: back off rather than spin.
                warn!(error = %e, listener = %b.listener.name, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let accepted = Accepted {
            stream,
            peer,
            listener: b.listener.clone(),
            tls: b.tls.clone(),
            stands_for: b.stands_for,
        };
        if out.send(accepted).await.is_err() {
            return;
        }
    }
}

/// The server side of a TLS handshake on an accepted socket, bounded by `idle` and abandoned
/// when `stop` turns true: the TLS stream and the client certificate's principal (ANONYMOUS
/// without one), or `None` (logged; the socket is closed) when it fails. A failed handshake
/// (plaintext to a TLS listener, a bad certificate) closes the socket.
async fn tls_accept(
    stream: TcpStream,
    tls: &Tls,
    idle: Duration,
    stop: &mut watch::Receiver<bool>,
) -> Option<(
    tokio_rustls::server::TlsStream<TcpStream>,
    crate::security::Principal,
)> {
    let handshake = tokio::time::timeout(idle, tls.acceptor().accept(stream));
    let stream = tokio::select! {
        _ = stop.wait_for(|s| *s) => return None,
        r = handshake => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                debug!(error = %e, "TLS handshake failed; closing");
                return None;
            }
            Err(_) => {
                debug!("TLS handshake timed out; closing");
                return None;
            }
        },
    };
    let principal = tls::principal(stream.get_ref().1);
    debug!(%principal, "TLS established");
    Some((stream, principal))
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
