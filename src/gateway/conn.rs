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
//! Cluster mode: a ShareFetch or ShareAcknowledge of a group another node serves goes on to
//! that node's port for the same upstream broker ([`Forwarder::via_owner`]), its answer back
//! as it came.
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
use crate::api::RequestContext;
use crate::security::acl::Operation;
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
    /// Cluster mode: its connections to the other nodes' broker ports (by address), for the
    /// share fetches of groups another node serves; never pooled, so a node sees this
    /// connection's share sessions end with it.
    nodes: HashMap<String, UpstreamConn>,
    /// It is another node's such connection (named so in its ApiVersions): what comes in on
    /// it is served here, never sent on again.
    from_node: bool,
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
            nodes: HashMap::new(),
            from_node: false,
        }))
    }
}

impl Layer for Forwarder {
    fn route<'a>(
        &'a mut self,
        frame: &'a Bytes,
        key: ApiKey,
        version: i16,
        ctx: &'a RequestContext,
    ) -> BoxFuture<'a, Routed> {
        Box::pin(self.forward(frame, key, version, ctx))
    }
}

impl Forwarder {
    /// ApiVersions, koord's own, or forwarded (an admitted request).
    async fn forward(
        &mut self,
        frame: &Bytes,
        key: ApiKey,
        version: i16,
        ctx: &RequestContext,
    ) -> Routed {
        let gw = self.gw.clone();
        let target = self.at.target;
        let corr = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let advertised = gw.advertised();
        if key == ApiKey::ApiVersions {
            let (routed, software) = api_versions(frame.clone(), &advertised);
            if software.as_deref() == Some(NODE_SOFTWARE) {
                self.from_node = true;
            }
            return routed;
        }
        if !rewrite::is_advertised(&advertised.versions, key, version) {
            debug!(api = ?key, v = version, "API or version not served; closing");
            return Routed::Close;
        }
        let forward = match rewrite::route(key, gw.own_acls()) {
            // Ending another producer's transaction (`kafka-transactions abort`) goes upstream
            // as koord's upstream user: with koord's authorizer, only for a client that koord
            // allows ALTER or CLUSTER_ACTION on the cluster; koord's handler answers the others
            // CLUSTER_AUTHORIZATION_FAILED, as Kafka.
            Route::Forward if key == ApiKey::WriteTxnMarkers => {
                let broker = &gw.broker;
                ctx.may_cluster(broker, Operation::Alter)
                    || ctx.may_cluster(broker, Operation::ClusterAction)
            }
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
            if matches!(key, ApiKey::ShareFetch | ApiKey::ShareAcknowledge) {
                if let Some(routed) = self.via_owner(frame, key, version, corr).await {
                    return routed;
                }
            }
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

impl Forwarder {
    /// Cluster mode: a share fetch or acknowledgement of a group another node serves goes to
    /// that node, on its port for the upstream broker this one stands for (the share session
    /// is per member and broker there too), on a connection of this client connection's own
    /// (closed with it, ending its sessions there). `None`: served here, which answers as the
    /// group's state here says (served, loading, NOT_COORDINATOR). Only on a PLAINTEXT
    /// listener: elsewhere the node would need the client's identity, which it cannot pass
    /// on; such a listener's share consumers need to reach the group's node for every
    /// partition (a cluster of one node, or a gateway without `cluster.name`).
    async fn via_owner(
        &mut self,
        frame: &Bytes,
        key: ApiKey,
        version: i16,
        corr: i32,
    ) -> Option<Routed> {
        let gw = self.gw.clone();
        let ownership = gw.broker.coordinator.ownership();
        let listener = &gw.listeners.get(self.at.listener)?.listener;
        if !ownership.is_cluster()
            || self.from_node
            || listener.protocol != crate::security::listener::SecurityProtocol::Plaintext
        {
            return None;
        }
        let target = self.at.target?;
        let group = match codec::decode_request(frame.clone()) {
            Ok(Request::Request { body, .. }) => match *body {
                RequestKind::ShareFetch(r) => r.group_id?,
                RequestKind::ShareAcknowledge(r) => r.group_id?,
                _ => return None,
            },
            _ => return None,
        };
        let now = gw.broker.coordinator.clock().now();
        let (node, endpoint) = ownership.coordinator(&group, &listener.name, now).ok()??;
        let addr = format!("{}:{}", endpoint.host, endpoint.presenting(target)?);
        if self.nodes.get(&addr).is_some_and(|c| !c.is_alive()) {
            self.nodes.remove(&addr);
        }
        if !self.nodes.contains_key(&addr) {
            match node_conn(&addr).await {
                Ok(c) => {
                    self.nodes.insert(addr.clone(), c);
                }
                Err(e) => {
                    // The client finds the group's node again and retries on a new connection.
                    debug!(node, %addr, error = %e, "the group's node cannot be reached; closing");
                    return Some(Routed::Close);
                }
            }
        }
        trace!(api = ?key, v = version, corr, node, "to the group's node");
        let metrics = crate::metrics::metrics();
        let sent = metrics.enabled().then(Instant::now);
        match self.nodes.get(&addr)?.send(frame.clone(), true).await {
            Ok(Some(rx)) => Some(Routed::Forwarded(Box::pin(answer(
                gw,
                self.at.listener,
                rx,
                key,
                version,
                corr,
                sent,
            )))),
            _ => {
                self.nodes.remove(&addr);
                Some(Routed::Close)
            }
        }
    }
}

/// What a node's connection to another node's broker port calls itself in ApiVersions.
const NODE_SOFTWARE: &str = "koord-node";

/// A connection to another node's broker port at `addr` (PLAINTEXT), named a node's.
async fn node_conn(addr: &str) -> Result<UpstreamConn, String> {
    let conn =
        super::upstream::connect(addr, &crate::security::client::ClientSecurity::plaintext())
            .await
            .map_err(|e| e.to_string())?;
    let hello = kafka_protocol::messages::ApiVersionsRequest::default()
        .with_client_software_name(kafka_protocol::protocol::StrBytes::from_static_str(
            NODE_SOFTWARE,
        ))
        .with_client_software_version(kafka_protocol::protocol::StrBytes::from_static_str(env!(
            "CARGO_PKG_VERSION"
        )));
    super::upstream::call_on(&conn, 3, &hello)
        .await
        .map_err(|e| e.to_string())?;
    Ok(conn)
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

/// ApiVersions: koord's own answer with the gateway's versions and upstream's transaction
/// protocol, and the client software name the request gave.
fn api_versions(frame: Bytes, advertised: &rewrite::Advertised) -> (Routed, Option<String>) {
    let mut software = None;
    let out = match codec::decode_request(frame) {
        Ok(Request::UnsupportedApiVersions { correlation_id, .. }) => {
            let body = api::api_versions::unsupported().with_api_keys(advertised.versions.clone());
            codec::encode_response(
                ApiKey::ApiVersions,
                0,
                correlation_id,
                &ResponseKind::ApiVersions(body),
            )
        }
        Ok(Request::Request { header, body }) => match *body {
            RequestKind::ApiVersions(r) => {
                software = Some(r.client_software_name.to_string());
                let v = header.request_api_version;
                // The answer stands for an upstream broker: KIP-1242's cluster and node check
                // is the upstream's, not made here.
                let mut body = api::api_versions::handle(&r, v, None);
                if body.error_code == 0 {
                    // Transactions are upstream's: its transaction protocol (version 2 adds a
                    // partition through Produce v12+, forwarded with its endpoints rewritten).
                    body = advertised.transaction.apply(body);
                    body.api_keys = advertised.versions.clone();
                }
                codec::encode_response(
                    ApiKey::ApiVersions,
                    v,
                    header.correlation_id,
                    &ResponseKind::ApiVersions(body),
                )
            }
            _ => return (Routed::Close, None),
        },
        Err(e) => {
            debug!(error = %e, "undecodable ApiVersions; closing");
            return (Routed::Close, None);
        }
    };
    let routed = match out {
        Ok(b) => Routed::Answered(b),
        Err(e) => {
            warn!(error = %e, "ApiVersions encoding failed; closing");
            Routed::Close
        }
    };
    (routed, software)
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
