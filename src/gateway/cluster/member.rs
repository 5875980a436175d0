//! The node's membership in the nodes' upstream group (`koord-cluster-<cluster.name>`), as a
//! Kafka classic-protocol member: JoinGroup (its metadata: who it is, where clients reach it,
//! which shards it holds), SyncGroup (the leader computes the assignment, [`super::assign`]),
//! Heartbeat every `cluster.heartbeat.interval.ms`, LeaveGroup on shutdown. On a connection of
//! its own to the upstream coordinator, since a JoinGroup holds it until the rebalance ends.
//!
//! What the assignment decides is carried out here, in order:
//! - a shard taken away: NOT_COORDINATOR for its groups at once, its storage lane drained (the
//!   writes already accepted reach upstream before anyone else reads the shard), its groups
//!   dropped; then the node rejoins, so the next round can hand the shard on;
//! - a shard gained: COORDINATOR_LOAD_IN_PROGRESS while its groups are read from koord's topic,
//!   then they are served.
//!
//! The lease: every answer of the upstream coordinator that keeps the member in the group
//! (a heartbeat, a join, a sync) lets the node serve its shards until the time that request
//! was sent plus the session timeout, before which upstream cannot have given them away. A node
//! that hears nothing (paused, cut off) stops serving when the lease runs out; it keeps the
//! groups in memory, and drops them only when upstream says it is no longer the member it was.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::assign::{assign, Candidate};
use super::wire::{self, Assigned, Metadata};
use super::{Node, ShardState};
use crate::broker::Broker;
use crate::gateway::client::{call_on, Upstream};
use crate::gateway::store::UpstreamStore;
use crate::gateway::upstream::UpstreamConn;
use crate::group::Timestamp;

/// The protocol type of the nodes' group (not "consumer": upstream's tools must not read it as
/// a consumer group) and its one protocol.
const PROTOCOL_TYPE: &str = "koord";
const PROTOCOL: &str = "shards-v0";

/// How this node takes part in its cluster.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The upstream group: `koord-cluster-<cluster.name>`.
    pub group: String,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// This node as the others see it: a change (a new upstream broker presented) makes the
    /// node join again, so the others learn it.
    pub node: watch::Receiver<Node>,
}

/// Why the member stopped its current round.
enum Next {
    /// Join again, keeping the shards (a rebalance began, or a shard was given up).
    Rejoin,
    /// Upstream no longer knows this member: drop every shard, join as a new member.
    Reset,
    /// The connection or the coordinator is gone: find it again, keeping the shards.
    Reconnect,
    Stop,
}

struct Member {
    broker: Arc<Broker>,
    up: Arc<Upstream>,
    store: Arc<UpstreamStore>,
    settings: Settings,
    member_id: String,
    generation: i32,
    conn: Option<UpstreamConn>,
    stop: watch::Receiver<bool>,
    /// The loading of the shards last gained (how many could not be), while it runs beside
    /// the heartbeats.
    loading: Option<tokio::task::JoinHandle<usize>>,
}

/// Runs this node's membership until `stop`, then leaves the group.
pub async fn run(
    broker: Arc<Broker>,
    up: Arc<Upstream>,
    store: Arc<UpstreamStore>,
    settings: Settings,
    stop: watch::Receiver<bool>,
) {
    let id = settings.node.borrow().id;
    info!(group = %settings.group, node = id, "joining the cluster's nodes");
    let mut m = Member {
        broker,
        up,
        store,
        settings,
        member_id: String::new(),
        generation: -1,
        conn: None,
        stop,
        loading: None,
    };
    let mut backoff = Duration::from_millis(100);
    loop {
        if *m.stop.borrow() {
            break;
        }
        let next = m.round().await;
        match next {
            Next::Stop => break,
            Next::Rejoin => backoff = Duration::from_millis(100),
            Next::Reset => {
                m.finish_loading().await;
                // No longer a member: no heartbeat while the shards are given up.
                m.member_id.clear();
                m.generation = -1;
                let held = m.ownership().held();
                m.release(&held).await;
            }
            Next::Reconnect => {
                m.conn = None;
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = m.stop.changed() => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
    m.leave().await;
}

impl Member {
    fn ownership(&self) -> &super::Ownership {
        self.broker.coordinator.ownership()
    }

    fn now(&self) -> Timestamp {
        self.broker.coordinator.clock().now()
    }

    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.settings.group.clone()))
    }

    /// Upstream kept this member in the group as of `sent` (when the request went out).
    fn renew(&self, sent: Timestamp) {
        self.ownership().renew_lease(Timestamp(
            sent.as_millis() + self.settings.session_timeout_ms,
        ));
    }

    /// One join, sync and the heartbeats of the generation that follows.
    async fn round(&mut self) -> Next {
        if self.conn.as_ref().is_none_or(|c| !c.is_alive()) {
            match self.up.coordinator_conn(&self.settings.group).await {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    debug!(error = %e, "cluster group coordinator not reachable");
                    return Next::Reconnect;
                }
            }
        }
        let (leader, members) = match self.join().await {
            Ok(x) => x,
            Err(next) => return next,
        };
        let assignments = if leader {
            self.lead(&members)
        } else {
            Vec::new()
        };
        let assigned = match self.sync(assignments).await {
            Ok(a) => a,
            Err(next) => return next,
        };
        if self.apply(assigned).await {
            // Shards were given up: join again, so they can be handed on.
            return Next::Rejoin;
        }
        self.heartbeats().await
    }

    /// The answer of one request on the member's connection.
    async fn call<R: kafka_protocol::protocol::Request>(
        &self,
        v: i16,
        req: &R,
    ) -> Result<R::Response, Next> {
        let Some(conn) = &self.conn else {
            return Err(Next::Reconnect);
        };
        let mut stop = self.stop.clone();
        tokio::select! {
            r = call_on(conn, v, req) => r.map_err(|e| {
                debug!(error = %e, "cluster group request failed");
                Next::Reconnect
            }),
            _ = stop.wait_for(|s| *s) => Err(Next::Stop),
        }
    }

    /// What an error code of the group means for the member.
    fn on_error(&self, code: i16, what: &str) -> Next {
        let e = ResponseError::try_from_code(code);
        match e {
            Some(
                ResponseError::UnknownMemberId
                | ResponseError::IllegalGeneration
                | ResponseError::FencedInstanceId,
            ) => {
                warn!(what, error = ?e, "no longer a member of the cluster's group: dropping every shard");
                Next::Reset
            }
            Some(ResponseError::RebalanceInProgress) => Next::Rejoin,
            _ => {
                debug!(what, error = ?e, "cluster group: finding the coordinator again");
                Next::Reconnect
            }
        }
    }

    /// JoinGroup until upstream takes the member: (whether it leads, the members' metadata).
    async fn join(&mut self) -> Result<(bool, Vec<(String, Metadata)>), Next> {
        loop {
            let node = self.settings.node.borrow_and_update().clone();
            let metadata = wire::encode_metadata(&Metadata {
                node,
                owned: self.ownership().held(),
            });
            let req = JoinGroupRequest::default()
                .with_group_id(self.group_id())
                .with_session_timeout_ms(self.settings.session_timeout_ms as i32)
                .with_rebalance_timeout_ms(self.settings.rebalance_timeout_ms as i32)
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(PROTOCOL))
                    .with_metadata(metadata)]);
            let sent = self.now();
            let resp = self.call(8, &req).await?;
            if resp.error_code == ResponseError::MemberIdRequired.code() {
                self.member_id = resp.member_id.to_string();
                continue;
            }
            if resp.error_code != 0 {
                if resp.error_code == ResponseError::UnknownMemberId.code() {
                    self.member_id.clear();
                }
                return Err(self.on_error(resp.error_code, "JoinGroup"));
            }
            self.renew(sent);
            self.member_id = resp.member_id.to_string();
            self.generation = resp.generation_id;
            let leader = resp.leader == resp.member_id;
            let mut members = Vec::new();
            for m in resp.members {
                match wire::decode_metadata(&m.metadata) {
                    Ok(md) => members.push((m.member_id.to_string(), md)),
                    Err(e) => {
                        warn!(member = %m.member_id, error = %e, "a cluster member's metadata does not decode; it gets no shard")
                    }
                }
            }
            debug!(
                generation = self.generation,
                leader,
                members = members.len(),
                "joined the cluster's group"
            );
            return Ok((leader, members));
        }
    }

    /// The leader's assignment: every member's shards and the whole table.
    fn lead(&self, members: &[(String, Metadata)]) -> Vec<SyncGroupRequestAssignment> {
        let shards = self.ownership().shards();
        let candidates: Vec<Candidate> = members
            .iter()
            .map(|(id, md)| Candidate {
                member: id.clone(),
                owned: md.owned.clone(),
            })
            .collect();
        let a = assign(shards, &candidates);
        let node_of = |member: &str| {
            members
                .iter()
                .find(|(id, _)| id == member)
                .map(|(_, md)| md.node.id)
        };
        let mut owners = vec![-1; shards as usize];
        for (member, ss) in &a.shards {
            let node = node_of(member).unwrap_or(-1);
            for &s in ss {
                owners[s as usize] = node;
            }
        }
        let mut nodes: Vec<Node> = members.iter().map(|(_, md)| md.node.clone()).collect();
        nodes.sort_by_key(|n| n.id);
        nodes.dedup_by_key(|n| n.id);
        info!(
            generation = self.generation,
            nodes = nodes.len(),
            revoking = a.revoking.len(),
            "assigning the cluster's shards"
        );
        a.shards
            .iter()
            .map(|(member, ss)| {
                let bytes = wire::encode_assigned(&Assigned {
                    shards: ss.clone(),
                    owners: owners.clone(),
                    nodes: nodes.clone(),
                });
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member.clone()))
                    .with_assignment(bytes)
            })
            .collect()
    }

    async fn sync(
        &mut self,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Assigned, Next> {
        let req = SyncGroupRequest::default()
            .with_group_id(self.group_id())
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
            .with_protocol_name(Some(StrBytes::from_static_str(PROTOCOL)))
            .with_assignments(assignments);
        let sent = self.now();
        let resp = self.call(5, &req).await?;
        if resp.error_code != 0 {
            return Err(self.on_error(resp.error_code, "SyncGroup"));
        }
        self.renew(sent);
        let bytes: Bytes = resp.assignment;
        wire::decode_assigned(&bytes).map_err(|e| {
            warn!(error = %e, "the cluster's assignment does not decode; joining again");
            Next::Rejoin
        })
    }

    /// Carries the assignment out; true when shards were given up (join again).
    async fn apply(&mut self, assigned: Assigned) -> bool {
        let shards = self.ownership().shards();
        let mine: BTreeSet<i32> = assigned
            .shards
            .iter()
            .copied()
            .filter(|s| (0..shards).contains(s))
            .collect();
        // A load still running finishes first: a shard is never dropped while it loads.
        self.finish_loading().await;
        let held: BTreeSet<i32> = self.ownership().held().into_iter().collect();
        let lost: Vec<i32> = held.difference(&mine).copied().collect();
        let gained: Vec<i32> = mine.difference(&held).copied().collect();
        if !lost.is_empty() {
            self.release(&lost).await;
        }
        self.ownership().set_table(&assigned.owners, assigned.nodes);
        if !gained.is_empty() {
            // Loaded beside the heartbeats (a first InitProducerId may wait for upstream to
            // create its transaction log: longer than a session).
            self.ownership().set(&gained, ShardState::Loading);
            let (broker, store) = (self.broker.clone(), self.store.clone());
            self.loading = Some(tokio::spawn(load(broker, store, gained.clone())));
        }
        info!(
            generation = self.generation,
            shards = mine.len(),
            gained = gained.len(),
            given_up = lost.len(),
            "cluster assignment applied"
        );
        !lost.is_empty()
    }

    /// Waits for the shards being loaded; how many could not be.
    async fn finish_loading(&mut self) -> usize {
        match self.loading.take() {
            Some(task) => task.await.unwrap_or(0),
            None => 0,
        }
    }

    /// Serves no more of `shards`: NOT_COORDINATOR at once, the writes already accepted for
    /// them made durable upstream, then their groups dropped.
    async fn release(&mut self, shards: &[i32]) {
        if shards.is_empty() {
            return;
        }
        self.finish_loading().await;
        self.ownership().set(shards, ShardState::Unassigned);
        // The writes already accepted reach upstream first, so the next owner reads them;
        // but not for longer than half a session: a write still held by upstream after that
        // lands before the next owner's fence, or is refused by it and fails (never
        // acknowledged, never lost). The node heartbeats meanwhile, so its lease on the
        // shards it keeps does not run out while upstream holds these writes.
        let drains = futures_util::future::join_all(
            shards
                .iter()
                .map(|&s| self.broker.storage.drained(s as usize)),
        );
        let patience =
            tokio::time::sleep(Duration::from_millis(self.settings.session_timeout_ms / 2));
        tokio::pin!(drains, patience);
        let interval = Duration::from_millis(self.settings.heartbeat_interval_ms);
        loop {
            tokio::select! {
                _ = &mut drains => break,
                _ = &mut patience => {
                    warn!(shards = ?shards, "writes of shards given up still held upstream; not waiting longer");
                    break;
                }
                _ = tokio::time::sleep(interval), if !self.member_id.is_empty() => {
                    // Its answer only renews the lease: the node rejoins after this anyway.
                    self.heartbeat_once().await.ok();
                }
            }
        }
        let groups = self.broker.coordinator.unload(shards);
        self.store.forget_shards(shards);
        self.store.unclaim(shards);
        info!(shards = ?shards, groups, "shards given up");
    }

    /// Heartbeats until the generation ends (or the node stops).
    async fn heartbeats(&mut self) -> Next {
        let interval = Duration::from_millis(self.settings.heartbeat_interval_ms);
        loop {
            let mut stop = self.stop.clone();
            let mut node = self.settings.node.clone();
            let loaded = async {
                match self.loading.as_mut() {
                    Some(task) => task.await.unwrap_or(0),
                    None => std::future::pending().await,
                }
            };
            let failed = tokio::select! {
                _ = tokio::time::sleep(interval) => None,
                _ = stop.wait_for(|s| *s) => return Next::Stop,
                Ok(()) = node.changed() => return Next::Rejoin,
                failed = loaded => Some(failed),
            };
            if let Some(failed) = failed {
                self.loading = None;
                if failed > 0 {
                    // Join again to be given them again, after a pause (upstream may be
                    // moving).
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    return Next::Rejoin;
                }
                continue;
            }
            // A shard upstream refused a write of as fenced is another node's already.
            let fenced = self.store.take_fenced();
            if !fenced.is_empty() {
                self.release(&fenced).await;
                return Next::Rejoin;
            }
            if let Err(next) = self.heartbeat_once().await {
                return next;
            }
        }
    }

    /// One heartbeat; the lease renewed if upstream kept the member. `Err`: what to do next
    /// (the generation ended, or the coordinator is gone).
    async fn heartbeat_once(&self) -> Result<(), Next> {
        let req = HeartbeatRequest::default()
            .with_group_id(self.group_id())
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()));
        let sent = self.now();
        let resp = self.call(4, &req).await?;
        if resp.error_code == 0 {
            self.renew(sent);
            return Ok(());
        }
        if resp.error_code == ResponseError::RebalanceInProgress.code() {
            // Still a member while it rejoins within the rebalance timeout.
            self.renew(sent);
        }
        Err(self.on_error(resp.error_code, "Heartbeat"))
    }

    /// Leaves the group (shutdown): the others take the shards without waiting for the
    /// session to expire. Best effort.
    async fn leave(&mut self) {
        self.finish_loading().await;
        let held = self.ownership().held();
        self.ownership().set(&held, ShardState::Unassigned);
        for &s in &held {
            self.broker.storage.drained(s as usize).await;
        }
        if self.member_id.is_empty() {
            return;
        }
        let Some(conn) = &self.conn else { return };
        let req = LeaveGroupRequest::default()
            .with_group_id(self.group_id())
            .with_members(vec![MemberIdentity::default()
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_reason(Some(StrBytes::from_static_str(
                    "koord node shutting down",
                )))]);
        match tokio::time::timeout(Duration::from_secs(5), call_on(conn, 5, &req)).await {
            Ok(Ok(_)) => info!("left the cluster's group"),
            Ok(Err(e)) => warn!(error = %e, "leaving the cluster's group failed"),
            Err(_) => warn!("leaving the cluster's group timed out"),
        }
    }
}

/// Reads the groups of `shards` and serves them (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
/// A shard that cannot be claimed or read stays unserved; returns how many, for the next
/// round to try again.
async fn load(broker: Arc<Broker>, store: Arc<UpstreamStore>, shards: Vec<i32>) -> usize {
    let ownership = broker.coordinator.ownership();
    let started = std::time::Instant::now();
    // Fence the former owner first: what it wrote before is then all there is to read.
    let claims = shards.iter().map(|&s| {
        let store = &store;
        async move { (s, store.claim(s).await) }
    });
    let mut wanted = Vec::new();
    for (s, claimed) in futures_util::future::join_all(claims).await {
        match claimed {
            Ok(()) => wanted.push(s),
            Err(e) => {
                warn!(shard = s, error = %e, "shard could not be claimed; not serving it");
                ownership.set(&[s], ShardState::Unassigned);
            }
        }
    }
    let unclaimed = shards.len() - wanted.len();
    let shards = &wanted[..];
    if shards.is_empty() {
        return unclaimed;
    }
    let loaded = store.load_shards(shards).await.and_then(|groups| {
        broker
            .coordinator
            .load_more(groups)
            .map_err(|e| crate::storage::Store::damaged(&*store, e))
    });
    match loaded {
        Ok(n) => {
            ownership.set(shards, ShardState::Owned);
            info!(
                shards = ?shards,
                groups = n,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "shards loaded and served"
            );
            unclaimed
        }
        Err(e) => {
            warn!(shards = ?shards, error = %e, "shards could not be loaded; not serving them");
            ownership.set(shards, ShardState::Unassigned);
            store.unclaim(shards);
            unclaimed + shards.len()
        }
    }
}
