//! Gateway mode's layer in front of dispatch ([`Layer`]): one per client connection, which
//! [`crate::server::connection::serve`] serves as it serves a standalone one (framing, the
//! session and SASL, koord's own APIs with their authorization, metrics and pipelined
//! heartbeats).
//!
//! Per request the layer decides: a koord API (the groups, share groups among them,
//! FindCoordinator for a group, the config APIs when every resource they name is a group) is
//! koord's own, run through dispatch; ApiVersions is answered with the gateway's versions; a
//! forwarded one is handed to this connection's upstream connection for its broker, and the
//! connection goes on to the next request. Answers leave in request order, each forwarded one
//! when upstream sent it: upstream's frame with the client's correlation id, except Metadata,
//! DescribeCluster and FindCoordinator (transaction), which are rewritten to name koord's
//! endpoints. If an upstream connection ends with a request of this client unanswered, or
//! upstream cannot be reached for it, the client connection is closed: the client retries on
//! a new one (after refreshing metadata), and nothing upstream did not acknowledge is
//! acknowledged.
//!
//! The connection's session admits a request before the layer sees it: on a SASL listener
//! nothing is forwarded for an unauthenticated client. Forwarded requests go upstream on
//! koord's own upstream connections, as koord's upstream user.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::sync::oneshot;
use tracing::{debug, trace, warn};

use super::rewrite::{self, Decoded, Route};
use super::upstream::{Response, UpstreamConn};
use super::Gateway;
use crate::api;
use crate::security::Principal;
use crate::server::codec::{self, Decoded as Request};
use crate::server::connection::{Answer, Conn, Layer, Routed};

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

/// The layer of one client connection: where it came in, and its upstream connections.
struct Forwarder {
    gw: Arc<Gateway>,
    at: At,
    upstreams: HashMap<i32, UpstreamConn>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        for (node, conn) in self.upstreams.drain() {
            self.gw.pool.put(node, conn);
        }
    }
}

/// What the shell puts in front of each gateway connection: its [`Forwarder`].
pub struct Front(pub Arc<Gateway>);

impl crate::server::Front for Front {
    fn layer(&self, conn: &Conn, stands_for: Option<i32>) -> Option<Box<dyn Layer>> {
        let gw = &self.0;
        let listener = gw
            .listeners
            .iter()
            .position(|l| Arc::ptr_eq(&l.listener, &conn.listener))?;
        let at = At {
            peer: conn.peer,
            listener,
            tls_principal: conn.tls_principal.clone(),
            target: stands_for,
        };
        Some(Box::new(Forwarder {
            gw: gw.clone(),
            at,
            upstreams: HashMap::new(),
        }))
    }
}

impl Layer for Forwarder {
    fn route<'a>(
        &'a mut self,
        frame: &'a Bytes,
        key: ApiKey,
        version: i16,
    ) -> BoxFuture<'a, Routed> {
        Box::pin(self.forward(frame, key, version))
    }
}

impl Forwarder {
    /// ApiVersions, koord's own, or forwarded (an admitted request).
    async fn forward(&mut self, frame: &Bytes, key: ApiKey, version: i16) -> Routed {
        let gw = self.gw.clone();
        let target = self.at.target;
        let corr = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let advertised = gw.advertised();
        if key == ApiKey::ApiVersions {
            return api_versions(frame.clone(), &advertised);
        }
        if !rewrite::is_advertised(&advertised, key, version) {
            debug!(api = ?key, v = version, "API or version not served; closing");
            return Routed::Close;
        }
        let forward = match rewrite::route(key, gw.own_acls()) {
            Route::Forward => true,
            Route::Koord => false,
            Route::FindCoordinator => match codec::decode_request(frame.clone()) {
                Ok(Request::Request { body, .. }) => match *body {
                    RequestKind::FindCoordinator(r) => r.key_type == rewrite::KEY_TYPE_TRANSACTION,
                    _ => return Routed::Close,
                },
                _ => {
                    debug!(api = ?key, v = version, "undecodable request; closing");
                    return Routed::Close;
                }
            },
            Route::Configs => match codec::decode_request(frame.clone()) {
                Ok(Request::Request { body, .. }) => {
                    let types: Vec<i8> = match *body {
                        RequestKind::DescribeConfigs(r) => {
                            r.resources.iter().map(|r| r.resource_type).collect()
                        }
                        RequestKind::AlterConfigs(r) => {
                            r.resources.iter().map(|r| r.resource_type).collect()
                        }
                        RequestKind::IncrementalAlterConfigs(r) => {
                            r.resources.iter().map(|r| r.resource_type).collect()
                        }
                        _ => return Routed::Close,
                    };
                    types.is_empty() || types.iter().any(|t| *t != rewrite::GROUP_RESOURCE)
                }
                _ => {
                    debug!(api = ?key, v = version, "undecodable request; closing");
                    return Routed::Close;
                }
            },
        };
        if !forward {
            return Routed::Own;
        }
        let expect = if key == ApiKey::Produce {
            match rewrite::produce_expects_response(frame, version) {
                Some(e) => e,
                None => {
                    debug!("undecodable Produce request; closing");
                    return Routed::Close;
                }
            }
        } else {
            true
        };
        trace!(api = ?key, v = version, corr, "forwarding");
        // Requests any broker answers alike fall back to the others when the port's broker is
        // unreachable; the rest (partition leaders, coordinators, a broker's own configs) do
        // not.
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
            let conn = match upstream_for(node, &gw, &mut self.upstreams).await {
                Some(c) => c,
                None => continue,
            };
            let metrics = crate::metrics::metrics();
            let sent = metrics.enabled().then(Instant::now);
            match conn.send(frame.clone(), expect).await {
                Ok(Some(rx)) => {
                    let listener = self.at.listener;
                    let answer = answer(gw, listener, rx, key, version, corr, sent);
                    return Routed::Forwarded(Box::pin(answer));
                }
                Ok(None) => {
                    // Produce with acks=0: served once sent.
                    if let Some(sent) = sent {
                        metrics.request(key as i16, version, sent.elapsed(), None);
                    }
                    return Routed::Silent;
                }
                Err(_) => {
                    // Ended under us; nothing was sent on it. Earlier requests on it fail when
                    // their answers are awaited, which closes this connection.
                    self.upstreams.remove(&node);
                    if target.is_some() && !any_broker {
                        return Routed::Close;
                    }
                }
            }
        }
        debug!(api = ?key, node = ?target, "no upstream broker reachable; closing");
        Routed::Close
    }
}

/// A forwarded request's answer for the client, once upstream sent it (counted in the request
/// metrics with its round trip; its error codes are upstream's own, not decoded here). `None`
/// when upstream went away first, or its answer cannot be passed on.
async fn answer(
    gw: Arc<Gateway>,
    listener: usize,
    rx: oneshot::Receiver<Response>,
    key: ApiKey,
    version: i16,
    corr: i32,
    sent: Option<Instant>,
) -> Option<Answer> {
    let frame = match rx.await {
        Ok(Ok(f)) => f,
        _ => {
            debug!(api = ?key, corr, "upstream gone before answering; closing");
            return None;
        }
    };
    if let Some(sent) = sent {
        crate::metrics::metrics().request(key as i16, version, sent.elapsed(), None);
    }
    answer_frame(&gw, listener, key, version, corr, frame).await
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

/// ApiVersions: koord's own answer with the gateway's versions.
fn api_versions(
    frame: Bytes,
    advertised: &[kafka_protocol::messages::api_versions_response::ApiVersion],
) -> Routed {
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
            _ => return Routed::Close,
        },
        Err(e) => {
            debug!(error = %e, "undecodable ApiVersions; closing");
            return Routed::Close;
        }
    };
    match out {
        Ok(b) => Routed::Answered(b),
        Err(e) => {
            warn!(error = %e, "ApiVersions encoding failed; closing");
            Routed::Close
        }
    }
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
        return Some(Answer::Pass { corr, frame });
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
