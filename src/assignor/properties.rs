//! Property tests of every built-in assignor: completeness, balance, determinism (also under a
//! different listing order of the members) and, for `uniform`, stickiness.

use std::collections::HashMap;

use proptest::prelude::*;

use super::range::RangeAssignor;
use super::roundrobin::RoundRobinAssignor;
use super::testing::spec;
use super::uniform::UniformAssignor;
use super::{Assignment, Assignor, GroupSpec, Partition};

const CASES: u32 = 128;

/// Partition counts of up to 6 topics and up to 8 members' subscriptions (possibly empty).
fn heterogeneous() -> impl Strategy<Value = (Vec<u32>, Vec<Vec<u32>>)> {
    prop::collection::vec(0u32..12, 1..=6).prop_flat_map(|parts| {
        let t = parts.len() as u32;
        let subs = prop::collection::vec(prop::collection::vec(0..t, 0..=t as usize), 1..=8);
        (Just(parts), subs)
    })
}

/// Up to 6 topics, 1 to 9 members all subscribed to the same topics.
fn homogeneous() -> impl Strategy<Value = (Vec<u32>, Vec<Vec<u32>>)> {
    (
        prop::collection::vec(0u32..8, 1..=4),
        1usize..=9,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(parts, n, keep)| {
            let t = parts.len() as u32;
            // A non-empty prefix-or-suffix-free subset: every topic with a bit of `keep` set.
            let bits = keep.index(1 << t).max(1);
            let sub: Vec<u32> = (0..t).filter(|i| bits & (1 << i) != 0).collect();
            (parts, vec![sub; n])
        })
}

/// Members in 1 to 4 buckets, each bucket subscribed to its own topics (Kafka's benchmark shape).
fn bucketed() -> impl Strategy<Value = (Vec<u32>, Vec<Vec<u32>>)> {
    prop::collection::vec((prop::collection::vec(0u32..10, 1..=3), 1usize..=4), 1..=4).prop_map(
        |buckets| {
            let mut parts = Vec::new();
            let mut subs = Vec::new();
            for (topics, members) in buckets {
                let first = parts.len() as u32;
                parts.extend(&topics);
                let sub: Vec<u32> = (first..parts.len() as u32).collect();
                subs.extend(std::iter::repeat_n(sub, members));
            }
            (parts, subs)
        },
    )
}

fn loads(a: &Assignment) -> Vec<usize> {
    a.iter().map(<[Partition]>::len).collect()
}

/// Every partition of every subscribed topic exactly once, only to a subscriber; lists sorted.
fn check_complete(s: &GroupSpec, a: &Assignment) {
    assert_eq!(a.len(), s.members.len());
    let mut seen: HashMap<Partition, usize> = HashMap::new();
    for (m, list) in a.iter().enumerate() {
        assert!(list.windows(2).all(|w| w[0] < w[1]), "unsorted {list:?}");
        for &p in list {
            assert!(
                s.members[m].subscription.contains(&p.topic),
                "{p:?} to non-subscriber {m}"
            );
            assert!(p.partition < s.topics[p.topic as usize].partitions);
            assert!(seen.insert(p, m).is_none(), "{p:?} assigned twice");
        }
    }
    for (t, subs) in s.subscribers().iter().enumerate() {
        if !subs.is_empty() {
            for n in 0..s.topics[t].partitions {
                assert!(
                    seen.contains_key(&Partition::new(t as u32, n)),
                    "t{t}-{n} unassigned"
                );
            }
        }
    }
}

/// Uniform's balance: no partition could go to another subscriber of its topic at least 2 lower.
fn check_uniform_balance(s: &GroupSpec, a: &Assignment) {
    let l = loads(a);
    let subs = s.subscribers();
    for (m, list) in a.iter().enumerate() {
        for p in list {
            for &o in &subs[p.topic as usize] {
                assert!(
                    l[m] < l[o] + 2,
                    "{p:?} at {m} ({}) could go to {o} ({})",
                    l[m],
                    l[o]
                );
            }
        }
    }
    if let (true, Some(min), Some(max)) = (s.is_homogeneous(), l.iter().min(), l.iter().max()) {
        assert!(max - min <= 1, "homogeneous loads {l:?}");
    }
}

fn with_owned(s: &GroupSpec, a: &Assignment) -> GroupSpec {
    let mut s = s.clone();
    for (m, list) in a.iter().enumerate() {
        s.members[m].owned = list.to_vec();
    }
    s
}

/// The assignment keyed by member id.
fn by_id(s: &GroupSpec, a: &Assignment) -> HashMap<String, Vec<Partition>> {
    s.members
        .iter()
        .zip(a.iter())
        .map(|(m, l)| (m.member_id.to_string(), l.to_vec()))
        .collect()
}

/// Same spec twice gives the same output; members listed in another order get the same
/// partitions by id.
fn check_deterministic(assignor: &dyn Assignor, s: &GroupSpec, perm: &[usize]) {
    let a = assignor.assign(s);
    assert_eq!(a, assignor.assign(s));
    let mut shuffled = s.clone();
    shuffled.members = perm.iter().map(|&i| s.members[i].clone()).collect();
    let b = assignor.assign(&shuffled);
    assert_eq!(by_id(s, &a), by_id(&shuffled, &b));
}

/// Partitions held by one member in `before` (by id) and another member in `after`.
fn moved(
    before: &HashMap<String, Vec<Partition>>,
    after: &HashMap<String, Vec<Partition>>,
) -> Vec<(String, Partition)> {
    let mut out = Vec::new();
    for (id, list) in before {
        for p in list {
            if !after.get(id).is_some_and(|l| l.contains(p)) {
                out.push((id.clone(), *p));
            }
        }
    }
    out.sort();
    out
}

fn perm(n: usize) -> impl Strategy<Value = Vec<usize>> {
    Just((0..n).collect::<Vec<usize>>()).prop_shuffle()
}

fn with_perm(
    st: impl Strategy<Value = (Vec<u32>, Vec<Vec<u32>>)>,
) -> impl Strategy<Value = (Vec<u32>, Vec<Vec<u32>>, Vec<usize>)> {
    st.prop_flat_map(|(p, s)| {
        let n = s.len();
        (Just(p), Just(s), perm(n))
    })
}

/// A spec with a member removed.
fn without(s: &GroupSpec, leaver: usize) -> GroupSpec {
    let mut s = s.clone();
    s.members.remove(leaver);
    s
}

/// A spec with a member (id sorting among the others) subscribed like member `like`.
fn with_joiner(s: &GroupSpec, like: usize, id: &str) -> GroupSpec {
    let mut s = s.clone();
    let mut m = s.members[like].clone();
    m.member_id = crate::vocab::MemberId::new(id.to_string());
    m.owned = Vec::new();
    s.members.push(m);
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn range_is_complete_balanced_per_topic_and_deterministic(
        (parts, subs, perm) in with_perm(heterogeneous())
    ) {
        let s = spec(&parts, &subs, &[]);
        let a = RangeAssignor.assign(&s);
        check_complete(&s, &a);
        for (t, members) in s.subscribers().iter().enumerate() {
            let counts: Vec<usize> = members
                .iter()
                .map(|&m| a[m].iter().filter(|p| p.topic == t as u32).count())
                .collect();
            if let (Some(min), Some(max)) = (counts.iter().min(), counts.iter().max()) {
                prop_assert!(max - min <= 1, "t{} counts {:?}", t, counts);
            }
        }
        check_deterministic(&RangeAssignor, &s, &perm);
    }

    #[test]
    fn roundrobin_is_complete_and_deterministic((parts, subs, perm) in with_perm(heterogeneous())) {
        let s = spec(&parts, &subs, &[]);
        check_complete(&s, &RoundRobinAssignor.assign(&s));
        check_deterministic(&RoundRobinAssignor, &s, &perm);
    }

    #[test]
    fn roundrobin_balances_homogeneous_groups((parts, subs, perm) in with_perm(homogeneous())) {
        let s = spec(&parts, &subs, &[]);
        let l = loads(&RoundRobinAssignor.assign(&s));
        prop_assert!(l.iter().max().unwrap() - l.iter().min().unwrap() <= 1, "{:?}", l);
        check_deterministic(&RoundRobinAssignor, &s, &perm);
    }

    #[test]
    fn uniform_is_complete_balanced_and_deterministic(
        (parts, subs, perm) in with_perm(heterogeneous()),
    ) {
        let s = spec(&parts, &subs, &[]);
        let a = UniformAssignor.assign(&s);
        check_complete(&s, &a);
        check_uniform_balance(&s, &a);
        check_deterministic(&UniformAssignor, &s, &perm);
    }

    #[test]
    fn uniform_balances_homogeneous_groups((parts, subs, perm) in with_perm(homogeneous())) {
        let s = spec(&parts, &subs, &[]);
        let a = UniformAssignor.assign(&s);
        check_complete(&s, &a);
        check_uniform_balance(&s, &a);
        check_deterministic(&UniformAssignor, &s, &perm);
    }

    /// From arbitrary (valid or not) owned partitions: still complete, balanced, deterministic.
    #[test]
    fn uniform_from_arbitrary_owned_partitions(
        (parts, subs, perm) in with_perm(heterogeneous()),
        claims in prop::collection::vec((0usize..8, 0u32..8, 0u32..14), 0..40),
    ) {
        let mut owned = vec![Vec::new(); subs.len()];
        let mut taken = std::collections::HashSet::new();
        for (m, t, n) in claims {
            let p = Partition::new(t % parts.len() as u32, n);
            if taken.insert(p) {
                owned[m % subs.len()].push(p);
            }
        }
        let s = spec(&parts, &subs, &owned);
        let a = UniformAssignor.assign(&s);
        check_complete(&s, &a);
        check_uniform_balance(&s, &a);
        check_deterministic(&UniformAssignor, &s, &perm);
    }

    /// n -> n + 1 (homogeneous): at most ceil(P / (n + 1)) partitions move.
    #[test]
    fn uniform_joiner_moves_at_most_its_share((parts, subs) in homogeneous(), pos in 0usize..10) {
        let s = spec(&parts, &subs, &[]);
        let before = with_owned(&s, &UniformAssignor.assign(&s));
        // The joiner's id sorts anywhere among the others.
        let id = format!("m{:06}x", pos.min(s.members.len()));
        let after = with_joiner(&before, 0, &id);
        let a = UniformAssignor.assign(&after);
        check_complete(&after, &a);
        check_uniform_balance(&after, &a);
        let total = s.partition_count_subscribed();
        let n1 = after.members.len();
        let moves = moved(&by_id(&before, &UniformAssignor.assign(&before)), &by_id(&after, &a));
        prop_assert!(moves.len() <= total.div_ceil(n1), "{} moved of {} for {}", moves.len(), total, n1);
    }

    /// n + 1 -> n (homogeneous): only the leaver's partitions move.
    #[test]
    fn uniform_leaver_moves_only_its_partitions_homogeneous(
        (parts, subs) in homogeneous(),
        pos in 0usize..10,
        leaver in any::<prop::sample::Index>(),
    ) {
        // A history first (a joiner whose id sorts anywhere), so that the members holding one
        // more are not simply the first ones.
        let s = spec(&parts, &subs, &[]);
        let s = with_owned(&s, &UniformAssignor.assign(&s));
        let s = with_joiner(&s, 0, &format!("m{:06}x", pos.min(s.members.len())));
        let before = with_owned(&s, &UniformAssignor.assign(&s));
        let leaver = leaver.index(s.members.len());
        let after = without(&before, leaver);
        let a = UniformAssignor.assign(&after);
        check_complete(&after, &a);
        check_uniform_balance(&after, &a);
        let mut old = by_id(&before, &UniformAssignor.assign(&before));
        old.remove(&before.members[leaver].member_id.to_string());
        prop_assert_eq!(moved(&old, &by_id(&after, &a)), vec![]);
    }

    /// n + 1 -> n (heterogeneous, each bucket of members with its own topics): only the leaver's
    /// partitions move. With overlapping subscriptions balance can require more moves (see
    /// uniform's `a_leaver_can_force_another_move`).
    #[test]
    fn uniform_leaver_moves_only_its_partitions_bucketed(
        (parts, subs) in bucketed(),
        like in any::<prop::sample::Index>(),
        leaver in any::<prop::sample::Index>(),
    ) {
        let s = spec(&parts, &subs, &[]);
        let s = with_owned(&s, &UniformAssignor.assign(&s));
        let like = like.index(s.members.len());
        let s = with_joiner(&s, like, &format!("m{like:06}x"));
        let before = with_owned(&s, &UniformAssignor.assign(&s));
        let leaver = leaver.index(s.members.len());
        let after = without(&before, leaver);
        let a = UniformAssignor.assign(&after);
        check_complete(&after, &a);
        check_uniform_balance(&after, &a);
        let mut old = by_id(&before, &UniformAssignor.assign(&before));
        old.remove(&before.members[leaver].member_id.to_string());
        prop_assert_eq!(moved(&old, &by_id(&after, &a)), vec![]);
    }

    /// A joiner to one bucket takes at most its share of that bucket, nothing else moves.
    #[test]
    fn uniform_joiner_moves_at_most_its_share_bucketed(
        (parts, subs) in bucketed(),
        like in any::<prop::sample::Index>(),
    ) {
        let s = spec(&parts, &subs, &[]);
        let before = with_owned(&s, &UniformAssignor.assign(&s));
        let like = like.index(s.members.len());
        let after = with_joiner(&before, like, "m999999");
        let a = UniformAssignor.assign(&after);
        check_complete(&after, &a);
        check_uniform_balance(&after, &a);
        let sub = &s.members[like].subscription;
        let bucket_parts: usize = sub.iter().map(|&t| parts[t as usize] as usize).sum();
        let bucket_members = s.members.iter().filter(|m| &m.subscription == sub).count() + 1;
        let moves = moved(&by_id(&before, &UniformAssignor.assign(&before)), &by_id(&after, &a));
        prop_assert!(moves.len() <= bucket_parts.div_ceil(bucket_members));
        prop_assert!(moves.iter().all(|(_, p)| sub.contains(&p.topic)));
    }

    /// Sticky with any subscriptions: an assignment that is already balanced is kept as it is,
    /// and a joiner to a topic of its own takes nothing from anyone.
    #[test]
    fn uniform_keeps_a_balanced_assignment_heterogeneous(
        (parts, subs, perm) in with_perm(heterogeneous()),
        extra in 0u32..6,
    ) {
        let s = spec(&parts, &subs, &[]);
        let a = UniformAssignor.assign(&s);
        let again = with_owned(&s, &a);
        prop_assert_eq!(&UniformAssignor.assign(&again), &a);
        check_deterministic(&UniformAssignor, &again, &perm);

        let mut joined = again.clone();
        let t = joined.topics.len() as u32;
        joined.topics.push(super::TopicSpec { name: "own".into(), partitions: extra });
        let mut m = joined.members[0].clone();
        m.member_id = crate::vocab::MemberId::new("m999999".to_string());
        m.subscription = std::sync::Arc::from(vec![t]);
        m.owned = Vec::new();
        joined.members.push(m);
        let b = UniformAssignor.assign(&joined);
        check_complete(&joined, &b);
        check_uniform_balance(&joined, &b);
        prop_assert!(b.iter().take(a.len()).eq(a.iter()));
    }
}

impl GroupSpec {
    /// Partitions of the topics some member subscribes to.
    fn partition_count_subscribed(&self) -> usize {
        self.subscribers()
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .map(|(t, _)| self.topics[t].partitions as usize)
            .sum()
    }
}
