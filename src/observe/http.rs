//! The HTTP listener (`http.listen`): `/metrics`, `/healthz`, `/readyz`, the status page at `/`
//! and its JSON at `/api/groups` and `/api/groups/{id}`. Anything else is 404; a method other
//! than GET or HEAD is 405.
//!
//! hyper's HTTP/1 server on koord's runtime, one task per connection, so it never holds a
//! Kafka connection's worker. What a peer can send is bounded: request heads above
//! [`MAX_HEAD_BYTES`] are refused (431), a head not complete within [`HEAD_TIMEOUT`] closes the
//! connection (slowloris), bodies are never read, and at most [`MAX_CONNECTIONS`] connections
//! are served at once (more are closed on accept).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::page;
use crate::broker::Broker;
use crate::group::GroupId;
use crate::metrics::metrics;

/// Largest request head (request line and headers) served.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Time a client has to send a whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// Serves `listener` until `shutdown` completes, then closes every HTTP connection.
pub async fn run(listener: TcpListener, broker: Arc<Broker>, shutdown: impl Future<Output = ()>) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        warn!(error = %e, "http accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    debug!(%peer, "http: too many connections; closing");
                    continue;
                };
                let broker = broker.clone();
                let mut stop = stop_rx.clone();
                conns.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let broker = broker.clone();
                        async move { Ok::<_, Infallible>(route(&broker, req).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEAD_TIMEOUT)
                        .max_buf_size(MAX_HEAD_BYTES)
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::pin!(conn);
                    let stopping = tokio::select! {
                        r = conn.as_mut() => {
                            if let Err(e) = r {
                                debug!(%peer, error = %e, "http connection ended");
                            }
                            false
                        }
                        s = stop.wait_for(|s| *s) => s.is_ok(),
                    };
                    if stopping {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
                    }
                    drop(permit);
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    info!("http listener closed");
}

/// Ready: the stored groups are loaded (the Kafka listener is bound before this one).
pub fn is_ready(broker: &Broker) -> bool {
    !broker.coordinator.is_loading()
}

async fn route(broker: &Broker, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
    }
    let path = req.uri().path();
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            if is_ready(broker) {
                text(StatusCode::OK, "ready\n")
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, "loading the store\n")
            }
        }
        "/metrics" => {
            let mut body = metrics().render(&broker.coordinator.group_counts());
            let telemetry = &broker.telemetry;
            let clients = telemetry.clients().views(telemetry.now_ms());
            let pushed = crate::telemetry::exposition(&clients);
            body.push_str(&pushed);
            respond(
                StatusCode::OK,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                body,
            )
        }
        "/" => {
            let groups = snapshots(broker).await;
            respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                page::render(&groups, is_ready(broker)),
            )
        }
        "/api/groups" => {
            let groups = snapshots(broker).await;
            json(StatusCode::OK, &groups)
        }
        _ => match path.strip_prefix("/api/groups/").map(percent_decode) {
            Some(Some(id)) if !id.is_empty() => {
                match broker.coordinator.snapshot(GroupId::new(&id)).await {
                    Some(group) => {
                        let mut one = [group];
                        with_client_metrics(broker, &mut one);
                        json(StatusCode::OK, &one[0])
                    }
                    None => text(StatusCode::NOT_FOUND, "no such group\n"),
                }
            }
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        },
    }
}

/// Every group, its members with what their clients pushed of themselves.
async fn snapshots(broker: &Broker) -> Vec<crate::coordinator::status::GroupSnapshot> {
    let mut groups = broker.coordinator.snapshots().await;
    with_client_metrics(broker, &mut groups);
    groups
}

fn with_client_metrics(broker: &Broker, groups: &mut [crate::coordinator::status::GroupSnapshot]) {
    let telemetry = &broker.telemetry;
    let clients = telemetry.clients().views(telemetry.now_ms());
    crate::coordinator::status::attach_client_metrics(groups, &clients);
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    respond(status, "text/plain; charset=utf-8", body.to_owned())
}

fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_string_pretty(value) {
        Ok(body) => respond(status, "application/json", body + "\n"),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
    }
}

/// `%XX` escapes decoded (a group id may hold any character); `None` for a bad escape or
/// bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b").as_deref(), Some("a b"));
        assert_eq!(percent_decode("g.1-x").as_deref(), Some("g.1-x"));
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
        assert_eq!(percent_decode("%e2%9c%93").as_deref(), Some("✓"));
    }
}
