//! Simulated consumer-protocol (KIP-848) group members.
//!
//! Each member behaves as a Java consumer with `group.protocol=consumer` does: FindCoordinator,
//! then ConsumerGroupHeartbeat (v1, key 68). The first heartbeat is a full one (member epoch 0,
//! a member id of its own, the rebalance timeout, the subscribed topic, no owned partitions, the
//! server assignor); later ones are incremental (fields null when unchanged) and carry the member
//! epoch. An answer with an assignment changes what the member owns at once (it revokes at once:
//! no processing to stop), and the next heartbeat, sent straight away as the Java client sends its
//! acknowledging heartbeat, carries the owned partitions. Otherwise the member heartbeats at the
//! interval the server gives (or at the run's fixed interval, or back to back).
//!
//! A group is *reconciled* once, as its members see it, every member is at the same epoch, owns
//! what it was last given and has acknowledged it, and the members' partitions are disjoint and
//! cover the topic with each member holding at least one (when there are at least as many
//! partitions as members); the member that sees this confirms it with ConsumerGroupDescribe
//! (state Stable, group epoch = assignment epoch = every member's epoch, every member present).
//! Until the group is confirmed, each later answer of one of its members checks again. The time
//! counted is that of the heartbeat answer that completed the picture.
//!
//! Every member heartbeats on one of the run's shared pipelined connections (a real consumer has
//! a connection of its own: give the run as many connections as members to get that).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, FindCoordinatorRequest, GroupId,
    TopicName,
};
use kafka_protocol::ResponseError;

use crate::conn::Conn;
use crate::member::{error_name, lock, retriable, str_bytes, tracing_like, Run};
use crate::stats::{Api, Stats};

const FIND_COORDINATOR_V: i16 = 4;
const HEARTBEAT_V: i16 = 1;
const DESCRIBE_V: i16 = 0;
/// How long a group whose describe said "not yet" waits before it is described again.
const DESCRIBE_AGAIN: Duration = Duration::from_millis(200);

/// What the group's members last reported.
struct Progress {
    /// Per member: its epoch, its owned partitions (topic id as u128, partition), and whether
    /// the server has seen them (acknowledged) with nothing new since.
    members: Vec<Option<Seen>>,
    reconciled: bool,
    /// A ConsumerGroupDescribe is in flight for this group.
    describing: bool,
    /// When the last one answered "not yet": the next waits a while, so that describing does
    /// not load the server.
    described_at: Option<Instant>,
}

#[derive(Clone)]
struct Seen {
    epoch: i32,
    owned: Vec<(u128, i32)>,
    settled: bool,
}

pub struct Group {
    index: usize,
    id: String,
    progress: Mutex<Progress>,
}

/// Runs group `index` until the run stops; returns what its members saw.
pub async fn run_group(run: Arc<Run>, index: usize) -> Stats {
    let m = run.plan.members;
    let group = Arc::new(Group {
        index,
        id: format!("{}-{index}", run.plan.group_prefix),
        progress: Mutex::new(Progress {
            members: vec![None; m],
            reconciled: false,
            describing: false,
            described_at: None,
        }),
    });
    let tasks: Vec<_> = (0..m)
        .map(|i| tokio::spawn(run_member(run.clone(), group.clone(), i)))
        .collect();
    let mut stats = Stats::default();
    for t in tasks {
        if let Ok(s) = t.await {
            stats.merge(s);
        }
    }
    stats
}

struct Member {
    run: Arc<Run>,
    group: Arc<Group>,
    index: usize,
    member_id: String,
    epoch: i32,
    /// What it owns, as the server last assigned it.
    owned: Vec<TopicPartitions>,
    /// The owned partitions still to be sent (the assignment changed since the last heartbeat).
    ack_due: bool,
    /// The next heartbeat is a full one (joining, or rejoining after being fenced).
    full: bool,
    /// The server's heartbeat interval.
    interval: Duration,
    stats: Stats,
}

async fn run_member(run: Arc<Run>, group: Arc<Group>, index: usize) -> Stats {
    let mut m = Member {
        member_id: member_uuid(&group.id, index),
        run: run.clone(),
        group,
        index,
        epoch: 0,
        owned: Vec::new(),
        ack_due: false,
        full: true,
        interval: Duration::from_millis(5000),
        stats: Stats::default(),
    };
    let mut stop = run.stop.clone();
    tokio::select! {
        _ = m.life() => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    m.stats
}

impl Member {
    fn conn(&self) -> &Conn {
        let run = &self.run;
        &run.shared[(self.group.index * run.plan.members + self.index) % run.shared.len()]
    }

    fn in_window(&self) -> bool {
        self.run.window_open.load(Ordering::Relaxed)
    }

    async fn life(&mut self) {
        while self.find_coordinator().await.is_err() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        loop {
            let now = self.heartbeat().await;
            let next = if now || self.ack_due || self.full {
                Duration::ZERO
            } else {
                match self.run.plan.heartbeat_every {
                    _ if self.run.plan.server_heartbeat => self.interval,
                    Some(every) => every,
                    None => Duration::ZERO,
                }
            };
            if !next.is_zero() {
                tokio::time::sleep(next).await;
            }
        }
    }

    async fn find_coordinator(&mut self) -> anyhow::Result<()> {
        let req = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![str_bytes(&self.group.id)]);
        loop {
            let t = Instant::now();
            let resp = match self.conn().call(FIND_COORDINATOR_V, &req).await {
                Ok(r) => r,
                Err(e) => {
                    self.stats.code(Api::FindCoordinator, "io", true);
                    return Err(e);
                }
            };
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

    fn request(&self) -> ConsumerGroupHeartbeatRequest {
        let plan = &self.run.plan;
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes(&self.group.id)))
            .with_member_id(str_bytes(&self.member_id))
            .with_member_epoch(self.epoch);
        if self.full {
            req.with_rebalance_timeout_ms(plan.rebalance_timeout_ms)
                .with_subscribed_topic_names(Some(vec![TopicName(str_bytes(&plan.topic))]))
                .with_server_assignor(Some(str_bytes(&plan.assignor)))
                .with_topic_partitions(Some(self.owned.clone()))
        } else {
            req.with_rebalance_timeout_ms(-1)
                .with_topic_partitions(self.ack_due.then(|| self.owned.clone()))
        }
    }

    /// One heartbeat; true when the next one is due at once (a retriable error).
    async fn heartbeat(&mut self) -> bool {
        let req = self.request();
        let acked = req.topic_partitions.is_some();
        let t = Instant::now();
        let resp = match self.conn().call(HEARTBEAT_V, &req).await {
            Ok(resp) => resp,
            Err(e) => {
                self.stats.code(Api::ConsumerGroupHeartbeat, "io", true);
                tracing_like(&format!(
                    "group {} member {}: {e:#}",
                    self.group.id, self.index
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
                return false;
            }
        };
        let window = self.in_window();
        self.stats
            .record(Api::ConsumerGroupHeartbeat, t.elapsed(), window);
        match resp.error_code.err() {
            None => {}
            Some(e @ (ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId)) => {
                // Not part of a healthy run: the member rejoins as the Java client does (same
                // id, epoch 0, nothing owned).
                self.stats
                    .code(Api::ConsumerGroupHeartbeat, &error_name(e), true);
                self.epoch = 0;
                self.owned.clear();
                self.full = true;
                self.ack_due = false;
                self.report(None);
                return true;
            }
            Some(e) => {
                self.stats
                    .code(Api::ConsumerGroupHeartbeat, &error_name(e), !retriable(e));
                tokio::time::sleep(Duration::from_millis(100)).await;
                return false;
            }
        }
        self.stats.code(Api::ConsumerGroupHeartbeat, "NONE", false);
        if window {
            self.run.heartbeats_ok.fetch_add(1, Ordering::Relaxed);
        }
        if acked {
            self.ack_due = false;
        }
        self.full = false;
        self.epoch = resp.member_epoch;
        if resp.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
        }
        if let Some(a) = resp.assignment {
            let mut owned: Vec<TopicPartitions> = a
                .topic_partitions
                .into_iter()
                .map(|tp| {
                    let mut partitions = tp.partitions;
                    partitions.sort_unstable();
                    TopicPartitions::default()
                        .with_topic_id(tp.topic_id)
                        .with_partitions(partitions)
                })
                .collect();
            owned.sort_by_key(|tp| tp.topic_id);
            if owned != self.owned {
                self.owned = owned;
                self.ack_due = true;
            }
        }
        let settled = !self.ack_due;
        let seen = Seen {
            epoch: self.epoch,
            owned: self
                .owned
                .iter()
                .flat_map(|tp| tp.partitions.iter().map(|&p| (tp.topic_id.as_u128(), p)))
                .collect(),
            settled,
        };
        if self.report(Some(seen)) {
            self.confirm().await;
        }
        false
    }

    /// Records what the member now sees; true when the group looks reconciled and this member
    /// is to confirm it.
    fn report(&self, seen: Option<Seen>) -> bool {
        let mut p = lock(&self.group.progress);
        p.members[self.index] = seen;
        if p.reconciled
            || p.describing
            || p.described_at.is_some_and(|t| t.elapsed() < DESCRIBE_AGAIN)
        {
            return false;
        }
        let plan = &self.run.plan;
        let Some(all) = p
            .members
            .iter()
            .map(Option::as_ref)
            .collect::<Option<Vec<&Seen>>>()
        else {
            return false;
        };
        let epoch = all[0].epoch;
        if epoch <= 0 || all.iter().any(|s| !s.settled || s.epoch != epoch) {
            return false;
        }
        if plan.partitions as usize >= plan.members && all.iter().any(|s| s.owned.is_empty()) {
            return false;
        }
        let mut owned: Vec<(u128, i32)> = all.iter().flat_map(|s| s.owned.clone()).collect();
        let n = owned.len();
        owned.sort_unstable();
        owned.dedup();
        if owned.len() != n || n != plan.partitions as usize {
            return false;
        }
        p.describing = true;
        true
    }

    /// Confirms with ConsumerGroupDescribe that the group is Stable with every member at its
    /// epoch. The group counts as reconciled from now (the answer that completed the picture).
    async fn confirm(&mut self) {
        let at = self.run.started.elapsed();
        let req = ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(str_bytes(&self.group.id))]);
        let t = Instant::now();
        let mut why = "";
        let ok = match self.conn().call(DESCRIBE_V, &req).await {
            Ok(resp) => {
                self.stats
                    .record(Api::ConsumerGroupDescribe, t.elapsed(), true);
                match resp.groups.first() {
                    Some(g) if g.error_code == 0 => {
                        self.stats.code(Api::ConsumerGroupDescribe, "NONE", false);
                        why = if g.group_state.as_str() != "Stable" {
                            "not yet Stable"
                        } else if g.group_epoch != g.assignment_epoch {
                            "target behind the group epoch"
                        } else if g.members.len() != self.run.plan.members {
                            "not every member"
                        } else if !g.members.iter().all(|m| {
                            m.member_epoch == g.assignment_epoch
                                && flat(&m.assignment) == flat(&m.target_assignment)
                        }) {
                            "a member not at its target"
                        } else {
                            ""
                        };
                        why.is_empty()
                    }
                    Some(g) => {
                        let name = g
                            .error_code
                            .err()
                            .map_or_else(|| g.error_code.to_string(), error_name);
                        self.stats.code(Api::ConsumerGroupDescribe, &name, true);
                        false
                    }
                    None => {
                        self.stats
                            .code(Api::ConsumerGroupDescribe, "no group", true);
                        false
                    }
                }
            }
            Err(_) => {
                self.stats.code(Api::ConsumerGroupDescribe, "io", true);
                false
            }
        };
        let became = {
            let mut p = lock(&self.group.progress);
            p.describing = false;
            if ok {
                p.reconciled = true;
            } else if !why.is_empty() {
                // Not reconciled yet as the server sees it: a later answer looks again.
                p.described_at = Some(Instant::now());
                self.stats.code(Api::ConsumerGroupDescribe, why, false);
            } else {
                p.described_at = Some(Instant::now());
            }
            ok
        };
        if became {
            {
                let mut last = lock(&self.run.last_stable);
                if last.is_none_or(|l| l < at) {
                    *last = Some(at);
                }
            }
            if self.run.groups_stable.fetch_add(1, Ordering::AcqRel) + 1 == self.run.groups {
                self.run.all_stable.notify_one();
            }
        }
    }
}

/// A described assignment as sorted (topic id, partition) pairs.
fn flat(
    a: &kafka_protocol::messages::consumer_group_describe_response::Assignment,
) -> Vec<(u128, i32)> {
    let mut v: Vec<(u128, i32)> = a
        .topic_partitions
        .iter()
        .flat_map(|tp| tp.partitions.iter().map(|&p| (tp.topic_id.as_u128(), p)))
        .collect();
    v.sort_unstable();
    v
}

/// A member id of its own (v1 members generate theirs): a random UUID in its usual text form.
fn member_uuid(group: &str, index: usize) -> String {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    let word = |salt: u8| state.hash_one((group, index, salt, Instant::now()));
    let v = (u128::from(word(1)) << 64) | u128::from(word(2));
    // Version 4, variant 1.
    let v = (v & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_are_uuids() {
        let a = member_uuid("g", 0);
        let b = member_uuid("g", 0);
        assert_eq!(a.len(), 36);
        assert_ne!(a, b);
        assert_eq!(&a[14..15], "4");
    }
}
