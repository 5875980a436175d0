//! Gateway mode (`upstream.bootstrap.servers`): koord in front of an existing Kafka cluster.
//!
//! koord presents every upstream broker as a listener port of its own (same broker id, koord's
//! host), one per koord listener (`listeners`, with that listener's security protocol and TLS),
//! so clients reach the upstream leaders only through koord, and a client is told the ports of
//! the listener it came in on. Clients authenticate to koord as standalone (koord's SASL and
//! credentials); koord reaches upstream as its own upstream identity ([`upstream::connect`],
//! `upstream.security.protocol` and the rest):
//! - [`rewrite`]: the pure rules: which API is koord's and which is forwarded, the versions
//!   advertised, the Metadata/DescribeCluster/FindCoordinator(transaction) rewrite;
//! - [`upstream`]: connections to the upstream brokers (correlation ids of their own, frames
//!   passed through) and their pool;
//! - [`conn`]: one client connection: koord's group APIs through koord's own dispatch,
//!   everything else to the broker the port stands for, answers in request order.
//!
//! - [`client`]: koord's own client to the upstream (offsets, its group topic, CreateTopics);
//! - [`store`]: the [`crate::storage::Store`] that keeps the groups' offsets and records
//!   upstream.
//!
//! The groups are koord's (its coordinator), their state upstream's; the upstream's topics are
//! mirrored into koord's topic registry (from every Metadata answer that passes through and a
//! periodic refresh), which server-side assignment and offset commits check against.

pub mod backend;
pub mod client;
pub mod cluster;
pub mod conn;
pub mod rewrite;
pub mod store;
pub mod upstream;

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::config::Config;
use crate::coordinator::ownership::Ownership;
use crate::security::client::ClientSecurity;
use crate::security::tls::Tls;
use crate::security::Listener;
use crate::storage::{EmbeddedStore, Mutation, Router};
use crate::vocab::partition_of;
use client::Upstream;
use rewrite::{Decoded, Endpoints};
use store::UpstreamStore;
use upstream::{ConnectError, Pool, UpstreamConn};

/// How often the gateway re-reads the upstream's brokers, topics and API versions.
const REFRESH: Duration = Duration::from_secs(10);

/// What the gateway knows of the upstream cluster.
#[derive(Debug, Clone, Default)]
pub struct UpstreamView {
    /// Broker id -> upstream `host:port`.
    pub brokers: BTreeMap<i32, String>,
    /// The upstream's API versions.
    pub versions: Vec<ApiVersion>,
    /// The transaction protocol upstream runs.
    pub transaction: rewrite::TransactionFeature,
    /// Every topic upstream has.
    pub topics: Vec<crate::metadata::Topic>,
}

/// One upstream broker as koord presents it.
#[derive(Debug, Clone)]
struct Presented {
    upstream: String,
    /// The port of koord's listener for this broker, one per koord listener (in the order of
    /// [`Gateway::listeners`]).
    ports: Vec<i32>,
}

/// One of koord's listeners (`listeners`) as the gateway serves it: clients bootstrap from it
/// and find the group coordinator on it, and it has one port per upstream broker with its
/// security protocol.
pub struct GatewayListener {
    pub listener: Arc<Listener>,
    /// The node's TLS configuration, for an SSL or SASL_SSL listener.
    tls: Option<Arc<Tls>>,
    /// Where its broker ports bind (its own address, port 0).
    bind_ip: IpAddr,
}

/// The upstream side of a gateway node: koord's client to the cluster and the store of its
/// groups there (cluster mode loads and drops shards of it while running).
#[derive(Clone)]
pub struct Upstreams {
    pub client: Arc<Upstream>,
    pub store: Arc<UpstreamStore>,
}

/// [`Broker::open`] for gateway mode: the groups' records and offsets live upstream
/// ([`UpstreamStore`], which creates its topic upstream first), the rest in the embedded store
/// under the data dir; the broker's backend is upstream ([`backend::Upstreamed`]).
///
/// # Errors
/// As [`Broker::open`], or upstream refused koord's topic or could not be reached.
pub async fn open_broker(config: Config, up: Arc<Upstream>) -> io::Result<(Broker, Upstreams)> {
    let local = Arc::new(
        EmbeddedStore::open(&Broker::prepare_data_dir(&config)?).map_err(io::Error::other)?,
    );
    let store = UpstreamStore::open(
        up.clone(),
        local,
        &config.upstream_groups_topic,
        config.upstream_groups_topic_partitions,
        std::time::Duration::from_millis(config.upstream_write_timeout_ms),
    )
    .await
    .map_err(|e| {
        io::Error::other(format!(
            "upstream.groups.topic.name {}: {e}",
            config.upstream_groups_topic
        ))
    })?;
    // A storage lane per partition of koord's topic: a group's writes wait only on its
    // own upstream partitions (one whose leader is being re-elected holds no other
    // group's writes), and writes without a group (users, ACLs, topics) have their own.
    let partitions = store.partitions();
    let route: Router = Arc::new(move |write: &[Mutation], lanes: usize| {
        match write.iter().find_map(Mutation::group) {
            Some(group) => partition_of(group.as_str(), partitions) as usize,
            None => lanes - 1,
        }
    });
    let lanes = (partitions as usize + 1, route);
    // Cluster mode: this node serves only the shards (partitions) its membership gives it.
    let ownership = if config.cluster_name.is_empty() {
        Ownership::single()
    } else {
        Ownership::cluster(config.node_id, partitions)
    };
    let store = Arc::new(if config.cluster_name.is_empty() {
        store
    } else {
        store.with_fencing(&config.cluster_name, config.node_id)
    });
    let broker = Broker::assemble(
        config,
        store.clone(),
        Arc::new(backend::Upstreamed::new(up.clone())),
        Some(lanes),
        Arc::new(ownership),
    )?;
    let (ownership, clock) = (
        broker.coordinator.ownership().clone(),
        broker.coordinator.clock().clone(),
    );
    store.set_lease_check(Box::new(move || !ownership.lease_expired(clock.now())));
    Ok((broker, Upstreams { client: up, store }))
}

/// Everything gateway connections share.
pub struct Gateway {
    pub broker: Arc<Broker>,
    /// koord's client to the cluster and its groups' store there.
    upstreams: Upstreams,
    bootstrap: Vec<String>,
    /// koord's listeners, each with its own broker ports.
    pub listeners: Vec<GatewayListener>,
    brokers: RwLock<BTreeMap<i32, Presented>>,
    /// Serialises the binding of new broker listeners.
    binding: tokio::sync::Mutex<()>,
    advertised: RwLock<Arc<rewrite::Advertised>>,
    pub pool: Pool,
    /// How every upstream connection is made (TLS, SASL).
    pub security: Arc<ClientSecurity>,
    /// Picks where a request for "any broker" goes first.
    next_any: AtomicUsize,
    /// The sockets of newly presented upstream brokers, for the shell to accept on.
    spawn: mpsc::UnboundedSender<crate::server::Bound>,
    /// This node as the other nodes of its cluster see it (its listeners and the ports they
    /// present upstream brokers on), renewed as brokers are presented.
    node: watch::Sender<crate::gateway::cluster::Node>,
}

/// Connects to the upstream and reads its brokers, topics and API versions, retrying (with a
/// log line) until it answers or `give_up` passes. Credentials upstream refuses, or a
/// certificate koord does not trust, fail at once: retrying cannot mend them.
///
/// # Errors
/// No upstream server answered in time, or one refused koord's TLS or SASL.
pub async fn discover(
    bootstrap: &[String],
    security: &ClientSecurity,
    give_up: Duration,
) -> Result<UpstreamView, String> {
    let deadline = tokio::time::Instant::now() + give_up;
    let mut backoff = Duration::from_millis(200);
    loop {
        let mut last = String::new();
        for addr in bootstrap {
            match read_view(addr, security).await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_fatal() => {
                    return Err(format!("upstream.bootstrap.servers: {e}"));
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        if tokio::time::Instant::now() + backoff > deadline {
            return Err(format!(
                "upstream.bootstrap.servers: no server answered ({last})"
            ));
        }
        warn!(error = %last, "upstream not reachable yet; retrying");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// ApiVersions and Metadata (every topic) from one upstream broker.
async fn read_view(addr: &str, security: &ClientSecurity) -> Result<UpstreamView, ConnectError> {
    let conn = upstream::connect(addr, security).await?;
    read_view_on(&conn).await.map_err(ConnectError::Unreachable)
}

async fn read_view_on(conn: &UpstreamConn) -> Result<UpstreamView, String> {
    let v = 3;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("koord-gateway"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let versions = upstream::call_on(conn, v, &req)
        .await
        .map_err(|e| e.to_string())?;
    if versions.error_code != 0 {
        return Err(format!("ApiVersions error {}", versions.error_code));
    }
    let v = 12;
    let req = MetadataRequest::default().with_topics(None);
    let frame = upstream::call_frame(conn, ApiKey::Metadata, v, &req)
        .await
        .map_err(|e| e.to_string())?;
    let decoded = Decoded::decode(ApiKey::Metadata, v, &frame)
        .map_err(|e| format!("Metadata: {e}"))?
        .ok_or("Metadata: not decoded")?;
    let brokers: BTreeMap<i32, String> = decoded.brokers().into_iter().collect();
    if brokers.is_empty() {
        return Err("Metadata names no broker".into());
    }
    Ok(UpstreamView {
        brokers,
        transaction: rewrite::TransactionFeature::of(&versions),
        versions: versions.api_keys,
        topics: decoded.topics(),
    })
}

/// koord's broker id in gateway mode: `node.id`, unless an upstream broker has it; then one
/// above every upstream id (a client keys connections by broker id, and librdkafka would move
/// an upstream broker's connection to the coordinator's address).
pub fn coordinator_node_id(configured: i32, view: &UpstreamView) -> i32 {
    if !view.brokers.contains_key(&configured) {
        return configured;
    }
    let max = view.brokers.keys().copied().max().unwrap_or(0);
    max.saturating_add(1000)
}

impl Gateway {
    /// Serves every listener of `bound` (where clients bootstrap and find the group
    /// coordinator) and, per listener, one port per upstream broker until `shutdown`
    /// completes, then drains connections.
    ///
    /// # Errors
    /// No listener, or a broker listener that cannot bind.
    pub async fn run(
        bound: Vec<crate::server::Bound>,
        broker: Arc<Broker>,
        upstreams: Upstreams,
        view: UpstreamView,
        security: Arc<ClientSecurity>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), String> {
        if bound.is_empty() {
            return Err("gateway mode needs a listener".into());
        }
        let mut listeners = Vec::new();
        for b in &bound {
            let bind_ip = b.tcp.local_addr().map_err(|e| e.to_string())?.ip();
            listeners.push(GatewayListener {
                listener: b.listener.clone(),
                tls: b.tls.clone(),
                bind_ip,
            });
        }
        let (spawn_tx, spawn_rx) = mpsc::unbounded_channel();
        let gw = Arc::new(Gateway {
            broker: broker.clone(),
            upstreams,
            bootstrap: view.brokers.values().cloned().collect(),
            listeners,
            brokers: RwLock::new(BTreeMap::new()),
            binding: tokio::sync::Mutex::new(()),
            advertised: RwLock::new(Arc::default()),
            pool: Pool::default(),
            security,
            next_any: AtomicUsize::new(0),
            spawn: spawn_tx,
            node: watch::Sender::new(crate::gateway::cluster::Node {
                id: broker.node_id(),
                endpoints: Vec::new(),
            }),
        });
        gw.apply(&view).await?;
        let refresher = tokio::spawn(refresh_loop(gw.clone()));
        let configs = tokio::spawn(
            gw.upstreams
                .store
                .clone()
                .follow_group_configs(broker.group_configs.clone()),
        );
        let (stop_tx, stop_rx) = watch::channel(false);
        let member = gw.join_cluster(stop_rx);
        // At shutdown the member starts leaving while the connections close.
        let shutdown = async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        };
        let front: Arc<dyn crate::server::Front> = Arc::new(conn::Front(gw.clone()));
        // The shell serves koord's listeners and the broker ports presented on them, each
        // connection behind the gateway's layer, until shutdown; then its connections close.
        crate::server::serve(bound, broker, Some(front), Some(spawn_rx), shutdown).await;
        refresher.abort();
        configs.abort();
        if let Some(member) = member {
            // It gives its shards up (their writes upstream first) and leaves the group.
            let _ = member.await;
        }
        Ok(())
    }

    /// Cluster mode: starts this node's membership in the nodes' upstream group, with the
    /// endpoint of each of its listeners; `None` outside a cluster.
    fn join_cluster(&self, stop: watch::Receiver<bool>) -> Option<tokio::task::JoinHandle<()>> {
        let config = &self.broker.config;
        if !self.broker.coordinator.ownership().is_cluster() {
            return None;
        }
        let Upstreams { client: up, store } = &self.upstreams;
        let settings = crate::gateway::cluster::member::Settings {
            group: format!("koord-cluster-{}", config.cluster_name),
            session_timeout_ms: config.cluster_session_timeout_ms,
            heartbeat_interval_ms: config.cluster_heartbeat_interval_ms,
            rebalance_timeout_ms: config.cluster_rebalance_timeout_ms,
            node: self.node.subscribe(),
        };
        Some(tokio::spawn(crate::gateway::cluster::member::run(
            self.broker.clone(),
            up.clone(),
            store.clone(),
            settings,
            stop,
        )))
    }

    /// Takes in what upstream says: new brokers get a listener, moved ones their new address,
    /// topics are mirrored, the advertised versions recomputed.
    async fn apply(self: &Arc<Self>, view: &UpstreamView) -> Result<(), String> {
        let brokers: Vec<(i32, String)> =
            view.brokers.iter().map(|(k, v)| (*k, v.clone())).collect();
        self.present(&brokers).await?;
        if !view.versions.is_empty() {
            *self.advertised.write().unwrap_or_else(|e| e.into_inner()) =
                Arc::new(rewrite::Advertised {
                    versions: rewrite::advertised(&view.versions, self.own_acls()),
                    transaction: view.transaction.clone(),
                });
        }
        self.broker.topics.mirror(&view.topics, true);
        Ok(())
    }

    /// Makes sure every broker named has a port on each koord listener, and its upstream
    /// address is current.
    ///
    /// # Errors
    /// A listener could not bind.
    pub async fn present(self: &Arc<Self>, brokers: &[(i32, String)]) -> Result<(), String> {
        let missing: Vec<(i32, String)> = {
            let known = self.brokers.read().unwrap_or_else(|e| e.into_inner());
            brokers
                .iter()
                .filter(|(id, addr)| known.get(id).map(|p| &p.upstream) != Some(addr))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let _binding = self.binding.lock().await;
        for (id, addr) in missing {
            {
                let mut known = self.brokers.write().unwrap_or_else(|e| e.into_inner());
                match known.get_mut(&id) {
                    Some(p) if p.upstream == addr => continue,
                    Some(p) => {
                        info!(node = id, from = %p.upstream, to = %addr, "upstream broker moved");
                        p.upstream = addr.clone();
                        self.pool.forget(id);
                        continue;
                    }
                    None => {}
                }
            }
            let mut sockets = Vec::new();
            let mut ports = Vec::new();
            for (i, l) in self.listeners.iter().enumerate() {
                let port = broker_port(self.broker.config.upstream_broker_port_base, i, id)?;
                let tcp = TcpListener::bind(SocketAddr::new(l.bind_ip, port))
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot bind a listener for upstream broker {id} ({}): {e}",
                            l.listener.name
                        )
                    })?;
                let port = tcp.local_addr().map_err(|e| e.to_string())?.port();
                info!(node = id, upstream = %addr, listener = %l.listener.name,
                    protocol = %l.listener.protocol, listen = %SocketAddr::new(l.bind_ip, port),
                    "presenting upstream broker");
                ports.push(i32::from(port));
                sockets.push(tcp);
            }
            self.brokers
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    id,
                    Presented {
                        upstream: addr,
                        ports,
                    },
                );
            for (l, tcp) in self.listeners.iter().zip(sockets) {
                let _ = self.spawn.send(crate::server::Bound {
                    tcp,
                    listener: l.listener.clone(),
                    tls: l.tls.clone(),
                    stands_for: Some(id),
                });
            }
        }
        let node = self.this_node();
        self.node.send_if_modified(|n| {
            let changed = *n != node;
            *n = node;
            changed
        });
        Ok(())
    }

    /// This node as the others of its cluster see it: where clients reach each of its
    /// listeners, and the port each presents every upstream broker on (where another node
    /// forwards a share fetch of a group this one serves).
    fn this_node(&self) -> crate::gateway::cluster::Node {
        let brokers = self.brokers.read().unwrap_or_else(|e| e.into_inner());
        crate::gateway::cluster::Node {
            id: self.broker.node_id(),
            endpoints: self
                .listeners
                .iter()
                .enumerate()
                .map(|(i, l)| crate::gateway::cluster::Endpoint {
                    listener: l.listener.name.clone(),
                    host: l.listener.advertised_host.clone(),
                    port: l.listener.advertised_port,
                    presented: brokers
                        .iter()
                        .filter_map(|(id, p)| Some((*id, *p.ports.get(i)?)))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The endpoint koord presents for each upstream broker to a client of listener
    /// `listener` (an index into [`Gateway::listeners`]).
    pub fn endpoints(&self, listener: usize) -> Endpoints {
        let Some(l) = self.listeners.get(listener) else {
            return Endpoints::new();
        };
        let host = l.listener.advertised_host.clone();
        self.brokers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|(id, p)| Some((*id, (host.clone(), *p.ports.get(listener)?))))
            .collect()
    }

    /// koord as a broker: the coordinator clients of listener `listener` find on it.
    pub fn own(&self, listener: usize) -> rewrite::Own {
        let Some(l) = self.listeners.get(listener) else {
            return rewrite::Own {
                node_id: self.broker.node_id(),
                host: String::new(),
                port: 0,
                internal_topic: self.broker.config.upstream_groups_topic.clone(),
                peers: Vec::new(),
            };
        };
        let name = &l.listener.name;
        let peers = self
            .broker
            .coordinator
            .ownership()
            .others()
            .into_iter()
            .filter_map(|n| {
                let e = n.endpoint(name)?;
                Some((n.id, e.host.clone(), e.port))
            })
            .collect();
        rewrite::Own {
            node_id: self.broker.node_id(),
            host: l.listener.advertised_host.clone(),
            port: l.listener.advertised_port,
            internal_topic: self.broker.config.upstream_groups_topic.clone(),
            peers,
        }
    }

    /// The upstream address of broker `node`.
    pub fn upstream_addr(&self, node: i32) -> Option<String> {
        self.brokers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&node)
            .map(|p| p.upstream.clone())
    }

    /// Every upstream broker id, starting at a rotating one (where "any broker" requests try
    /// first).
    pub fn any_order(&self) -> Vec<i32> {
        let ids: Vec<i32> = self
            .brokers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect();
        client::rotated(ids, &self.next_any)
    }

    /// Whether the ACL APIs are koord's: koord has an authorizer (`authorizer.class.name`).
    pub fn own_acls(&self) -> bool {
        !self.broker.config.authorizer_class_name.is_empty()
    }

    /// What is advertised to clients (API versions, upstream's transaction protocol).
    pub fn advertised(&self) -> Arc<rewrite::Advertised> {
        self.advertised
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The port upstream broker `node` is presented on at koord's listener `listener`
/// (`upstream.broker.port.base`; 0 lets the system pick a free one).
///
/// # Errors
/// A node id outside 0-999, or a port past 65535.
fn broker_port(base: u16, listener: usize, node: i32) -> Result<u16, String> {
    if base == 0 {
        return Ok(0);
    }
    if !(0..1000).contains(&node) {
        return Err(format!(
            "upstream.broker.port.base={base}: upstream broker {node} has a node id outside \
             0-999; set it to 0 (free ports)"
        ));
    }
    let port = usize::from(base) + 1000 * listener + node as usize;
    u16::try_from(port).map_err(|_| {
        format!(
            "upstream.broker.port.base={base}: upstream broker {node} on listener {listener} \
             would need port {port}"
        )
    })
}

/// Re-reads the upstream every [`REFRESH`]: new brokers, moved brokers, topics.
async fn refresh_loop(gw: Arc<Gateway>) {
    loop {
        tokio::time::sleep(REFRESH).await;
        let mut addrs: Vec<(Option<i32>, String)> = gw
            .any_order()
            .into_iter()
            .filter_map(|id| Some((Some(id), gw.upstream_addr(id)?)))
            .collect();
        addrs.extend(gw.bootstrap.iter().map(|a| (None, a.clone())));
        let mut done = false;
        for (node, addr) in &addrs {
            // A pooled connection to the broker if there is one (no new TLS and SASL
            // handshake every few seconds), given back afterwards.
            let pooled = node.and_then(|id| Some((id, gw.pool.take(id)?)));
            let read = match pooled {
                Some((id, conn)) => {
                    let view = read_view_on(&conn).await.map_err(ConnectError::Unreachable);
                    gw.pool.put(id, conn);
                    view
                }
                None => read_view(addr, &gw.security).await,
            };
            match read {
                Ok(view) => {
                    if let Err(e) = gw.apply(&view).await {
                        warn!(error = %e, "upstream refresh not applied");
                    }
                    done = true;
                    break;
                }
                Err(e) => debug!(upstream = %addr, error = %e, "upstream refresh failed"),
            }
        }
        if !done {
            warn!("upstream refresh: no upstream broker answered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_id_never_collides_with_an_upstream_broker() {
        let mut view = UpstreamView::default();
        view.brokers.insert(1, "a:1".into());
        view.brokers.insert(2, "a:2".into());
        assert_eq!(coordinator_node_id(7, &view), 7);
        assert_eq!(coordinator_node_id(1, &view), 1002);
        assert_eq!(coordinator_node_id(2, &view), 1002);
    }

    #[test]
    fn broker_ports_follow_the_node_id_from_a_base() {
        assert_eq!(broker_port(0, 3, 5000), Ok(0), "0: free ports, any node id");
        assert_eq!(broker_port(19_000, 0, 1), Ok(19_001));
        assert_eq!(broker_port(19_000, 2, 999), Ok(21_999));
        assert!(broker_port(19_000, 0, 1000).unwrap_err().contains("0-999"));
        assert!(broker_port(19_000, 0, -1).is_err());
        assert!(broker_port(65_000, 1, 3).unwrap_err().contains("66003"));
    }
}
