//! What a learner-capable member holds, restores and owes, and the decisions it makes at each
//! join and after each SyncGroup (learner-spec.md sections 6.2, 7 and 11), as pure functions of
//! that state and the time: the network loop in `main.rs` only carries them over the wire.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use koord::assignor::learner::wire::{LearnerAssignment, LearnerSubscription};
use koord::assignor::protocol::{encode_subscription, Subscription, TopicPartitions};

/// A task: topic and partition.
pub type Tp = (String, i32);

/// When the member gives up marked tasks: the server's `learner.mode`, mirrored (seed: at
/// every join; ready-gated: never, koord revokes a task once its learner is ready).
pub use koord::assignor::learner::Mode;

/// The `ConsumerProtocolSubscription` version sent: v1, the first with ownedPartitions (the
/// version of learner-vectors.md's envelope vector).
pub const SUBSCRIPTION_VERSION: i16 = 1;

/// One member's state.
#[derive(Debug)]
pub struct State {
    pub mode: Mode,
    /// Time to restore a learning task, from when it was first received as learning.
    pub restore: Duration,
    /// Readiness also needs the gate open (`--ready-gate`: opened by a `ready` line on stdin).
    pub gate_open: bool,
    /// Active tasks held now.
    pub held: BTreeSet<Tp>,
    /// Tasks of the last assignment that someone else is learning.
    pub marks: BTreeSet<Tp>,
    /// Tasks being restored, with when each was first received as learning.
    pub learning: BTreeMap<Tp, Instant>,
    /// Ready tasks a join has already reported (a task becoming ready triggers one rejoin).
    pub announced_ready: BTreeSet<Tp>,
    /// Tasks given up at a join whose generation has not completed yet (kept across failed
    /// joins: koord's state still names this member their owner until a SyncGroup succeeds).
    pub pending_revoked: BTreeSet<Tp>,
    pub leaving: bool,
}

/// What one join reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinInfo {
    pub owned: BTreeSet<Tp>,
    pub revoked: BTreeSet<Tp>,
    pub learning: BTreeSet<Tp>,
    pub ready: BTreeSet<Tp>,
    pub leaving: bool,
}

/// What one completed generation gave the member, and what it does next.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncOutcome {
    pub assigned: BTreeSet<Tp>,
    pub learning: BTreeSet<Tp>,
    pub marks: BTreeSet<Tp>,
    /// The spec's output `revoked`: what was given up at the join minus what was assigned.
    pub revoked: BTreeSet<Tp>,
    pub probe_ms: i64,
    /// Tasks held at the join that the assignment left out without the member revoking them
    /// (a cooperative revoke: rejoin at once so they can be granted elsewhere).
    pub taken: BTreeSet<Tp>,
    /// Rejoin at once: something was taken, or a learning task is already ready.
    pub rejoin: bool,
    /// Leaving and nothing left to hold or learn: leave the group.
    pub done: bool,
}

impl State {
    pub fn new(mode: Mode, restore: Duration, gate_open: bool) -> State {
        State {
            mode,
            restore,
            gate_open,
            held: BTreeSet::new(),
            marks: BTreeSet::new(),
            learning: BTreeMap::new(),
            announced_ready: BTreeSet::new(),
            pending_revoked: BTreeSet::new(),
            leaving: false,
        }
    }

    /// The member lost its membership (UNKNOWN_MEMBER_ID): it starts again as a new member,
    /// holding and learning nothing.
    pub fn lose_everything(&mut self) {
        self.held.clear();
        self.marks.clear();
        self.learning.clear();
        self.announced_ready.clear();
        self.pending_revoked.clear();
    }

    fn is_ready(&self, since: Instant, now: Instant) -> bool {
        self.gate_open && now.saturating_duration_since(since) >= self.restore
    }

    /// Learning tasks whose restore is done.
    pub fn ready(&self, now: Instant) -> BTreeSet<Tp> {
        self.learning
            .iter()
            .filter(|(_, &since)| self.is_ready(since, now))
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// A learning task became ready since the last join reported readiness: rejoin.
    pub fn newly_ready(&self, now: Instant) -> bool {
        self.ready(now)
            .iter()
            .any(|tp| !self.announced_ready.contains(tp))
    }

    /// When the next learning task becomes ready (none while the gate is closed).
    pub fn next_ready_at(&self) -> Option<Instant> {
        if !self.gate_open {
            return None;
        }
        self.learning
            .iter()
            .filter(|(tp, _)| !self.announced_ready.contains(*tp))
            .map(|(_, &since)| since + self.restore)
            .min()
    }

    /// At a join: in seed mode gives up the marked tasks it holds, then reports what it owns,
    /// gave up (this join and earlier joins of the same, unfinished rebalance), learns and has
    /// ready.
    pub fn prepare_join(&mut self, now: Instant) -> JoinInfo {
        if self.mode == Mode::Seed {
            let give_up: Vec<Tp> = self.held.intersection(&self.marks).cloned().collect();
            for tp in give_up {
                self.held.remove(&tp);
                self.pending_revoked.insert(tp);
            }
        }
        let ready = self.ready(now);
        self.announced_ready = ready.clone();
        JoinInfo {
            owned: self.held.clone(),
            revoked: self.pending_revoked.clone(),
            learning: self.learning.keys().cloned().collect(),
            ready,
            leaving: self.leaving,
        }
    }

    /// After a successful SyncGroup: holds exactly `assigned`, restores the listed learning
    /// tasks (keeping the start time of those it was already restoring), forgets the rest.
    pub fn apply(
        &mut self,
        assigned: BTreeSet<Tp>,
        la: &LearnerAssignment,
        now: Instant,
    ) -> SyncOutcome {
        let learning = to_set(&la.learning);
        let marks = to_set(&la.marks);
        let taken: BTreeSet<Tp> = self.held.difference(&assigned).cloned().collect();
        let revoked: BTreeSet<Tp> = self
            .pending_revoked
            .difference(&assigned)
            .cloned()
            .collect();
        self.pending_revoked.clear();
        self.held = assigned.clone();
        self.marks = marks.clone();
        self.learning.retain(|tp, _| learning.contains(tp));
        for tp in &learning {
            self.learning.entry(tp.clone()).or_insert(now);
        }
        self.announced_ready.retain(|tp| learning.contains(tp));
        let done = self.leaving && self.held.is_empty() && self.learning.is_empty();
        let rejoin = !done && (!taken.is_empty() || self.newly_ready(now));
        SyncOutcome {
            assigned,
            learning,
            marks,
            revoked,
            probe_ms: la.probe_ms,
            taken,
            rejoin,
            done,
        }
    }
}

impl JoinInfo {
    /// The JoinGroup protocol metadata: a `ConsumerProtocolSubscription` whose user data is the
    /// `LearnerSubscription`.
    pub fn metadata(&self, topics: &[String]) -> Bytes {
        let user = LearnerSubscription {
            revoked: to_list(&self.revoked),
            learning: to_list(&self.learning),
            ready: to_list(&self.ready),
            lags: Vec::new(),
            leaving: self.leaving,
        };
        let sub = Subscription {
            version: SUBSCRIPTION_VERSION,
            topics: topics.to_vec(),
            user_data: Some(user.encode()),
            owned_partitions: to_list(&self.owned),
            generation: -1,
            rack: None,
        };
        encode_subscription(&sub, SUBSCRIPTION_VERSION)
    }
}

/// Topic-partition lists sorted by topic, partitions ascending.
pub fn to_list(set: &BTreeSet<Tp>) -> TopicPartitions {
    let mut out: TopicPartitions = Vec::new();
    for (topic, p) in set {
        match out.last_mut() {
            Some((t, ps)) if t == topic => ps.push(*p),
            _ => out.push((topic.clone(), vec![*p])),
        }
    }
    out
}

pub fn to_set(list: &TopicPartitions) -> BTreeSet<Tp> {
    list.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(ps: &[i32]) -> BTreeSet<Tp> {
        ps.iter().map(|&p| ("orders".to_owned(), p)).collect()
    }

    fn la(learning: &[i32], marks: &[i32]) -> LearnerAssignment {
        LearnerAssignment {
            learning: to_list(&tps(learning)),
            marks: to_list(&tps(marks)),
            probe_ms: -1,
        }
    }

    fn state(mode: Mode, restore_ms: u64) -> State {
        State::new(mode, Duration::from_millis(restore_ms), true)
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// learner-vectors.md, "ConsumerProtocolSubscription v1 carrying a LearnerSubscription":
    /// a member holding orders[0,3,5] with orders-0 marked gives it up at its join.
    #[test]
    fn join_metadata_is_the_spec_vector() {
        let mut s = state(Mode::Seed, 0);
        let now = Instant::now();
        s.apply(tps(&[0, 3, 5]), &la(&[], &[0]), now);
        let info = s.prepare_join(now);
        assert_eq!(info.owned, tps(&[3, 5]));
        assert_eq!(info.revoked, tps(&[0]));
        assert_eq!(
            info.metadata(&["orders".to_owned()]).as_ref(),
            hex("00010000000100066f72646572730000002300000000000100066f72646572730000000100000000000000000000000000000000000000000100066f7264657273000000020000000300000005").as_slice()
        );
    }

    /// S1 of the seed trace: marked T1 in R1, gives it up at R2's join and gets it back (revoked
    /// output empty), gives it up again at R3's join and loses it (revoked [T1]).
    #[test]
    fn seed_owner_gives_up_marks_at_every_join() {
        let mut s = state(Mode::Seed, 0);
        let t = Instant::now();
        let r0 = s.apply(tps(&[0, 1]), &la(&[], &[]), t);
        assert!(!r0.rejoin && r0.revoked.is_empty());
        assert_eq!(s.prepare_join(t).revoked, tps(&[]));
        let r1 = s.apply(tps(&[0, 1]), &la(&[], &[0]), t);
        assert_eq!(r1.marks, tps(&[0]));
        let j2 = s.prepare_join(t);
        assert_eq!((j2.owned, j2.revoked), (tps(&[1]), tps(&[0])));
        let r2 = s.apply(tps(&[0, 1]), &la(&[], &[0]), t);
        assert!(r2.revoked.is_empty() && !r2.rejoin && r2.taken.is_empty());
        let j3 = s.prepare_join(t);
        assert_eq!(j3.revoked, tps(&[0]));
        let r3 = s.apply(tps(&[1]), &la(&[], &[]), t);
        assert_eq!(r3.revoked, tps(&[0]));
        assert!(
            !r3.rejoin,
            "a task it gave up itself is no cooperative revoke"
        );
    }

    #[test]
    fn given_up_tasks_survive_a_failed_join() {
        let mut s = state(Mode::Seed, 0);
        let t = Instant::now();
        s.apply(tps(&[0, 1]), &la(&[], &[0]), t);
        s.prepare_join(t);
        // SyncGroup said REBALANCE_IN_PROGRESS: join again.
        let again = s.prepare_join(t);
        assert_eq!((again.owned, again.revoked), (tps(&[1]), tps(&[0])));
    }

    #[test]
    fn ready_gated_owner_keeps_marks_and_rejoins_on_a_cooperative_revoke() {
        let mut s = state(Mode::ReadyGated, 0);
        let t = Instant::now();
        s.apply(tps(&[0, 1]), &la(&[], &[0]), t);
        let j = s.prepare_join(t);
        assert_eq!((j.owned, j.revoked), (tps(&[0, 1]), tps(&[])));
        let r = s.apply(tps(&[1]), &la(&[], &[]), t);
        assert_eq!(r.taken, tps(&[0]));
        assert!(r.rejoin && r.revoked.is_empty());
        assert_eq!(s.prepare_join(t).owned, tps(&[1]));
    }

    #[test]
    fn learner_restores_from_first_receipt_and_rejoins_once_when_ready() {
        let mut s = state(Mode::Seed, 3000);
        let t0 = Instant::now();
        s.prepare_join(t0);
        let r1 = s.apply(tps(&[]), &la(&[0], &[]), t0);
        assert!(!r1.rejoin);
        assert_eq!(s.next_ready_at(), Some(t0 + Duration::from_millis(3000)));
        // Still learning in the next generation: the clock keeps running from t0.
        let t1 = t0 + Duration::from_millis(1000);
        let j = s.prepare_join(t1);
        assert_eq!((j.learning.clone(), j.ready.clone()), (tps(&[0]), tps(&[])));
        s.apply(tps(&[]), &la(&[0], &[]), t1);
        let t2 = t0 + Duration::from_millis(3000);
        assert!(!s.newly_ready(t1) && s.newly_ready(t2));
        let j = s.prepare_join(t2);
        assert_eq!(j.ready, tps(&[0]));
        assert!(!s.newly_ready(t2), "reported once");
        assert_eq!(s.next_ready_at(), None);
        // Still learning (ready-gated revoke first): no second rejoin for the same task.
        let r = s.apply(tps(&[]), &la(&[0], &[]), t2);
        assert!(!r.rejoin);
        assert_eq!(s.prepare_join(t2).ready, tps(&[0]));
        // Granted: held, no longer learning.
        let r = s.apply(tps(&[0]), &la(&[], &[]), t2);
        assert!(!r.rejoin && s.learning.is_empty() && r.assigned == tps(&[0]));
    }

    #[test]
    fn a_dropped_learning_task_restarts_its_clock_when_listed_again() {
        let mut s = state(Mode::Seed, 1000);
        let t0 = Instant::now();
        s.apply(tps(&[]), &la(&[2], &[]), t0);
        let t1 = t0 + Duration::from_millis(600);
        s.apply(tps(&[]), &la(&[], &[]), t1);
        assert!(s.learning.is_empty());
        s.apply(tps(&[]), &la(&[2], &[]), t1);
        assert!(!s.newly_ready(t0 + Duration::from_millis(1000)));
        assert!(s.newly_ready(t1 + Duration::from_millis(1000)));
    }

    #[test]
    fn gate_holds_readiness() {
        let mut s = state(Mode::Seed, 0);
        s.gate_open = false;
        let t = Instant::now();
        s.apply(tps(&[]), &la(&[1], &[]), t);
        assert!(!s.newly_ready(t) && s.next_ready_at().is_none());
        s.gate_open = true;
        assert!(s.newly_ready(t));
    }

    #[test]
    fn restore_zero_rejoins_right_after_the_sync() {
        let mut s = state(Mode::Seed, 0);
        let t = Instant::now();
        let r = s.apply(tps(&[]), &la(&[4], &[]), t);
        assert!(r.rejoin);
    }

    #[test]
    fn leaving_member_is_done_once_it_holds_and_learns_nothing() {
        let mut s = state(Mode::Seed, 0);
        let t = Instant::now();
        s.apply(tps(&[0]), &la(&[], &[0]), t);
        s.leaving = true;
        let j = s.prepare_join(t);
        assert!(j.leaving && j.owned.is_empty());
        let r = s.apply(tps(&[]), &la(&[], &[]), t);
        assert!(r.done && !r.rejoin && r.revoked == tps(&[0]));
    }

    #[test]
    fn lists_group_by_topic() {
        let set: BTreeSet<Tp> = [
            ("a".to_owned(), 2),
            ("b".to_owned(), 0),
            ("a".to_owned(), 1),
        ]
        .into_iter()
        .collect();
        let list = to_list(&set);
        assert_eq!(
            list,
            vec![("a".to_owned(), vec![1, 2]), ("b".to_owned(), vec![0])]
        );
        assert_eq!(to_set(&list), set);
    }
}
