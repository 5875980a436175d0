//! Simulated classic consumer-group members.
//!
//! Each member behaves as a Kafka consumer does: FindCoordinator, JoinGroup (the
//! MEMBER_ID_REQUIRED round trip, then the join that waits for the rebalance), SyncGroup (the
//! leader sends a round-robin assignment of the group's topic), then heartbeats (and commits, if
//! asked) until told to stop. A heartbeat, sync or commit that says the group is rebalancing
//! sends it back to JoinGroup with its member id; one that says it is unknown, with none.
//!
//! Joins wait inside the server, and a server answers one request of a connection at a time, so
//! every member joins on a connection of its own: a member's waiting JoinGroup must never hold up
//! another member's request. Heartbeats and commits, which never wait, share a pool of
//! connections. A group's join connections are closed once the group is Stable, so a run can
//! have more members than the process may open sockets.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::sync::{watch, Semaphore};

use crate::conn::Conn;
use crate::stats::{Api, Stats};

/// Versions sent: what Java clients 3.x/4.x send to a 4.x broker.
const FIND_COORDINATOR_V: i16 = 4;
const JOIN_GROUP_V: i16 = 9;
const SYNC_GROUP_V: i16 = 5;
const HEARTBEAT_V: i16 = 4;
const OFFSET_COMMIT_V: i16 = 8;

/// The scenario every member follows.
#[derive(Debug, Clone)]
pub struct Plan {
    pub coordinator: SocketAddr,
    pub group_prefix: String,
    pub members: usize,
    pub topic: String,
    pub partitions: i32,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// `None`: back to back.
    pub heartbeat_every: Option<Duration>,
    /// `None`: no commits; `Some(None)`: back to back.
    pub commit_every: Option<Option<Duration>>,
    pub commit_partitions: i32,
    /// Consumer protocol: the `ServerAssignor` members name.
    pub assignor: String,
    /// Consumer protocol: heartbeat at the interval the server gives (no fixed interval asked).
    pub server_heartbeat: bool,
}

/// Run-wide state the members share.
pub struct Run {
    pub plan: Plan,
    /// Heartbeat and commit connections.
    pub shared: Vec<Conn>,
    /// Join connections that may be open at once.
    pub join_slots: Arc<Semaphore>,
    pub started: Instant,
    /// Set once every group is Stable: latencies of heartbeats and commits count from then.
    pub window_open: AtomicBool,
    pub stop: watch::Receiver<bool>,
    pub groups_stable: AtomicUsize,
    pub last_stable: Mutex<Option<Duration>>,
    pub all_stable: tokio::sync::Notify,
    pub groups: usize,
    /// Heartbeats answered with no error, all run long (for rates over the window).
    pub heartbeats_ok: AtomicU64,
    pub offsets_ok: AtomicU64,
}

/// A group's progress to Stable: the generation whose leader saw every member, and how many
/// members synced in each generation.
#[derive(Default)]
struct Progress {
    full_generation: Option<i32>,
    synced: std::collections::HashMap<i32, usize>,
    stable: bool,
    /// Members that dropped their join connection after the group became Stable.
    released: usize,
}

pub struct Group {
    index: usize,
    id: String,
    progress: Mutex<Progress>,
    stable: tokio::sync::Notify,
    released: tokio::sync::Notify,
}

/// Runs group `index` until the run stops; returns what its members saw.
pub async fn run_group(run: Arc<Run>, index: usize) -> Stats {
    let group = Arc::new(Group {
        index,
        id: format!("{}-{index}", run.plan.group_prefix),
        progress: Mutex::default(),
        stable: tokio::sync::Notify::new(),
        released: tokio::sync::Notify::new(),
    });
    let m = run.plan.members;
    let permits = run
        .join_slots
        .clone()
        .acquire_many_owned(m as u32)
        .await
        .expect("the semaphore is never closed");
    let mut tasks = Vec::with_capacity(m);
    for member in 0..m {
        tasks.push(tokio::spawn(run_member(run.clone(), group.clone(), member)));
    }
    // Hold the join slots until every member closed its join connection.
    loop {
        let notified = group.released.notified();
        if lock(&group.progress).released >= m {
            break;
        }
        let mut stop = run.stop.clone();
        tokio::select! {
            _ = notified => {}
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    drop(permits);
    let mut stats = Stats::default();
    for t in tasks {
        if let Ok(s) = t.await {
            stats.merge(s);
        }
    }
    stats
}

/// Why a member goes back to JoinGroup.
enum Rejoin {
    /// With its member id (rebalance in progress, illegal generation).
    Known,
    /// From scratch (unknown member).
    Fresh,
}

struct Member {
    run: Arc<Run>,
    group: Arc<Group>,
    index: usize,
    /// Its join connection, until the group is Stable.
    join_conn: Option<Conn>,
    member_id: String,
    generation: i32,
    stats: Stats,
    next_offset: i64,
}

async fn run_member(run: Arc<Run>, group: Arc<Group>, index: usize) -> Stats {
    let mut m = Member {
        run: run.clone(),
        group,
        index,
        join_conn: None,
        member_id: String::new(),
        generation: -1,
        stats: Stats::default(),
        next_offset: 0,
    };
    let mut stop = run.stop.clone();
    tokio::select! {
        _ = m.life() => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    m.release_join_conn();
    m.stats
}

impl Member {
    fn shared(&self) -> &Conn {
        let run = &self.run;
        &run.shared[(self.group.index * run.plan.members + self.index) % run.shared.len()]
    }

    fn in_window(&self) -> bool {
        self.run.window_open.load(Ordering::Relaxed)
    }

    async fn life(&mut self) {
        loop {
            if let Err(e) = self.join_and_sync().await {
                self.stats.code(Api::JoinGroup, "io", true);
                tracing_like(&format!(
                    "group {} member {}: {e:#}",
                    self.group.id, self.index
                ));
                tokio::time::sleep(Duration::from_millis(200)).await;
                self.join_conn = None;
                continue;
            }
            match self.steady().await {
                Rejoin::Known => {}
                Rejoin::Fresh => self.member_id.clear(),
            }
        }
    }

    async fn join_conn(&mut self) -> Result<Conn> {
        if let Some(c) = &self.join_conn {
            return Ok(c.clone());
        }
        let c = crate::security::connect(self.run.plan.coordinator, "koord-load").await?;
        self.join_conn = Some(c.clone());
        Ok(c)
    }

    /// FindCoordinator, JoinGroup and SyncGroup until the member holds an assignment.
    async fn join_and_sync(&mut self) -> Result<()> {
        let conn = self.join_conn().await?;
        if self.member_id.is_empty() {
            self.find_coordinator(&conn).await?;
        }
        loop {
            let req = self.join_request();
            let t = Instant::now();
            let resp = conn.call(JOIN_GROUP_V, &req).await?;
            self.stats.record(Api::JoinGroup, t.elapsed(), true);
            match resp.error_code.err() {
                None => {}
                Some(ResponseError::MemberIdRequired) => {
                    self.stats.code(Api::JoinGroup, "MEMBER_ID_REQUIRED", false);
                    self.member_id = resp.member_id.to_string();
                    continue;
                }
                Some(ResponseError::UnknownMemberId) => {
                    self.stats.code(Api::JoinGroup, "UNKNOWN_MEMBER_ID", true);
                    self.member_id.clear();
                    continue;
                }
                Some(e) => {
                    self.stats
                        .code(Api::JoinGroup, &error_name(e), !retriable(e));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            }
            self.stats.code(Api::JoinGroup, "NONE", false);
            self.member_id = resp.member_id.to_string();
            self.generation = resp.generation_id;
            let leader = resp.leader == resp.member_id;
            if leader && resp.members.len() == self.run.plan.members {
                lock(&self.group.progress).full_generation = Some(resp.generation_id);
            }
            let assignments = if leader && !resp.skip_assignment {
                self.round_robin(
                    resp.members
                        .iter()
                        .map(|m| m.member_id.to_string())
                        .collect(),
                )
            } else {
                Vec::new()
            };
            let sync = SyncGroupRequest::default()
                .with_group_id(GroupId(str_bytes(&self.group.id)))
                .with_generation_id(self.generation)
                .with_member_id(str_bytes(&self.member_id))
                .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(Some(StrBytes::from_static_str("range")))
                .with_assignments(assignments);
            let t = Instant::now();
            let resp = conn.call(SYNC_GROUP_V, &sync).await?;
            self.stats.record(Api::SyncGroup, t.elapsed(), true);
            match resp.error_code.err() {
                None => {
                    self.stats.code(Api::SyncGroup, "NONE", false);
                    self.synced();
                    return Ok(());
                }
                Some(
                    e @ (ResponseError::RebalanceInProgress | ResponseError::IllegalGeneration),
                ) => {
                    self.stats.code(Api::SyncGroup, &error_name(e), false);
                }
                Some(ResponseError::UnknownMemberId) => {
                    self.stats.code(Api::SyncGroup, "UNKNOWN_MEMBER_ID", true);
                    self.member_id.clear();
                }
                Some(e) => {
                    self.stats
                        .code(Api::SyncGroup, &error_name(e), !retriable(e));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    async fn find_coordinator(&mut self, conn: &Conn) -> Result<()> {
        let req = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![str_bytes(&self.group.id)]);
        loop {
            let t = Instant::now();
            let resp = conn.call(FIND_COORDINATOR_V, &req).await?;
            self.stats.record(Api::FindCoordinator, t.elapsed(), true);
            let code = resp.coordinators.first().map_or(0, |c| c.error_code);
            match code.err() {
                None => {
                    self.stats.code(Api::FindCoordinator, "NONE", false);
                    return Ok(());
                }
                Some(e) => {
                    self.stats
                        .code(Api::FindCoordinator, &error_name(e), !retriable(e));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn join_request(&self) -> JoinGroupRequest {
        let mut metadata = BytesMut::new();
        metadata.put_i16(0);
        ConsumerProtocolSubscription::default()
            .with_topics(vec![str_bytes(&self.run.plan.topic)])
            .encode(&mut metadata, 0)
            .expect("a subscription encodes");
        JoinGroupRequest::default()
            .with_group_id(GroupId(str_bytes(&self.group.id)))
            .with_session_timeout_ms(self.run.plan.session_timeout_ms)
            .with_rebalance_timeout_ms(self.run.plan.rebalance_timeout_ms)
            .with_member_id(str_bytes(&self.member_id))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(metadata.freeze())])
    }

    /// The leader's assignment: partition `p` of the topic to member `p % n`.
    fn round_robin(&self, members: Vec<String>) -> Vec<SyncGroupRequestAssignment> {
        let n = members.len().max(1);
        let topic = TopicName(str_bytes(&self.run.plan.topic));
        members
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let partitions: Vec<i32> = (0..self.run.plan.partitions)
                    .filter(|p| *p as usize % n == i)
                    .collect();
                let mut b = BytesMut::new();
                b.put_i16(0);
                ConsumerProtocolAssignment::default()
                    .with_assigned_partitions(vec![AssignedTopic::default()
                        .with_topic(topic.clone())
                        .with_partitions(partitions)])
                    .encode(&mut b, 0)
                    .expect("an assignment encodes");
                SyncGroupRequestAssignment::default()
                    .with_member_id(str_bytes(id))
                    .with_assignment(Bytes::from(b))
            })
            .collect()
    }

    /// Counts this member's sync; marks the group Stable when every member synced in the
    /// generation whose leader saw them all.
    fn synced(&mut self) {
        let became_stable = {
            let mut p = lock(&self.group.progress);
            *p.synced.entry(self.generation).or_default() += 1;
            let done = !p.stable
                && p.full_generation
                    .is_some_and(|g| p.synced.get(&g) == Some(&self.run.plan.members));
            if done {
                p.stable = true;
            }
            done
        };
        if became_stable {
            self.group.stable.notify_waiters();
            let at = self.run.started.elapsed();
            *lock(&self.run.last_stable) = Some(at);
            if self.run.groups_stable.fetch_add(1, Ordering::AcqRel) + 1 == self.run.groups {
                self.run.all_stable.notify_one();
            }
        }
    }

    fn release_join_conn(&mut self) {
        if self.join_conn.take().is_some() {
            lock(&self.group.progress).released += 1;
            self.group.released.notify_waiters();
        }
    }

    /// Heartbeats (and commits) until the member must rejoin.
    async fn steady(&mut self) -> Rejoin {
        let mut next_heartbeat = Instant::now();
        let mut next_commit = Instant::now();
        loop {
            if self.join_conn.is_some() && lock(&self.group.progress).stable {
                self.release_join_conn();
            }
            let commit_due = self.run.plan.commit_every.map(|every| (every, next_commit));
            // The earlier of the next heartbeat and the next commit.
            let commit_first = commit_due.is_some_and(|(_, at)| at < next_heartbeat);
            if commit_first {
                let (every, at) = commit_due.expect("checked");
                tokio::time::sleep_until(at.into()).await;
                if let Some(r) = self.commit().await {
                    return r;
                }
                next_commit = every.map_or_else(Instant::now, |e| at + e);
            } else {
                tokio::time::sleep_until(next_heartbeat.into()).await;
                if let Some(r) = self.heartbeat().await {
                    return r;
                }
                next_heartbeat = match self.run.plan.heartbeat_every {
                    Some(every) => (next_heartbeat + every).max(Instant::now()),
                    None => Instant::now(),
                };
            }
        }
    }

    /// A steady-state request on the member's shared connection, timed: the response and
    /// whether the measured window is open. A failed connection counts as a failure and
    /// yields `None` after a short pause (the caller tries again later).
    async fn call_shared<R: kafka_protocol::protocol::Request>(
        &mut self,
        api: Api,
        version: i16,
        req: &R,
    ) -> Option<(R::Response, bool)> {
        let t = Instant::now();
        match self.shared().call(version, req).await {
            Ok(resp) => {
                let window = self.in_window();
                self.stats.record(api, t.elapsed(), window);
                Some((resp, window))
            }
            Err(_) => {
                self.stats.code(api, "io", true);
                tokio::time::sleep(Duration::from_millis(100)).await;
                None
            }
        }
    }

    async fn heartbeat(&mut self) -> Option<Rejoin> {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes(&self.group.id)))
            .with_generation_id(self.generation)
            .with_member_id(str_bytes(&self.member_id));
        let (resp, window) = self.call_shared(Api::Heartbeat, HEARTBEAT_V, &req).await?;
        match resp.error_code.err() {
            None => {
                self.stats.code(Api::Heartbeat, "NONE", false);
                if window {
                    self.run.heartbeats_ok.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
            Some(e) => self.steer(Api::Heartbeat, e),
        }
    }

    async fn commit(&mut self) -> Option<Rejoin> {
        let n = self.run.plan.commit_partitions;
        let first = (self.index as i32 * n) % self.run.plan.partitions.max(1);
        let offset = self.next_offset;
        self.next_offset += 1;
        let partitions = (0..n)
            .map(|i| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index((first + i) % self.run.plan.partitions.max(1))
                    .with_committed_offset(offset)
            })
            .collect();
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(str_bytes(&self.group.id)))
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(str_bytes(&self.member_id))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(str_bytes(&self.run.plan.topic)))
                .with_partitions(partitions)]);
        let (resp, window) = self
            .call_shared(Api::OffsetCommit, OFFSET_COMMIT_V, &req)
            .await?;
        let mut worst = None;
        let mut ok = 0u64;
        for p in resp.topics.iter().flat_map(|t| t.partitions.iter()) {
            match p.error_code.err() {
                None => ok += 1,
                Some(e) => worst = Some(e),
            }
        }
        if window {
            self.stats.offsets_committed += ok;
            self.run.offsets_ok.fetch_add(ok, Ordering::Relaxed);
        }
        match worst {
            None => {
                self.stats.code(Api::OffsetCommit, "NONE", false);
                None
            }
            Some(e) => self.steer(Api::OffsetCommit, e),
        }
    }

    /// What an error on a steady-state request means for the member.
    fn steer(&mut self, api: Api, e: ResponseError) -> Option<Rejoin> {
        match e {
            ResponseError::RebalanceInProgress => {
                // The protocol's way of asking members to rejoin; a failure only once every
                // group is Stable (nothing should rebalance then).
                let failure = self.in_window();
                self.stats.code(api, "REBALANCE_IN_PROGRESS", failure);
                Some(Rejoin::Known)
            }
            ResponseError::IllegalGeneration => {
                self.stats.code(api, "ILLEGAL_GENERATION", self.in_window());
                Some(Rejoin::Known)
            }
            ResponseError::UnknownMemberId => {
                self.stats.code(api, "UNKNOWN_MEMBER_ID", true);
                Some(Rejoin::Fresh)
            }
            e => {
                self.stats.code(api, &error_name(e), !retriable(e));
                None
            }
        }
    }
}

pub(crate) fn retriable(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::CoordinatorLoadInProgress
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::NotCoordinator
    )
}

pub(crate) fn error_name(e: ResponseError) -> String {
    // `CoordinatorLoadInProgress` -> `COORDINATOR_LOAD_IN_PROGRESS`, as Kafka names codes.
    let debug = format!("{e:?}");
    let mut out = String::with_capacity(debug.len() + 8);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Connection-level trouble goes to stderr, at most a few lines a second in a bad run.
pub(crate) fn tracing_like(line: &str) {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    let mut last = lock(&LAST);
    if last.is_none_or(|t| t.elapsed() > Duration::from_millis(500)) {
        eprintln!("koord-load: {line}");
        *last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(
            error_name(ResponseError::CoordinatorLoadInProgress),
            "COORDINATOR_LOAD_IN_PROGRESS"
        );
        assert_eq!(
            error_name(ResponseError::UnknownMemberId),
            "UNKNOWN_MEMBER_ID"
        );
    }
}
