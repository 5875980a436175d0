//! Tests of the classic group machine, driven by a manual clock ([`Ctx`], after Kafka's
//! `GroupMetadataManagerTestContext`): `sleep(ms)` advances time and fires the timers that
//! expire on the way, in deadline order. Every test is named after the spec checklist item
//! (§1.1-1.4, §3.1) or style.md trap it covers.

mod heartbeat_leave;
mod join;
mod model;
mod offsets;
mod server_assignment;
mod sync;

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;

use super::*;

/// Session timeout used unless a test says otherwise.
pub const SESSION: u64 = 10_000;
/// Rebalance timeout used unless a test says otherwise.
pub const REBALANCE: u64 = 60_000;
/// `group.initial.rebalance.delay.ms` in tests (Kafka's default).
pub const DELAY: u64 = 3_000;

/// A JoinGroup builder with test defaults (dynamic member, protocol type `consumer`, one
/// protocol `range`, JoinGroup v3 semantics: no MEMBER_ID_REQUIRED, no SkipAssignment).
#[derive(Debug, Clone)]
pub struct J {
    pub req: JoinGroup,
}

impl J {
    pub fn new() -> J {
        J {
            req: JoinGroup {
                token: RequestToken(0),
                member_id: MemberId::unknown(),
                instance_id: None,
                client_id: "client".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: SESSION,
                rebalance_timeout_ms: REBALANCE,
                protocol_type: "consumer".into(),
                protocols: vec![Protocol::new("range", Bytes::from_static(b"sub"))],
                require_known_member_id: false,
                supports_skip_assignment: false,
                reason: None,
                member_id_nonce: String::new(),
            },
        }
    }

    /// Rejoin with a known id.
    pub fn member(mut self, id: &MemberId) -> J {
        self.req.member_id = id.clone();
        self
    }

    pub fn instance(mut self, instance: &str) -> J {
        self.req.instance_id = Some(InstanceId::new(instance));
        self
    }

    pub fn client(mut self, client: &str) -> J {
        self.req.client_id = client.into();
        self
    }

    pub fn session(mut self, ms: u64) -> J {
        self.req.session_timeout_ms = ms;
        self
    }

    pub fn rebalance(mut self, ms: u64) -> J {
        self.req.rebalance_timeout_ms = ms;
        self
    }

    pub fn protocol_type(mut self, t: &str) -> J {
        self.req.protocol_type = t.into();
        self
    }

    /// Protocols as `(name, metadata)`, in preference order.
    pub fn protocols(mut self, protocols: &[(&str, &'static [u8])]) -> J {
        self.req.protocols = protocols
            .iter()
            .map(|(n, m)| Protocol::new(*n, Bytes::from_static(m)))
            .collect();
        self
    }

    /// JoinGroup v4-8: a dynamic member without id gets MEMBER_ID_REQUIRED.
    pub fn v4(mut self) -> J {
        self.req.require_known_member_id = true;
        self
    }

    /// JoinGroup v9: MEMBER_ID_REQUIRED and SkipAssignment.
    pub fn v9(mut self) -> J {
        self.req.require_known_member_id = true;
        self.req.supports_skip_assignment = true;
        self
    }
}

/// A test harness: the group, a manual clock, and every output collected and checked.
pub struct Ctx {
    pub group: ClassicGroup,
    pub now: Timestamp,
    next_token: u64,
    next_nonce: u64,
    issued_joins: HashSet<RequestToken>,
    issued_syncs: HashSet<RequestToken>,
    pub join_replies: HashMap<RequestToken, JoinReply>,
    pub sync_replies: HashMap<RequestToken, SyncReply>,
    pub events: Vec<GroupEvent>,
    pub records: Vec<GroupRecord>,
    /// When set, Persist outputs are held here instead of being acknowledged at once.
    pub hold_writes: bool,
    pub held_writes: Vec<WriteId>,
    last_generation: Generation,
    /// The keyed-timer shell's view of the timers, built only from `TimerChange` outputs.
    pub mirror: BTreeMap<TimerKey, Timestamp>,
    /// Drive time like a single-sleep shell instead (see [`Ctx::sleep`]).
    pub single_sleep: bool,
}

impl Ctx {
    pub fn new() -> Ctx {
        Ctx::with_config(GroupConfig {
            initial_rebalance_delay_ms: DELAY,
            ..GroupConfig::default()
        })
    }

    pub fn with_config(config: GroupConfig) -> Ctx {
        let now = Timestamp(1_000_000);
        let mut ctx = Ctx {
            group: ClassicGroup::new(GroupId::new("g"), config, now),
            now,
            next_token: 1,
            next_nonce: 1,
            issued_joins: HashSet::new(),
            issued_syncs: HashSet::new(),
            join_replies: HashMap::new(),
            sync_replies: HashMap::new(),
            events: Vec::new(),
            records: Vec::new(),
            hold_writes: false,
            held_writes: Vec::new(),
            last_generation: Generation(0),
            mirror: BTreeMap::new(),
            single_sleep: false,
        };
        ctx.drain();
        ctx
    }

    fn token(&mut self) -> RequestToken {
        let t = RequestToken(self.next_token);
        self.next_token += 1;
        t
    }

    /// Sends a JoinGroup; returns its token (look the reply up with [`Ctx::join_reply`]).
    pub fn join(&mut self, j: J) -> RequestToken {
        let mut req = j.req;
        req.token = self.token();
        req.member_id_nonce = format!("n{}", self.next_nonce);
        self.next_nonce += 1;
        self.issued_joins.insert(req.token);
        let token = req.token;
        self.group.handle_join(req, self.now);
        self.drain();
        token
    }

    /// Sends a SyncGroup; returns its token.
    pub fn sync(
        &mut self,
        member: &MemberId,
        generation: Generation,
        assignments: &[(&MemberId, &'static [u8])],
    ) -> RequestToken {
        let req = SyncGroup {
            token: self.token(),
            member_id: member.clone(),
            instance_id: self
                .group
                .member(member)
                .and_then(|m| m.instance_id.clone()),
            generation,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| ((*m).clone(), Bytes::from_static(a)))
                .collect(),
        };
        self.sync_req(req)
    }

    pub fn sync_req(&mut self, mut req: SyncGroup) -> RequestToken {
        if req.token.0 == 0 {
            req.token = self.token();
        }
        self.issued_syncs.insert(req.token);
        let token = req.token;
        self.group.handle_sync(req, self.now);
        self.drain();
        token
    }

    pub fn heartbeat(
        &mut self,
        member: &MemberId,
        generation: Generation,
    ) -> Result<(), GroupError> {
        let req = Heartbeat {
            member_id: member.clone(),
            instance_id: self
                .group
                .member(member)
                .and_then(|m| m.instance_id.clone()),
            generation,
        };
        let r = self.group.handle_heartbeat(&req, self.now);
        self.drain();
        r
    }

    pub fn leave(&mut self, members: &[(&str, Option<&str>)]) -> LeaveOutcome {
        let req = LeaveGroup {
            members: members
                .iter()
                .map(|(m, i)| LeavingMember {
                    member_id: MemberId::new(*m),
                    instance_id: i.map(InstanceId::new),
                    reason: None,
                })
                .collect(),
        };
        let out = self.group.handle_leave(&req, self.now);
        self.drain();
        out
    }

    pub fn commit(&mut self, auth: OffsetCommitAuth) -> Result<(), GroupError> {
        let r = self.group.validate_offset_commit(&auth, self.now);
        self.drain();
        r
    }

    /// Advances the clock by `ms`, firing every timer that expires on the way, in order.
    ///
    /// By default it acts as a keyed-timer shell: it mirrors the `TimerChange` outputs, sleeps
    /// until its own earliest deadline and fires that key with `handle_timer`. With
    /// `single_sleep` it acts as a quinn-style shell: `next_deadline` + `handle_timeout`.
    pub fn sleep(&mut self, ms: u64) {
        let target = self.now.plus_ms(ms);
        loop {
            if self.single_sleep {
                let Some(deadline) = self.group.next_deadline() else {
                    break;
                };
                if deadline > target {
                    break;
                }
                self.now = self.now.max(deadline);
                self.group.handle_timeout(self.now);
                // Fired keys leave the table without a Cancel: resynchronise the mirror.
                self.mirror = self
                    .group
                    .armed_timers()
                    .into_iter()
                    .filter_map(|k| self.group.timer_deadline(&k).map(|d| (k, d)))
                    .collect();
            } else {
                let Some((key, deadline)) = self
                    .mirror
                    .iter()
                    .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
                    .map(|(k, d)| (k.clone(), *d))
                else {
                    break;
                };
                if deadline > target {
                    break;
                }
                self.mirror.remove(&key);
                self.now = self.now.max(deadline);
                self.group.handle_timer(key, self.now);
            }
            self.drain();
        }
        self.now = target;
    }

    /// Acknowledges the `i`-th held write with `result`.
    pub fn complete_write(&mut self, i: usize, result: Result<(), GroupError>) {
        let write = self.held_writes.remove(i);
        self.group.handle_write_complete(write, result, self.now);
        self.drain();
    }

    /// Acknowledges every held write with `result`.
    pub fn complete_held_writes(&mut self, result: Result<(), GroupError>) {
        while !self.held_writes.is_empty() {
            for write in std::mem::take(&mut self.held_writes) {
                self.group.handle_write_complete(write, result, self.now);
                self.drain();
            }
        }
    }

    /// Drains the outputs, checking the invariants every output must satisfy.
    pub fn drain(&mut self) {
        while let Some(out) = self.group.poll_output() {
            match out {
                Output::JoinReply { token, reply } => {
                    assert!(
                        self.issued_joins.contains(&token),
                        "join reply to {token:?} never sent"
                    );
                    if reply.error.is_none() {
                        assert!(
                            self.group.has_member(&reply.member_id),
                            "successful join reply for non-member {}",
                            reply.member_id
                        );
                        assert_eq!(
                            reply.generation,
                            self.group.generation(),
                            "join reply for another generation"
                        );
                    }
                    let dup = self.join_replies.insert(token, reply);
                    assert!(dup.is_none(), "join {token:?} answered twice");
                }
                Output::SyncReply { token, reply } => {
                    assert!(
                        self.issued_syncs.contains(&token),
                        "sync reply to {token:?} never sent"
                    );
                    if reply.error.is_none() {
                        assert_eq!(
                            self.group.state(),
                            GroupState::Stable,
                            "assignment delivered outside Stable"
                        );
                    }
                    let dup = self.sync_replies.insert(token, reply);
                    assert!(dup.is_none(), "sync {token:?} answered twice");
                }
                Output::Persist { write, record } => {
                    self.records.push(record);
                    if self.hold_writes {
                        self.held_writes.push(write);
                    } else {
                        self.group.handle_write_complete(write, Ok(()), self.now);
                    }
                }
                Output::Event(e) => self.events.push(e),
                Output::Timer(TimerChange::Set { key, deadline }) => {
                    self.mirror.insert(key, deadline);
                }
                Output::Timer(TimerChange::Cancel { key }) => {
                    self.mirror.remove(&key);
                }
            }
        }
        self.check_invariants();
    }

    /// Invariants that hold after every input.
    pub fn check_invariants(&mut self) {
        self.group.check_counters();
        let g = &self.group;
        if !self.single_sleep {
            // The TimerChange outputs are enough to mirror the core's timers exactly.
            let table: BTreeMap<TimerKey, Timestamp> = g
                .armed_timers()
                .into_iter()
                .filter_map(|k| g.timer_deadline(&k).map(|d| (k, d)))
                .collect();
            assert_eq!(
                self.mirror, table,
                "timer outputs out of sync with the core"
            );
        }
        assert!(
            g.generation() >= self.last_generation,
            "generation went backwards"
        );
        self.last_generation = g.generation();
        match g.state() {
            GroupState::Empty => assert_eq!(g.num_members(), 0, "Empty group with members"),
            GroupState::Dead => {}
            // A join phase may lose all its members (they left); it still ends on its timer.
            _ if g.num_members() == 0 => assert!(g.leader().is_none()),
            _ => {
                let leader = g.leader().expect("group with members but no leader");
                assert!(g.has_member(leader), "leader {leader} is not a member");
            }
        }
        if matches!(
            g.state(),
            GroupState::CompletingRebalance | GroupState::Stable
        ) {
            assert!(g.num_members() > 0, "{} without members", g.state());
        }
        if g.state() != GroupState::Dead {
            for m in g.members() {
                // Liveness of sessions: a member that is not parked always has a session timer,
                // so that every member (static ones too) eventually expires if it goes silent.
                let parked = m.awaiting_join.is_some() || m.awaiting_sync.is_some();
                let armed = g
                    .timer_deadline(&TimerKey::Heartbeat(m.id.clone()))
                    .is_some();
                assert!(parked || armed, "member {} has no session timer", m.id);
                if let Some(instance) = &m.instance_id {
                    assert_eq!(
                        g.static_member_id(instance),
                        Some(&m.id),
                        "static map out of sync"
                    );
                }
            }
        }
        // Liveness of phases: a running join phase always has a timer that ends it; a new
        // generation waiting for syncs always has the pending-sync timer (writes are
        // acknowledged at once unless held).
        let join_timer = g.timer_deadline(&TimerKey::Join).is_some()
            || g.timer_deadline(&TimerKey::InitialDelay).is_some();
        match g.state() {
            GroupState::PreparingRebalance => assert!(join_timer, "join phase without timer"),
            GroupState::Dead => {}
            _ => assert!(!join_timer, "join timer armed in {}", g.state()),
        }
        if g.state() == GroupState::CompletingRebalance && !self.hold_writes {
            assert!(
                g.timer_deadline(&TimerKey::PendingSync).is_some(),
                "CompletingRebalance without pending-sync timer"
            );
        }
        for m in g.members() {
            if m.awaiting_sync.is_some() {
                assert_eq!(
                    g.state(),
                    GroupState::CompletingRebalance,
                    "sync parked outside CompletingRebalance"
                );
            }
            if m.awaiting_join.is_some() {
                assert!(
                    g.state() == GroupState::PreparingRebalance
                        || (g.state() == GroupState::Stable),
                    "join parked in {}",
                    g.state()
                );
            }
        }
    }

    /// Requests sent but never answered.
    pub fn unanswered(&self) -> Vec<RequestToken> {
        let mut v: Vec<RequestToken> = self
            .issued_joins
            .iter()
            .filter(|t| !self.join_replies.contains_key(t))
            .chain(
                self.issued_syncs
                    .iter()
                    .filter(|t| !self.sync_replies.contains_key(t)),
            )
            .copied()
            .collect();
        v.sort();
        v
    }

    pub fn join_reply(&self, token: RequestToken) -> &JoinReply {
        self.join_replies
            .get(&token)
            .unwrap_or_else(|| panic!("join {token:?} not answered (parked)"))
    }

    pub fn sync_reply(&self, token: RequestToken) -> &SyncReply {
        self.sync_replies
            .get(&token)
            .unwrap_or_else(|| panic!("sync {token:?} not answered (parked)"))
    }

    pub fn join_parked(&self, token: RequestToken) -> bool {
        !self.join_replies.contains_key(&token)
    }

    pub fn sync_parked(&self, token: RequestToken) -> bool {
        !self.sync_replies.contains_key(&token)
    }

    /// The session deadline of a member (or pending member).
    pub fn session_deadline(&self, member: &MemberId) -> Option<Timestamp> {
        self.group
            .timer_deadline(&TimerKey::Heartbeat(member.clone()))
    }

    pub fn removed(&self, member: &MemberId) -> Option<&RemoveReason> {
        self.events.iter().rev().find_map(|e| match e {
            GroupEvent::MemberRemoved {
                member: m, reason, ..
            } if m == member => Some(reason),
            _ => None,
        })
    }

    /// `n` dynamic members join a new group and the initial delay runs out: the group is in
    /// CompletingRebalance, generation 1, and the members (in join order, the first is the
    /// leader) are returned with their join tokens.
    pub fn completing_group(&mut self, n: usize) -> Vec<MemberId> {
        let tokens: Vec<_> = (0..n)
            .map(|i| self.join(J::new().client(&format!("c{i}"))))
            .collect();
        // Every join after the first extends the initial delay once.
        for _ in 0..10 {
            if self.group.state() != GroupState::PreparingRebalance {
                break;
            }
            self.sleep(DELAY);
        }
        assert_eq!(self.group.state(), GroupState::CompletingRebalance);
        tokens
            .iter()
            .map(|t| self.join_reply(*t).member_id.clone())
            .collect()
    }

    /// [`Ctx::completing_group`], then every member syncs (leader first, assigning `a-{i}`):
    /// the group is Stable, generation 1.
    pub fn stable_group(&mut self, n: usize) -> Vec<MemberId> {
        let ids = self.completing_group(n);
        let assignment: Vec<(&MemberId, &'static [u8])> = ids
            .iter()
            .map(|id| (id, b"assigned" as &'static [u8]))
            .collect();
        let generation = self.group.generation();
        let t = self.sync(&ids[0], generation, &assignment);
        assert!(self.sync_reply(t).error.is_none());
        for id in &ids[1..] {
            let t = self.sync(id, generation, &[]);
            assert!(self.sync_reply(t).error.is_none());
        }
        assert_eq!(self.group.state(), GroupState::Stable);
        ids
    }

    /// Every member that is still a member rejoins with its id; returns the tokens.
    pub fn rejoin_all(&mut self, ids: &[MemberId]) -> Vec<RequestToken> {
        ids.iter()
            .filter(|id| self.group.has_member(id))
            .cloned()
            .collect::<Vec<_>>()
            .iter()
            .map(|id| {
                let instance = self.group.member(id).and_then(|m| m.instance_id.clone());
                let mut j = J::new().member(id);
                j.req.instance_id = instance;
                self.join(j)
            })
            .collect()
    }
}
