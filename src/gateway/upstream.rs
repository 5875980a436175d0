//! Connections to the upstream brokers: one task per connection that writes request frames
//! with correlation ids of its own and hands each response back to whoever sent the request,
//! and the pool idle connections wait in between clients.
//!
//! A request frame goes upstream as it came from the client except for its correlation id
//! (bytes 4..8 of every request header version), written from the slices around it: nothing
//! is decoded or re-encoded. Kafka answers one connection's requests in order, so the pending
//! requests are a queue; a response whose correlation id is not the head's means the stream is
//! out of step, and the connection is dropped. When a connection ends (the broker went away, a
//! frame could not be read) every request still pending gets [`UpstreamGone`], and the client
//! connection that sent it is closed: nothing upstream did not answer is answered.
//!
//! [`connect`] is the one way koord reaches an upstream broker (discovery, forwarding, koord's
//! own client): TCP, then TLS when `upstream.security.protocol` asks for it, then SaslHandshake
//! and SaslAuthenticate as Kafka's clients run them, before the connection is used for anything
//! else.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use crate::security::client::{server_name, ClientSecurity, SaslIdentity};
use crate::security::scram::client::ClientFirst;
use crate::security::SaslMechanism;
use crate::server::frame::read_frame;

/// The upstream connection ended before it answered.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("the upstream connection ended before answering")]
pub struct UpstreamGone;

/// How long one request of koord's own may wait for its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection attempt to an upstream broker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests queued for one upstream connection's writer.
const QUEUE: usize = 64;
/// Idle connections kept per upstream broker.
const POOL_PER_BROKER: usize = 8;
/// Largest response frame accepted from upstream (a Fetch answer is bounded by the client's
/// fetch.max.bytes; this only keeps a corrupt length from being believed).
const MAX_RESPONSE: usize = 1 << 30;

/// A response frame from upstream, without its length prefix; bytes 0..4 are the gateway's
/// correlation id, to be replaced by the client's.
pub type Response = Result<Bytes, UpstreamGone>;

struct Out {
    frame: Bytes,
    reply: Option<oneshot::Sender<Response>>,
}

/// One connection to an upstream broker.
#[derive(Debug)]
pub struct UpstreamConn {
    tx: mpsc::Sender<Out>,
    /// Requests sent and not yet answered (a connection goes back to the pool only at 0).
    in_flight: Arc<AtomicUsize>,
}

/// Why a connection to an upstream broker could not be made.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// Not reachable (refused, timed out, closed during the exchange): worth retrying.
    #[error("{0}")]
    Unreachable(String),
    /// The TLS handshake failed on a certificate or protocol error: retrying does not mend it.
    #[error("TLS handshake with {addr} failed: {message}")]
    Tls { addr: String, message: String },
    /// Upstream refused koord's SASL authentication (its own message, e.g. wrong password),
    /// or the exchange went wrong: retrying does not mend it.
    #[error("SASL authentication to {addr} as {user} failed: {message}")]
    Authentication {
        addr: String,
        user: String,
        message: String,
    },
}

impl ConnectError {
    /// Whether retrying cannot help (wrong credentials, a certificate not trusted): start-up
    /// fails at once rather than retrying until its deadline.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ConnectError::Unreachable(_))
    }
}

/// Connects to the upstream broker at `addr` (`host:port`) as `security` says: TCP, TLS,
/// SASL. The connection is ready for requests.
///
/// # Errors
/// [`ConnectError`]: unreachable, a failed TLS handshake, refused credentials.
pub async fn connect(addr: &str, security: &ClientSecurity) -> Result<UpstreamConn, ConnectError> {
    let unreachable = |e: std::io::Error| ConnectError::Unreachable(format!("{addr}: {e}"));
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| ConnectError::Unreachable(format!("{addr}: connect timed out")))?
        .map_err(unreachable)?;
    let _ = stream.set_nodelay(true);
    let conn = match &security.tls {
        None => UpstreamConn::over(stream, addr),
        Some(tls) => {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let name = server_name(host).map_err(|message| ConnectError::Tls {
                addr: addr.to_string(),
                message,
            })?;
            let handshake = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, stream));
            let stream = match handshake.await {
                Err(_) => {
                    return Err(ConnectError::Unreachable(format!(
                        "{addr}: TLS handshake timed out"
                    )))
                }
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    // rustls's own errors (a certificate not trusted, no common protocol) are
                    // for good; an I/O error is the network's.
                    let tls_error = e
                        .get_ref()
                        .is_some_and(|inner| inner.is::<tokio_rustls::rustls::Error>());
                    return Err(if tls_error {
                        ConnectError::Tls {
                            addr: addr.to_string(),
                            message: e.to_string(),
                        }
                    } else {
                        unreachable(e)
                    });
                }
            };
            UpstreamConn::over(stream, addr)
        }
    };
    if let Some(identity) = &security.sasl {
        authenticate(&conn, addr, identity).await?;
    }
    Ok(conn)
}

/// SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate v2, as Kafka's clients
/// authenticate (KIP-152). Upstream closes the connection after a failure; its error message
/// is what the caller reports.
async fn authenticate(
    conn: &UpstreamConn,
    addr: &str,
    identity: &SaslIdentity,
) -> Result<(), ConnectError> {
    let failed = |message: String| ConnectError::Authentication {
        addr: addr.to_string(),
        user: identity.username.clone(),
        message,
    };
    let call_failed = |e: UpstreamError| match e {
        UpstreamError::Unreachable(m) => ConnectError::Unreachable(format!("{addr}: {m}")),
        other => failed(other.to_string()),
    };
    let mechanism = identity.mechanism;
    let handshake = call_on(
        conn,
        1,
        &SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name())),
    )
    .await
    .map_err(call_failed)?;
    if handshake.error_code != 0 {
        let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(failed(format!(
            "SaslHandshake for {} answered error {} (upstream offers {})",
            mechanism.name(),
            handshake.error_code,
            offered.join(", ")
        )));
    }
    let send = |token: Vec<u8>| async move {
        let r = call_on(
            conn,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
        )
        .await
        .map_err(call_failed)?;
        if r.error_code != 0 {
            return Err(failed(format!(
                "{} (error {})",
                r.error_message.as_deref().unwrap_or("no message"),
                r.error_code
            )));
        }
        Ok(r.auth_bytes)
    };
    match mechanism {
        SaslMechanism::Plain => {
            let token = format!("\0{}\0{}", identity.username, identity.password);
            send(token.into_bytes()).await?;
        }
        SaslMechanism::Scram(m) => {
            let nonce = crate::security::scram::server_nonce();
            let (state, first) =
                ClientFirst::new(m, &identity.username, &identity.password, &nonce);
            let server_first = send(first).await?;
            // PBKDF2 over the password: milliseconds of CPU, off the runtime's workers.
            let computed = tokio::task::spawn_blocking(move || state.handle(&server_first))
                .await
                .map_err(|e| failed(e.to_string()))?;
            let (state, fin) = computed.map_err(|e| failed(format!("SCRAM: {e}")))?;
            let server_final = send(fin).await?;
            state
                .finish(&server_final)
                .map_err(|e| failed(format!("SCRAM: {e}")))?;
        }
    }
    debug!(upstream = %addr, user = %identity.username, mechanism = mechanism.name(), "authenticated upstream");
    Ok(())
}

impl UpstreamConn {
    /// A connection over `stream` (connected, TLS established if any), its task spawned.
    fn over<S>(stream: S, addr: &str) -> UpstreamConn
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(QUEUE);
        let in_flight = Arc::new(AtomicUsize::new(0));
        tokio::spawn(run(stream, rx, in_flight.clone(), addr.to_string()));
        UpstreamConn { tx, in_flight }
    }

    /// Sends one request frame (header and body, no length prefix; at least 8 bytes, checked
    /// by the caller). With `expect_response` the receiver gets the answer; without (Produce
    /// with acks=0) upstream sends none.
    ///
    /// # Errors
    /// [`UpstreamGone`] when the connection has ended.
    pub async fn send(
        &self,
        frame: Bytes,
        expect_response: bool,
    ) -> Result<Option<oneshot::Receiver<Response>>, UpstreamGone> {
        let (reply, rx) = if expect_response {
            let (t, r) = oneshot::channel();
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        if expect_response {
            self.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        if self.tx.send(Out { frame, reply }).await.is_err() {
            return Err(UpstreamGone);
        }
        Ok(rx)
    }

    /// Whether the connection still runs.
    pub fn is_alive(&self) -> bool {
        !self.tx.is_closed()
    }

    /// Whether nothing is waiting for an answer on it.
    pub fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

/// The connection's task: writes what is queued, reads answers, until either side ends.
async fn run<S>(stream: S, mut rx: mpsc::Receiver<Out>, in_flight: Arc<AtomicUsize>, addr: String)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, wr) = tokio::io::split(stream);
    let mut wr = BufWriter::new(wr);
    let mut buf = BytesMut::new();
    let mut pending: VecDeque<(i32, Option<oneshot::Sender<Response>>)> = VecDeque::new();
    let mut next_corr: i32 = 0;
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(out) = out else { break };
                let corr = next_corr;
                next_corr = next_corr.wrapping_add(1);
                let f = &out.frame;
                let written = async {
                    wr.write_all(&(f.len() as i32).to_be_bytes()).await?;
                    wr.write_all(&f[..4]).await?;
                    wr.write_all(&corr.to_be_bytes()).await?;
                    wr.write_all(&f[8..]).await?;
                    if rx.is_empty() {
                        wr.flush().await?;
                    }
                    std::io::Result::Ok(())
                }
                .await;
                if let Err(e) = written {
                    debug!(upstream = %addr, error = %e, "upstream write failed");
                    if out.reply.is_some() {
                        in_flight.fetch_sub(1, Ordering::AcqRel);
                    }
                    break;
                }
                if let Some(reply) = out.reply {
                    pending.push_back((corr, Some(reply)));
                }
            }
            frame = read_frame(&mut rd, &mut buf, MAX_RESPONSE) => {
                let frame = match frame {
                    Ok(Some(f)) if f.len() >= 4 => f,
                    Ok(None) => {
                        debug!(upstream = %addr, "upstream closed the connection");
                        break;
                    }
                    Ok(Some(_)) => {
                        debug!(upstream = %addr, "upstream frame too short");
                        break;
                    }
                    Err(e) => {
                        debug!(upstream = %addr, error = %e, "upstream read failed");
                        break;
                    }
                };
                let corr = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                match pending.pop_front() {
                    Some((want, reply)) if want == corr => {
                        in_flight.fetch_sub(1, Ordering::AcqRel);
                        if let Some(reply) = reply {
                            // The client may have gone meanwhile; the answer is then dropped.
                            let _ = reply.send(Ok(frame));
                        }
                    }
                    other => {
                        debug!(upstream = %addr, corr, expected = ?other.as_ref().map(|p| p.0),
                            "upstream answered out of step; dropping the connection");
                        if let Some((_, Some(reply))) = other {
                            in_flight.fetch_sub(1, Ordering::AcqRel);
                            let _ = reply.send(Err(UpstreamGone));
                        }
                        break;
                    }
                }
            }
        }
    }
    // Every request still pending learns that no answer comes.
    for (_, reply) in pending.drain(..) {
        if let Some(reply) = reply {
            let _ = reply.send(Err(UpstreamGone));
        }
    }
    rx.close();
    while let Some(out) = rx.recv().await {
        if let Some(reply) = out.reply {
            let _ = reply.send(Err(UpstreamGone));
        }
    }
    let _ = wr.shutdown().await;
}

/// Idle upstream connections by broker id, taken by a client connection on its first request
/// for that broker and given back when the client connection closes.
#[derive(Debug, Default)]
pub struct Pool {
    idle: Mutex<HashMap<i32, Vec<UpstreamConn>>>,
}

impl Pool {
    /// An idle, live connection to broker `node`, if the pool has one.
    pub fn take(&self, node: i32) -> Option<UpstreamConn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.get_mut(&node)?;
        while let Some(c) = conns.pop() {
            if c.is_alive() {
                return Some(c);
            }
        }
        None
    }

    /// Gives a connection back; one that is busy or dead, or beyond the pool's size, is
    /// dropped (which closes it).
    pub fn put(&self, node: i32, conn: UpstreamConn) {
        if !conn.is_alive() || !conn.is_idle() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.entry(node).or_default();
        if conns.len() < POOL_PER_BROKER {
            conns.push(conn);
        }
    }

    /// Drops every idle connection to `node` (its address changed).
    pub fn forget(&self, node: i32) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.remove(&node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn frame(corr: i32, body: &[u8]) -> Bytes {
        let mut f = vec![0, 3, 0, 12];
        f.extend_from_slice(&corr.to_be_bytes());
        f.extend_from_slice(body);
        Bytes::from(f)
    }

    /// A fake broker: reads `n` frames, answers each with its own correlation id and body
    /// reversed, in order.
    async fn echo_broker(n: usize) -> (String, tokio::task::JoinHandle<Vec<Vec<u8>>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let h = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut seen = Vec::new();
            for _ in 0..n {
                let len = s.read_i32().await.unwrap() as usize;
                let mut f = vec![0; len];
                s.read_exact(&mut f).await.unwrap();
                let mut answer = f[4..8].to_vec();
                answer.extend(f[8..].iter().rev());
                s.write_all(&(answer.len() as i32).to_be_bytes())
                    .await
                    .unwrap();
                s.write_all(&answer).await.unwrap();
                seen.push(f);
            }
            seen
        });
        (addr, h)
    }

    #[tokio::test]
    async fn correlation_ids_are_the_connections_own_and_answers_return_in_order() {
        let (addr, broker) = echo_broker(2).await;
        let up = connect(&addr, &ClientSecurity::plaintext()).await.unwrap();
        let a = up.send(frame(1000, b"ab"), true).await.unwrap().unwrap();
        let b = up.send(frame(1000, b"cd"), true).await.unwrap().unwrap();
        let a = a.await.unwrap().unwrap();
        let b = b.await.unwrap().unwrap();
        assert_eq!(&a[4..], b"ba");
        assert_eq!(&b[4..], b"dc");
        let seen = broker.await.unwrap();
        // The client's 1000 was replaced by 0 and 1; the rest went as it came.
        assert_eq!(&seen[0][4..8], &0i32.to_be_bytes());
        assert_eq!(&seen[1][4..8], &1i32.to_be_bytes());
        assert_eq!(&seen[0][..4], &[0, 3, 0, 12]);
        assert_eq!(&seen[0][8..], b"ab");
        assert!(up.is_idle());
    }

    #[tokio::test]
    async fn a_broker_that_goes_away_fails_what_is_pending() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let broker = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let len = s.read_i32().await.unwrap() as usize;
            let mut f = vec![0; len];
            s.read_exact(&mut f).await.unwrap();
            // Gone without answering.
        });
        let up = connect(&addr, &ClientSecurity::plaintext()).await.unwrap();
        let rx = up.send(frame(5, b"x"), true).await.unwrap().unwrap();
        broker.await.unwrap();
        assert_eq!(rx.await.unwrap(), Err(UpstreamGone));
        assert!(!up.is_idle(), "a failed request never counts as answered");
    }

    #[tokio::test]
    async fn an_answer_out_of_step_drops_the_connection() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let len = s.read_i32().await.unwrap() as usize;
            let mut f = vec![0; len];
            s.read_exact(&mut f).await.unwrap();
            s.write_all(&[0, 0, 0, 4, 0, 0, 0, 99]).await.unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
        });
        let up = connect(&addr, &ClientSecurity::plaintext()).await.unwrap();
        let rx = up.send(frame(5, b"x"), true).await.unwrap().unwrap();
        assert_eq!(rx.await.unwrap(), Err(UpstreamGone));
    }

    /// A broker that takes the handshake and refuses the password: `connect` fails at once,
    /// for good, with the broker's own message.
    #[tokio::test]
    async fn refused_credentials_fail_with_the_brokers_message() {
        use bytes::BufMut;
        use kafka_protocol::messages::{
            ApiKey, ResponseHeader, SaslAuthenticateResponse, SaslHandshakeResponse,
        };
        use kafka_protocol::protocol::Encodable;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            for key in [ApiKey::SaslHandshake, ApiKey::SaslAuthenticate] {
                let len = s.read_i32().await.unwrap() as usize;
                let mut f = vec![0; len];
                s.read_exact(&mut f).await.unwrap();
                assert_eq!(i16::from_be_bytes([f[0], f[1]]), key as i16);
                let v = i16::from_be_bytes([f[2], f[3]]);
                let mut out = BytesMut::new();
                out.put_i32(0);
                ResponseHeader::default()
                    .with_correlation_id(i32::from_be_bytes([f[4], f[5], f[6], f[7]]))
                    .encode(&mut out, key.response_header_version(v))
                    .unwrap();
                if key == ApiKey::SaslHandshake {
                    SaslHandshakeResponse::default()
                        .with_mechanisms(vec![StrBytes::from_static_str("PLAIN")])
                        .encode(&mut out, v)
                        .unwrap();
                } else {
                    assert_eq!(&f[f.len() - 13..], b"\0koord\0wrong\0", "{f:?}");
                    SaslAuthenticateResponse::default()
                        .with_error_code(58)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Invalid username or password",
                        )))
                        .encode(&mut out, v)
                        .unwrap();
                }
                let n = (out.len() - 4) as i32;
                out[..4].copy_from_slice(&n.to_be_bytes());
                s.write_all(&out).await.unwrap();
            }
            // Kafka closes a connection whose authentication failed.
        });
        let security = ClientSecurity {
            tls: None,
            sasl: Some(SaslIdentity {
                mechanism: SaslMechanism::Plain,
                username: "koord".into(),
                password: "wrong".into(),
            }),
        };
        let e = connect(&addr, &security).await.unwrap_err();
        assert!(e.is_fatal(), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("as koord failed: Invalid username or password (error 58)"),
            "{text}"
        );
    }
}

/// Why an upstream operation failed.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum UpstreamError {
    /// No broker (or not the one needed) could be reached, or it did not answer in time.
    #[error("upstream unreachable: {0}")]
    Unreachable(String),
    /// Upstream refused with a Kafka error that retrying does not mend (or kept answering a
    /// retriable one until the deadline: [`UpstreamError::client_code`]).
    #[error("upstream answered {error:?} ({what})")]
    Refused { error: i16, what: String },
    /// An answer that does not decode.
    #[error("upstream protocol error: {0}")]
    Protocol(String),
}

impl UpstreamError {
    pub(super) fn refused(code: i16, what: impl Into<String>) -> UpstreamError {
        UpstreamError::Refused {
            error: code,
            what: what.into(),
        }
    }

    /// The Kafka error code, if upstream answered one.
    pub fn code(&self) -> Option<i16> {
        match self {
            UpstreamError::Refused { error, .. } => Some(*error),
            _ => None,
        }
    }

    /// Whether upstream could not serve yet (unreachable, or a retriable answer such as a
    /// coordinator moving or loading, kept up until the deadline), as opposed to a refusal.
    pub fn is_unavailable(&self) -> bool {
        match self {
            UpstreamError::Unreachable(_) => true,
            UpstreamError::Refused { error, .. } => retriable(*error),
            UpstreamError::Protocol(_) => false,
        }
    }

    /// What a client of koord is told when a group operation koord sent upstream failed.
    /// koord is the group's coordinator, so upstream's coordinator moving or loading, or
    /// upstream unreachable, is never NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE (a client
    /// would look its coordinator up, find koord again, and may not retry: librdkafka does
    /// not re-send an OffsetFetch then). It is COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer
    /// while a coordinator cannot serve a group yet, which every client retries on the same
    /// coordinator for the group APIs. Any other refusal is upstream's code, passed on.
    pub fn client_code(&self) -> i16 {
        match self {
            UpstreamError::Refused { error, .. } if !retriable(*error) => *error,
            UpstreamError::Protocol(_) => ResponseError::UnknownServerError.code(),
            _ => ResponseError::CoordinatorLoadInProgress.code(),
        }
    }

    /// [`UpstreamError::client_code`], logged: `api` for `group` failed upstream and its
    /// client is told so.
    pub fn answer(&self, group: &str, api: &str) -> i16 {
        let code = self.client_code();
        warn!(group, api, error = %self, answered = code, "upstream could not serve the group's request in time");
        code
    }
}

/// Whether `code` is worth retrying after re-reading where to send (Kafka's retriable errors,
/// and a coordinator that moved or is loading).
pub(super) fn retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| {
        e.is_retriable()
            || matches!(
                e,
                ResponseError::NotCoordinator
                    | ResponseError::CoordinatorNotAvailable
                    | ResponseError::CoordinatorLoadInProgress
            )
    })
}

/// Sends `req` on `conn` at version `v` and decodes the answer.
pub async fn call_on<R: Request>(
    conn: &UpstreamConn,
    v: i16,
    req: &R,
) -> Result<R::Response, UpstreamError> {
    let key = ApiKey::try_from(R::KEY)
        .map_err(|_| UpstreamError::Protocol(format!("unknown api key {}", R::KEY)))?;
    let mut frame = call_frame(conn, key, v, req).await?;
    ResponseHeader::decode(&mut frame, R::Response::header_version(v))
        .map_err(|e| UpstreamError::Protocol(format!("{key:?} header: {e}")))?;
    R::Response::decode(&mut frame, v).map_err(|e| UpstreamError::Protocol(format!("{key:?}: {e}")))
}

/// Sends `req` (API `key`) on `conn` at version `v`; the answer's frame as it came, response
/// header included, for a caller that reads it its own way.
pub async fn call_frame<R: Encodable>(
    conn: &UpstreamConn,
    key: ApiKey,
    v: i16,
    req: &R,
) -> Result<Bytes, UpstreamError> {
    let mut f = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(v)
        .with_client_id(Some(StrBytes::from_static_str("koord-gateway")))
        .encode(&mut f, key.request_header_version(v))
        .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
    req.encode(&mut f, v)
        .map_err(|e| UpstreamError::Protocol(format!("{key:?} v{v}: {e}")))?;
    let gone = |what: &str| UpstreamError::Unreachable(format!("{key:?}: {what}"));
    let rx = conn
        .send(f.freeze(), true)
        .await
        .map_err(|_| gone("connection ended"))?
        .ok_or_else(|| gone("no response expected"))?;
    tokio::time::timeout(REQUEST_TIMEOUT, rx)
        .await
        .map_err(|_| gone("timed out"))?
        .map_err(|_| gone("connection ended"))?
        .map_err(|_| gone("connection ended"))
}
