//! The deterministic algorithm of learner-spec.md 6.5, over an interned [`GroupSpec`].
//!
//! Tasks are the spec's partitions in (topic index, partition) order; topic indices are in name
//! order, so this is the spec's total order of tasks. Members are in Kafka's `MemberInfo` order
//! (dynamic members by member id): "the first member" is the first in that order. Every step is
//! a pass over dense per-task vectors; the searches for "the first member with P < Q" move
//! forward only, because receivers' loads only grow and donors' loads never fall below a
//! receiver's bound.

use std::collections::HashMap;
use std::sync::Arc;

use super::state::{Cold, Learner, Names, State};
use super::{Settings, TaskEvent, TaskEventKind};
use crate::assignor::{Assignment, GroupSpec, Partition, TopicIndex};
use crate::vocab::{MemberId, Timestamp};

/// No member (a task without owner, a slot without learner); S's `NO_MEMBER`, so the plan's
/// owner vector becomes S's as it is.
const NONE: u32 = super::state::NO_MEMBER;
/// Declared by two different members.
const MANY: u32 = u32::MAX - 1;
/// Orphans placed beyond this many in one plan are not told one by one (a fresh group of
/// 100,000 tasks would log each).
const ORPHAN_EVENTS: usize = 32;

/// Task flags: held back from its owner's assignment this generation (I1).
const WITHHELD: u8 = 1;
/// Task flags: someone learns it.
const MARKED: u8 = 2;
/// Task flags: its owner (in the owner vector) is cold for it (step 3a).
const COLD: u8 = 4;
/// Task flags: moved by step 3a in this plan (its new owner is cold for it since now).
const MOVED: u8 = 8;

/// What one live member brings to a rebalance, besides its subscription (in the spec).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LearnerInput {
    /// Speaks the learner protocol (reports readiness, reads marks); otherwise an unmodified
    /// client, whose learners are ready `learner.warmup.ms` after they were planned.
    pub capable: bool,
    /// What the member says it holds now (`ownedPartitions`): I1 never grants a task while
    /// another member holds it.
    pub declared: Vec<Partition>,
    /// Tasks it gave up at this join because they were being learned.
    pub revoked: Vec<Partition>,
    /// Learning tasks it reports restored.
    pub ready: Vec<Partition>,
    /// Reported lags of learning tasks.
    pub lags: Vec<(Partition, i64)>,
    /// It asked to leave: drain it.
    pub leaving: bool,
}

/// The result of one rebalance, by member index of the spec (flat lists, one span per member,
/// as uniform returns them: a plan for 10,000 members is not 40,000 vectors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Active tasks granted this generation, sorted.
    pub assigned: Assignment,
    /// Tasks to restore, sorted.
    pub learning: Assignment,
    /// Assigned tasks that someone is learning, sorted.
    pub marks: Assignment,
    /// Confirmed give-ups: `revokedAtJoin − assigned`, sorted.
    pub revoked: Assignment,
    /// The coordinator state S after this rebalance.
    pub state: State,
    /// When koord must start a rebalance by itself (a warm-up ends, a scale-down deadline
    /// passes, the probe interval elapses), if learners or leavers remain.
    pub follow_up: Option<Timestamp>,
    /// `now + learner.probe.interval.ms` while learners remain whose readiness is not pushed
    /// (learners on unmodified members).
    pub probe: Option<Timestamp>,
    /// What changed and why, in task order (for the generation's log line and for tests).
    pub events: Vec<TaskEvent>,
}

/// One learner slot of S, interned.
#[derive(Debug, Clone, Copy)]
struct Slot {
    task: usize,
    member: u32,
    planned: Timestamp,
}

struct Plane<'a> {
    spec: &'a GroupSpec,
    inputs: &'a [LearnerInput],
    settings: &'a Settings,
    now: Timestamp,
    /// First dense task index of each topic.
    offset: Vec<usize>,
    /// Member indices in order.
    order: Vec<usize>,
    /// Not leaving (the set N of the spec).
    in_n: Vec<bool>,
    /// Leaving and past its deadline: counts as departed.
    gone: Vec<bool>,
    leaving_since: Vec<Option<Timestamp>>,
    /// Each member's subscription, as an index into the distinct subscriptions.
    sub_of: Vec<u32>,
    /// The distinct subscriptions' topics.
    sub_lists: Vec<&'a [TopicIndex]>,
    /// The distinct subscriptions as bit sets of `words` words each.
    sub_bits: Vec<u64>,
    words: usize,
    /// The single member declaring each task, NONE, or MANY; empty when nobody declares.
    declared: Vec<u32>,
    owner: Vec<u32>,
    /// WITHHELD, MARKED, COLD and MOVED, per task.
    flags: Vec<u8>,
    /// When a cold owner started restoring, for the COLD tasks whose owner did not start now
    /// (carried over from S, or a learner promoted before it was ready), in no order; the last
    /// entry of a task wins. Empty with `learner.warmup.ms=0`.
    cold_since: Vec<(u32, Timestamp)>,
    /// Some task is COLD.
    cold_any: bool,
    /// Step 3a moved a task (a fresh group's deal no longer is the assignment).
    moved_cold: bool,
    load: Vec<i64>,
    slots: Vec<Slot>,
    events: Vec<TaskEvent>,
    /// S's member ids and topic names, where they begin this spec's (S's tables then start
    /// as copies of them).
    same_members: Option<&'a Names>,
    same_topics: Option<&'a Names>,
}

impl Plane<'_> {
    /// The number of tasks.
    fn n(&self) -> usize {
        self.flags.len()
    }

    fn partition(&self, task: usize) -> Partition {
        // The last topic whose offset is at or before `task`.
        let topic = self.offset.partition_point(|&o| o <= task) - 1;
        Partition::new(topic as TopicIndex, (task - self.offset[topic]) as u32)
    }

    fn task(&self, p: Partition) -> Option<usize> {
        let topic = self.spec.topics.get(p.topic as usize)?;
        (p.partition < topic.partitions)
            .then(|| self.offset[p.topic as usize] + p.partition as usize)
    }

    fn subscribed(&self, member: u32, task: usize) -> bool {
        self.subscribes(member, self.partition(task).topic as usize)
    }

    fn subscribes(&self, member: u32, topic: usize) -> bool {
        let word = self.sub_of[member as usize] as usize * self.words + topic / 64;
        self.sub_bits[word] >> (topic % 64) & 1 != 0
    }

    /// Whether `a` and `b` subscribe to a topic in common (if not, `a` holds no task `b` may
    /// take: every task's owner subscribes to it).
    fn share_a_topic(&self, a: usize, b: usize) -> bool {
        let (sa, sb) = (self.sub_of[a] as usize, self.sub_of[b] as usize);
        let words = self.words;
        sa == sb
            || self.sub_bits[sa * words..(sa + 1) * words]
                .iter()
                .zip(&self.sub_bits[sb * words..(sb + 1) * words])
                .any(|(x, y)| x & y != 0)
    }

    /// Someone other than `member` still holds `task`.
    fn held_by_other(&self, task: usize, member: u32) -> bool {
        self.declared
            .get(task)
            .is_some_and(|&d| d != NONE && d != member)
    }

    /// Step 3a: the task's owner is cold for it.
    fn cold(&self, task: usize) -> bool {
        self.flags[task] & COLD != 0
    }

    /// Whether owners can be cold at all (`learner.warmup.ms > 0`).
    fn colds(&self) -> bool {
        self.settings.warmup_ms > 0
    }

    /// Marks `tasks` as just given cold to their owner (an orphan or a first assignment).
    fn given_cold(&mut self, tasks: std::ops::Range<usize>) {
        if self.colds() && !tasks.is_empty() {
            for f in &mut self.flags[tasks] {
                *f |= COLD;
            }
            self.cold_any = true;
        }
    }

    fn marked(&self, task: usize) -> bool {
        self.flags[task] & MARKED != 0
    }

    fn withheld(&self, task: usize) -> bool {
        self.flags[task] & WITHHELD != 0
    }

    fn ready(&self, slot: &Slot) -> bool {
        let input = &self.inputs[slot.member as usize];
        if !input.capable {
            return self.now >= slot.planned.plus_ms(self.settings.warmup_ms);
        }
        let p = self.partition(slot.task);
        input.ready.contains(&p)
            || input.lags.iter().any(|&(q, lag)| {
                q == p && (0..=self.settings.acceptable_recovery_lag).contains(&lag)
            })
    }

    fn event(&mut self, task: usize, kind: TaskEventKind) {
        let partition = self.partition(task);
        self.events.push(TaskEvent { partition, kind });
    }

    fn member_id(&self, m: u32) -> MemberId {
        self.spec.members[m as usize].member_id.clone()
    }
}

/// Runs steps 1 to 6 of learner-spec.md 6.5 (standbys, step 5, are out of scope), with step
/// 3a: a task whose owner is cold for it moves directly in step 4, without a learner and
/// outside the budget (see the module docs of [`super`]).
///
/// `inputs` is parallel to `spec.members`; `prev` is S as the last rebalance left it.
pub fn plan(
    spec: &GroupSpec,
    inputs: &[LearnerInput],
    prev: &State,
    settings: &Settings,
    now: Timestamp,
) -> Plan {
    plan_with(spec, inputs, prev, settings, now, true)
}

/// [`plan`], where `deal_fresh` says whether a fresh group of one subscription takes the
/// shortcut of [`deal`] (tests compare both ways).
pub(super) fn plan_with(
    spec: &GroupSpec,
    inputs: &[LearnerInput],
    prev: &State,
    settings: &Settings,
    now: Timestamp,
    deal_fresh: bool,
) -> Plan {
    let members = spec.members.len();
    assert_eq!(inputs.len(), members, "one input per member");
    let mut n = 0usize;
    let offset: Vec<usize> = spec
        .topics
        .iter()
        .map(|t| {
            n += t.partitions as usize;
            n - t.partitions as usize
        })
        .collect();

    // Membership: who is live, leaving, past its deadline. S names members by their index in
    // the last spec, usually this spec's index too (members keep their places, joiners come
    // last): only members found elsewhere are looked up by id.
    let aligned = |i: usize, id: &str| {
        spec.members
            .get(i)
            .is_some_and(|m| m.member_id.as_str() == id)
    };
    let same_members = prev
        .members
        .iter()
        .enumerate()
        .all(|(i, id)| aligned(i, id));
    let from_prev: Vec<u32> = if same_members {
        (0..prev.members.len() as u32).collect()
    } else {
        let live: HashMap<&str, u32> = spec
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| (m.member_id.as_str(), i as u32))
            .collect();
        prev.members
            .iter()
            .map(|id| live.get(id).copied().unwrap_or(NONE))
            .collect()
    };
    // One pass over the inputs: who leaves, and whether anyone declares or revokes anything
    // (a fresh group does neither, and skips what needs it).
    let mut leaving_since = vec![None; members];
    let (mut any_declared, mut any_revoked) = (false, false);
    for (since, input) in leaving_since.iter_mut().zip(inputs) {
        if input.leaving {
            *since = Some(now);
        }
        any_declared |= !input.declared.is_empty();
        any_revoked |= !input.revoked.is_empty();
    }
    for &(m, since) in &prev.leaving {
        if let Some(&i) = from_prev.get(m as usize) {
            if i != NONE && inputs[i as usize].leaving {
                leaving_since[i as usize] = Some(since);
            }
        }
    }
    let gone: Vec<bool> = leaving_since
        .iter()
        .map(|since| {
            since.is_some_and(|s| {
                settings
                    .scale_down_timeout_ms
                    .is_some_and(|timeout| now >= s.plus_ms(timeout))
            })
        })
        .collect();
    let in_n: Vec<bool> = leaving_since.iter().map(Option::is_none).collect();

    // Subscriptions, deduplicated (members with the same subscription usually share it) and
    // as bit sets, so that "does m subscribe to this task's topic" is one load.
    let topics = spec.topics.len();
    let words = topics.div_ceil(64).max(1);
    let mut sub_of = Vec::with_capacity(members);
    let mut sub_lists: Vec<&[TopicIndex]> = Vec::new();
    let mut sub_bits: Vec<u64> = Vec::new();
    // Looked up in a list while there are few (no hashing of a 1000-topic subscription), in
    // a map past that (the heterogeneous properties reach both).
    const FEW: usize = 4;
    let mut distinct: HashMap<&[TopicIndex], u32> = HashMap::new();
    for (i, m) in spec.members.iter().enumerate() {
        if i > 0 && Arc::ptr_eq(&m.subscription, &spec.members[i - 1].subscription) {
            sub_of.push(sub_of[i - 1]);
            continue;
        }
        let subscription: &[TopicIndex] = &m.subscription;
        let next = sub_lists.len() as u32;
        let id = if sub_lists.len() < FEW {
            let found = sub_lists.iter().position(|&s| s == subscription);
            found.map_or(next, |id| id as u32)
        } else {
            if distinct.is_empty() {
                distinct.extend(sub_lists.iter().enumerate().map(|(id, &s)| (s, id as u32)));
            }
            *distinct.entry(subscription).or_insert(next)
        };
        if id == next {
            sub_lists.push(subscription);
            sub_bits.resize(sub_bits.len() + words, 0);
            let bits = &mut sub_bits[id as usize * words..];
            // A word at a time (subscriptions are usually sorted).
            let (mut word, mut acc) = (0usize, 0u64);
            for t in subscription
                .iter()
                .map(|&t| t as usize)
                .filter(|&t| t < topics)
            {
                if t / 64 != word {
                    bits[word] |= acc;
                    (word, acc) = (t / 64, 0);
                }
                acc |= 1 << (t % 64);
            }
            bits[word] |= acc;
        }
        sub_of.push(id);
    }

    // A fresh group (S holds no task, nobody declares any) of one subscription: step 2 places
    // every task, and that is a deal in member order.
    let fresh = deal_fresh
        && !any_declared
        && prev.owners.is_empty()
        && prev.learners.is_empty()
        && sub_lists.len() == 1;

    // Who declares each task, if anyone declares anything (a fresh group declares nothing).
    let mut declared = Vec::new();
    if any_declared {
        declared = vec![NONE; n];
    }
    let mut plane = Plane {
        spec,
        inputs,
        settings,
        now,
        offset,
        order: spec.member_order(),
        in_n,
        gone,
        leaving_since,
        sub_of,
        sub_lists,
        sub_bits,
        words,
        declared,
        // A fresh group's is written by `deal`, in order.
        owner: if fresh {
            Vec::with_capacity(n)
        } else {
            vec![NONE; n]
        },
        flags: vec![0; n],
        cold_since: Vec::new(),
        cold_any: false,
        moved_cold: false,
        load: vec![0; members],
        slots: Vec::new(),
        events: Vec::new(),
        same_members: same_members.then_some(&prev.members),
        same_topics: None,
    };
    for (i, input) in inputs.iter().enumerate().filter(|_| any_declared) {
        // A member's list is mostly runs of one topic: its offset and size are looked up once
        // per run.
        let (mut topic, mut first, mut size) = (TopicIndex::MAX, 0usize, 0u32);
        for &p in &input.declared {
            if p.topic != topic {
                let Some(t) = spec.topics.get(p.topic as usize) else {
                    continue;
                };
                (topic, first, size) = (p.topic, plane.offset[p.topic as usize], t.partitions);
            }
            if p.partition < size {
                let d = &mut plane.declared[first + p.partition as usize];
                if *d == NONE {
                    *d = i as u32;
                } else if *d != i as u32 {
                    *d = MANY;
                }
            }
        }
    }

    let receivers = plane.order.iter().filter(|&&m| plane.in_n[m]).count();
    // q and Q; with nobody to receive, no member can be below or above them.
    let q = n.checked_div(receivers).unwrap_or(0) as i64;
    let big_q = if receivers == 0 {
        0
    } else {
        n.div_ceil(receivers) as i64
    };

    let dealt = if fresh {
        Some(deal(&mut plane, big_q))
    } else {
        sticky(&mut plane, prev, &from_prev, big_q);
        None
    };

    // Step 4: new learners within the budget, and (3a) tasks of cold owners moved directly,
    // outside it.
    let mut budget = settings.max_learners.saturating_sub(plane.slots.len());
    let work = (budget > 0 || plane.cold_any)
        && plane.order.iter().any(|&m| {
            let load = plane.load[m];
            !plane.in_n[m] || load < q || load > big_q
        });
    let mut owned = Owned::default();
    // (a) drain leaving members, (b) fill members below q, then (c) shave members above Q;
    // again while step 3a moved a task or a learner was added (each lowers the loads'
    // spread, and a drain's receiver may be below Q again after a fill), so that the plan is
    // settled: planned again at once, it moves nothing more.
    let leavers: Vec<usize> = plane
        .order
        .iter()
        .copied()
        .filter(|&m| !plane.in_n[m] && !plane.gone[m])
        .collect();
    let mut skipped = vec![false; if work { members } else { 0 }];
    loop {
        let mut progress = false;
        'drain: for &d in leavers.iter().filter(|_| work) {
            for task in owned.of(&plane, d) {
                let task = task as usize;
                if plane.marked(task) || plane.owner[task] != d as u32 {
                    continue;
                }
                let cold = plane.cold(task);
                if budget == 0 && !cold {
                    if !plane.cold_any {
                        break 'drain;
                    }
                    continue;
                }
                let receiver = plane.order.iter().copied().find(|&r| {
                    plane.in_n[r] && plane.load[r] < big_q && plane.subscribed(r as u32, task)
                });
                if let Some(r) = receiver {
                    if cold {
                        move_cold(&mut plane, &mut owned, task, d, r, "owner cold, drain");
                    } else {
                        add_learner(&mut plane, task, d, r, "drain");
                        budget -= 1;
                    }
                    progress = true;
                }
            }
        }
        skipped.fill(false);
        while (budget > 0 || plane.cold_any) && work {
            let Some(r) = plane
                .order
                .iter()
                .copied()
                .find(|&r| plane.in_n[r] && !skipped[r] && plane.load[r] < q)
            else {
                break;
            };
            let donor = find_donor(&plane, &mut owned, r, big_q, budget)
                .or_else(|| find_donor(&plane, &mut owned, r, q, budget));
            match donor {
                Some((d, task)) if plane.cold(task) => {
                    move_cold(&mut plane, &mut owned, task, d, r, "owner cold, fill");
                    progress = true;
                }
                Some((d, task)) => {
                    add_learner(&mut plane, task, d, r, "fill");
                    budget -= 1;
                    progress = true;
                }
                None => skipped[r] = true,
            }
        }
        skipped.fill(false);
        while (budget > 0 || plane.cold_any) && work {
            let Some(d) = plane
                .order
                .iter()
                .copied()
                .find(|&d| plane.in_n[d] && !skipped[d] && plane.load[d] > big_q)
            else {
                break;
            };
            let tasks = owned.of(&plane, d);
            let found = plane
                .order
                .iter()
                .copied()
                .filter(|&r| plane.in_n[r] && plane.load[r] < big_q && plane.share_a_topic(d, r))
                .find_map(|r| pick(&plane, &tasks, r, budget).map(|task| (r, task)));
            match found {
                Some((r, task)) if plane.cold(task) => {
                    move_cold(&mut plane, &mut owned, task, d, r, "owner cold, shave");
                    progress = true;
                }
                Some((r, task)) => {
                    add_learner(&mut plane, task, d, r, "shave");
                    budget -= 1;
                    progress = true;
                }
                None => skipped[d] = true,
            }
        }
        // Without cold owners one pass is step 4 as written (its moves are learners, and a
        // second pass would find the loads where the first left them).
        if !progress || !plane.cold_any {
            break;
        }
    }

    emit(plane, any_revoked, dealt)
}

/// Steps 1 to 3: learners resolved, every other task stays with its owner in S, orphans
/// placed; leaves the owner vector, the flags, the learner slots and the loads.
fn sticky<'a>(plane: &mut Plane<'a>, prev: &'a State, from_prev: &[u32], big_q: i64) {
    let n = plane.owner.len();
    // S, interned: each task's previous owner (a live member that may keep it; step 3 keeps
    // it unless step 1 decides otherwise) and the learner slots.
    let (prev_slots, kept_any) = intern_state(plane, prev, from_prev);
    // Whether any task has an owner after step 1 (else loads are all learners', and every
    // task is an orphan).
    let owned_any = kept_any || !prev_slots.is_empty();

    // Step 1: resolve learners, in task order.
    for slot in prev_slots {
        let task = slot.task;
        let o = plane.owner[task];
        let l = slot.member;
        let drop_why = if l == NONE {
            Some("learner departed")
        } else if !plane.in_n[l as usize] {
            Some("learner is leaving")
        } else if !plane.subscribed(l, task) {
            Some("learner unsubscribed")
        } else if l == o {
            Some("learner owns the task")
        } else {
            None
        };
        if let Some(why) = drop_why {
            plane.event(task, TaskEventKind::LearnerDropped { why });
            continue;
        }
        let why = if o == NONE {
            Some("owner gone")
        } else if plane.ready(&slot) {
            Some("learner ready")
        } else {
            None
        };
        match why {
            Some(why) if plane.held_by_other(task, l) => {
                // I1: the holder gives it up first; the learner keeps learning meanwhile.
                // Meanwhile S names no owner if the owner is gone (not the learner: I3) or
                // leaving (it gives the task up for good: should the learner vanish, the
                // task is an orphan, never handed back to a leaver that no longer holds it,
                // I8); step 2 leaves such a task to its learner.
                plane.owner[task] = if o != NONE && plane.in_n[o as usize] {
                    o
                } else {
                    NONE
                };
                plane.flags[task] |= WITHHELD | MARKED;
                plane.slots.push(slot);
                let holder = plane.declared[task];
                let from = (holder != MANY).then(|| plane.member_id(holder));
                plane.event(
                    task,
                    TaskEventKind::Revoking {
                        from,
                        to: plane.member_id(l),
                        why,
                    },
                );
            }
            Some(why) => {
                plane.owner[task] = l;
                // Through a ready learner: warm at once. Promoted before it was ready (its
                // owner is gone): cold until its warm-up would have ended.
                plane.flags[task] &= !COLD;
                let warm_at = slot.planned.plus_ms(plane.settings.warmup_ms);
                if plane.colds() && why == "owner gone" && warm_at > plane.now {
                    plane.flags[task] |= COLD;
                    plane.cold_any = true;
                    plane.cold_since.push((task as u32, slot.planned));
                }
                let from = (o != NONE).then(|| plane.member_id(o));
                plane.event(
                    task,
                    TaskEventKind::Moved {
                        from,
                        to: plane.member_id(l),
                        why,
                    },
                );
            }
            None => {
                // Not ready: back to its owner (it still is), learner kept (no half-way
                // bounce).
                plane.flags[task] |= MARKED;
                plane.slots.push(slot);
            }
        }
    }

    // Step 3 came first (every other task stays with its owner), so that orphans see every
    // sticky load.
    // Whether step 2 has work: a task without owner that is not withheld.
    let mut any_open = !owned_any && n > 0;
    if owned_any {
        // Counted by runs (sticky tasks mostly come in runs of one owner).
        let (mut run, mut count) = (NONE, 0i64);
        for (&o, &flags) in plane.owner.iter().zip(&plane.flags) {
            any_open |= o == NONE && flags & WITHHELD == 0;
            if o != run {
                if run != NONE {
                    plane.load[run as usize] += count;
                }
                (run, count) = (o, 0);
            }
            count += 1 - i64::from(flags & MARKED != 0);
        }
        if run != NONE {
            plane.load[run as usize] += count;
        }
    }
    for s in &plane.slots {
        plane.load[s.member as usize] += 1;
    }

    // Step 2: orphans, to the first member of N with P < Q (cold restore).
    if any_open {
        orphans(plane, big_q);
    }
}

/// Fills the owner vector from S (members mapped to this spec's indices by `from_prev`) and
/// returns S's learner slots in task order, and whether any task kept its owner. An owner keeps a task only while live, within its
/// deadline and subscribed; tasks of topics or partitions the spec no longer has are gone.
fn intern_state<'a>(
    plane: &mut Plane<'a>,
    prev: &'a State,
    from_prev: &[u32],
) -> (Vec<Slot>, bool) {
    let spec = plane.spec;
    let keeps: Vec<u32> = from_prev
        .iter()
        .map(|&i| {
            if i != NONE && !plane.gone[i as usize] {
                i
            } else {
                NONE
            }
        })
        .collect();
    // S's topics are usually the spec's, in the same places (`same` of them).
    let mut by_name: Option<HashMap<&str, usize>> = None;
    let mut same = 0usize;
    let mut slots = Vec::with_capacity(prev.learners.len());
    let mut kept = false;
    let mut learners = prev.learners.iter().peekable();
    let mut cold = prev.cold.iter().peekable();
    let mut end = 0usize;
    for (i, (name, &partitions)) in prev.topics.iter().zip(&prev.partitions).enumerate() {
        let first = end;
        end += partitions as usize;
        let t = if spec.topics.get(i).is_some_and(|t| *t.name == *name) {
            same += 1;
            Some(i)
        } else {
            let by_name = by_name.get_or_insert_with(|| {
                spec.topics
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (&*t.name, i))
                    .collect()
            });
            by_name.get(name).copied()
        };
        let shared = t.map_or(0, |t| partitions.min(spec.topics[t].partitions) as usize);
        while let Some(l) = learners.next_if(|l| (l.task as usize) < end) {
            let (Some(t), Some(p)) = (t, (l.task as usize).checked_sub(first)) else {
                continue;
            };
            if p < shared {
                slots.push(Slot {
                    task: plane.offset[t] + p,
                    member: from_prev.get(l.member as usize).copied().unwrap_or(NONE),
                    planned: l.planned,
                });
            }
        }
        let (Some(t), Some(src)) = (t, prev.owners.get(first..first + shared)) else {
            continue;
        };
        let (sub_of, sub_bits, words) = (&plane.sub_of, &plane.sub_bits, plane.words);
        let (word, bit) = (t / 64, t % 64);
        let dst = &mut plane.owner[plane.offset[t]..plane.offset[t] + shared];
        // Decided once per run of one owner (S's owners mostly come in runs).
        let (mut last, mut keep) = (NONE, NONE);
        for (d, &o) in dst.iter_mut().zip(src) {
            if o != last {
                last = o;
                keep = keeps.get(o as usize).copied().unwrap_or(NONE);
                if keep != NONE
                    && sub_bits[sub_of[keep as usize] as usize * words + word] >> bit & 1 == 0
                {
                    keep = NONE;
                }
                kept |= keep != NONE;
            }
            *d = keep;
        }
        // S's cold members of this topic's tasks, while still cold: owners that keep their
        // task, and the receivers of step 3a's moves that waited for the holder to give the
        // task up (S names no owner meanwhile), unless they left N or unsubscribed (I8).
        if plane.settings.warmup_ms > 0 {
            let dst = plane.offset[t];
            // (Entries of earlier topics that the spec no longer has are skipped here.)
            while let Some(c) = cold.next_if(|c| (c.task as usize) < end) {
                let Some(p) = (c.task as usize).checked_sub(first) else {
                    continue;
                };
                let m = keeps.get(c.member as usize).copied().unwrap_or(NONE);
                let warm_at = c.since.plus_ms(plane.settings.warmup_ms);
                if p >= shared || m == NONE || warm_at <= plane.now {
                    continue;
                }
                let owner = plane.owner[dst + p];
                let pending = owner == NONE
                    && src[p] == NONE
                    && plane.in_n[m as usize]
                    && plane.subscribes(m, t);
                if pending && !plane.held_by_other(dst + p, m) {
                    // The holder gave it up: granted now (the log says so; S named no owner).
                    let to = plane.member_id(m);
                    plane.event(
                        dst + p,
                        TaskEventKind::Moved {
                            from: None,
                            to,
                            why: "given up by its cold owner",
                        },
                    );
                }
                if owner == m || pending {
                    plane.owner[dst + p] = m;
                    plane.flags[dst + p] |= COLD;
                    plane.cold_any = true;
                    plane.cold_since.push(((dst + p) as u32, c.since));
                    kept = true;
                }
            }
        }
    }
    slots.sort_by_key(|s| s.task);
    if same == prev.topics.len() {
        plane.same_topics = Some(&prev.topics);
    }
    (slots, kept)
}

/// Step 2: each task without owner goes to the first member of N with P < Q subscribed to it,
/// else to the least loaded subscriber in N (the first of those), else stays unassigned.
///
/// Members of N are grouped by subscription, each group in order with a cursor at its first
/// member below Q (loads only grow here, so cursors only move forward); a task's candidates
/// are the cursors of the groups subscribed to its topic, the first in order wins.
fn orphans(plane: &mut Plane<'_>, big_q: i64) {
    let spec = plane.spec;
    let open = |plane: &Plane<'_>, t: usize| plane.owner[t] == NONE && !plane.withheld(t);
    let mut rank = vec![0u32; spec.members.len()];
    let mut groups: Vec<Vec<u32>> = vec![Vec::new(); plane.sub_lists.len()];
    for (r, &m) in plane.order.iter().enumerate() {
        rank[m] = r as u32;
        if plane.in_n[m] {
            groups[plane.sub_of[m] as usize].push(m as u32);
        }
    }
    // The groups subscribed to each topic, flat: topic t's are `of[start[t]..start[t + 1]]`.
    let topics = spec.topics.len();
    let (sub_lists, groups_ref) = (&plane.sub_lists, &groups);
    let subscribed = |g: usize| {
        let live = !groups_ref[g].is_empty();
        sub_lists[g]
            .iter()
            .map(|&t| t as usize)
            .filter(move |&t| live && t < topics)
    };
    let mut start = vec![0usize; topics + 1];
    for g in 0..groups.len() {
        for t in subscribed(g) {
            start[t + 1] += 1;
        }
    }
    for t in 0..topics {
        start[t + 1] += start[t];
    }
    let mut next = start.clone();
    let mut of = vec![0u32; start[topics]];
    for g in 0..groups.len() {
        for t in subscribed(g) {
            of[next[t]] = g as u32;
            next[t] += 1;
        }
    }
    let mut cursor = vec![0usize; groups.len()];
    let mut placed = 0usize;
    for topic in 0..topics {
        let of_topic = &of[start[topic]..start[topic + 1]];
        let end = plane.offset[topic] + spec.topics[topic].partitions as usize;
        let mut task = plane.offset[topic];
        while task < end {
            if !open(plane, task) {
                task += 1;
                continue;
            }
            // The run's end: whole blocks of open tasks at a time (a fresh group's tasks are
            // all open), then task by task.
            const BLOCK: usize = 64;
            let mut run = task + 1;
            while run + BLOCK <= end
                && plane.owner[run..run + BLOCK]
                    .iter()
                    .zip(&plane.flags[run..run + BLOCK])
                    .fold(true, |all, (&o, &f)| {
                        all & (o == NONE) & (f & WITHHELD == 0)
                    })
            {
                run += BLOCK;
            }
            while run < end && open(plane, run) {
                run += 1;
            }
            // The open tasks task..run, member by member: a member below Q stays the first
            // below Q (nobody else's load changes) until it reaches Q, so it takes that many
            // at once; the least loaded one (nobody below Q) takes one at a time.
            while task < run {
                let mut best: Option<u32> = None;
                for &g in of_topic {
                    let list = &groups[g as usize];
                    let c = &mut cursor[g as usize];
                    while *c < list.len() && plane.load[list[*c] as usize] >= big_q {
                        *c += 1;
                    }
                    if let Some(&m) = list.get(*c) {
                        if best.is_none_or(|b| rank[m as usize] < rank[b as usize]) {
                            best = Some(m);
                        }
                    }
                }
                let (m, take) = match best {
                    Some(m) => (
                        m,
                        ((big_q - plane.load[m as usize]) as usize).min(run - task),
                    ),
                    None => {
                        let least = of_topic
                            .iter()
                            .flat_map(|&g| groups[g as usize].iter().copied())
                            .min_by_key(|&m| (plane.load[m as usize], rank[m as usize]));
                        match least {
                            Some(m) => (m, 1),
                            // Nobody in N subscribes: the topic's tasks stay unassigned.
                            None => break,
                        }
                    }
                };
                plane.owner[task..task + take].fill(m);
                plane.given_cold(task..task + take);
                plane.load[m as usize] += take as i64;
                for t in task..(task + take).min(task + ORPHAN_EVENTS.saturating_sub(placed)) {
                    let to = plane.member_id(m);
                    plane.event(t, TaskEventKind::Orphan { to });
                }
                placed += take;
                task += take;
            }
            task = run;
        }
    }
}

/// Step 2 for a fresh group of one subscription, in one pass. Every task is an orphan, and the
/// first member of N below Q stays the first until it reaches Q (nobody else's load changes),
/// so the members of N in order take Q of the subscribed tasks each, in task order, the last
/// ones fewer: what [`orphans`] does run by run. Writes the owner vector and the loads, and
/// returns the assignment (the dealt tasks in order, each member's span where its deal lies,
/// laid out as [`emit`] lays spans out), which step 4 does not change.
fn deal(plane: &mut Plane<'_>, big_q: i64) -> Assignment {
    let spec = plane.spec;
    let members = spec.members.len();
    // One subscription: its bits are the first `words` words.
    let bits = &plane.sub_bits[..plane.words];
    let subscribed = |t: usize| bits[t / 64] >> (t % 64) & 1 != 0;
    // With nobody in N (Q = 0) nothing is dealt.
    let total: usize = if big_q == 0 {
        0
    } else {
        (0..spec.topics.len())
            .filter(|&t| subscribed(t))
            .map(|t| spec.topics[t].partitions as usize)
            .sum()
    };
    let mut spans = vec![(0u32, 0u32); members];
    let mut takers = Vec::with_capacity(members);
    let (mut left, mut at) = (total, 0u32);
    for &m in &plane.order {
        let take = if plane.in_n[m] {
            (big_q as usize).min(left)
        } else {
            0
        };
        if take > 0 {
            takers.push((m as u32, take));
        }
        left -= take;
        spans[m] = (at, at + take as u32);
        plane.load[m] = take as i64;
        at += take as u32;
    }
    // Runs of subscribed topics are runs of tasks, filled member by member.
    let mut granted = Vec::with_capacity(total);
    let mut takers = takers.into_iter();
    let (mut m, mut left) = (NONE, 0usize);
    let topics = spec.topics.len();
    let mut t = 0;
    while t < topics {
        let (first, sub) = (t, subscribed(t));
        while t < topics && subscribed(t) == sub {
            t += 1;
        }
        let mut tasks = plane.offset.get(t).copied().unwrap_or(plane.n()) - plane.offset[first];
        if total == 0 || !sub {
            plane.owner.resize(plane.owner.len() + tasks, NONE);
            continue;
        }
        for (t, topic) in spec.topics.iter().enumerate().take(t).skip(first) {
            granted.extend((0..topic.partitions).map(|p| Partition::new(t as TopicIndex, p)));
        }
        while tasks > 0 {
            if left == 0 {
                // Q per member of N covers every task.
                (m, left) = takers.next().expect("a member of N below Q");
            }
            let take = left.min(tasks);
            plane.owner.resize(plane.owner.len() + take, m);
            (left, tasks) = (left - take, tasks - take);
        }
    }
    // Every dealt task is a first assignment: cold (step 3a).
    if plane.colds() && !granted.is_empty() {
        for (f, &o) in plane.flags.iter_mut().zip(&plane.owner) {
            if o != NONE {
                *f |= COLD;
            }
        }
        plane.cold_any = true;
    }
    plane.events.reserve(granted.len().min(ORPHAN_EVENTS));
    for &p in granted.iter().take(ORPHAN_EVENTS) {
        let task = plane.offset[p.topic as usize] + p.partition as usize;
        let to = plane.member_id(plane.owner[task]);
        plane.event(task, TaskEventKind::Orphan { to });
    }
    Assignment::from_spans(granted, spans)
}

/// Each member's granted tasks in task order, as step 4 asks for them. Its budget is small, so
/// it asks for few members' tasks: the first [`Owned::SCANS`] are found by scanning the owner
/// vector, and only past that (a heterogeneous fill may try many donors) are all members'
/// lists built at once.
///
/// Step 3a moves tasks while the lists are in use: a built list drops what its member no
/// longer owns and gains what it was moved (`moved_in`, few).
#[derive(Default)]
struct Owned {
    lists: Option<OwnedLists>,
    scans: usize,
    /// (member, task) moved to the member by step 3a in this plan.
    moved_in: Vec<(u32, u32)>,
}

impl Owned {
    const SCANS: usize = 4;

    fn of(&mut self, plane: &Plane<'_>, m: usize) -> Vec<u32> {
        if self.lists.is_none() && self.scans < Owned::SCANS {
            self.scans += 1;
            // A block of owners at a time, tested without a branch per task (a member's tasks
            // are few among many); only blocks that hold one are looked into.
            const BLOCK: usize = 64;
            let m = m as u32;
            let mut scanned = Vec::with_capacity(plane.load[m as usize].max(0) as usize);
            for (b, block) in plane.owner.chunks(BLOCK).enumerate() {
                if !block.iter().fold(false, |any, &o| any | (o == m)) {
                    continue;
                }
                for (t, &o) in (b * BLOCK..).zip(block) {
                    if o == m && plane.flags[t] & WITHHELD == 0 {
                        scanned.push(t as u32);
                    }
                }
            }
            // Under test both ways agree on every lookup, whichever one a plan takes.
            #[cfg(test)]
            {
                let lists = OwnedLists::new(plane);
                let m = m as usize;
                assert_eq!(scanned, lists.tasks[lists.start[m]..lists.start[m + 1]]);
            }
            return scanned;
        }
        let lists = self.lists.get_or_insert_with(|| OwnedLists::new(plane));
        let mut tasks = lists.tasks[lists.start[m]..lists.start[m + 1]].to_vec();
        if !self.moved_in.is_empty() {
            tasks.extend(
                self.moved_in
                    .iter()
                    .filter(|&&(to, _)| to as usize == m)
                    .map(|&(_, t)| t),
            );
            tasks.retain(|&t| plane.owner[t as usize] == m as u32);
            tasks.sort_unstable();
            tasks.dedup();
        }
        tasks
    }
}

/// Every member's granted tasks in task order, all in one vector.
struct OwnedLists {
    tasks: Vec<u32>,
    /// Member `m`'s tasks are `tasks[start[m]..start[m + 1]]`.
    start: Vec<usize>,
}

impl OwnedLists {
    /// Counted, then placed, by runs of one owner: its count and cursor stay in registers.
    fn new(plane: &Plane<'_>) -> OwnedLists {
        let granted = |(&o, &flags): (&u32, &u8)| if flags & WITHHELD != 0 { NONE } else { o };
        let members = plane.load.len();
        let mut start = vec![0usize; members + 1];
        let (mut run, mut count) = (NONE, 0usize);
        for o in plane.owner.iter().zip(&plane.flags).map(granted) {
            if o != run {
                if run != NONE {
                    start[run as usize + 1] += count;
                }
                (run, count) = (o, 0);
            }
            count += 1;
        }
        if run != NONE {
            start[run as usize + 1] += count;
        }
        for m in 0..members {
            start[m + 1] += start[m];
        }
        let mut next = start.clone();
        let mut tasks = vec![0u32; start[members]];
        let (mut run, mut at) = (NONE, 0usize);
        for (t, o) in plane
            .owner
            .iter()
            .zip(&plane.flags)
            .map(granted)
            .enumerate()
        {
            if o != run {
                if run != NONE {
                    next[run as usize] = at;
                }
                run = o;
                if o != NONE {
                    at = next[o as usize];
                }
            }
            if o != NONE {
                tasks[at] = t as u32;
                at += 1;
            }
        }
        OwnedLists { tasks, start }
    }
}

/// The first donor with P > `above` holding a task that `r` may take ([`pick`]), and that
/// task.
fn find_donor(
    plane: &Plane<'_>,
    owned: &mut Owned,
    r: usize,
    above: i64,
    budget: usize,
) -> Option<(usize, usize)> {
    plane
        .order
        .iter()
        .copied()
        .filter(|&d| plane.in_n[d] && d != r && plane.load[d] > above)
        .filter(|&d| plane.share_a_topic(d, r))
        .find_map(|d| pick(plane, &owned.of(plane, d), r, budget).map(|task| (d, task)))
}

/// The task `r` takes of a donor's `owned` (in task order), among those it subscribes to that
/// nobody learns: the lowest one whose owner is cold (it moves
/// directly, step 3a), one that no other member holds first (it is granted now, not revoked
/// first); else, while the budget allows a learner, the lowest one. Without cold owners, the
/// donor's lowest unmarked task (6.5 step 4).
fn pick(plane: &Plane<'_>, owned: &[u32], r: usize, budget: usize) -> Option<usize> {
    let (mut held, mut warm) = (None, None);
    for t in owned.iter().map(|&t| t as usize) {
        if plane.marked(t) || !plane.subscribed(r as u32, t) {
            continue;
        }
        if plane.cold(t) {
            if !plane.held_by_other(t, r as u32) {
                return Some(t);
            }
            held = held.or(Some(t));
        } else if budget > 0 && warm.is_none() {
            warm = Some(t);
            if !plane.cold_any {
                break;
            }
        }
    }
    held.or(warm)
}

/// Step 3a: `task`'s owner `from` is cold for it, so it goes to `to` without a learner and
/// outside the budget. `to` restores it cold (from now). Should `from` (or anyone else) still
/// hold it, [`granted`] withholds it (I1): S names no owner, and its cold entry names `to`,
/// to whom the next rebalance grants it once the holder gave it up.
fn move_cold(
    plane: &mut Plane<'_>,
    owned: &mut Owned,
    task: usize,
    from: usize,
    to: usize,
    why: &'static str,
) {
    owned.moved_in.push((to as u32, task as u32));
    plane.owner[task] = to as u32;
    plane.flags[task] |= COLD | MOVED;
    plane.load[from] -= 1;
    plane.load[to] += 1;
    plane.moved_cold = true;
    let to_id = plane.member_id(to as u32);
    let kind = if plane.held_by_other(task, to as u32) {
        let holder = plane.declared[task];
        TaskEventKind::Revoking {
            from: (holder != MANY).then(|| plane.member_id(holder)),
            to: to_id,
            why,
        }
    } else {
        TaskEventKind::Moved {
            from: Some(plane.member_id(from as u32)),
            to: to_id,
            why,
        }
    };
    plane.event(task, kind);
}

fn add_learner(
    plane: &mut Plane<'_>,
    task: usize,
    owner: usize,
    learner: usize,
    step: &'static str,
) {
    plane.flags[task] |= MARKED;
    plane.load[owner] -= 1;
    plane.load[learner] += 1;
    plane.slots.push(Slot {
        task,
        member: learner as u32,
        planned: plane.now,
    });
    let kind = TaskEventKind::LearnerAdded {
        owner: plane.member_id(owner as u32),
        learner: plane.member_id(learner as u32),
        step,
    };
    plane.event(task, kind);
}

/// Step 6's assignment: every task granted to its owner, unless withheld (I1).
fn granted(plane: &mut Plane<'_>) -> Assignment {
    let members = plane.spec.members.len();
    // I1 for everything granted: never while another member holds the task. Nor is such a
    // task recorded as its owner's in S, since the owner does not hold it: the next rebalance
    // places it afresh once the holder gave it up (else, had the owner started leaving
    // meanwhile, step 3 would hand a leaver a task it never held, against I8).
    // In the same pass, each member's grants are counted by runs (a member's tasks mostly come
    // in runs: orphans and sticky ranges).
    let mut grants = vec![0u32; members];
    let (mut run, mut count) = (NONE, 0u32);
    let declared = &plane.declared;
    for (t, (o, flags)) in plane.owner.iter_mut().zip(&mut plane.flags).enumerate() {
        if *o != NONE && declared.get(t).is_some_and(|&d| d != NONE && d != *o) {
            *flags |= WITHHELD;
            *o = NONE;
        }
        let o = if *flags & WITHHELD != 0 { NONE } else { *o };
        if o != run {
            if run != NONE {
                grants[run as usize] += count;
            }
            (run, count) = (o, 0);
        }
        count += 1;
    }
    if run != NONE {
        grants[run as usize] += count;
    }
    // Each member's span of the flat assignment, laid out in member order (the order orphans
    // and fills hand tasks out in, so that writing them in task order mostly walks forward),
    // with a cursor per member; the current owner's cursor stays in a register through a run.
    let mut spans = vec![(0u32, 0u32); members];
    let mut cursor = grants;
    let mut at = 0u32;
    for &m in &plane.order {
        spans[m] = (at, at + cursor[m]);
        cursor[m] = at;
        at = spans[m].1;
    }
    // Written in span order, as a fresh group's orphans are, it is pushed (never zeroed first);
    // the first write out of that order fills it out to its length.
    let mut granted: Vec<Partition> = Vec::with_capacity(at as usize);
    let (mut run, mut next) = (NONE, 0u32);
    for (t, topic) in plane.spec.topics.iter().enumerate() {
        let first = plane.offset[t];
        let tasks = first..first + topic.partitions as usize;
        for ((p, &o), &flags) in plane.owner[tasks.clone()]
            .iter()
            .enumerate()
            .zip(&plane.flags[tasks])
        {
            if o == NONE || flags & WITHHELD != 0 {
                continue;
            }
            if o != run {
                if run != NONE {
                    cursor[run as usize] = next;
                }
                run = o;
                next = cursor[o as usize];
            }
            let partition = Partition::new(t as TopicIndex, p as u32);
            if next as usize == granted.len() {
                granted.push(partition);
            } else {
                granted.resize(at as usize, Partition::new(0, 0));
                granted[next as usize] = partition;
            }
            next += 1;
        }
    }
    Assignment::from_spans(granted, spans)
}

/// S's cold members after the plan: every COLD task's owner, or for a task withheld from
/// its holder, the member it is `pending` for; since when: now, unless carried over from S
/// or promoted from a learner (and not moved by step 3a since).
fn cold_owners(plane: &mut Plane<'_>, pending: &[(u32, u32)]) -> Vec<Cold> {
    // Stable: of two entries of a task, the later one wins.
    plane.cold_since.sort_by_key(|&(t, _)| t);
    let entries = &plane.cold_since;
    let (mut next, mut next_pending) = (0usize, 0usize);
    let mut cold = Vec::new();
    for (t, (&o, &flags)) in plane.owner.iter().zip(&plane.flags).enumerate() {
        if flags & COLD == 0 {
            continue;
        }
        // Entries of earlier tasks belong to tasks that are no longer cold.
        let mut carried = None;
        while let Some(&(task, since)) = entries.get(next).filter(|e| e.0 as usize <= t) {
            if task as usize == t {
                carried = Some(since);
            }
            next += 1;
        }
        let mut member = o;
        while let Some(&(task, m)) = pending.get(next_pending).filter(|e| e.0 as usize <= t) {
            if task as usize == t {
                member = m;
            }
            next_pending += 1;
        }
        if member == NONE {
            continue;
        }
        let since = if flags & MOVED != 0 {
            plane.now
        } else {
            carried.unwrap_or(plane.now)
        };
        cold.push(Cold {
            task: t as u32,
            member,
            since,
        });
    }
    cold
}

/// Step 6: the outputs, the new S and the follow-up.
fn emit(mut plane: Plane<'_>, any_revoked: bool, dealt: Option<Assignment>) -> Plan {
    let members = plane.spec.members.len();
    // In task order, one per task (should a task have two, the last planned wins).
    plane.slots.sort_by_key(|s| s.task);
    let mut slots: Vec<Slot> = Vec::with_capacity(plane.slots.len());
    for s in plane.slots.drain(..) {
        match slots.last_mut() {
            Some(last) if last.task == s.task => *last = s,
            _ => slots.push(s),
        }
    }
    let learning: Vec<(u32, Partition)> = slots
        .iter()
        .map(|s| (s.member, plane.partition(s.task)))
        .collect();
    let learning = Assignment::from_pairs(members, &learning);

    // Step 3a changed a deal's owners: the assignment is the owner vector's.
    let dealt = dealt.filter(|_| !plane.moved_cold);
    // Cold tasks that another member still holds: granted to nobody now (I1), and S names
    // their cold member, to whom the next rebalance grants them once given up.
    let pending: Vec<(u32, u32)> = if plane.cold_any && !plane.declared.is_empty() {
        (0..plane.n())
            .filter(|&t| plane.cold(t) && plane.owner[t] != NONE)
            .filter(|&t| plane.held_by_other(t, plane.owner[t]))
            .map(|t| (t as u32, plane.owner[t]))
            .collect()
    } else {
        Vec::new()
    };
    let assigned = dealt.unwrap_or_else(|| granted(&mut plane));
    let cold = if plane.cold_any {
        cold_owners(&mut plane, &pending)
    } else {
        Vec::new()
    };
    // Marked tasks are the slots' (one each); those granted are marks.
    let marks: Vec<(u32, Partition)> = slots
        .iter()
        .filter(|s| plane.owner[s.task] != NONE && !plane.withheld(s.task))
        .map(|s| (plane.owner[s.task], plane.partition(s.task)))
        .collect();
    let marks = Assignment::from_pairs(members, &marks);

    let mut revoked = Vec::new();
    for (m, input) in plane.inputs.iter().enumerate().filter(|_| any_revoked) {
        if input.revoked.is_empty() {
            continue;
        }
        let mine = assigned.member(m);
        let mut out: Vec<Partition> = input
            .revoked
            .iter()
            .copied()
            .filter(|p| plane.task(*p).is_some() && mine.binary_search(p).is_err())
            .collect();
        out.sort_unstable();
        out.dedup();
        revoked.extend(out.into_iter().map(|p| (m as u32, p)));
    }
    let revoked = Assignment::from_pairs(members, &revoked);

    // Follow-up: unmodified learners' warm-ups (unless waiting for a holder to give the task
    // up: its rejoin is the trigger), leavers' deadlines, and the probe while learners remain.
    let settings = plane.settings;
    let mut follow_up: Option<Timestamp> = None;
    let mut earliest = |at: Timestamp| {
        follow_up = Some(follow_up.map_or(at, |f| f.min(at)));
    };
    for s in &slots {
        if !plane.inputs[s.member as usize].capable && !plane.withheld(s.task) {
            earliest(s.planned.plus_ms(settings.warmup_ms).max(plane.now));
        }
    }
    let mut leaving = Vec::new();
    for (m, since) in plane.leaving_since.iter().enumerate() {
        if let Some(since) = *since {
            leaving.push((m as u32, since));
            if let (Some(timeout), false) = (settings.scale_down_timeout_ms, plane.gone[m]) {
                earliest(since.plus_ms(timeout));
            }
        }
    }
    // 6.5 step 6: the probe only where readiness is not pushed. Learner-capable members rejoin
    // when ready; unmodified members cannot.
    let pushed = slots
        .iter()
        .all(|s| plane.inputs[s.member as usize].capable);
    let probe = (!pushed).then(|| plane.now.plus_ms(settings.probe_interval_ms));
    if let Some(p) = probe {
        earliest(p);
    }

    // The new S: this spec's topics, the owner vector as it is, members by spec index.
    let spec = plane.spec;
    let state = State {
        members: Names::after(plane.same_members, &spec.members, |m| m.member_id.as_str()),
        leaving,
        topics: Names::after(plane.same_topics, &spec.topics, |t| &t.name),
        partitions: plane.spec.topics.iter().map(|t| t.partitions).collect(),
        owners: plane.owner,
        learners: slots
            .iter()
            .map(|s| Learner {
                task: s.task as u32,
                member: s.member,
                planned: s.planned,
            })
            .collect(),
        cold,
    };
    Plan {
        assigned,
        learning,
        marks,
        revoked,
        state,
        follow_up,
        probe,
        events: plane.events,
    }
}
