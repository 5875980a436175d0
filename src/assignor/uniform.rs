//! Balanced and sticky, with the semantics of Kafka's server-side `UniformAssignor`
//! (`UniformHomogeneousAssignmentBuilder`, `UniformHeterogeneousAssignmentBuilder`).
//!
//! Balance comes first, then stickiness:
//! - Homogeneous groups (every member subscribes to the same topics): member loads differ by at
//!   most one. Every member has a quota of `P / M` partitions, and `P % M` members one more;
//!   the extra ones go first to members that already hold more than `P / M` valid partitions, so
//!   that going from `n` to `n + 1` members moves at most `ceil(P / (n + 1))` partitions and going
//!   from `n + 1` back to `n` moves only the leaver's partitions.
//! - Heterogeneous groups: no partition could move from its member to another subscriber of its
//!   topic whose load is at least two lower. Owned partitions are kept, the unowned ones go to the
//!   least loaded subscriber, then partitions move from the most loaded holders of a topic to its
//!   least loaded subscribers until no such move is left. A partition therefore moves only when
//!   that condition requires it. With overlapping subscriptions the condition can require moving
//!   a partition that a leaver never held (see the `a_leaver_can_force_another_move` test).
//!
//! Owned partitions of topics a member no longer subscribes to, or beyond a topic's partition
//! count, are dropped; a partition listed by two members stays with the first in member order.
//!
//! Deterministic: members are taken in [`GroupSpec::member_order`], every tie is broken by that
//! order, and hash maps are only looked up, never iterated, so the same spec (whatever the order
//! its members are listed in) gives every member id the same partitions. Racks are ignored, as
//! in Kafka's uniform builders without rack-aware placement.
//!
//! Cost: the homogeneous path is one pass over members and one over partitions (with no owned
//! partitions, each member's list is one contiguous run of the partitions in topic order). The
//! heterogeneous path groups members by subscription ("classes", usually few) so that choosing
//! the least loaded subscriber of a topic costs `O(log classes)`, not `O(subscribers)`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::{Assignment, Assignor, GroupSpec, Partition, TopicIndex};

/// No member / no offset.
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, Default)]
pub struct UniformAssignor;

impl Assignor for UniformAssignor {
    fn name(&self) -> &'static str {
        "uniform"
    }

    fn assign(&self, spec: &GroupSpec) -> Assignment {
        if spec.members.is_empty() {
            return Assignment::default();
        }
        let order = spec.member_order();
        if spec.is_homogeneous() {
            homogeneous(spec, &order)
        } else {
            Heterogeneous::new(spec, &order).run()
        }
    }
}

/// The partitions of the assigned topics laid end to end: partition `p` of topic `t` is at flat
/// index `offset[t] + p`.
struct Layout {
    /// Per topic of the spec; [`NONE`] for a topic nobody (validly) subscribes to.
    offset: Vec<u32>,
    /// The laid out topics, ascending.
    topics: Vec<TopicIndex>,
    total: usize,
}

impl Layout {
    fn new(spec: &GroupSpec, topics: Vec<TopicIndex>) -> Layout {
        let mut offset = vec![NONE; spec.topics.len()];
        let mut total = 0usize;
        for &t in &topics {
            offset[t as usize] = total as u32;
            total += spec.topics[t as usize].partitions as usize;
        }
        Layout {
            offset,
            topics,
            total,
        }
    }

    /// The flat index of `p`, if its topic is laid out and the partition exists.
    fn flat(&self, spec: &GroupSpec, p: Partition) -> Option<usize> {
        let off = *self.offset.get(p.topic as usize)?;
        (off != NONE && p.partition < spec.topics[p.topic as usize].partitions)
            .then(|| off as usize + p.partition as usize)
    }

    /// Each member's sorted list from the owner of every flat index (all assigned), placed by
    /// counting. Spans are laid out in member order, the order partitions were handed out in,
    /// so that writing them in topic order mostly walks forward through memory.
    fn emit(&self, spec: &GroupSpec, order: &[usize], owner: &[u32], loads: &[u32]) -> Assignment {
        let mut spans = vec![(0, 0); loads.len()];
        let mut cursor = vec![0u32; loads.len()];
        let mut at = 0u32;
        for &m in order {
            spans[m] = (at, at + loads[m]);
            cursor[m] = at;
            at += loads[m];
        }
        let mut partitions = vec![Partition::new(0, 0); at as usize];
        // The current owner's cursor stays in a register through a run of its partitions.
        let (mut run, mut at) = (NONE, 0u32);
        for &t in &self.topics {
            let off = self.offset[t as usize] as usize;
            let count = spec.topics[t as usize].partitions as usize;
            for (p, &o) in owner[off..off + count].iter().enumerate() {
                if o != run {
                    if run != NONE {
                        cursor[run as usize] = at;
                    }
                    run = o;
                    at = cursor[o as usize];
                }
                partitions[at as usize] = Partition::new(t, p as u32);
                at += 1;
            }
        }
        Assignment::from_spans(partitions, spans)
    }
}

/// Every member subscribes to the same topics: quotas, keep what fits, hand out the rest.
fn homogeneous(spec: &GroupSpec, order: &[usize]) -> Assignment {
    let n = spec.members.len();
    let topics: Vec<TopicIndex> = spec.members[0]
        .subscription
        .iter()
        .copied()
        .filter(|&t| (t as usize) < spec.topics.len())
        .collect();
    let total: usize = topics
        .iter()
        .map(|&t| spec.topics[t as usize].partitions as usize)
        .sum();
    if total == 0 {
        return Assignment::from_spans(Vec::new(), vec![(0, 0); n]);
    }
    let q = total / n;
    let r = total % n;

    if spec.members.iter().all(|m| m.owned.is_empty()) {
        // From nothing: member k in order takes the next `q (+1)` partitions in topic order.
        let mut partitions = Vec::with_capacity(total);
        for &t in &topics {
            partitions
                .extend((0..spec.topics[t as usize].partitions).map(|p| Partition::new(t, p)));
        }
        let mut spans = vec![(0, 0); n];
        let mut at = 0u32;
        for (k, &m) in order.iter().enumerate() {
            let quota = (q + usize::from(k < r)) as u32;
            spans[m] = (at, at + quota);
            at += quota;
        }
        return Assignment::from_spans(partitions, spans);
    }

    let layout = Layout::new(spec, topics);
    let mut owner = vec![NONE; layout.total];
    let mut kept = vec![0u32; n];
    let rank = ranks(order);
    for (m, member) in spec.members.iter().enumerate() {
        for &p in &member.owned {
            if let Some(f) = layout.flat(spec, p) {
                claim(&mut owner, &mut kept, &rank, f, m);
            }
        }
    }

    // The `r` extra partitions go first to members holding more than `q`, so they keep them.
    let q32 = q as u32;
    let mut quota = vec![q32; n];
    let mut extras = r;
    for &m in order {
        if extras == 0 {
            break;
        }
        if kept[m] > q32 {
            quota[m] += 1;
            extras -= 1;
        }
    }
    for &m in order {
        if extras == 0 {
            break;
        }
        if quota[m] == q32 {
            quota[m] += 1;
            extras -= 1;
        }
    }

    // Revoke beyond the quota, highest partitions first.
    for (m, member) in spec.members.iter().enumerate() {
        if kept[m] <= quota[m] {
            continue;
        }
        for &p in member.owned.iter().rev() {
            if kept[m] == quota[m] {
                break;
            }
            if let Some(f) = layout.flat(spec, p) {
                if owner[f] == m as u32 {
                    owner[f] = NONE;
                    kept[m] -= 1;
                }
            }
        }
    }

    // Hand out the free partitions, in topic order, to the members below quota, in member order.
    let mut cursor = 0usize;
    for &m in order {
        while kept[m] < quota[m] {
            while owner[cursor] != NONE {
                cursor += 1;
            }
            owner[cursor] = m as u32;
            kept[m] += 1;
        }
    }
    layout.emit(spec, order, &owner, &quota)
}

/// Position of each member in member order.
fn ranks(order: &[usize]) -> Vec<u32> {
    let mut rank = vec![0u32; order.len()];
    for (k, &m) in order.iter().enumerate() {
        rank[m] = k as u32;
    }
    rank
}

/// Member `m` claims flat partition `f`: a partition claimed twice goes to the member first in
/// member order, whatever order the claims come in (members are visited in listing order,
/// which is also their order in memory).
fn claim(owner: &mut [u32], kept: &mut [u32], rank: &[u32], f: usize, m: usize) {
    let o = owner[f];
    if o == NONE {
        owner[f] = m as u32;
        kept[m] += 1;
    } else if rank[m] < rank[o as usize] {
        kept[o as usize] -= 1;
        owner[f] = m as u32;
        kept[m] += 1;
    }
}

/// The members with one subscription.
struct Class {
    /// The subscribed topics that exist, ascending.
    topics: Vec<TopicIndex>,
    /// Member indices in member order.
    members: Vec<u32>,
    /// The least and the most loaded member's load (kept up to date while balancing).
    min: u32,
    max: u32,
}

/// Hands partitions to the least loaded members of one class, ties in member order, in `O(1)`
/// amortised per partition (Kafka's "least loaded range"). Loads of the class's members must
/// change only through it while it is in use.
struct Dealer {
    /// The class's members by (load when the dealer was made, member order).
    sorted: Vec<u32>,
    /// `sorted[..end]` are at `level` or, before `next`, at `level + 1`.
    end: usize,
    next: usize,
    level: u32,
}

impl Dealer {
    fn new(members: &[u32], loads: &[u32]) -> Dealer {
        let mut sorted = members.to_vec();
        // Members come in member order, so this stable sort is linear when loads are equal.
        sorted.sort_by_key(|&m| loads[m as usize]);
        let level = loads[sorted[0] as usize];
        let end = sorted
            .iter()
            .take_while(|&&m| loads[m as usize] == level)
            .count();
        Dealer {
            sorted,
            end,
            next: 0,
            level,
        }
    }

    /// The member the next partition goes to, and its load now.
    fn peek(&self) -> (u32, u32) {
        if self.next < self.end {
            (self.sorted[self.next], self.level)
        } else {
            (self.sorted[0], self.level + 1)
        }
    }

    fn deal(&mut self, loads: &[u32]) -> u32 {
        if self.next == self.end {
            self.level += 1;
            while self.end < self.sorted.len()
                && loads[self.sorted[self.end] as usize] == self.level
            {
                self.end += 1;
            }
            self.next = 0;
        }
        let m = self.sorted[self.next];
        self.next += 1;
        m
    }
}

struct Heterogeneous<'a> {
    spec: &'a GroupSpec,
    order: &'a [usize],
    /// Position of each member in member order.
    rank: Vec<u32>,
    class_of: Vec<u32>,
    classes: Vec<Class>,
    /// The classes subscribed to each topic, ascending.
    topic_classes: Vec<Vec<u32>>,
    /// Members subscribed to each topic.
    subscribers: Vec<u32>,
    layout: Layout,
    owner: Vec<u32>,
    loads: Vec<u32>,
}

impl<'a> Heterogeneous<'a> {
    fn new(spec: &'a GroupSpec, order: &'a [usize]) -> Heterogeneous<'a> {
        let n = spec.members.len();
        let t_count = spec.topics.len();
        let rank = ranks(order);

        // Classes by allocation first, then by content; members visited in listing order (in
        // memory order, and members sharing a subscription tend to be listed together). Class
        // numbers never decide anything: ties are broken by member order.
        let mut class_of = vec![0u32; n];
        let mut classes: Vec<Class> = Vec::new();
        let mut by_ptr: HashMap<*const TopicIndex, u32> = HashMap::new();
        let mut by_content: HashMap<&'a [TopicIndex], u32> = HashMap::new();
        let mut last: Option<(*const TopicIndex, u32)> = None;
        for (m, member) in spec.members.iter().enumerate() {
            let sub = &member.subscription;
            let ptr = sub.as_ptr();
            let c = match last {
                Some((p, c)) if p == ptr => c,
                _ => match by_ptr.get(&ptr) {
                    Some(&c) => c,
                    None => {
                        let c = *by_content.entry(&sub[..]).or_insert_with(|| {
                            classes.push(Class {
                                topics: sub
                                    .iter()
                                    .copied()
                                    .filter(|&t| (t as usize) < t_count)
                                    .collect(),
                                members: Vec::new(),
                                min: 0,
                                max: 0,
                            });
                            (classes.len() - 1) as u32
                        });
                        by_ptr.insert(ptr, c);
                        c
                    }
                },
            };
            last = Some((ptr, c));
            class_of[m] = c;
        }
        for &m in order {
            classes[class_of[m] as usize].members.push(m as u32);
        }

        let mut topic_classes = vec![Vec::new(); t_count];
        let mut subscribers = vec![0u32; t_count];
        for (c, class) in classes.iter().enumerate() {
            for &t in &class.topics {
                topic_classes[t as usize].push(c as u32);
                subscribers[t as usize] += class.members.len() as u32;
            }
        }
        let laid: Vec<TopicIndex> = (0..t_count as u32)
            .filter(|&t| subscribers[t as usize] > 0)
            .collect();
        let layout = Layout::new(spec, laid);
        let owner = vec![NONE; layout.total];
        Heterogeneous {
            spec,
            order,
            rank,
            class_of,
            classes,
            topic_classes,
            subscribers,
            layout,
            owner,
            loads: vec![0; n],
        }
    }

    fn run(mut self) -> Assignment {
        self.keep_owned();
        self.assign_free();
        self.balance();
        self.layout
            .emit(self.spec, self.order, &self.owner, &self.loads)
    }

    /// Kafka's topic order: partitions per subscriber descending, then subscribers ascending,
    /// then topic index.
    fn sort_topics(&self, topics: &mut [TopicIndex]) {
        let parts = |t: TopicIndex| self.spec.topics[t as usize].partitions as u64;
        let subs = |t: TopicIndex| self.subscribers[t as usize] as u64;
        topics.sort_unstable_by(|&a, &b| {
            (parts(b) * subs(a))
                .cmp(&(parts(a) * subs(b)))
                .then(subs(a).cmp(&subs(b)))
                .then(a.cmp(&b))
        });
    }

    /// Keeps every owned partition of a topic the member still subscribes to.
    fn keep_owned(&mut self) {
        for (m, member) in self.spec.members.iter().enumerate() {
            let topics = &self.classes[self.class_of[m] as usize].topics;
            for &p in &member.owned {
                if topics.binary_search(&p.topic).is_err() {
                    continue;
                }
                if let Some(f) = self.layout.flat(self.spec, p) {
                    claim(&mut self.owner, &mut self.loads, &self.rank, f, m);
                }
            }
        }
    }

    /// Each free partition to the least loaded subscriber of its topic, topics in Kafka's order.
    fn assign_free(&mut self) {
        let mut topics: Vec<TopicIndex> = self
            .layout
            .topics
            .iter()
            .copied()
            .filter(|&t| {
                let off = self.layout.offset[t as usize] as usize;
                let count = self.spec.topics[t as usize].partitions as usize;
                self.owner[off..off + count].contains(&NONE)
            })
            .collect();
        self.sort_topics(&mut topics);

        let mut dealers: Vec<Option<Dealer>> = (0..self.classes.len()).map(|_| None).collect();
        let mut heap: BinaryHeap<Reverse<(u32, u32, u32)>> = BinaryHeap::new();
        for t in topics {
            let off = self.layout.offset[t as usize] as usize;
            let count = self.spec.topics[t as usize].partitions as usize;
            let classes = &self.topic_classes[t as usize];
            for &c in classes {
                if dealers[c as usize].is_none() {
                    dealers[c as usize] =
                        Some(Dealer::new(&self.classes[c as usize].members, &self.loads));
                }
            }
            if let [c] = classes[..] {
                let dealer = dealers[c as usize].as_mut().expect("made above");
                for f in off..off + count {
                    if self.owner[f] == NONE {
                        let m = dealer.deal(&self.loads);
                        self.owner[f] = m;
                        self.loads[m as usize] += 1;
                    }
                }
                continue;
            }
            heap.clear();
            for &c in classes {
                let (m, load) = dealers[c as usize].as_ref().expect("made above").peek();
                heap.push(Reverse((load, self.rank[m as usize], c)));
            }
            for f in off..off + count {
                if self.owner[f] != NONE {
                    continue;
                }
                let Reverse((_, _, c)) = heap.pop().expect("a topic has a subscriber");
                let dealer = dealers[c as usize].as_mut().expect("made above");
                let m = dealer.deal(&self.loads);
                self.owner[f] = m;
                self.loads[m as usize] += 1;
                let (next, load) = dealer.peek();
                heap.push(Reverse((load, self.rank[next as usize], c)));
            }
        }
    }

    fn refresh_class(&mut self, c: usize) {
        let class = &mut self.classes[c];
        let (mut min, mut max) = (u32::MAX, 0);
        for &m in &class.members {
            let l = self.loads[m as usize];
            min = min.min(l);
            max = max.max(l);
        }
        class.min = min;
        class.max = max;
    }

    /// Moves partitions from the most loaded holders of a topic to its least loaded subscribers
    /// until, for every topic, no holder is two or more above a subscriber. Each move lowers the
    /// sum of squared loads, so this ends.
    fn balance(&mut self) {
        for c in 0..self.classes.len() {
            self.refresh_class(c);
        }
        let mut topics: Vec<TopicIndex> = self
            .layout
            .topics
            .iter()
            .copied()
            .filter(|&t| self.subscribers[t as usize] >= 2)
            .collect();
        self.sort_topics(&mut topics);
        let mut scratch = Scratch {
            holder_of: vec![NONE; self.spec.members.len()],
            ..Scratch::default()
        };
        loop {
            let mut moved = false;
            for &t in &topics {
                let classes = &self.topic_classes[t as usize];
                let hi = classes.iter().map(|&c| self.classes[c as usize].max).max();
                let lo = classes.iter().map(|&c| self.classes[c as usize].min).min();
                if let (Some(hi), Some(lo)) = (hi, lo) {
                    if hi >= lo + 2 {
                        moved |= self.balance_topic(t, &mut scratch);
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn balance_topic(&mut self, t: TopicIndex, s: &mut Scratch) -> bool {
        let off = self.layout.offset[t as usize] as usize;
        let count = self.spec.topics[t as usize].partitions as usize;
        s.pairs.clear();
        s.pairs
            .extend((0..count).map(|p| (self.owner[off + p], p as u32)));
        s.pairs.sort_unstable();
        s.holders.clear();
        for (i, &(m, _)) in s.pairs.iter().enumerate() {
            match s.holders.last_mut() {
                Some(h) if h.0 == m => h.2 = i + 1,
                _ => {
                    s.holder_of[m as usize] = s.holders.len() as u32;
                    s.holders.push((m, i, i + 1));
                }
            }
        }
        let rank = &self.rank;
        let loads = &mut self.loads;
        let mut holders: BinaryHeap<(u32, Reverse<u32>, u32)> = s
            .holders
            .iter()
            .enumerate()
            .map(|(i, &(m, _, _))| (loads[m as usize], Reverse(rank[m as usize]), i as u32))
            .collect();
        let mut receivers: BinaryHeap<Reverse<(u32, u32, u32)>> = self.topic_classes[t as usize]
            .iter()
            .flat_map(|&c| self.classes[c as usize].members.iter())
            .map(|&m| Reverse((loads[m as usize], rank[m as usize], m)))
            .collect();

        s.touched.clear();
        loop {
            let giver = loop {
                let Some(&(l, _, h)) = holders.peek() else {
                    break None;
                };
                let (m, start, end) = s.holders[h as usize];
                if start == end || loads[m as usize] != l {
                    holders.pop();
                    continue;
                }
                break Some(h as usize);
            };
            let taker = loop {
                let Some(&Reverse((l, _, m))) = receivers.peek() else {
                    break None;
                };
                if loads[m as usize] != l {
                    receivers.pop();
                    continue;
                }
                break Some(m);
            };
            let (Some(h), Some(r)) = (giver, taker) else {
                break;
            };
            let g = s.holders[h].0;
            if loads[g as usize] < loads[r as usize] + 2 {
                break;
            }
            holders.pop();
            receivers.pop();
            s.holders[h].2 -= 1;
            let p = s.pairs[s.holders[h].2].1 as usize;
            self.owner[off + p] = r;
            loads[g as usize] -= 1;
            loads[r as usize] += 1;
            if s.holders[h].1 < s.holders[h].2 {
                holders.push((loads[g as usize], Reverse(rank[g as usize]), h as u32));
            }
            receivers.push(Reverse((loads[g as usize], rank[g as usize], g)));
            receivers.push(Reverse((loads[r as usize], rank[r as usize], r)));
            let hr = s.holder_of[r as usize];
            if hr != NONE && s.holders[hr as usize].1 < s.holders[hr as usize].2 {
                holders.push((loads[r as usize], Reverse(rank[r as usize]), hr));
            }
            s.touched.push(self.class_of[g as usize]);
            s.touched.push(self.class_of[r as usize]);
        }
        for &(m, _, _) in &s.holders {
            s.holder_of[m as usize] = NONE;
        }
        let moved = !s.touched.is_empty();
        s.touched.sort_unstable();
        s.touched.dedup();
        let touched = std::mem::take(&mut s.touched);
        for &c in &touched {
            self.refresh_class(c as usize);
        }
        s.touched = touched;
        moved
    }
}

/// Buffers reused across topics while balancing.
#[derive(Default)]
struct Scratch {
    /// (owner, partition) of the topic's partitions, sorted.
    pairs: Vec<(u32, u32)>,
    /// (member, start, end) ranges of `pairs`; `end` shrinks as partitions leave.
    holders: Vec<(u32, usize, usize)>,
    /// Member index -> index in `holders`, [`NONE`] outside the topic being balanced.
    holder_of: Vec<u32>,
    touched: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignor::testing::spec;

    fn p(t: u32, n: u32) -> Partition {
        Partition::new(t, n)
    }

    fn all(t: u32, n: u32) -> Vec<Partition> {
        (0..n).map(|i| p(t, i)).collect()
    }

    #[test]
    fn one_member_gets_everything() {
        // Kafka's testOneMemberSubscribedToTwoTopics.
        let s = spec(&[3, 2], &[vec![0, 1]], &[]);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![vec![p(0, 0), p(0, 1), p(0, 2), p(1, 0), p(1, 1)]]);
    }

    #[test]
    fn homogeneous_from_nothing_deals_runs_in_member_order() {
        // Kafka's testFirstAssignmentTwoMembersTwoTopics shape, with three members: 6 partitions,
        // 2 each, runs in topic order.
        let s = spec(&[3, 3], &[vec![0, 1], vec![0, 1], vec![0, 1]], &[]);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a[0], vec![p(0, 0), p(0, 1)]);
        assert_eq!(a[1], vec![p(0, 2), p(1, 0)]);
        assert_eq!(a[2], vec![p(1, 1), p(1, 2)]);
    }

    #[test]
    fn homogeneous_remainder_goes_to_the_first_members() {
        let s = spec(&[7], &[vec![0], vec![0], vec![0]], &[]);
        let a = UniformAssignor.assign(&s);
        assert_eq!(
            a,
            vec![all(0, 3), vec![p(0, 3), p(0, 4)], vec![p(0, 5), p(0, 6)]]
        );
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let s = spec(&[2], &[vec![0], vec![0], vec![0]], &[]);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![vec![p(0, 0)], vec![p(0, 1)], vec![]]);
    }

    #[test]
    fn a_joining_member_takes_one_from_each_without_other_moves() {
        // Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics:
        // two members own 3 each; a third joins; each old member gives up exactly one.
        let owned = [
            vec![p(0, 0), p(0, 1), p(1, 0)],
            vec![p(0, 2), p(1, 1), p(1, 2)],
        ];
        let s = spec(&[3, 3], &[vec![0, 1], vec![0, 1], vec![0, 1]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a[0], vec![p(0, 0), p(0, 1)]);
        assert_eq!(a[1], vec![p(0, 2), p(1, 1)]);
        assert_eq!(a[2], vec![p(1, 0), p(1, 2)]);
    }

    #[test]
    fn a_leaver_s_partitions_go_to_the_others_and_nothing_else_moves() {
        // Kafka's testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics:
        // three members held 2 each (7 partitions: one held 3); the one with 3 stays, one leaves.
        let owned = [vec![p(0, 0), p(0, 1), p(0, 2)], vec![p(1, 0), p(1, 1)]];
        let s = spec(&[3, 4], &[vec![0, 1], vec![0, 1]], &owned);
        let a = UniformAssignor.assign(&s);
        // 7 partitions for 2 members: 4 and 3; m0 keeps its 3 and gets one of the leaver's two.
        assert_eq!(a[0], vec![p(0, 0), p(0, 1), p(0, 2), p(1, 2)]);
        assert_eq!(a[1], vec![p(1, 0), p(1, 1), p(1, 3)]);
    }

    #[test]
    fn the_extra_partition_goes_to_a_member_that_already_has_it() {
        // 5 partitions, 2 members: the quota is 2 and one member gets 3. The second member owns 3,
        // so it is the one that keeps 3, although the first comes first in member order.
        let owned = [vec![p(0, 0), p(0, 1)], vec![p(0, 2), p(0, 3), p(0, 4)]];
        let s = spec(&[5], &[vec![0], vec![0]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, owned.to_vec());
    }

    #[test]
    fn over_quota_members_give_up_their_highest_partitions() {
        let owned = [all(0, 6), vec![]];
        let s = spec(&[6], &[vec![0], vec![0]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![all(0, 3), vec![p(0, 3), p(0, 4), p(0, 5)]]);
    }

    #[test]
    fn partitions_of_dropped_topics_or_out_of_range_are_not_kept() {
        // m0 owned t1-0 (no longer subscribed) and t0-9 (t0 has 4 partitions now).
        let owned = [vec![p(0, 0), p(0, 9), p(1, 0)], vec![p(0, 1)]];
        let s = spec(&[4, 2], &[vec![0], vec![0]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![vec![p(0, 0), p(0, 2)], vec![p(0, 1), p(0, 3)]]);
        let s = spec(&[4, 2], &[vec![0], vec![0, 1]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a[0].iter().filter(|x| x.topic == 1).count(), 0);
        assert!(a[0].contains(&p(0, 0)) && a[1].contains(&p(0, 1)));
        assert!(!a.iter().flatten().any(|x| x.partition >= 4 && x.topic == 0));
    }

    #[test]
    fn a_partition_claimed_twice_stays_with_the_first_member() {
        let owned = [vec![p(0, 0)], vec![p(0, 0)]];
        let s = spec(&[2], &[vec![0], vec![0]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![vec![p(0, 0)], vec![p(0, 1)]]);
        let s = spec(&[2, 1], &[vec![0], vec![0, 1]], &owned);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a[0][0], p(0, 0));
        assert!(!a[1].contains(&p(0, 0)));
    }

    #[test]
    fn heterogeneous_members_without_common_topics() {
        // Kafka's testTwoMembersNoTopicsInCommon (heterogeneous builder).
        let s = spec(&[3, 2], &[vec![0], vec![1]], &[]);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![all(0, 3), all(1, 2)]);
    }

    #[test]
    fn heterogeneous_sole_subscribers_are_counted_before_sharing() {
        // m1 is the only subscriber of t1 (3), so the shared t0 (3) goes to m0: 3 and 3, not
        // 2 and 4.
        let s = spec(&[3, 3], &[vec![0], vec![0, 1]], &[]);
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![all(0, 3), all(1, 3)]);
    }

    #[test]
    fn heterogeneous_three_members_overlapping() {
        // Kafka's testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions shape:
        // m0 {t0, t1}, m1 {t1, t2}, m2 {t2, t0}; 3, 3, 3 partitions: 3 each.
        let s = spec(&[3, 3, 3], &[vec![0, 1], vec![1, 2], vec![2, 0]], &[]);
        let a = UniformAssignor.assign(&s);
        assert!(a.iter().all(|l| l.len() == 3), "{a:?}");
        assert_eq!(a.iter().map(<[Partition]>::len).sum::<usize>(), 9);
    }

    #[test]
    fn heterogeneous_balanced_assignment_is_kept_as_is() {
        let owned = [
            vec![p(0, 0), p(1, 1)],
            vec![p(1, 0), p(2, 0)],
            vec![p(0, 1), p(2, 1)],
        ];
        let s = spec(&[2, 2, 2], &[vec![0, 1], vec![1, 2], vec![2, 0]], &owned);
        assert_eq!(UniformAssignor.assign(&s), owned.to_vec());
    }

    #[test]
    fn heterogeneous_joiner_takes_from_the_most_loaded_subscribers() {
        // m0 and m1 share t0 (4 partitions, 2 each); m2 subscribes to t0 and t1 (2) and joins.
        let owned = [vec![p(0, 0), p(0, 1)], vec![p(0, 2), p(0, 3)], vec![]];
        let s = spec(&[4, 2], &[vec![0], vec![0], vec![0, 1]], &owned);
        let a = UniformAssignor.assign(&s);
        // m2 gets t1 (2): loads 2, 2, 2; nothing of t0 moves.
        assert_eq!(a, vec![owned[0].clone(), owned[1].clone(), all(1, 2)]);
    }

    #[test]
    fn a_leaver_can_force_another_move() {
        // x {A, B}, l {A}, y {B}; A and B have 2 partitions. x: A0 B0, l: A1, y: B1 is balanced
        // (2, 1, 1). When l leaves, A1 can only go to x (3 against y's 1), so balance requires
        // moving B0 from x to y although y never held it.
        let before = [vec![p(0, 0), p(1, 0)], vec![p(0, 1)], vec![p(1, 1)]];
        let s = spec(&[2, 2], &[vec![0, 1], vec![0], vec![1]], &before);
        assert_eq!(UniformAssignor.assign(&s), before.to_vec());
        let s = spec(
            &[2, 2],
            &[vec![0, 1], vec![1]],
            &[before[0].clone(), before[2].clone()],
        );
        let a = UniformAssignor.assign(&s);
        assert_eq!(a, vec![all(0, 2), all(1, 2)]);
    }

    #[test]
    fn members_listed_in_any_order_get_the_same_partitions() {
        let owned = [vec![p(0, 1)], vec![], vec![p(1, 0), p(1, 1)]];
        let s = spec(&[3, 3], &[vec![0, 1], vec![0], vec![1]], &owned);
        let a = UniformAssignor.assign(&s);
        let mut r = s.clone();
        r.members.reverse();
        let mut b = UniformAssignor.assign(&r).to_lists();
        b.reverse();
        assert_eq!(a, b);
    }
}
