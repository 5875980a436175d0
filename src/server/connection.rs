//! One client connection: length-prefixed frames in, responses out, one request at a time.
//!
//! [`serve`] takes any byte stream (a TCP socket from [`super::run`], an in-memory pipe in
//! tests) and is three pieces: [`super::frame`] cuts requests out of the stream (the
//! `socket.request.max.bytes` cap checked before anything is allocated), `step` runs one request
//! (decode, dispatch, encode), and the flush policy decides when answers leave.
//! Kafka serves one request per connection at a time and answers in order; so does this loop.
//! Requests a client pipelines arrive in one read and their answers leave in one write: a
//! response is flushed when no further complete request is buffered, or when the next one may
//! wait (JoinGroup, SyncGroup, Fetch). A framing or decoding failure closes only this connection.
//! Before a request is dispatched, the connection's [`Session`] admits it: on a SASL listener
//! nothing but ApiVersions and the SASL exchange is served before authentication, and the
//! principal the session established goes with every request.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tracing::{debug, trace, warn, Instrument};

use super::codec::{self, Decoded};
use super::frame::{complete_frame, read_frame, FrameError};
use super::throttle::{self, Meter};
use crate::api::{self, Outcome, RequestContext};
use crate::broker::Broker;
use crate::coordinator::HeartbeatSent;
use crate::security::session::{Admit, Session};
use crate::security::{Listener, Principal};

/// Who is at the other end of a connection, and where it came in.
#[derive(Debug, Clone)]
pub struct Conn {
    /// The client's address, which JoinGroup records as the member's host.
    pub peer: SocketAddr,
    pub listener: Arc<Listener>,
    /// The client certificate's principal, on a TLS listener.
    pub tls_principal: Option<Principal>,
    /// Gateway mode: the upstream broker the socket it came in on stands for (`None`: one of
    /// koord's listeners).
    pub stands_for: Option<i32>,
}

/// A forwarded request's answer, once it comes: the client's frame, or `None` to close the
/// connection (the peer that was to answer went away, or its answer cannot be passed on).
pub type Waiting = BoxFuture<'static, Option<Answer>>;

/// A forwarded request's answer as the client gets it.
pub enum Answer {
    /// A whole response frame, length prefix included.
    Whole(Bytes),
    /// The peer's frame as it came (bytes 0..4 its correlation id), passed on behind the
    /// client's correlation id `corr`.
    Pass { corr: i32, frame: Bytes },
}

/// What a [`Layer`] makes of a request.
pub enum Routed {
    /// koord's own: run through dispatch as on any connection.
    Own,
    /// Answered by the layer at once (a whole frame).
    Answered(Bytes),
    /// Forwarded: its answer comes later, and leaves in request order.
    Forwarded(Waiting),
    /// Nothing to answer (Produce with acks=0).
    Silent,
    Close,
}

/// A layer in front of dispatch, one per connection: gateway mode's, which per API serves a
/// request as koord's own or forwards it to the upstream broker the port stands for. It sees
/// each request the session admitted, except the SASL exchange and Heartbeat (always koord's),
/// with the request's context (its principal, for a check koord makes before forwarding).
pub trait Layer: Send {
    fn route<'a>(
        &'a mut self,
        frame: &'a Bytes,
        key: ApiKey,
        version: i16,
        ctx: &'a RequestContext,
    ) -> BoxFuture<'a, Routed>;
}

/// Forwarded requests of one connection in flight at once.
const PIPELINE: usize = 32;
/// How long the answers before a failed authentication's may take to be written.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// An answer queued behind a forwarded one, in request order.
enum Queued {
    Ready(Bytes),
    Waiting(Waiting),
}

/// What woke the connection.
enum Event {
    Stop,
    /// A throttled client's wait is over: its requests are read again.
    Unmuted,
    Frame(Result<Option<Bytes>, FrameError>),
    Idle,
    Answer(Option<Answer>),
}

/// Waits until `until` (forever for `None`).
async fn sleep_until(until: Option<tokio::time::Instant>) {
    match until {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// The answer of the forwarded request at the head of `queue`.
async fn head(queue: &mut VecDeque<Queued>) -> Option<Answer> {
    match queue.front_mut() {
        Some(Queued::Waiting(answer)) => answer.await,
        _ => std::future::pending().await,
    }
}

/// Appends a forwarded request's answer to `out`; a large passed frame is written as it is,
/// after what `out` holds.
async fn put_answer<W: AsyncWrite + Unpin>(
    wr: &mut W,
    out: &mut BytesMut,
    answer: Answer,
) -> std::io::Result<()> {
    match answer {
        Answer::Whole(b) => out.put_slice(&b),
        Answer::Pass { corr, frame } if frame.len() <= HOLD_BYTES => {
            out.put_i32(frame.len() as i32);
            out.put_i32(corr);
            out.put_slice(&frame[4..]);
        }
        Answer::Pass { corr, frame } => {
            write_out(wr, out).await?;
            let head = [(frame.len() as i32).to_be_bytes(), corr.to_be_bytes()];
            wr.write_all(head.as_flattened()).await?;
            wr.write_all(&frame[4..]).await?;
            // A TLS stream sends what it holds only when flushed.
            wr.flush().await?;
        }
    }
    Ok(())
}

/// Serves one connection over `stream` until the peer closes it, it misbehaves, or shutdown is
/// signalled (then the request being served is finished first). `layer` (gateway mode) sees
/// each request before dispatch; a request it forwards is answered in request order, while
/// the connection goes on reading (up to [`PIPELINE`] in flight).
pub async fn serve<S>(
    stream: S,
    conn: Conn,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    mut layer: Option<Box<dyn Layer>>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let mut session = Session::new(
        conn.listener.protocol,
        conn.tls_principal,
        broker.config.sasl_enabled_mechanisms.clone(),
        broker.config.connections_max_reauth_ms,
    );
    let mut ctx = RequestContext {
        peer: conn.peer,
        peer_host: conn.peer.ip().to_string().into(),
        listener: conn.listener,
        principal: session.principal().clone(),
        stands_for: conn.stands_for,
        share_sessions: Default::default(),
    };
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = BytesMut::new();
    // Answers not yet written: each response is encoded here, and they leave together when the
    // flush policy says so. Reused from request to request (no allocation per answer).
    let mut out = BytesMut::new();
    // Answers behind a forwarded request's, in request order (empty without a layer).
    let mut queue: VecDeque<Queued> = VecDeque::new();
    let max = broker.config.socket_request_max_bytes;
    let idle = std::time::Duration::from_millis(broker.config.connections_max_idle_ms);
    // A client over its quota: its last answer's throttle, then until when nothing is read.
    let mut throttled: u64 = 0;
    let mut muted: Option<tokio::time::Instant> = None;
    debug!("connection open");
    loop {
        while let Some(Queued::Ready(_)) = queue.front() {
            if let Some(Queued::Ready(b)) = queue.pop_front() {
                out.put_slice(&b);
            }
        }
        // The flush policy: with nothing in flight, answers wait only for a quick request
        // already buffered; before waiting on a forwarded answer, the ones before it leave.
        let flushed = if queue.is_empty() && muted.is_none() {
            flush_unless_next_is_quick(&mut wr, &mut out, &buf, max).await
        } else {
            write_out(&mut wr, &mut out).await
        };
        if let Err(e) = flushed {
            debug!(error = %e, "write failed");
            break;
        }
        let event = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => Event::Stop,
            a = head(&mut queue), if !queue.is_empty() => Event::Answer(a),
            _ = sleep_until(muted), if muted.is_some() => Event::Unmuted,
            f = tokio::time::timeout(idle, read_frame(&mut rd, &mut buf, max)), if queue.len() < PIPELINE && muted.is_none() => match f {
                Ok(f) => Event::Frame(f),
                Err(_) => Event::Idle,
            },
        };
        let frame = match event {
            Event::Stop => break,
            Event::Unmuted => {
                muted = None;
                continue;
            }
            Event::Idle => {
                debug!(idle_ms = idle.as_millis() as u64, "idle; closing");
                break;
            }
            Event::Answer(answer) => {
                queue.pop_front();
                let Some(answer) = answer else { break };
                if let Err(e) = put_answer(&mut wr, &mut out, answer).await {
                    debug!(error = %e, "write failed");
                    break;
                }
                continue;
            }
            Event::Frame(Ok(Some(f))) => f,
            Event::Frame(Ok(None)) => {
                debug!("peer closed");
                break;
            }
            Event::Frame(Err(FrameError::Io(e))) => {
                debug!(error = %e, "read failed");
                break;
            }
            Event::Frame(Err(e)) => {
                debug!(error = %e, "bad frame; closing");
                break;
            }
        };
        // Where this request's own answer starts in `out`: behind a forwarded request's, it
        // waits in the queue instead.
        let mark = out.len();
        let step = if session.expects_raw_token() {
            // After SaslHandshake v0 the SASL tokens come as bare frames.
            match session
                .raw_token(&frame, &broker.credentials, Instant::now())
                .await
            {
                Some(token) => {
                    ctx.principal = session.principal().clone();
                    out.put_i32(token.len() as i32);
                    out.put_slice(&token);
                    Step::Wrote
                }
                None => {
                    debug!("SASL authentication failed; closing");
                    // No answer in v0; the close waits as a failed SaslAuthenticate's does.
                    Step::WriteThenClose
                }
            }
        } else if is_heartbeat(&frame) && !broker.quotas.active() {
            heartbeats(frame, &mut buf, max, &broker, &ctx, &session, &mut out).await
        } else {
            let routed = match layer.as_mut() {
                Some(layer) => route(layer.as_mut(), &frame, &session, &ctx).await,
                None => Routed::Own,
            };
            match routed {
                Routed::Own => {
                    let step = step(
                        frame,
                        &broker,
                        &mut ctx,
                        &mut session,
                        &mut stop,
                        &mut out,
                        &mut throttled,
                    )
                    .await;
                    if throttled > 0 {
                        let ms = std::mem::take(&mut throttled);
                        muted = tokio::time::Instant::now()
                            .checked_add(std::time::Duration::from_millis(ms));
                    }
                    step
                }
                Routed::Answered(b) => {
                    out.put_slice(&b);
                    Step::Wrote
                }
                Routed::Forwarded(answer) => {
                    queue.push_back(Queued::Waiting(answer));
                    continue;
                }
                Routed::Silent => Step::Silent,
                Routed::Close => Step::Close,
            }
        };
        if !queue.is_empty() {
            let own = out.split_off(mark).freeze();
            if !own.is_empty() {
                queue.push_back(Queued::Ready(own));
            }
        }
        match step {
            // Its answer leaves by the flush policy at the top of the loop (answers held back
            // for a request without one, Silent, too).
            Step::Wrote | Step::Silent => {}
            Step::WriteThenClose => {
                failed_authentication_delay(&broker, &mut stop).await;
                // The answers before it are written first (bounded: a peer that does not
                // answer, or a client that reads nothing, is not waited for).
                let _ = tokio::time::timeout(DRAIN, async {
                    while let Some(q) = queue.pop_front() {
                        let answer = match q {
                            Queued::Ready(b) => Answer::Whole(b),
                            Queued::Waiting(a) => match a.await {
                                Some(a) => a,
                                None => break,
                            },
                        };
                        if put_answer(&mut wr, &mut out, answer).await.is_err() {
                            break;
                        }
                    }
                    let _ = write_out(&mut wr, &mut out).await;
                })
                .await;
                break;
            }
            Step::Close => break,
        }
    }
    // Answers held back for a request that closed the connection still leave (not those
    // behind a forwarded request still unanswered).
    let _ = write_out(&mut wr, &mut out).await;
    let _ = wr.shutdown().await;
    api::share_fetch::connection_closed(&broker, &ctx);
}

/// A request through the connection's layer: admitted by the session first (the SASL
/// exchange, and a request the session refuses, go to [`step`] as they would without one).
async fn route(
    layer: &mut dyn Layer,
    frame: &Bytes,
    session: &Session,
    ctx: &RequestContext,
) -> Routed {
    if frame.len() < 8 {
        debug!(len = frame.len(), "request frame too short; closing");
        return Routed::Close;
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Ok(key) = ApiKey::try_from(raw_key) else {
        debug!(key = raw_key, "unknown API key; closing");
        return Routed::Close;
    };
    match session.admit(key, Instant::now()) {
        Admit::Serve => layer.route(frame, key, version, ctx).await,
        Admit::Sasl | Admit::Close(_) => Routed::Own,
    }
}

/// The most answers held back for the next request's: more leave at once.
const HOLD_BYTES: usize = 64 * 1024;

/// Writes the answers `out` holds and empties it, keeping a small buffer for the next ones.
async fn write_out<W: AsyncWrite + Unpin>(wr: &mut W, out: &mut BytesMut) -> std::io::Result<()> {
    /// A buffer that grew past this (a large Fetch answer) is not kept for an idle connection.
    const KEEP: usize = 2 * HOLD_BYTES;
    if out.is_empty() {
        return Ok(());
    }
    let written = async {
        wr.write_all(out).await?;
        wr.flush().await
    }
    .await;
    if out.capacity() > KEEP {
        *out = BytesMut::new();
    } else {
        out.clear();
    }
    written
}

/// Kafka's `connection.failed.authentication.delay.ms`: a failed authentication is answered
/// (and the connection closed) only after this delay, which slows down password guessing; cut
/// short by shutdown.
pub(crate) async fn failed_authentication_delay(broker: &Broker, stop: &mut watch::Receiver<bool>) {
    let delay = broker.config.connection_failed_authentication_delay_ms;
    if delay == 0 {
        return;
    }
    tokio::select! {
        _ = stop.wait_for(|s| *s) => {}
        _ = tokio::time::sleep(std::time::Duration::from_millis(delay)) => {}
    }
}

/// What one request leaves the connection to do.
#[derive(Debug)]
pub(crate) enum Step {
    /// Its response frame is appended to the connection's answers.
    Wrote,
    /// Write nothing (Produce with acks=0), read the next request.
    Silent,
    /// Its response frame is appended; write the answers, then close the connection (failed
    /// authentication, after `connection.failed.authentication.delay.ms`).
    WriteThenClose,
    /// Close the connection.
    Close,
}

/// Runs one request frame: decode, admit, dispatch, encode (appended to `out`).
async fn step(
    frame: Bytes,
    broker: &Arc<Broker>,
    ctx: &mut RequestContext,
    session: &mut Session,
    stop: &mut watch::Receiver<bool>,
    out: &mut BytesMut,
    throttled: &mut u64,
) -> Step {
    let size = frame.len();
    let encoded = match codec::decode_request(frame) {
        Ok(Decoded::UnsupportedApiVersions {
            correlation_id,
            version,
        }) => {
            debug!(
                v = version,
                corr = correlation_id,
                "ApiVersions at unsupported version"
            );
            codec::unsupported_api_versions(correlation_id).map(|bytes| out.put_slice(&bytes))
        }
        Ok(Decoded::Request { header, mut body }) => {
            let key = ApiKey::try_from(header.request_api_key).unwrap_or(ApiKey::ApiVersions);
            let version = header.request_api_version;
            let corr = header.correlation_id;
            match session.admit(key, Instant::now()) {
                Admit::Serve => {}
                Admit::Sasl => return sasl(broker, ctx, session, &header, *body, out).await,
                Admit::Close(why) => {
                    debug!(api = ?key, why, "request not admitted; closing");
                    return Step::Close;
                }
            }
            let span = tracing::debug_span!(
                "req",
                api = ?key,
                v = version,
                corr,
                client_id = header.client_id.as_deref().unwrap_or(""),
            );
            // A request that waits (a long-poll Fetch, a JoinGroup or SyncGroup parked by
            // its group) is dropped on shutdown, as Kafka does, instead of holding the
            // process for up to its timeout. Requests that answer at once win the race.
            let metrics = crate::metrics::metrics();
            let started = metrics.enabled().then(std::time::Instant::now);
            let quotas = &broker.quotas;
            let meter = Meter::new(
                quotas,
                ctx.principal.name(),
                header.client_id.as_deref().unwrap_or(""),
            );
            if let Some(m) = &meter {
                m.cap(quotas, &mut body);
            }
            let dispatched = api::dispatch(broker, &header, ctx, body).instrument(span);
            let (outcome, busy) = tokio::select! {
                biased;
                o = throttle::busy_time(dispatched, meter.is_some()) => o,
                _ = stop.wait_for(|s| *s) => {
                    debug!(corr, "shutdown while the request waits; closing");
                    return Step::Close;
                }
            };
            let mut throttle = meter
                .as_ref()
                .map_or(0, |m| m.request(quotas, key, busy, size));
            if let Some(started) = started {
                let response = match &outcome {
                    Outcome::Respond(r) => Some(&**r),
                    _ => None,
                };
                metrics.request(header.request_api_key, version, started.elapsed(), response);
            }
            match outcome {
                Outcome::Respond(mut resp) => {
                    let mark = out.len();
                    let mut encoded = codec::encode_response_into(out, key, version, corr, &resp);
                    if let (Some(m), ResponseKind::Fetch(_), Ok(())) = (&meter, &*resp, &encoded) {
                        throttle = m.fetched(quotas, out.len() - mark, throttle);
                        if throttle > 0 {
                            *resp = throttle::empty_fetch();
                        }
                    }
                    if throttle > 0 && encoded.is_ok() {
                        throttle::set_throttle(&mut resp, throttle);
                        out.truncate(mark);
                        encoded = codec::encode_response_into(out, key, version, corr, &resp);
                    }
                    *throttled = throttle;
                    encoded
                }
                Outcome::Silent => {
                    trace!(corr, "no response");
                    *throttled = throttle;
                    return Step::Silent;
                }
                Outcome::Close => return Step::Close,
            }
        }
        Err(e) => {
            debug!(error = %e, "undecodable request; closing");
            return Step::Close;
        }
    };
    match encoded {
        Ok(()) => Step::Wrote,
        Err(e) => {
            warn!(error = %e, "response encoding failed; closing");
            Step::Close
        }
    }
}

/// The most heartbeats of one connection queued with their groups at once.
const PIPELINED_HEARTBEATS: usize = 256;

/// Whether a request frame (header first, no length prefix) is a Heartbeat.
fn is_heartbeat(frame: &[u8]) -> bool {
    frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == ApiKey::Heartbeat as i16
}

/// The next buffered request, if it is complete and a Heartbeat.
fn take_heartbeat(buf: &mut BytesMut, max: usize) -> Option<Bytes> {
    match complete_frame(buf, max) {
        Ok(Some(len)) if is_heartbeat(&buf[4..4 + len]) => {
            let _ = buf.split_to(4);
            Some(buf.split_to(len).freeze())
        }
        _ => None,
    }
}

/// One Heartbeat of a pipelined run.
struct PipelinedHeartbeat {
    version: i16,
    corr: i32,
    started: Option<Instant>,
}

/// A pipelined heartbeat checked, then queued.
enum Checked<T> {
    /// Refused by the authorizer.
    Denied(Box<ResponseKind>),
    /// The request admitted, then what the coordinator made of it.
    Admitted(T),
}

/// Heartbeats a client pipelined (`first` and every complete Heartbeat buffered after it, up to
/// [`PIPELINED_HEARTBEATS`]), in three passes: each is decoded, admitted and checked as [`step`]
/// does; all are queued with their groups, back to back; their answers are awaited, the last
/// first, and encoded in request order. The shards answer a run in about the order it was
/// queued, so the last answer's wake-up finds the others there already: the connection wakes
/// about once per run rather than once per heartbeat, and the shards are woken about once per
/// run rather than for every heartbeat decoded. Observably the same as one at a time: a
/// group's heartbeats reach it in order (one queue per shard), heartbeats change nothing
/// another group reads, and the answers leave in request order. A heartbeat that closes the
/// connection ends the run; the answers before it still leave.
async fn heartbeats(
    first: Bytes,
    buf: &mut BytesMut,
    max: usize,
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    session: &Session,
    out: &mut BytesMut,
) -> Step {
    let metrics = crate::metrics::metrics();
    let mut run = Vec::new();
    let mut checked = Vec::new();
    let mut end = Step::Wrote;
    let mut next = Some(first);
    while let Some(frame) = next.take() {
        let (header, body) = match codec::decode_request(frame) {
            Ok(Decoded::Request { header, body }) => (header, body),
            Ok(Decoded::UnsupportedApiVersions { .. }) | Err(_) => {
                debug!("undecodable request; closing");
                end = Step::Close;
                break;
            }
        };
        match session.admit(ApiKey::Heartbeat, Instant::now()) {
            Admit::Serve => {}
            // Sasl is for the SASL APIs only.
            Admit::Close(why) => {
                debug!(api = ?ApiKey::Heartbeat, why, "request not admitted; closing");
                end = Step::Close;
                break;
            }
            Admit::Sasl => {
                end = Step::Close;
                break;
            }
        }
        let started = metrics.enabled().then(Instant::now);
        let answer = match api::authz::deny_request(broker, ctx, header.request_api_version, &body)
        {
            Some(denied) => Checked::Denied(Box::new(denied)),
            None => match *body {
                RequestKind::Heartbeat(req) => Checked::Admitted(req),
                // The frame's key said Heartbeat.
                _ => {
                    end = Step::Close;
                    break;
                }
            },
        };
        run.push(PipelinedHeartbeat {
            version: header.request_api_version,
            corr: header.correlation_id,
            started,
        });
        checked.push(answer);
        if run.len() < PIPELINED_HEARTBEATS {
            next = take_heartbeat(buf, max);
        }
    }
    let queued: Vec<Checked<HeartbeatSent>> = checked
        .into_iter()
        .map(|c| match c {
            Checked::Denied(resp) => Checked::Denied(resp),
            Checked::Admitted(req) => Checked::Admitted(api::heartbeat::submit(broker, &req)),
        })
        .collect();
    let mut answers = Vec::with_capacity(queued.len());
    for q in queued.into_iter().rev() {
        answers.push(match q {
            Checked::Denied(resp) => *resp,
            Checked::Admitted(sent) => {
                ResponseKind::Heartbeat(api::heartbeat::response(sent).await)
            }
        });
    }
    for (hb, resp) in run.iter().zip(answers.into_iter().rev()) {
        if let Some(started) = hb.started {
            metrics.request(
                ApiKey::Heartbeat as i16,
                hb.version,
                started.elapsed(),
                Some(&resp),
            );
        }
        if let Err(e) =
            codec::encode_response_into(out, ApiKey::Heartbeat, hb.version, hb.corr, &resp)
        {
            warn!(error = %e, "response encoding failed; closing");
            return Step::Close;
        }
    }
    end
}

/// Runs SaslHandshake or SaslAuthenticate through the connection's session (standalone and
/// gateway connections alike), its answer appended to `out`.
pub(crate) async fn sasl(
    broker: &Broker,
    ctx: &mut RequestContext,
    session: &mut Session,
    header: &RequestHeader,
    body: RequestKind,
    out: &mut BytesMut,
) -> Step {
    let (v, corr) = (header.request_api_version, header.correlation_id);
    let (key, resp, close) = match body {
        RequestKind::SaslHandshake(r) => {
            let (resp, close) = session.handshake(&r, v);
            debug!(mechanism = %r.mechanism.as_str(), error = resp.error_code, "SaslHandshake");
            (
                ApiKey::SaslHandshake,
                ResponseKind::SaslHandshake(resp),
                close,
            )
        }
        RequestKind::SaslAuthenticate(r) => {
            match session
                .authenticate(&r, v, &broker.credentials, Instant::now())
                .await
            {
                Some((resp, close)) => {
                    debug!(error = resp.error_code, "SaslAuthenticate");
                    (
                        ApiKey::SaslAuthenticate,
                        ResponseKind::SaslAuthenticate(resp),
                        close,
                    )
                }
                None => {
                    debug!("SaslAuthenticate out of turn; closing");
                    return Step::Close;
                }
            }
        }
        _ => return Step::Close,
    };
    ctx.principal = session.principal().clone();
    match codec::encode_response_into(out, key, v, corr, &resp) {
        Ok(()) if close => Step::WriteThenClose,
        Ok(()) => Step::Wrote,
        Err(e) => {
            warn!(error = %e, "response encoding failed; closing");
            Step::Close
        }
    }
}

/// The flush policy: the answers `out` holds leave now, unless the next request is already
/// buffered whole and answered without waiting; then they wait to leave with its answer (up to
/// [`HOLD_BYTES`] of them).
async fn flush_unless_next_is_quick<W: AsyncWrite + Unpin>(
    wr: &mut W,
    out: &mut BytesMut,
    buffered: &[u8],
    max: usize,
) -> std::io::Result<()> {
    if out.len() < HOLD_BYTES && next_is_quick(buffered, max) {
        Ok(())
    } else {
        write_out(wr, out).await
    }
}

/// Whether the next buffered request is complete and answered without waiting, so the
/// responses so far may wait for it and leave in one write. A request that may wait (a
/// JoinGroup or SyncGroup parked by its group, a long-poll Fetch) never holds answers back.
fn next_is_quick(buf: &[u8], max: usize) -> bool {
    const WAITING: [i16; 3] = [
        ApiKey::Fetch as i16,
        ApiKey::JoinGroup as i16,
        ApiKey::SyncGroup as i16,
    ];
    matches!(complete_frame(buf, max), Ok(Some(len)) if len >= 2
        && !WAITING.contains(&i16::from_be_bytes([buf[4], buf[5]])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use crate::vocab::GroupError;

    #[test]
    fn answers_wait_only_for_a_complete_quick_request() {
        let frame = |key: ApiKey| {
            let mut f = 8i32.to_be_bytes().to_vec();
            f.extend_from_slice(&(key as i16).to_be_bytes());
            f.extend_from_slice(&[0; 6]);
            f
        };
        assert!(next_is_quick(&frame(ApiKey::Heartbeat), 100));
        assert!(next_is_quick(&frame(ApiKey::OffsetCommit), 100));
        assert!(!next_is_quick(&frame(ApiKey::JoinGroup), 100));
        assert!(!next_is_quick(&frame(ApiKey::SyncGroup), 100));
        assert!(!next_is_quick(&frame(ApiKey::Fetch), 100));
        assert!(
            !next_is_quick(&frame(ApiKey::Heartbeat)[..9], 100),
            "incomplete"
        );
        assert!(!next_is_quick(b"", 100));
        assert!(
            !next_is_quick(b"\xff\xff\xff\xff", 100),
            "a bad length flushes"
        );
    }

    /// A frame (length prefix included) of `req` under `key` at version `v`.
    fn request_frame<R: Encodable>(key: ApiKey, v: i16, corr: i32, req: &R) -> Vec<u8> {
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(v)
            .with_correlation_id(corr)
            .with_client_id(Some(StrBytes::from_static_str("t")))
            .encode(&mut frame, key.request_header_version(v))
            .unwrap();
        req.encode(&mut frame, v).unwrap();
        let mut out = (frame.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        out
    }

    /// Pipelined heartbeats are queued together and answered in request order, each with its
    /// own answer; a request after them waits for theirs; an undecodable heartbeat in a run
    /// closes the connection after the answers of the heartbeats before it.
    #[tokio::test]
    async fn pipelined_heartbeats_are_answered_in_order() {
        use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
        let broker = Arc::new(crate::api::testing::broker());
        let (_stop, stop_rx) = watch::channel(false);
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let peer: SocketAddr = "192.0.2.1:50000".parse().unwrap();
        let conn = Conn {
            peer,
            listener: RequestContext::plaintext(&broker, peer).listener,
            tls_principal: None,
            stands_for: None,
        };
        let served = tokio::spawn(serve(server, conn, broker, stop_rx, None));

        // Even correlation ids: a group nobody joined (UNKNOWN_MEMBER_ID); odd: an empty
        // group id (INVALID_GROUP_ID). More than one run's worth.
        let n = PIPELINED_HEARTBEATS as i32 + 10;
        let mut bytes = Vec::new();
        for corr in 0..n {
            let group = if corr % 2 == 0 { "g" } else { "" };
            let hb = HeartbeatRequest::default()
                .with_group_id(StrBytes::from_string(group.to_owned()).into())
                .with_member_id(StrBytes::from_static_str("m"))
                .with_generation_id(1);
            bytes.extend(request_frame(ApiKey::Heartbeat, 4, corr, &hb));
        }
        bytes.extend(request_frame(
            ApiKey::ApiVersions,
            3,
            n,
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("koord-test"))
                .with_client_software_version(StrBytes::from_static_str("1.0")),
        ));
        // A heartbeat, then one whose body is cut short.
        let hb = HeartbeatRequest::default()
            .with_group_id(StrBytes::from_static_str("g").into())
            .with_member_id(StrBytes::from_static_str("m"));
        bytes.extend(request_frame(ApiKey::Heartbeat, 4, n + 1, &hb));
        let mut bad = request_frame(ApiKey::Heartbeat, 4, n + 2, &hb);
        bad.truncate(bad.len() - 3);
        let len = (bad.len() - 4) as i32;
        bad[..4].copy_from_slice(&len.to_be_bytes());
        bytes.extend(bad);
        client.write_all(&bytes).await.unwrap();

        let mut answers = Vec::new();
        loop {
            let mut len = [0u8; 4];
            if client.read_exact(&mut len).await.is_err() {
                break;
            }
            let mut resp = vec![0; i32::from_be_bytes(len) as usize];
            client.read_exact(&mut resp).await.unwrap();
            answers.push(Bytes::from(resp));
        }
        assert_eq!(
            answers.len(),
            n as usize + 2,
            "every answer up to the bad frame"
        );
        for (i, mut resp) in answers.into_iter().enumerate() {
            let corr = i as i32;
            if corr == n {
                let h = ResponseHeader::decode(&mut resp, 0).unwrap();
                assert_eq!(h.correlation_id, corr);
                continue;
            }
            let key = ApiKey::Heartbeat;
            let h = ResponseHeader::decode(&mut resp, key.response_header_version(4)).unwrap();
            assert_eq!(h.correlation_id, corr, "answers in request order");
            let body = HeartbeatResponse::decode(&mut resp, 4).unwrap();
            let want = if corr % 2 == 1 && corr < n {
                GroupError::InvalidGroupId.code()
            } else {
                GroupError::UnknownMemberId.code()
            };
            assert_eq!(body.error_code, want, "corr {corr}");
        }
        tokio::time::timeout(std::time::Duration::from_secs(10), served)
            .await
            .expect("the bad frame closes the connection")
            .unwrap();
    }

    /// `serve` over an in-memory pipe instead of a socket: ApiVersions is answered, then a
    /// length prefix beyond `socket.request.max.bytes` closes the connection.
    #[tokio::test]
    async fn serves_an_in_memory_stream() {
        let broker = Arc::new(crate::api::testing::broker());
        let (_stop, stop_rx) = watch::channel(false);
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let peer: SocketAddr = "192.0.2.1:50000".parse().unwrap();
        let conn = Conn {
            peer,
            listener: RequestContext::plaintext(&broker, peer).listener,
            tls_principal: None,
            stands_for: None,
        };
        let served = tokio::spawn(serve(server, conn, broker, stop_rx, None));

        let v = 3;
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("koord-test"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::ApiVersions as i16)
            .with_request_api_version(v)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("t")))
            .encode(&mut frame, ApiKey::ApiVersions.request_header_version(v))
            .unwrap();
        req.encode(&mut frame, v).unwrap();
        client
            .write_all(&(frame.len() as i32).to_be_bytes())
            .await
            .unwrap();
        client.write_all(&frame).await.unwrap();

        let len = client.read_i32().await.unwrap();
        let mut resp = vec![0; len as usize];
        client.read_exact(&mut resp).await.unwrap();
        let mut resp = Bytes::from(resp);
        let header =
            ResponseHeader::decode(&mut resp, ApiKey::ApiVersions.response_header_version(v))
                .unwrap();
        assert_eq!(header.correlation_id, 7);
        let body = ApiVersionsResponse::decode(&mut resp, v).unwrap();
        assert_eq!(body, api::api_versions::handle(&req, v, None));
        assert_eq!(body.error_code, 0);
        assert!(resp.is_empty(), "one response, nothing after it");

        client.write_all(&i32::MAX.to_be_bytes()).await.unwrap();
        let closed = async {
            let mut rest = Vec::new();
            assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0, "no answer");
            served.await.unwrap();
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), closed)
            .await
            .expect("the connection is closed and serve returns");
    }
}
