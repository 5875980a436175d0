//! learner-client: one learner-capable member of a classic consumer group (learner-spec.md
//! section 11), for koord's proto-tests.
//!
//! It joins with protocol type `consumer` and one protocol, `learner`, whose metadata is a
//! `ConsumerProtocolSubscription` v1 (topics, ownedPartitions = what it holds now) carrying a
//! `LearnerSubscription` (revoked, learning, ready, leaving). koord answers its SyncGroup with a
//! `ConsumerProtocolAssignment` carrying a `LearnerAssignment` (learning, marks, probe_ms). It
//! processes nothing: "holding" a partition is bookkeeping, and "restoring" a learning task is
//! waiting `--restore-ms` from when it first received the task as learning.
//!
//! Behaviour (src/state.rs has the decisions, as pure functions):
//! - seed mode: at each join it gives up the marked tasks of its last assignment (left out of
//!   ownedPartitions, listed in `revoked`); ready-gated mode: it never gives up marks.
//! - After each SyncGroup it holds exactly the assigned partitions, starts restoring newly
//!   learning tasks and forgets learning tasks no longer listed.
//! - It rejoins at once when a learning task becomes ready, when the assignment took away a
//!   partition it held without revoking it (a cooperative revoke), and when a Heartbeat or
//!   SyncGroup says REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION. UNKNOWN_MEMBER_ID: it lost
//!   everything and joins as a new member.
//! - `--leave-after-ms N` (or a `leave` line on stdin): N ms after its first completed
//!   generation it joins again with leaving=true and exits once it holds and learns nothing.
//! - `--ready-gate`: a learning task is ready only after a `ready` line on stdin too (and its
//!   restore time): lets a test order readiness without relying on timing.
//! - SIGTERM / SIGINT: LeaveGroup, then exit 0. A connection failure is retried on a new
//!   connection to the bootstrap address (koord is its own coordinator: no FindCoordinator).
//!
//! Output: one JSON object per line on stdout, every one with "event", "client", "member_id",
//! "generation" and "ts_us" (wall clock, microseconds since the Unix epoch: taken before a
//! request is sent for "join", after the response arrived for "sync"). Partitions are integers
//! when one topic is subscribed, otherwise "topic-partition" strings.
//! - "sync": one per completed generation: "assigned", "learning", "marks", "revoked" (what it
//!   gave up at that join minus what it was assigned, the spec's definition), "probe_ms",
//!   "taken" (cooperatively revoked), "rejoin" (it rejoins at once).
//! - "join": each JoinGroup sent: "owned", "revoked", "learning", "ready", "leaving", "reason".
//! - "response_error": an error code: "api", "error".
//! - "disconnected" / "reconnected": a call failed / the first call that succeeded after.
//! - "gate_open", "lost" (UNKNOWN_MEMBER_ID), "exit" (holds nothing from here; then
//!   LeaveGroup), "fatal" (an error it cannot recover from: "error"; exit code 2).
//!
//! Diagnostics go to stderr.

mod conn;
mod state;

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Result};
use bytes::Bytes;
use clap::Parser;
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use koord::assignor::learner::wire::LearnerAssignment;
use koord::assignor::protocol::decode_assignment;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};

use crate::conn::Conn;
use crate::state::{Mode, State, SyncOutcome, Tp};

/// Versions sent: what Java clients 3.x/4.x send to a 4.x broker.
const JOIN_GROUP_V: i16 = 9;
const SYNC_GROUP_V: i16 = 5;
const HEARTBEAT_V: i16 = 4;
const LEAVE_GROUP_V: i16 = 5;

const PROTOCOL_TYPE: &str = "consumer";
const PROTOCOL_NAME: &str = "learner";
const BACKOFF: Duration = Duration::from_millis(100);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
#[command(
    name = "learner-client",
    about = "A learner-capable classic consumer-group member (learner-spec.md section 11)"
)]
struct Args {
    /// host:port of koord (used as the group coordinator).
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    group: String,
    /// Subscribed topics (repeat the flag or give several values).
    #[arg(long, required = true, num_args = 1..)]
    topic: Vec<String>,
    /// Client id; koord's member ids are `<client.id>-<uuid>`, so it orders the members.
    #[arg(long)]
    client_id: String,
    /// Time to restore a learning task, from when it is first received as learning.
    #[arg(long, default_value_t = 0)]
    restore_ms: u64,
    /// seed: give up marked tasks at every join; ready-gated: never.
    #[arg(long, default_value = "seed", value_parser = ["seed", "ready-gated"])]
    mode: String,
    #[arg(long, default_value_t = 10_000)]
    session_timeout_ms: i32,
    #[arg(long, default_value_t = 30_000)]
    rebalance_timeout_ms: i32,
    #[arg(long, default_value_t = 500)]
    heartbeat_ms: u64,
    /// Timeout of a request other than JoinGroup (which gets the rebalance timeout + 5 s).
    #[arg(long, default_value_t = 10_000)]
    request_timeout_ms: u64,
    /// Leave (leaving=true, then exit once holding nothing) this long after the first
    /// completed generation.
    #[arg(long)]
    leave_after_ms: Option<u64>,
    /// Readiness also needs a `ready` line on stdin.
    #[arg(long)]
    ready_gate: bool,
}

/// Why the member stops.
enum Stop {
    Shutdown,
    Done,
    Fatal(String),
}

enum Cmd {
    Ready,
    Leave,
}

struct Member {
    args: Args,
    state: State,
    conn: Option<Conn>,
    member_id: String,
    generation: i32,
    shutdown: watch::Receiver<bool>,
    cmds: mpsc::UnboundedReceiver<Cmd>,
    cmds_open: bool,
    disconnected: bool,
    leave_at: Option<Instant>,
    join_reason: &'static str,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Coordinator hiccups and rebalances that a retry of the same request gets past.
fn retriable(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::CoordinatorLoadInProgress
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::NotCoordinator
            | ResponseError::RebalanceInProgress
            | ResponseError::RequestTimedOut
            | ResponseError::NetworkException
    )
}

impl Member {
    fn log(&self, msg: impl std::fmt::Display) {
        eprintln!(
            "learner-client {} [{}] gen {}: {msg}",
            self.args.client_id, self.member_id, self.generation
        );
    }

    fn tps(&self, set: &BTreeSet<Tp>) -> Value {
        let single = (self.args.topic.len() == 1).then(|| &self.args.topic[0]);
        Value::Array(
            set.iter()
                .map(|(t, p)| match single {
                    Some(only) if only == t => json!(p),
                    _ => json!(format!("{t}-{p}")),
                })
                .collect(),
        )
    }

    fn emit(&self, event: &str, mut fields: Value) {
        let line = {
            let obj = fields.as_object_mut().expect("fields are an object");
            let mut out = serde_json::Map::new();
            out.insert("event".into(), json!(event));
            out.insert("client".into(), json!(self.args.client_id));
            out.insert("member_id".into(), json!(self.member_id));
            out.insert("generation".into(), json!(self.generation));
            out.append(obj);
            out.insert("ts_us".into(), json!(now_us()));
            Value::Object(out)
        };
        let mut stdout = std::io::stdout().lock();
        // stdout closed: nothing to report to, keep running (stderr still logs).
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }

    /// Sends one request on the member's connection (opening one if needed). The outer error
    /// is a shutdown; the inner one a failed call, after which the connection is dropped.
    async fn call<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        timeout: Duration,
    ) -> Result<Result<R::Response>, Stop> {
        let mut shutdown = self.shutdown.clone();
        let mut slot = self.conn.take();
        let result = {
            let addr = self.args.bootstrap.clone();
            let client_id = self.args.client_id.clone();
            let slot = &mut slot;
            let attempt = async move {
                let conn = match slot {
                    Some(c) => c,
                    None => {
                        let c =
                            tokio::time::timeout(CONNECT_TIMEOUT, Conn::connect(&addr, &client_id))
                                .await
                                .map_err(|_| anyhow!("connect to {addr} timed out"))??;
                        slot.insert(c)
                    }
                };
                tokio::time::timeout(timeout, conn.call(version, request))
                    .await
                    .map_err(|_| anyhow!("no response within {timeout:?}"))?
            };
            tokio::select! {
                r = attempt => r,
                _ = shutdown.wait_for(|s| *s) => return Err(Stop::Shutdown),
            }
        };
        let api = kafka_protocol::messages::ApiKey::try_from(R::KEY)
            .map_or_else(|()| format!("api {}", R::KEY), |k| format!("{k:?}"));
        match &result {
            Ok(_) => {
                self.conn = slot;
                if self.disconnected {
                    self.disconnected = false;
                    self.emit("reconnected", json!({ "api": api }));
                    self.log(format_args!("reconnected ({api})"));
                }
            }
            Err(e) => {
                if !self.disconnected {
                    self.disconnected = true;
                    self.emit(
                        "disconnected",
                        json!({ "api": api, "error": format!("{e:#}") }),
                    );
                }
                self.log(format_args!("{api} failed: {e:#}"));
            }
        }
        Ok(result)
    }

    /// Sleeps `d` unless shut down first.
    async fn sleep(&self, d: Duration) -> Result<(), Stop> {
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            () = tokio::time::sleep(d) => Ok(()),
            _ = shutdown.wait_for(|s| *s) => Err(Stop::Shutdown),
        }
    }

    fn response_error(&self, api: &str, e: ResponseError) {
        self.emit(
            "response_error",
            json!({ "api": api, "error": format!("{e:?}") }),
        );
        self.log(format_args!("{api}: {e:?}"));
    }

    fn lose_everything(&mut self) {
        self.log("lost its membership: holds nothing, joins as a new member");
        self.state.lose_everything();
        self.emit("lost", json!({}));
        self.member_id.clear();
        self.generation = -1;
    }

    async fn run(&mut self) -> Stop {
        loop {
            let outcome = match self.join_and_sync().await {
                Ok(o) => o,
                Err(stop) => return stop,
            };
            if outcome.done {
                return Stop::Done;
            }
            if self.leave_at.is_none() && !self.state.leaving {
                if let Some(ms) = self.args.leave_after_ms {
                    self.leave_at = Some(Instant::now() + Duration::from_millis(ms));
                }
            }
            if outcome.rejoin {
                self.join_reason = if outcome.taken.is_empty() {
                    "a learning task is ready"
                } else {
                    "partitions were revoked"
                };
                continue;
            }
            if let Err(stop) = self.steady().await {
                return stop;
            }
        }
    }

    /// JoinGroup and SyncGroup until a generation completes.
    async fn join_and_sync(&mut self) -> Result<SyncOutcome, Stop> {
        let topics = self.args.topic.clone();
        loop {
            let info = self.state.prepare_join(Instant::now());
            self.emit(
                "join",
                json!({
                    "owned": self.tps(&info.owned),
                    "revoked": self.tps(&info.revoked),
                    "learning": self.tps(&info.learning),
                    "ready": self.tps(&info.ready),
                    "leaving": info.leaving,
                    "reason": self.join_reason,
                }),
            );
            let join = JoinGroupRequest::default()
                .with_group_id(GroupId(str_bytes(&self.args.group)))
                .with_session_timeout_ms(self.args.session_timeout_ms)
                .with_rebalance_timeout_ms(self.args.rebalance_timeout_ms)
                .with_member_id(str_bytes(&self.member_id))
                .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(PROTOCOL_NAME))
                    .with_metadata(info.metadata(&topics))])
                .with_reason(Some(str_bytes(self.join_reason)));
            let timeout = Duration::from_millis(self.args.rebalance_timeout_ms.max(0) as u64)
                + Duration::from_secs(5);
            let resp = match self.call(JOIN_GROUP_V, &join, timeout).await? {
                Ok(r) => r,
                Err(_) => {
                    self.sleep(BACKOFF).await?;
                    continue;
                }
            };
            match resp.error_code.err() {
                None => {}
                Some(ResponseError::MemberIdRequired) => {
                    self.member_id = resp.member_id.to_string();
                    continue;
                }
                Some(e @ (ResponseError::UnknownMemberId | ResponseError::FencedInstanceId)) => {
                    self.response_error("JoinGroup", e);
                    self.lose_everything();
                    continue;
                }
                Some(e) if retriable(e) => {
                    self.response_error("JoinGroup", e);
                    self.sleep(BACKOFF).await?;
                    continue;
                }
                Some(e) => {
                    self.response_error("JoinGroup", e);
                    return Err(Stop::Fatal(format!("JoinGroup: {e:?}")));
                }
            }
            self.member_id = resp.member_id.to_string();
            self.generation = resp.generation_id;
            self.join_reason = "rebalance";
            if resp.protocol_name.as_deref() != Some(PROTOCOL_NAME) {
                self.log(format_args!(
                    "the group chose protocol {:?}, not {PROTOCOL_NAME}",
                    resp.protocol_name
                ));
            }
            // koord assigns on the server: every member, the leader included, sends no
            // assignments (a v9 leader is told SkipAssignment).
            let sync = SyncGroupRequest::default()
                .with_group_id(GroupId(str_bytes(&self.args.group)))
                .with_generation_id(self.generation)
                .with_member_id(str_bytes(&self.member_id))
                .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
                .with_protocol_name(Some(StrBytes::from_static_str(PROTOCOL_NAME)));
            let request_timeout = Duration::from_millis(self.args.request_timeout_ms);
            let resp = match self.call(SYNC_GROUP_V, &sync, request_timeout).await? {
                Ok(r) => r,
                Err(_) => {
                    self.sleep(BACKOFF).await?;
                    continue;
                }
            };
            match resp.error_code.err() {
                None => {}
                Some(
                    e @ (ResponseError::RebalanceInProgress | ResponseError::IllegalGeneration),
                ) => {
                    self.response_error("SyncGroup", e);
                    continue;
                }
                Some(e @ (ResponseError::UnknownMemberId | ResponseError::FencedInstanceId)) => {
                    self.response_error("SyncGroup", e);
                    self.lose_everything();
                    continue;
                }
                Some(e) if retriable(e) => {
                    self.response_error("SyncGroup", e);
                    self.sleep(BACKOFF).await?;
                    continue;
                }
                Some(e) => {
                    self.response_error("SyncGroup", e);
                    return Err(Stop::Fatal(format!("SyncGroup: {e:?}")));
                }
            }
            let (assigned, la) = decode(&resp.assignment).map_err(|e| {
                Stop::Fatal(format!(
                    "SyncGroup generation {}: undecodable assignment {:02x?}: {e:#}",
                    self.generation,
                    resp.assignment.as_ref()
                ))
            })?;
            let outcome = self.state.apply(assigned, &la, Instant::now());
            self.emit(
                "sync",
                json!({
                    "assigned": self.tps(&outcome.assigned),
                    "learning": self.tps(&outcome.learning),
                    "marks": self.tps(&outcome.marks),
                    "revoked": self.tps(&outcome.revoked),
                    "probe_ms": outcome.probe_ms,
                    "taken": self.tps(&outcome.taken),
                    "rejoin": outcome.rejoin,
                }),
            );
            self.log(format_args!(
                "assigned {:?} learning {:?} marks {:?} revoked {:?}",
                outcome.assigned, outcome.learning, outcome.marks, outcome.revoked
            ));
            return Ok(outcome);
        }
    }

    /// Heartbeats until the member must rejoin (Ok) or stop.
    async fn steady(&mut self) -> Result<(), Stop> {
        let hb = Duration::from_millis(self.args.heartbeat_ms.max(1));
        let mut next_hb = Instant::now() + hb;
        loop {
            let now = Instant::now();
            if self.state.newly_ready(now) {
                self.log("a learning task is ready: rejoining");
                self.join_reason = "a learning task is ready";
                return Ok(());
            }
            if !self.state.leaving && self.leave_at.is_some_and(|at| now >= at) {
                self.log("leaving: rejoining with leaving=true");
                self.state.leaving = true;
                self.join_reason = "leaving";
                return Ok(());
            }
            let mut wake = next_hb;
            if let Some(at) = self.state.next_ready_at() {
                wake = wake.min(at);
            }
            if let Some(at) = self.leave_at.filter(|_| !self.state.leaving) {
                wake = wake.min(at);
            }
            let mut shutdown = self.shutdown.clone();
            tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => {}
                cmd = self.cmds.recv(), if self.cmds_open => match cmd {
                    Some(Cmd::Ready) => {
                        if !self.state.gate_open {
                            self.state.gate_open = true;
                            self.emit("gate_open", json!({}));
                        }
                    }
                    Some(Cmd::Leave) => self.leave_at = Some(Instant::now()),
                    None => self.cmds_open = false,
                },
                _ = shutdown.wait_for(|s| *s) => return Err(Stop::Shutdown),
            }
            if Instant::now() < next_hb {
                continue;
            }
            next_hb = Instant::now() + hb;
            let req = HeartbeatRequest::default()
                .with_group_id(GroupId(str_bytes(&self.args.group)))
                .with_generation_id(self.generation)
                .with_member_id(str_bytes(&self.member_id));
            let timeout = Duration::from_millis(self.args.request_timeout_ms);
            let resp = match self.call(HEARTBEAT_V, &req, timeout).await? {
                Ok(r) => r,
                // Retried at the next heartbeat, on a new connection.
                Err(_) => continue,
            };
            match resp.error_code.err() {
                None => {}
                Some(
                    e @ (ResponseError::RebalanceInProgress | ResponseError::IllegalGeneration),
                ) => {
                    self.response_error("Heartbeat", e);
                    self.join_reason = "rebalance";
                    return Ok(());
                }
                Some(e @ (ResponseError::UnknownMemberId | ResponseError::FencedInstanceId)) => {
                    self.response_error("Heartbeat", e);
                    self.lose_everything();
                    self.join_reason = "lost its membership";
                    return Ok(());
                }
                Some(e) if retriable(e) => self.response_error("Heartbeat", e),
                Some(e) => {
                    self.response_error("Heartbeat", e);
                    self.join_reason = "heartbeat error";
                    return Ok(());
                }
            }
        }
    }

    /// Stops holding anything, then LeaveGroup (best effort, on a fresh connection if the old
    /// one was mid-request).
    async fn leave(&mut self) {
        self.state.lose_everything();
        self.emit("exit", json!({}));
        if self.member_id.is_empty() {
            return;
        }
        let req = LeaveGroupRequest::default()
            .with_group_id(GroupId(str_bytes(&self.args.group)))
            .with_members(vec![MemberIdentity::default()
                .with_member_id(str_bytes(&self.member_id))
                .with_reason(Some(StrBytes::from_static_str("learner-client exits")))]);
        let addr = self.args.bootstrap.clone();
        let client_id = self.args.client_id.clone();
        let conn = self.conn.take();
        let attempt = async move {
            let mut conn = match conn {
                Some(c) => c,
                None => Conn::connect(&addr, &client_id).await?,
            };
            conn.call(LEAVE_GROUP_V, &req).await
        };
        match tokio::time::timeout(Duration::from_secs(5), attempt).await {
            Ok(Ok(resp)) => {
                let codes: Vec<i16> = std::iter::once(resp.error_code)
                    .chain(resp.members.iter().map(|m| m.error_code))
                    .filter(|&c| c != 0)
                    .collect();
                if codes.is_empty() {
                    self.log("left the group");
                } else {
                    self.log(format_args!("LeaveGroup error codes {codes:?}"));
                }
            }
            Ok(Err(e)) => self.log(format_args!("LeaveGroup failed: {e:#}")),
            Err(_) => self.log("LeaveGroup timed out"),
        }
    }
}

/// A `ConsumerProtocolAssignment` and its `LearnerAssignment` (none: nothing to learn or
/// revoke, no probe; an empty assignment: nothing at all).
fn decode(bytes: &Bytes) -> Result<(BTreeSet<Tp>, LearnerAssignment)> {
    let none = LearnerAssignment {
        probe_ms: -1,
        ..Default::default()
    };
    if bytes.is_empty() {
        return Ok((BTreeSet::new(), none));
    }
    let (partitions, user_data) =
        decode_assignment(bytes).map_err(|e| anyhow!("ConsumerProtocolAssignment: {e}"))?;
    let la = match user_data {
        Some(u) if !u.is_empty() => {
            LearnerAssignment::decode(&u).map_err(|e| anyhow!("LearnerAssignment: {e}"))?
        }
        _ => none,
    };
    Ok((state::to_set(&partitions), la))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let mode = Mode::parse(&args.mode).expect("clap checks the mode");
    let (stop_tx, shutdown) = watch::channel(false);
    tokio::spawn(async move {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                eprintln!("learner-client: no SIGTERM handler ({e}); SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        let _ = stop_tx.send(true);
    });
    let (cmd_tx, cmds) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let cmd = match line.trim() {
                "ready" => Cmd::Ready,
                "leave" => Cmd::Leave,
                "" => continue,
                other => {
                    eprintln!("learner-client: unknown stdin command {other:?} (ready, leave)");
                    continue;
                }
            };
            if cmd_tx.send(cmd).is_err() {
                break;
            }
        }
    });
    let state = State::new(
        mode,
        Duration::from_millis(args.restore_ms),
        !args.ready_gate,
    );
    let mut member = Member {
        args,
        state,
        conn: None,
        member_id: String::new(),
        generation: -1,
        shutdown,
        cmds,
        cmds_open: true,
        disconnected: false,
        leave_at: None,
        join_reason: "start",
    };
    let code = match member.run().await {
        Stop::Shutdown => {
            member.log("signalled: leaving the group");
            member.leave().await;
            0
        }
        Stop::Done => {
            member.log("left everything it held: leaving the group");
            member.leave().await;
            0
        }
        Stop::Fatal(e) => {
            member.log(format_args!("fatal: {e}"));
            member.emit("fatal", json!({ "error": e }));
            member.leave().await;
            2
        }
    };
    // The stdin reader may sit in a blocking read: do not wait for it.
    std::process::exit(code);
}
