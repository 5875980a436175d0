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

use super::state::{State, StateTopic, TaskEntry, NO_MEMBER};
use super::{Settings, TaskEvent, TaskEventKind};
use crate::assignor::{GroupSpec, Partition, TopicIndex};
use crate::group::{MemberId, Timestamp};

/// No member (a task without owner, a slot without learner).
const NONE: u32 = u32::MAX;
/// Declared by two different members.
const MANY: u32 = u32::MAX - 1;

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

/// The result of one rebalance, by member index of the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Active tasks granted this generation, sorted.
    pub assigned: Vec<Vec<Partition>>,
    /// Tasks to restore, sorted.
    pub learning: Vec<Vec<Partition>>,
    /// Assigned tasks that someone is learning, sorted.
    pub marks: Vec<Vec<Partition>>,
    /// Confirmed give-ups: `revokedAtJoin − assigned`, sorted.
    pub revoked: Vec<Vec<Partition>>,
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
    /// The single member declaring each task, NONE, or MANY.
    declared: Vec<u32>,
    owner: Vec<u32>,
    withheld: Vec<bool>,
    marked: Vec<bool>,
    load: Vec<i64>,
    slots: Vec<Slot>,
    events: Vec<TaskEvent>,
}

impl Plane<'_> {
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

    /// Someone other than `member` still holds `task`.
    fn held_by_other(&self, task: usize, member: u32) -> bool {
        let d = self.declared[task];
        d != NONE && d != member
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

    fn member_id(&self, m: u32) -> String {
        self.spec.members[m as usize].member_id.to_string()
    }
}

/// Runs steps 1 to 6 of learner-spec.md 6.5 (standbys, step 5, are out of scope).
///
/// `inputs` is parallel to `spec.members`; `prev` is S as the last rebalance left it.
pub fn plan(
    spec: &GroupSpec,
    inputs: &[LearnerInput],
    prev: &State,
    settings: &Settings,
    now: Timestamp,
) -> Plan {
    let members = spec.members.len();
    assert_eq!(inputs.len(), members, "one input per member");
    let mut offset = Vec::with_capacity(spec.topics.len());
    let mut n = 0usize;
    for t in &spec.topics {
        offset.push(n);
        n += t.partitions as usize;
    }

    // Membership: who is live, leaving, past its deadline. S names members by their index in
    // the last spec, usually this spec's index too (members keep their places, joiners come
    // last): only members found elsewhere are looked up by id.
    let aligned = |i: usize, id: &MemberId| {
        spec.members
            .get(i)
            .is_some_and(|m| m.member_id.as_str() == id.as_str())
    };
    let from_prev: Vec<u32> = if prev
        .members
        .iter()
        .enumerate()
        .all(|(i, id)| aligned(i, id))
    {
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
            .map(|id| live.get(id.as_str()).copied().unwrap_or(NONE))
            .collect()
    };
    let mut leaving_since = vec![None; members];
    for (i, input) in inputs.iter().enumerate() {
        if input.leaving {
            leaving_since[i] = Some(now);
        }
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
    let mut distinct: HashMap<&[TopicIndex], u32> = HashMap::new();
    for (i, m) in spec.members.iter().enumerate() {
        if i > 0 && Arc::ptr_eq(&m.subscription, &spec.members[i - 1].subscription) {
            sub_of.push(sub_of[i - 1]);
            continue;
        }
        let next = sub_lists.len() as u32;
        let id = *distinct.entry(&m.subscription).or_insert(next);
        if id == next {
            sub_lists.push(&m.subscription);
            sub_bits.resize(sub_bits.len() + words, 0);
            let bits = &mut sub_bits[id as usize * words..];
            for &t in m.subscription.iter().filter(|&&t| (t as usize) < topics) {
                bits[t as usize / 64] |= 1 << (t % 64);
            }
        }
        sub_of.push(id);
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
        declared: vec![NONE; n],
        owner: vec![NONE; n],
        withheld: vec![false; n],
        marked: vec![false; n],
        load: vec![0; members],
        slots: Vec::new(),
        events: Vec::new(),
    };
    for (i, input) in inputs.iter().enumerate() {
        for &p in &input.declared {
            if let Some(t) = plane.task(p) {
                let d = &mut plane.declared[t];
                if *d == NONE {
                    *d = i as u32;
                } else if *d != i as u32 {
                    *d = MANY;
                }
            }
        }
    }

    // S, interned: the previous owner (a live member that may keep it) and learner slots.
    let topic_index: HashMap<&str, usize> = spec
        .topics
        .iter()
        .enumerate()
        .map(|(i, t)| (&*t.name, i))
        .collect();
    let mut prev_owner = vec![NONE; n];
    let mut prev_slots: Vec<Slot> = Vec::new();
    for topic in &prev.topics {
        let Some(&t) = topic_index.get(topic.name.as_str()) else {
            continue;
        };
        for e in &topic.tasks {
            if e.partition >= spec.topics[t].partitions {
                continue;
            }
            let task = plane.offset[t] + e.partition as usize;
            let owner = from_prev.get(e.owner as usize).copied().unwrap_or(NONE);
            // An owner keeps a task only while live, within its deadline and subscribed.
            if owner != NONE && !plane.gone[owner as usize] && plane.subscribes(owner, t) {
                prev_owner[task] = owner;
            }
            if e.learner != NO_MEMBER {
                let learner = from_prev.get(e.learner as usize).copied().unwrap_or(NONE);
                let slot = Slot {
                    task,
                    member: learner,
                    planned: e.planned,
                };
                prev_slots.push(slot);
            }
        }
    }
    prev_slots.sort_by_key(|s| s.task);

    // Step 1: resolve learners, in task order.
    for slot in prev_slots {
        let task = slot.task;
        let o = prev_owner[task];
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
                plane.withheld[task] = true;
                plane.marked[task] = true;
                plane.slots.push(slot);
                let holder = plane.declared[task];
                let from = if holder == MANY {
                    "several members".to_owned()
                } else {
                    plane.member_id(holder)
                };
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
                let from = if o == NONE {
                    "nobody".to_owned()
                } else {
                    plane.member_id(o)
                };
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
                // Not ready: back to its owner, learner kept (no half-way bounce).
                plane.owner[task] = o;
                plane.marked[task] = true;
                plane.slots.push(slot);
            }
        }
    }

    // Step 3 before step 2, so that orphans see every sticky load: everything else stays.
    for ((owner, &prev), &withheld) in plane.owner.iter_mut().zip(&prev_owner).zip(&plane.withheld)
    {
        if *owner == NONE && !withheld {
            *owner = prev;
        }
    }
    for task in 0..n {
        let o = plane.owner[task];
        if o != NONE {
            plane.load[o as usize] += 1 - i64::from(plane.marked[task]);
        }
    }
    for s in &plane.slots {
        plane.load[s.member as usize] += 1;
    }

    let receivers = plane.order.iter().filter(|&&m| plane.in_n[m]).count();
    // q and Q; with nobody to receive, no member can be below or above them.
    let q = n.checked_div(receivers).unwrap_or(0) as i64;
    let big_q = if receivers == 0 {
        0
    } else {
        n.div_ceil(receivers) as i64
    };

    // Step 2: orphans, to the first member of N with P < Q (cold restore).
    orphans(&mut plane, big_q);

    // Step 4: new learners within the budget.
    let mut budget = settings.max_learners.saturating_sub(plane.slots.len());
    let work = budget > 0
        && plane.order.iter().any(|&m| {
            let load = plane.load[m];
            !plane.in_n[m] || load < q || load > big_q
        });
    let owned = if work {
        Owned::new(&plane)
    } else {
        Owned::default()
    };
    // (a) drain leaving members.
    let leavers: Vec<usize> = plane
        .order
        .iter()
        .copied()
        .filter(|&m| !plane.in_n[m] && !plane.gone[m])
        .collect();
    'drain: for d in leavers {
        for &task in &owned[d] {
            if plane.marked[task] {
                continue;
            }
            if budget == 0 {
                break 'drain;
            }
            let receiver = plane.order.iter().copied().find(|&r| {
                plane.in_n[r] && plane.load[r] < big_q && plane.subscribed(r as u32, task)
            });
            if let Some(r) = receiver {
                add_learner(&mut plane, task, d, r, "drain");
                budget -= 1;
            }
        }
    }
    // (b) fill members below q, then (c) shave members above Q.
    let mut skipped = vec![false; members];
    while budget > 0 {
        let Some(r) = plane
            .order
            .iter()
            .copied()
            .find(|&r| plane.in_n[r] && !skipped[r] && plane.load[r] < q)
        else {
            break;
        };
        let donor =
            find_donor(&plane, &owned, r, big_q).or_else(|| find_donor(&plane, &owned, r, q));
        match donor {
            Some((d, task)) => {
                add_learner(&mut plane, task, d, r, "fill");
                budget -= 1;
            }
            None => skipped[r] = true,
        }
    }
    let mut skipped = vec![false; members];
    while budget > 0 {
        let Some(d) = plane
            .order
            .iter()
            .copied()
            .find(|&d| plane.in_n[d] && !skipped[d] && plane.load[d] > big_q)
        else {
            break;
        };
        let found = plane
            .order
            .iter()
            .copied()
            .filter(|&r| plane.in_n[r] && plane.load[r] < big_q)
            .find_map(|r| lowest_unmarked(&plane, &owned[d], r).map(|task| (r, task)));
        match found {
            Some((r, task)) => {
                add_learner(&mut plane, task, d, r, "shave");
                budget -= 1;
            }
            None => skipped[d] = true,
        }
    }

    emit(plane, n)
}

/// Step 2: each task without owner goes to the first member of N with P < Q subscribed to it,
/// else to the least loaded subscriber in N (the first of those), else stays unassigned.
///
/// Members of N are grouped by subscription, each group in order with a cursor at its first
/// member below Q (loads only grow here, so cursors only move forward); a task's candidates
/// are the cursors of the groups subscribed to its topic, the first in order wins.
fn orphans(plane: &mut Plane<'_>, big_q: i64) {
    let spec = plane.spec;
    let open = |plane: &Plane<'_>, t: usize| plane.owner[t] == NONE && !plane.withheld[t];
    if !(0..plane.owner.len()).any(|t| open(plane, t)) {
        return;
    }
    let mut rank = vec![0u32; spec.members.len()];
    let mut groups: Vec<Vec<u32>> = vec![Vec::new(); plane.sub_lists.len()];
    for (r, &m) in plane.order.iter().enumerate() {
        rank[m] = r as u32;
        if plane.in_n[m] {
            groups[plane.sub_of[m] as usize].push(m as u32);
        }
    }
    let mut groups_of_topic: Vec<Vec<u32>> = vec![Vec::new(); spec.topics.len()];
    for (g, list) in plane.sub_lists.iter().enumerate() {
        if !groups[g].is_empty() {
            for &t in list.iter().filter(|&&t| (t as usize) < spec.topics.len()) {
                groups_of_topic[t as usize].push(g as u32);
            }
        }
    }
    let mut cursor = vec![0usize; groups.len()];
    let mut placed = 0usize;
    for (topic, of_topic) in groups_of_topic.iter().enumerate() {
        let first = plane.offset[topic];
        for task in first..first + spec.topics[topic].partitions as usize {
            if !open(plane, task) {
                continue;
            }
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
            let to = best.or_else(|| {
                of_topic
                    .iter()
                    .flat_map(|&g| groups[g as usize].iter().copied())
                    .min_by_key(|&m| (plane.load[m as usize], rank[m as usize]))
            });
            let Some(m) = to else {
                continue;
            };
            plane.owner[task] = m;
            plane.load[m as usize] += 1;
            placed += 1;
            if placed <= 32 {
                let to = plane.member_id(m);
                plane.event(task, TaskEventKind::Orphan { to });
            }
        }
    }
}

/// Each member's granted tasks in task order, all in one vector.
#[derive(Default)]
struct Owned {
    tasks: Vec<usize>,
    /// Member `m`'s tasks are `tasks[start[m]..start[m + 1]]`.
    start: Vec<usize>,
}

impl Owned {
    fn new(plane: &Plane<'_>) -> Owned {
        let granted = |t: usize| {
            let o = plane.owner[t];
            (o != NONE && !plane.withheld[t]).then_some(o as usize)
        };
        let members = plane.load.len();
        let mut start = vec![0usize; members + 1];
        for t in 0..plane.owner.len() {
            if let Some(o) = granted(t) {
                start[o + 1] += 1;
            }
        }
        for m in 0..members {
            start[m + 1] += start[m];
        }
        let mut next = start.clone();
        let mut tasks = vec![0usize; start[members]];
        for t in 0..plane.owner.len() {
            if let Some(o) = granted(t) {
                tasks[next[o]] = t;
                next[o] += 1;
            }
        }
        Owned { tasks, start }
    }
}

impl std::ops::Index<usize> for Owned {
    type Output = [usize];

    fn index(&self, m: usize) -> &[usize] {
        match (self.start.get(m), self.start.get(m + 1)) {
            (Some(&s), Some(&e)) => &self.tasks[s..e],
            _ => &[],
        }
    }
}

/// The first donor with P > `above` holding an unmarked task that `r` may take, and that task.
fn find_donor(plane: &Plane<'_>, owned: &Owned, r: usize, above: i64) -> Option<(usize, usize)> {
    plane
        .order
        .iter()
        .copied()
        .filter(|&d| plane.in_n[d] && d != r && plane.load[d] > above)
        .find_map(|d| lowest_unmarked(plane, &owned[d], r).map(|task| (d, task)))
}

fn lowest_unmarked(plane: &Plane<'_>, owned: &[usize], r: usize) -> Option<usize> {
    owned
        .iter()
        .copied()
        .find(|&t| !plane.marked[t] && plane.subscribed(r as u32, t))
}

fn add_learner(
    plane: &mut Plane<'_>,
    task: usize,
    owner: usize,
    learner: usize,
    step: &'static str,
) {
    plane.marked[task] = true;
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

/// Step 6: the outputs, the new S and the follow-up.
fn emit(mut plane: Plane<'_>, n: usize) -> Plan {
    let members = plane.spec.members.len();
    plane.slots.sort_by_key(|s| s.task);
    let mut marks: Vec<Vec<Partition>> = vec![Vec::new(); members];
    let mut learning: Vec<Vec<Partition>> = vec![Vec::new(); members];
    for s in &plane.slots {
        learning[s.member as usize].push(plane.partition(s.task));
    }

    // I1 for everything granted: never while another member holds the task. Nor is such a
    // task recorded as its owner's in S, since the owner does not hold it: the next rebalance
    // places it afresh once the holder gave it up (else, had the owner started leaving
    // meanwhile, step 3 would hand a leaver a task it never held, against I8).
    let mut grants = vec![0usize; members];
    for task in 0..n {
        let o = plane.owner[task];
        if o != NONE && plane.held_by_other(task, o) {
            plane.withheld[task] = true;
            plane.owner[task] = NONE;
        }
        if o != NONE && !plane.withheld[task] {
            grants[o as usize] += 1;
        }
    }
    let mut assigned: Vec<Vec<Partition>> = grants.into_iter().map(Vec::with_capacity).collect();

    // The new S, by topic; owners and learners name members by their index in the spec.
    // Learners by task: the slots are sorted by task (the last of a task's slots wins).
    let mut topics = Vec::with_capacity(plane.spec.topics.len());
    let mut slot = 0usize;
    for (t, topic) in plane.spec.topics.iter().enumerate() {
        let mut tasks = Vec::with_capacity(topic.partitions as usize);
        for p in 0..topic.partitions {
            let task = plane.offset[t] + p as usize;
            let o = plane.owner[task];
            let (mut l, mut planned) = (NONE, Timestamp::default());
            while let Some(s) = plane.slots.get(slot).filter(|s| s.task <= task) {
                if s.task == task {
                    (l, planned) = (s.member, s.planned);
                }
                slot += 1;
            }
            if o != NONE && !plane.withheld[task] {
                let partition = Partition::new(t as TopicIndex, p);
                assigned[o as usize].push(partition);
                if plane.marked[task] {
                    marks[o as usize].push(partition);
                }
            }
            if o != NONE || l != NONE {
                tasks.push(TaskEntry {
                    partition: p,
                    owner: if o == NONE { NO_MEMBER } else { o },
                    learner: if l == NONE { NO_MEMBER } else { l },
                    planned,
                });
            }
        }
        if !tasks.is_empty() {
            topics.push(StateTopic {
                name: topic.name.to_string(),
                tasks,
            });
        }
    }

    let revoked = plane
        .inputs
        .iter()
        .zip(&assigned)
        .map(|(input, mine)| {
            let mut out: Vec<Partition> = input
                .revoked
                .iter()
                .copied()
                .filter(|p| plane.task(*p).is_some() && mine.binary_search(p).is_err())
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();

    // Follow-up: unmodified learners' warm-ups (unless waiting for a holder to give the task
    // up: its rejoin is the trigger), leavers' deadlines, and the probe while learners remain.
    let settings = plane.settings;
    let mut follow_up: Option<Timestamp> = None;
    let mut earliest = |at: Timestamp| {
        follow_up = Some(follow_up.map_or(at, |f| f.min(at)));
    };
    for s in &plane.slots {
        if !plane.inputs[s.member as usize].capable && !plane.withheld[s.task] {
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
    let pushed = plane
        .slots
        .iter()
        .all(|s| plane.inputs[s.member as usize].capable);
    let probe = (!pushed).then(|| plane.now.plus_ms(settings.probe_interval_ms));
    if let Some(p) = probe {
        earliest(p);
    }

    let state = State {
        members: plane
            .spec
            .members
            .iter()
            .map(|m| m.member_id.clone())
            .collect(),
        leaving,
        topics,
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
