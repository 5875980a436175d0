//! The simulation loop: one [`ClassicGroup`], the simulated members, a simulated clock and an
//! event queue. The engine is the group's whole shell: it delivers requests and replies (no
//! network delay), plays the store (the assignment record is acknowledged `barrier_ms` after it
//! is written, see the module docs of [`super`]), and fires the core's timers when the clock
//! reaches [`ClassicGroup::next_deadline`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

use crate::assignor::learner::wire::LearnerAssignment;
use crate::assignor::protocol::decode_assignment;
use crate::group::{
    ClassicGroup, GroupConfig, GroupError, GroupEvent, GroupId, GroupState, Heartbeat, JoinGroup,
    LeaveGroup, LeavingMember, Output, Protocol, RequestToken, SyncGroup, TimerKey, Timestamp,
    WriteId,
};

use super::client::{tasks, ClientKind, Phase, SimMember};
use super::record::Recorder;
use super::Scenario;

/// Session and rebalance timeouts of the simulated members: healthy members never time out.
const TIMEOUT_MS: u64 = 1_000_000_000;
/// Inputs handled at one instant before the engine declares a livelock.
const MAX_STEPS_PER_INSTANT: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The store acknowledges a write.
    WriteAck(u64),
    /// A member's store of a task is restored (stale if the store changed since).
    Restored {
        member: usize,
        task: u32,
        warm_at: u64,
    },
    /// A scheduled membership change: `+1` starts a member, `-1` stops one.
    Scale(i32),
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Join(usize),
    Sync(usize),
    Leave(usize),
}

/// A run in progress.
pub struct Engine<'a> {
    scenario: &'a Scenario,
    pub now: Timestamp,
    pub group: ClassicGroup,
    pub members: Vec<SimMember>,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    tokens: BTreeMap<RequestToken, usize>,
    next_token: u64,
    actions: VecDeque<Action>,
    pub rec: Recorder,
    /// During set-up every store is warm at once.
    prewarm: bool,
    pub anomalies: Vec<String>,
}

impl<'a> Engine<'a> {
    pub fn new(scenario: &'a Scenario, config: GroupConfig) -> Engine<'a> {
        let now = Timestamp(0);
        let group = ClassicGroup::new(GroupId::new("sim"), config, now);
        let kind = scenario.strategy.client_kind();
        let members = (0..scenario.member_slots())
            .map(|i| SimMember::new(i, kind))
            .collect();
        Engine {
            scenario,
            now,
            group,
            members,
            queue: BinaryHeap::new(),
            seq: 0,
            tokens: BTreeMap::new(),
            next_token: 1,
            actions: VecDeque::new(),
            rec: Recorder::new(scenario.tasks as usize),
            prewarm: true,
            anomalies: Vec::new(),
        }
    }

    fn schedule(&mut self, at: Timestamp, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at.0, self.seq, event)));
    }

    fn anomaly(&mut self, what: String) {
        if self.anomalies.len() < 20 {
            self.anomalies.push(format!("at {} ms: {what}", self.now.0));
        }
    }

    /// Forms the initial group of `before` members and settles it, every store warm: the
    /// steady state the scenario starts from.
    pub fn set_up(&mut self) -> Result<(), String> {
        for i in 0..self.scenario.before {
            self.actions.push_back(Action::Join(i));
        }
        self.run_until_quiet(None)?;
        self.prewarm = false;
        if !self.quiet() {
            return Err("the initial group did not settle".into());
        }
        Ok(())
    }

    /// Schedules the membership changes (offsets from `start`) and runs until nothing is left
    /// to happen or the horizon passes.
    pub fn run(&mut self, start: Timestamp) -> Result<(), String> {
        for &(at, delta) in &self.scenario.schedule() {
            let step = if delta > 0 { 1 } else { -1 };
            for _ in 0..delta.unsigned_abs() {
                self.schedule(start.plus_ms(at), Event::Scale(step));
            }
        }
        self.rec.start(self.now, start);
        self.record();
        self.run_until_quiet(Some(start.plus_ms(self.scenario.horizon_ms)))
    }

    fn run_until_quiet(&mut self, horizon: Option<Timestamp>) -> Result<(), String> {
        let mut steps_now = 0usize;
        loop {
            self.pump();
            self.record();
            if self.quiet() {
                return Ok(());
            }
            let next_event = self.queue.peek().map(|Reverse((t, _, _))| Timestamp(*t));
            let next_timer = self.group.next_deadline();
            let next = match (next_event, next_timer) {
                (Some(e), Some(t)) => e.min(t),
                (Some(e), None) => e,
                (None, Some(t)) => t,
                (None, None) => return Err("stuck: nothing left to happen".into()),
            };
            if horizon.is_some_and(|h| next > h) {
                return Ok(());
            }
            if next > self.now {
                self.now = next;
                steps_now = 0;
            }
            steps_now += 1;
            if steps_now > MAX_STEPS_PER_INSTANT {
                return Err(format!("livelock at {} ms", self.now.0));
            }
            // Everything due at this instant happens before anyone reacts: two members
            // scheduled to join together join the same rebalance.
            while let Some(Reverse((at, _, _))) = self.queue.peek() {
                if *at > self.now.0 {
                    break;
                }
                if let Some(Reverse((_, _, event))) = self.queue.pop() {
                    self.handle_event(event);
                }
            }
            self.group.handle_timeout(self.now);
        }
    }

    /// Nothing in flight: no event, no request, every member settled, and no group timer other
    /// than the members' sessions (which healthy members never let expire).
    fn quiet(&self) -> bool {
        self.queue.is_empty()
            && self.actions.is_empty()
            && matches!(self.group.state(), GroupState::Stable | GroupState::Empty)
            && self
                .members
                .iter()
                .all(|m| matches!(m.phase, Phase::Idle | Phase::Stable | Phase::Left))
            && self.members.iter().all(|m| !m.wants_rejoin)
            && self
                .group
                .armed_timers()
                .iter()
                .all(|k| matches!(k, TimerKey::Heartbeat(_)))
    }

    fn handle_event(&mut self, event: Event) {
        match event {
            Event::WriteAck(w) => self
                .group
                .handle_write_complete(WriteId(w), Ok(()), self.now),
            Event::Restored {
                member,
                task,
                warm_at,
            } => {
                let m = &mut self.members[member];
                if m.stores.get(&task).map(|w| w.0) != Some(warm_at) {
                    return;
                }
                if m.has_news(self.now) {
                    m.wants_rejoin = true;
                    if m.phase == Phase::Stable {
                        self.actions.push_back(Action::Join(member));
                    }
                }
            }
            Event::Scale(delta) if delta > 0 => {
                if let Some(i) = self.members.iter().position(|m| m.phase == Phase::Idle) {
                    self.members[i].phase = Phase::Joining;
                    self.actions.push_back(Action::Join(i));
                }
            }
            Event::Scale(_) => {
                let Some(i) = self.members.iter().rposition(|m| m.live() && !m.leaving) else {
                    return;
                };
                let m = &mut self.members[i];
                m.leaving = true;
                if m.kind == ClientKind::Learner {
                    // Drain first: rejoin saying so, keep processing.
                    m.wants_rejoin = true;
                    if m.phase == Phase::Stable {
                        self.actions.push_back(Action::Join(i));
                    }
                } else {
                    self.actions.push_back(Action::Leave(i));
                }
            }
        }
    }

    /// Delivers outputs and requests at `now` until none is left. Members learn of a rebalance
    /// at once: whenever the group is preparing one, every settled member heartbeats, is told
    /// REBALANCE_IN_PROGRESS and rejoins.
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(output) = self.group.poll_output() {
                progressed = true;
                self.handle_output(output);
            }
            while let Some(action) = self.actions.pop_front() {
                progressed = true;
                self.act(action);
                while let Some(output) = self.group.poll_output() {
                    self.handle_output(output);
                }
            }
            if self.group.state() == GroupState::PreparingRebalance {
                for i in 0..self.members.len() {
                    let m = &self.members[i];
                    if m.phase != Phase::Stable {
                        continue;
                    }
                    let hb = Heartbeat {
                        member_id: m.id.clone(),
                        instance_id: None,
                        generation: m.generation,
                    };
                    match self.group.handle_heartbeat(&hb, self.now) {
                        Ok(()) => {}
                        Err(e) => {
                            if !matches!(
                                e,
                                GroupError::RebalanceInProgress | GroupError::IllegalGeneration
                            ) {
                                self.anomaly(format!("heartbeat of {}: {e:?}", m.name));
                            }
                            progressed = true;
                            self.actions.push_back(Action::Join(i));
                        }
                    }
                }
            }
            if !progressed {
                return;
            }
        }
    }

    fn token(&mut self, member: usize) -> RequestToken {
        let t = RequestToken(self.next_token);
        self.next_token += 1;
        self.tokens.insert(t, member);
        self.members[member].token = Some(t);
        t
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Join(i) => {
                if matches!(self.members[i].phase, Phase::Left) || self.members[i].token.is_some() {
                    // Gone, or a request in flight (whoever wanted this rejoin set
                    // `wants_rejoin`, honoured when the request is answered).
                    return;
                }
                let metadata = self.members[i].begin_join(self.now);
                let token = self.token(i);
                let m = &mut self.members[i];
                m.phase = Phase::Joining;
                let req = JoinGroup {
                    token,
                    member_id: m.id.clone(),
                    instance_id: None,
                    client_id: m.name.clone(),
                    client_host: "/sim".into(),
                    session_timeout_ms: TIMEOUT_MS,
                    rebalance_timeout_ms: TIMEOUT_MS,
                    protocol_type: "consumer".into(),
                    protocols: vec![Protocol::new(m.kind.protocol(), metadata)],
                    require_known_member_id: false,
                    supports_skip_assignment: true,
                    reason: None,
                    member_id_nonce: "sim".into(),
                };
                self.group.handle_join(req, self.now);
            }
            Action::Sync(i) => {
                let token = self.token(i);
                let m = &mut self.members[i];
                m.phase = Phase::Syncing;
                let req = SyncGroup {
                    token,
                    member_id: m.id.clone(),
                    instance_id: None,
                    generation: m.generation,
                    protocol_type: Some("consumer".into()),
                    protocol_name: Some(m.kind.protocol().into()),
                    assignments: Vec::new(),
                };
                self.group.handle_sync(req, self.now);
            }
            Action::Leave(i) => {
                let m = &mut self.members[i];
                if m.phase == Phase::Left {
                    return;
                }
                let req = LeaveGroup {
                    members: vec![LeavingMember {
                        member_id: m.id.clone(),
                        instance_id: None,
                        reason: Some("scale-in".into()),
                    }],
                };
                m.depart();
                let outcome = self.group.handle_leave(&req, self.now);
                if let Some(e) = outcome.single_member_error() {
                    self.anomaly(format!("leave: {e:?}"));
                }
            }
        }
    }

    fn handle_output(&mut self, output: Output) {
        match output {
            Output::JoinReply { token, reply } => {
                let Some(i) = self.tokens.remove(&token) else {
                    return;
                };
                let m = &mut self.members[i];
                if m.phase == Phase::Left {
                    return;
                }
                m.token = None;
                match reply.error {
                    None => {
                        m.id = reply.member_id;
                        m.generation = reply.generation;
                        self.actions.push_back(Action::Sync(i));
                    }
                    Some(e) => {
                        if e == GroupError::UnknownMemberId {
                            m.id = crate::group::MemberId::unknown();
                        }
                        let name = m.name.clone();
                        self.anomaly(format!("JoinGroup of {name}: {e:?}"));
                        self.actions.push_back(Action::Join(i));
                    }
                }
            }
            Output::SyncReply { token, reply } => {
                let Some(i) = self.tokens.remove(&token) else {
                    return;
                };
                if self.members[i].phase == Phase::Left {
                    return;
                }
                self.members[i].token = None;
                match reply.error {
                    None => self.apply_assignment(i, &reply.assignment),
                    Some(e) => {
                        if e != GroupError::RebalanceInProgress {
                            let name = self.members[i].name.clone();
                            self.anomaly(format!("SyncGroup of {name}: {e:?}"));
                        }
                        self.members[i].phase = Phase::Joining;
                        self.actions.push_back(Action::Join(i));
                    }
                }
            }
            Output::Persist { write, .. } => {
                let at = self.now.plus_ms(self.scenario.barrier_ms);
                self.schedule(at, Event::WriteAck(write.0));
            }
            Output::Event(GroupEvent::RebalanceStarted { .. }) => {
                self.rec.rebalance_started(self.now)
            }
            Output::Event(GroupEvent::GenerationStarted { .. }) => self.rec.generation(self.now),
            Output::Event(_) | Output::Timer(_) => {}
        }
    }

    fn apply_assignment(&mut self, i: usize, bytes: &bytes::Bytes) {
        let (assigned, learner) = match decode_assignment(bytes) {
            Ok((parts, user_data)) => {
                let learner = match (self.members[i].kind, user_data) {
                    (ClientKind::Learner, Some(d)) if !d.is_empty() => {
                        match LearnerAssignment::decode(&d) {
                            Ok(a) => Some(a),
                            Err(e) => {
                                self.anomaly(format!("learner assignment: {e}"));
                                None
                            }
                        }
                    }
                    _ => None,
                };
                (tasks(&parts), learner)
            }
            Err(e) if bytes.is_empty() => {
                let _ = e;
                (BTreeSet::new(), None)
            }
            Err(e) => {
                self.anomaly(format!("assignment: {e}"));
                (BTreeSet::new(), None)
            }
        };
        let restore = if self.prewarm {
            0
        } else {
            self.scenario.restore_ms
        };
        let started = self.members[i].apply_assignment(assigned, learner, self.now, restore);
        for (task, warm_at) in started {
            if warm_at > self.now {
                self.schedule(
                    warm_at,
                    Event::Restored {
                        member: i,
                        task,
                        warm_at: warm_at.0,
                    },
                );
            }
        }
        let m = &self.members[i];
        if m.kind == ClientKind::Learner && m.leaving && m.owned.is_empty() && m.learning.is_empty()
        {
            self.actions.push_back(Action::Leave(i));
        } else if m.wants_rejoin {
            self.actions.push_back(Action::Join(i));
        }
    }

    fn record(&mut self) {
        let now = self.now;
        let scale_pending = self
            .queue
            .iter()
            .any(|Reverse((_, _, e))| matches!(e, Event::Scale(_)));
        self.rec.observe(now, &self.members, scale_pending);
    }
}
