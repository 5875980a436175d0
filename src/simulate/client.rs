//! Simulated members: what a Kafka consumer of each kind holds, gives up at JoinGroup, declares
//! in its subscription and does with the assignment its SyncGroup returns. They never talk to a
//! socket; [`super::engine`] turns their wishes into the group core's inputs.
//!
//! A member keeps a *store* per task (its local state): a store restored at `warm_at` lets the
//! member process the task from then on. A member restores a store when it is granted a task or
//! asked to learn it and has none; it keeps a store while it owns or learns the task, and drops
//! it when an assignment leaves it neither (the state is then stale: someone else processes it).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::assignor::learner::wire::{LearnerAssignment, LearnerSubscription};
use crate::assignor::protocol::{encode_subscription, Subscription, TopicPartitions};
use crate::group::{Generation, MemberId, RequestToken, Timestamp};

/// The one topic of a simulation: a task is one of its partitions.
pub const TOPIC: &str = "tasks";

/// How a simulated client rebalances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Protocol `range`: revokes everything when it joins, declares nothing.
    Eager,
    /// Protocol `cooperative-sticky`: keeps its tasks through the join, declares them, gives up
    /// what the new assignment removes and rejoins at once after such a revocation.
    Cooperative,
    /// Protocol `learner` (learner-spec.md 11): cooperative, plus a `LearnerSubscription`
    /// (gives up marked tasks at join, restores learning tasks in the background, rejoins when
    /// one is ready, drains before leaving).
    Learner,
}

impl ClientKind {
    /// The protocol (client assignor) name it joins with.
    pub fn protocol(self) -> &'static str {
        match self {
            ClientKind::Eager => "range",
            ClientKind::Cooperative => "cooperative-sticky",
            ClientKind::Learner => crate::assignor::learner::NAME,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ClientKind::Eager => "eager",
            ClientKind::Cooperative => "cooperative",
            ClientKind::Learner => "learner-capable",
        }
    }
}

/// Where a member is in the group protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet (a member of a later scale-out).
    Idle,
    /// A JoinGroup is in flight.
    Joining,
    /// A SyncGroup is in flight.
    Syncing,
    /// Has its generation's assignment.
    Stable,
    /// Sent LeaveGroup; gone.
    Left,
}

/// One simulated consumer.
#[derive(Debug, Clone)]
pub struct SimMember {
    /// Client id; the core makes the member id `{name}-sim`, so members sort by name.
    pub name: String,
    pub id: MemberId,
    pub kind: ClientKind,
    pub phase: Phase,
    pub generation: Generation,
    /// The request in flight, if any.
    pub token: Option<RequestToken>,
    /// Active tasks it holds (processes once their store is warm).
    pub owned: BTreeSet<u32>,
    /// Local state per task: usable from `warm_at`.
    pub stores: BTreeMap<u32, Timestamp>,
    /// Tasks it restores as a learner.
    pub learning: BTreeSet<u32>,
    /// Owned tasks someone else learns (seed mode: give them up at the next join).
    pub marks: BTreeSet<u32>,
    /// Marked tasks given up at the current join.
    pub revoked_at_join: BTreeSet<u32>,
    /// Ready learning tasks already reported in a join: a member rejoins for news only.
    pub reported_ready: BTreeSet<u32>,
    /// Asked to leave (learner-capable members drain first).
    pub leaving: bool,
    /// Rejoin as soon as the request in flight is answered.
    pub wants_rejoin: bool,
}

impl SimMember {
    pub fn new(index: usize, kind: ClientKind) -> SimMember {
        SimMember {
            name: format!("m{:02}", index + 1),
            id: MemberId::unknown(),
            kind,
            phase: Phase::Idle,
            generation: Generation::NONE,
            token: None,
            owned: BTreeSet::new(),
            stores: BTreeMap::new(),
            learning: BTreeSet::new(),
            marks: BTreeSet::new(),
            revoked_at_join: BTreeSet::new(),
            reported_ready: BTreeSet::new(),
            leaving: false,
            wants_rejoin: false,
        }
    }

    /// In the group (joined at least once and not gone).
    pub fn live(&self) -> bool {
        !matches!(self.phase, Phase::Idle | Phase::Left)
    }

    fn warm(&self, task: u32, now: Timestamp) -> bool {
        self.stores.get(&task).is_some_and(|w| *w <= now)
    }

    /// Holds `task` and its state is restored.
    pub fn processing(&self, task: u32, now: Timestamp) -> bool {
        self.owned.contains(&task) && self.warm(task, now)
    }

    /// Learning `task` with its state restored.
    pub fn learner_ready(&self, task: u32, now: Timestamp) -> bool {
        self.learning.contains(&task) && self.warm(task, now)
    }

    /// A learning task is ready and not reported yet: a learner-capable member rejoins.
    pub fn has_news(&self, now: Timestamp) -> bool {
        self.kind == ClientKind::Learner
            && self
                .learning
                .iter()
                .any(|&t| self.warm(t, now) && !self.reported_ready.contains(&t))
    }

    /// Gives up what its protocol gives up at a join and returns the subscription to join with.
    pub fn begin_join(&mut self, now: Timestamp) -> Bytes {
        self.wants_rejoin = false;
        self.revoked_at_join.clear();
        match self.kind {
            ClientKind::Eager => self.owned.clear(),
            ClientKind::Cooperative => {}
            ClientKind::Learner => {
                let marked: Vec<u32> = self.owned.intersection(&self.marks).copied().collect();
                for t in marked {
                    self.owned.remove(&t);
                    self.revoked_at_join.insert(t);
                }
            }
        }
        let user_data = (self.kind == ClientKind::Learner).then(|| {
            let ready: BTreeSet<u32> = self
                .learning
                .iter()
                .copied()
                .filter(|&t| self.warm(t, now))
                .collect();
            self.reported_ready = ready.clone();
            LearnerSubscription {
                revoked: partitions(&self.revoked_at_join),
                learning: partitions(&self.learning),
                ready: partitions(&ready),
                lags: Vec::new(),
                leaving: self.leaving,
            }
            .encode()
        });
        let declared = match self.kind {
            ClientKind::Eager => BTreeSet::new(),
            _ => self.owned.clone(),
        };
        let subscription = Subscription {
            version: 3,
            topics: vec![TOPIC.to_owned()],
            user_data,
            owned_partitions: partitions(&declared),
            generation: self.generation.0,
            rack: None,
        };
        encode_subscription(&subscription, 3)
    }

    /// Takes the generation's assignment. Returns the stores it started restoring (task,
    /// warm_at); sets `wants_rejoin` after a revocation (cooperative two-step) or when a
    /// learning task is already ready.
    pub fn apply_assignment(
        &mut self,
        assigned: BTreeSet<u32>,
        learner: Option<LearnerAssignment>,
        now: Timestamp,
        restore_ms: u64,
    ) -> Vec<(u32, Timestamp)> {
        self.phase = Phase::Stable;
        if self.kind != ClientKind::Eager && !self.owned.is_subset(&assigned) {
            self.wants_rejoin = true;
        }
        self.owned = assigned;
        let (learning, marks) = match learner {
            Some(a) => (tasks(&a.learning), tasks(&a.marks)),
            None => (BTreeSet::new(), BTreeSet::new()),
        };
        self.learning = learning;
        self.marks = marks;
        self.reported_ready.retain(|t| self.learning.contains(t));
        self.stores
            .retain(|t, _| self.owned.contains(t) || self.learning.contains(t));
        let mut started = Vec::new();
        for &t in self.owned.iter().chain(&self.learning) {
            if let std::collections::btree_map::Entry::Vacant(e) = self.stores.entry(t) {
                let warm_at = now.plus_ms(restore_ms);
                e.insert(warm_at);
                started.push((t, warm_at));
            }
        }
        if self.has_news(now) {
            self.wants_rejoin = true;
        }
        started
    }

    /// Makes every store warm now (the steady state before a scenario starts).
    pub fn prewarm(&mut self, now: Timestamp) {
        for w in self.stores.values_mut() {
            *w = now;
        }
    }

    /// Gone: holds nothing.
    pub fn depart(&mut self) {
        self.phase = Phase::Left;
        self.token = None;
        self.owned.clear();
        self.learning.clear();
        self.marks.clear();
        self.stores.clear();
        self.wants_rejoin = false;
    }
}

/// Tasks as the topic-partition lists of the wire formats.
pub fn partitions(tasks: &BTreeSet<u32>) -> TopicPartitions {
    if tasks.is_empty() {
        Vec::new()
    } else {
        vec![(TOPIC.to_owned(), tasks.iter().map(|&t| t as i32).collect())]
    }
}

/// The tasks of a topic-partition list (other topics ignored).
pub fn tasks(list: &TopicPartitions) -> BTreeSet<u32> {
    list.iter()
        .filter(|(t, _)| t == TOPIC)
        .flat_map(|(_, ps)| ps.iter().filter_map(|&p| u32::try_from(p).ok()))
        .collect()
}
