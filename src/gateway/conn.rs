//! One client connection to the gateway.
//!
//! The reader takes one request at a time, as koord standalone does: a koord API (the groups,
//! ApiVersions, FindCoordinator for a group) is decoded and run through koord's own dispatch to
//! the end; a forwarded one is handed to the upstream connection for its broker, and the reader
//! goes on to the next request. The writer answers in request order, waiting for each forwarded
//! answer in turn: a forwarded frame goes back as upstream sent it with the client's
//! correlation id, except Metadata, DescribeCluster and FindCoordinator (transaction), which
//! are rewritten to name koord's endpoints. If an upstream connection ends with a request of
//! this client unanswered, or upstream cannot be reached for it, the client connection is
//! closed: the client retries on a new one (after refreshing metadata), and nothing upstream
//! did not acknowledge is acknowledged.
//!
//! Before anything is routed, the connection's [`Session`] admits the request, as on a
//! standalone connection: on a SASL listener nothing but ApiVersions and the SASL exchange
//! (koord's own, against koord's credentials, run by the same code as standalone) is served
//! before authentication, so nothing is forwarded for an unauthenticated client; koord's APIs
//! then run with the session's principal (koord's authorizer applies to them as standalone).
//! Forwarded requests go upstream on koord's own upstream connections, as koord's upstream
//! user.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter, WriteHalf};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, trace, warn, Instrument};

use super::rewrite::{self, Decoded, Route};
use super::upstream::{Response, UpstreamConn};
use super::Gateway;
use crate::api::{self, Outcome, RequestContext};
use crate::security::session::{Admit, Session};
use crate::security::Principal;
use crate::server::codec::{self, Decoded as Request};
use crate::server::connection::{failed_authentication_delay, Step};
use crate::server::frame::read_frame;

/// Answers queued for the writer at once (forwarded requests in flight per connection).
const PIPELINE: usize = 32;
/// How long the answers before a failed authentication's may take to be written.
const DRAIN: Duration = Duration::from_secs(5);

/// One answer, in request order.
enum Pending {
    /// A whole response frame, length prefix included.
    Ready(Bytes),
    /// A forwarded request's answer, still to come.
    Upstream {
        rx: oneshot::Receiver<Response>,
        corr: i32,
        key: ApiKey,
        version: i16,
        /// When it went upstream (request metrics on).
        sent: Option<Instant>,
    },
}

/// What the reader does after a request.
enum Next {
    Queue(Pending),
    /// Nothing to answer (Produce with acks=0).
    Nothing,
    Close,
    /// Answer, then close once the answers before it are written (a failed authentication,
    /// after `connection.failed.authentication.delay.ms`).
    QueueThenClose(Pending),
}

/// Where a client connection came in.
#[derive(Debug, Clone)]
pub struct At {
    pub peer: SocketAddr,
    /// The koord listener (an index into [`Gateway::listeners`]).
    pub listener: usize,
    /// The client certificate's principal, on a TLS listener.
    pub tls_principal: Option<Principal>,
    /// The upstream broker the port stands for; `None` on the listener's own port.
    pub target: Option<i32>,
}

/// The connection's state the reader keeps from request to request.
struct Client {
    at: At,
    ctx: RequestContext,
    session: Session,
    upstreams: HashMap<i32, UpstreamConn>,
}

/// Serves one client connection until it closes, misbehaves, loses its upstream, or shutdown.
pub async fn serve<S>(stream: S, at: At, gw: Arc<Gateway>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let Some(listener) = gw.listeners.get(at.listener).map(|l| l.listener.clone()) else {
        return;
    };
    let (mut rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel::<Pending>(PIPELINE);
    let writer = tokio::spawn(write_loop(wr, rx, gw.clone(), at.listener).in_current_span());
    let mut stop = gw.stop.clone();
    let session = Session::new(
        listener.protocol,
        at.tls_principal.clone(),
        gw.broker.config.sasl_enabled_mechanisms.clone(),
        gw.broker.config.connections_max_reauth_ms,
    );
    let ctx = RequestContext {
        peer: at.peer,
        peer_host: at.peer.ip().to_string().into(),
        listener,
        principal: session.principal().clone(),
    };
    let mut client = Client {
        at,
        ctx,
        session,
        upstreams: HashMap::new(),
    };
    let mut buf = BytesMut::new();
    let max = gw.broker.config.socket_request_max_bytes;
    let idle = Duration::from_millis(gw.broker.config.connections_max_idle_ms);
    // Whether the answers queued are written before the connection closes (a failed
    // authentication's answer), rather than dropped.
    let mut drain = false;
    debug!("gateway connection open");
    loop {
        let frame = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            // The writer ended (a write failed, or upstream went away): stop reading.
            _ = tx.closed() => break,
            f = tokio::time::timeout(idle, read_frame(&mut rd, &mut buf, max)) => match f {
                Ok(Ok(Some(f))) => f,
                Ok(Ok(None)) => { debug!("peer closed"); break }
                Ok(Err(e)) => { debug!(error = %e, "bad frame or read failure; closing"); break }
                Err(_) => { debug!("idle; closing"); break }
            },
        };
        let next = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            n = request(frame, &gw, &mut client) => n,
        };
        match next {
            Next::Queue(p) => {
                if tx.send(p).await.is_err() {
                    break;
                }
            }
            Next::Nothing => {}
            Next::Close => break,
            Next::QueueThenClose(p) => {
                failed_authentication_delay(&gw.broker, &mut stop).await;
                drain = tx.send(p).await.is_ok();
                break;
            }
        }
    }
    // The client is gone, or is being closed on: answers still waiting (an upstream that does
    // not answer, a long-poll Fetch) are not waited for, except a failed authentication's,
    // written with what precedes it (bounded: a client that reads nothing is not waited for).
    // Upstream connections with a request in flight are dropped rather than pooled.
    drop(tx);
    let mut writer = writer;
    if !drain || tokio::time::timeout(DRAIN, &mut writer).await.is_err() {
        writer.abort();
        let _ = writer.await;
    }
    for (node, conn) in client.upstreams {
        gw.pool.put(node, conn);
    }
}

/// Runs one request frame: admitted by the session, then SASL, koord's own or forwarded.
async fn request(frame: Bytes, gw: &Arc<Gateway>, client: &mut Client) -> Next {
    if client.session.expects_raw_token() {
        // After SaslHandshake v0 the SASL tokens come as bare frames.
        return match client
            .session
            .raw_token(&frame, &gw.broker.credentials, Instant::now())
            .await
        {
            Some(token) => {
                client.ctx.principal = client.session.principal().clone();
                let mut out = BytesMut::with_capacity(4 + token.len());
                out.put_i32(token.len() as i32);
                out.put_slice(&token);
                Next::Queue(Pending::Ready(out.freeze()))
            }
            None => {
                debug!("SASL authentication failed; closing");
                // No answer in v0; the close waits as a failed SaslAuthenticate's does.
                Next::QueueThenClose(Pending::Ready(Bytes::new()))
            }
        };
    }
    let target = client.at.target;
    if frame.len() < 8 {
        debug!(len = frame.len(), "request frame too short; closing");
        return Next::Close;
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let corr = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(key) = ApiKey::try_from(raw_key) else {
        debug!(key = raw_key, "unknown API key; closing");
        return Next::Close;
    };
    match client.session.admit(key, Instant::now()) {
        Admit::Serve => {}
        Admit::Sasl => return sasl(frame, gw, client).await,
        Admit::Close(why) => {
            debug!(api = ?key, why, "request not admitted; closing");
            return Next::Close;
        }
    }
    let advertised = gw.advertised();
    if key == ApiKey::ApiVersions {
        return api_versions(frame, &advertised);
    }
    if !rewrite::is_advertised(&advertised, key, version) {
        debug!(api = ?key, v = version, "API or version not served; closing");
        return Next::Close;
    }
    let forward = match rewrite::route(key, gw.own_acls()) {
        Route::Forward => true,
        Route::Koord => false,
        Route::FindCoordinator => match codec::decode_request(frame.clone()) {
            Ok(Request::Request { body, .. }) => match *body {
                RequestKind::FindCoordinator(r) => r.key_type == rewrite::KEY_TYPE_TRANSACTION,
                _ => return Next::Close,
            },
            _ => {
                debug!(api = ?key, v = version, "undecodable request; closing");
                return Next::Close;
            }
        },
    };
    if !forward {
        return koord(frame, gw, &client.ctx).await;
    }
    let expect = if key == ApiKey::Produce {
        match rewrite::produce_expects_response(&frame, version) {
            Some(e) => e,
            None => {
                debug!("undecodable Produce request; closing");
                return Next::Close;
            }
        }
    } else {
        true
    };
    trace!(api = ?key, v = version, corr, "forwarding");
    // Requests any broker answers alike fall back to the others when the port's broker is
    // unreachable; the rest (partition leaders, coordinators, a broker's own configs) do not.
    let any_broker = matches!(
        key,
        ApiKey::Metadata | ApiKey::DescribeCluster | ApiKey::FindCoordinator
    );
    let candidates = match target {
        Some(node) if any_broker => std::iter::once(node)
            .chain(gw.any_order().into_iter().filter(|n| *n != node))
            .collect(),
        Some(node) => vec![node],
        None => gw.any_order(),
    };
    for node in candidates {
        let conn = match upstream_for(node, gw, &mut client.upstreams).await {
            Some(c) => c,
            None => continue,
        };
        let metrics = crate::metrics::metrics();
        let sent = metrics.enabled().then(Instant::now);
        match conn.send(frame.clone(), expect).await {
            Ok(Some(rx)) => {
                return Next::Queue(Pending::Upstream {
                    rx,
                    corr,
                    key,
                    version,
                    sent,
                })
            }
            Ok(None) => {
                // Produce with acks=0: served once sent.
                if let Some(sent) = sent {
                    metrics.request(raw_key, version, sent.elapsed(), None);
                }
                return Next::Nothing;
            }
            Err(_) => {
                // Ended under us; nothing was sent on it. Earlier requests on it fail in
                // the writer, which closes this connection.
                client.upstreams.remove(&node);
                if target.is_some() && !any_broker {
                    return Next::Close;
                }
            }
        }
    }
    debug!(api = ?key, node = ?target, "no upstream broker reachable; closing");
    Next::Close
}

/// This connection's upstream connection to broker `node`: the one it has, one from the pool,
/// or a new one. `None` when upstream cannot be reached.
async fn upstream_for<'a>(
    node: i32,
    gw: &Gateway,
    upstreams: &'a mut HashMap<i32, UpstreamConn>,
) -> Option<&'a UpstreamConn> {
    if upstreams.get(&node).is_some_and(|c| !c.is_alive()) {
        upstreams.remove(&node);
    }
    let conn = match upstreams.entry(node) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let conn = match gw.pool.take(node) {
                Some(c) => c,
                None => {
                    let addr = gw.upstream_addr(node)?;
                    match super::upstream::connect(&addr, &gw.security).await {
                        Ok(c) => c,
                        Err(e) => {
                            debug!(node, upstream = %addr, error = %e, "cannot reach upstream broker");
                            return None;
                        }
                    }
                }
            };
            e.insert(conn)
        }
    };
    Some(conn)
}

/// SaslHandshake or SaslAuthenticate: koord's own exchange against koord's credentials, run
/// by the standalone connection's code.
async fn sasl(frame: Bytes, gw: &Arc<Gateway>, client: &mut Client) -> Next {
    let (header, body) = match codec::decode_request(frame) {
        Ok(Request::Request { header, body }) => (header, body),
        _ => {
            debug!("undecodable SASL request; closing");
            return Next::Close;
        }
    };
    let mut out = BytesMut::new();
    let step = crate::server::connection::sasl(
        &gw.broker,
        &mut client.ctx,
        &mut client.session,
        &header,
        *body,
        &mut out,
    )
    .await;
    match step {
        Step::Wrote => Next::Queue(Pending::Ready(out.freeze())),
        Step::WriteThenClose => Next::QueueThenClose(Pending::Ready(out.freeze())),
        Step::Silent => Next::Nothing,
        Step::Close => Next::Close,
    }
}

/// ApiVersions: koord's own answer with the gateway's versions.
fn api_versions(
    frame: Bytes,
    advertised: &[kafka_protocol::messages::api_versions_response::ApiVersion],
) -> Next {
    let out = match codec::decode_request(frame) {
        Ok(Request::UnsupportedApiVersions { correlation_id, .. }) => {
            let body = api::api_versions::unsupported().with_api_keys(advertised.to_vec());
            codec::encode_response(
                ApiKey::ApiVersions,
                0,
                correlation_id,
                &ResponseKind::ApiVersions(body),
            )
        }
        Ok(Request::Request { header, body }) => match *body {
            RequestKind::ApiVersions(r) => {
                let v = header.request_api_version;
                let body = api::api_versions::handle(&r, v).with_api_keys(advertised.to_vec());
                codec::encode_response(
                    ApiKey::ApiVersions,
                    v,
                    header.correlation_id,
                    &ResponseKind::ApiVersions(body),
                )
            }
            _ => return Next::Close,
        },
        Err(e) => {
            debug!(error = %e, "undecodable ApiVersions; closing");
            return Next::Close;
        }
    };
    match out {
        Ok(b) => Next::Queue(Pending::Ready(b)),
        Err(e) => {
            warn!(error = %e, "ApiVersions encoding failed; closing");
            Next::Close
        }
    }
}

/// A koord API: decoded and run through koord's own dispatch.
async fn koord(frame: Bytes, gw: &Arc<Gateway>, ctx: &RequestContext) -> Next {
    let (header, body) = match codec::decode_request(frame) {
        Ok(Request::Request { header, body }) => (header, body),
        Ok(Request::UnsupportedApiVersions { .. }) => return Next::Close,
        Err(e) => {
            debug!(error = %e, "undecodable request; closing");
            return Next::Close;
        }
    };
    let key = ApiKey::try_from(header.request_api_key).unwrap_or(ApiKey::ApiVersions);
    let (v, corr) = (header.request_api_version, header.correlation_id);
    let span = tracing::debug_span!("req", api = ?key, v, corr);
    let metrics = crate::metrics::metrics();
    let started = metrics.enabled().then(Instant::now);
    let outcome = api::dispatch(&gw.broker, &header, ctx, body)
        .instrument(span)
        .await;
    if let Some(started) = started {
        let response = match &outcome {
            Outcome::Respond(r) => Some(&**r),
            _ => None,
        };
        metrics.request(header.request_api_key, v, started.elapsed(), response);
    }
    match outcome {
        Outcome::Respond(resp) => match codec::encode_response(key, v, corr, &resp) {
            Ok(b) => Next::Queue(Pending::Ready(b)),
            Err(e) => {
                warn!(error = %e, "response encoding failed; closing");
                Next::Close
            }
        },
        Outcome::Silent => Next::Nothing,
        Outcome::Close => Next::Close,
    }
}

/// Writes the answers in request order; ends (closing the connection) when a forwarded request
/// gets no answer from upstream or an answer cannot be written.
async fn write_loop<W: AsyncWrite + Send + 'static>(
    wr: WriteHalf<W>,
    mut rx: mpsc::Receiver<Pending>,
    gw: Arc<Gateway>,
    listener: usize,
) {
    let mut wr = BufWriter::new(wr);
    while let Some(p) = rx.recv().await {
        let bytes = match p {
            Pending::Ready(b) => b,
            Pending::Upstream {
                rx: answer,
                corr,
                key,
                version,
                sent,
            } => {
                // Flush what is ready before waiting (a long-poll Fetch may take a while).
                if wr.flush().await.is_err() {
                    break;
                }
                let frame = match answer.await {
                    Ok(Ok(f)) => f,
                    _ => {
                        debug!(api = ?key, corr, "upstream gone before answering; closing");
                        break;
                    }
                };
                // Forwarded: counted with its latency; its error codes are upstream's own
                // (upstream's metrics count them), not decoded here.
                if let Some(sent) = sent {
                    crate::metrics::metrics().request(key as i16, version, sent.elapsed(), None);
                }
                match answer_frame(&gw, listener, key, version, corr, frame).await {
                    Some(Answer::Whole(b)) => b,
                    Some(Answer::Pass(frame)) => {
                        // Upstream's bytes as they came, behind the client's correlation id.
                        let head = [(frame.len() as i32).to_be_bytes(), corr.to_be_bytes()];
                        if wr.write_all(head.as_flattened()).await.is_err()
                            || wr.write_all(&frame[4..]).await.is_err()
                        {
                            break;
                        }
                        if rx.is_empty() && wr.flush().await.is_err() {
                            break;
                        }
                        continue;
                    }
                    None => break,
                }
            }
        };
        if wr.write_all(&bytes).await.is_err() {
            break;
        }
        if rx.is_empty() && wr.flush().await.is_err() {
            break;
        }
    }
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

/// What goes back to the client for an upstream answer.
enum Answer {
    /// Upstream's frame (bytes 0..4 its correlation id, replaced by the client's on the way).
    Pass(Bytes),
    /// A rewritten frame, length prefix and the client's correlation id included.
    Whole(Bytes),
}

/// The client's frame for an upstream answer: the same bytes with the client's correlation id,
/// or for the responses that name brokers, rewritten to name koord's endpoints on the client's
/// listener.
async fn answer_frame(
    gw: &Arc<Gateway>,
    listener: usize,
    key: ApiKey,
    version: i16,
    corr: i32,
    frame: Bytes,
) -> Option<Answer> {
    let decoded = match Decoded::decode(key, version, &frame) {
        Ok(d) => d,
        Err(e) => {
            warn!(api = ?key, v = version, error = %e, "undecodable upstream answer; closing");
            return None;
        }
    };
    let Some(decoded) = decoded else {
        return Some(Answer::Pass(frame));
    };
    if let Err(e) = gw.present(&decoded.brokers()).await {
        warn!(error = %e, "a new upstream broker cannot be presented");
    }
    let topics = decoded.topics();
    if !topics.is_empty() {
        gw.broker.topics.mirror(&topics, false);
    }
    let body = decoded.rewrite(&gw.endpoints(listener), &gw.own(listener));
    match codec::encode_response(key, version, corr, &body) {
        Ok(b) => Some(Answer::Whole(b)),
        Err(e) => {
            warn!(error = %e, "rewritten answer does not encode; closing");
            None
        }
    }
}
