//! The share groups' assignor, as Kafka 4.4's `SimpleAssignor` shapes its answer: every
//! subscribed partition goes to `ceil(members / partitions)` members (a partition may go to
//! several: its records are shared, one acquisition at a time), each member gets about the
//! same number of partitions, and what a member already has is kept where those bounds allow.
//!
//! Kafka's homogeneous builder spreads the slots (`sharing * partitions`) over the members by
//! index; the heterogeneous one works per topic. Here one greedy pass serves both: kept
//! assignments first (within the partition's sharing and the member's quota), then each
//! partition short of its sharing goes to the eligible member holding the fewest, ties by
//! member id, so the answer is deterministic; a member left without a partition (only possible
//! when subscriptions differ) gets the least-shared partition it can read.

use std::collections::{BTreeMap, BTreeSet};

use crate::vocab::{MemberId, Partitions, TopicId};

/// One member as the assignor sees it.
pub struct Subscriber<'a> {
    pub id: &'a MemberId,
    /// The topics it subscribes to that exist, by id.
    pub topics: BTreeSet<TopicId>,
    /// What it has now.
    pub current: &'a Partitions,
}

/// The target assignment of every member, given each subscribed topic's partition count.
pub fn assign(
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<TopicId, u32>,
) -> BTreeMap<MemberId, Partitions> {
    let mut out: BTreeMap<MemberId, BTreeSet<(TopicId, i32)>> = members
        .iter()
        .map(|m| (m.id.clone(), BTreeSet::new()))
        .collect();
    let targets: Vec<(TopicId, i32)> = partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.topics.contains(t)))
        .flat_map(|(t, n)| (0..*n as i32).map(move |p| (*t, p)))
        .collect();
    let readers = members.iter().filter(|m| !m.topics.is_empty()).count();
    if targets.is_empty() || readers == 0 {
        return finish(out);
    }
    let sharing = readers.div_ceil(targets.len());
    // The slots (`sharing` per partition) spread over the readers, as Kafka's desired
    // assignment counts: some get one more, those holding the most now first (stickiness).
    let slots = sharing * targets.len();
    let mut order: Vec<&Subscriber<'_>> = members.iter().filter(|m| !m.topics.is_empty()).collect();
    order.sort_by_key(|m| {
        let held: usize = m.current.values().map(Vec::len).sum();
        (std::cmp::Reverse(held), m.id.as_str())
    });
    let quota: BTreeMap<&MemberId, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id, slots / readers + usize::from(i < slots % readers)))
        .collect();
    let eligible = |tp: &(TopicId, i32)| -> Vec<&Subscriber<'_>> {
        members
            .iter()
            .filter(|m| m.topics.contains(&tp.0))
            .collect()
    };
    let mut holders: BTreeMap<(TopicId, i32), usize> = targets.iter().map(|tp| (*tp, 0)).collect();

    // 1. Keep what members have, within the bounds.
    for m in members {
        for (topic, parts) in m.current {
            for &p in parts {
                let tp = (*topic, p);
                let Some(count) = holders.get_mut(&tp) else {
                    continue;
                };
                let mine = out.get_mut(m.id).expect("every member has an entry");
                let quota = quota.get(m.id).copied().unwrap_or(0);
                if m.topics.contains(topic) && *count < sharing && mine.len() < quota {
                    *count += 1;
                    mine.insert(tp);
                }
            }
        }
    }

    // 2. Each partition up to its sharing, to the least-loaded eligible members.
    for tp in &targets {
        let candidates = eligible(tp);
        let want = sharing.min(candidates.len());
        while holders[tp] < want {
            let pick = candidates
                .iter()
                .filter(|m| !out[m.id].contains(tp))
                .min_by_key(|m| (out[m.id].len(), m.id.as_str()));
            let Some(m) = pick else { break };
            out.get_mut(m.id)
                .expect("every member has an entry")
                .insert(*tp);
            *holders.get_mut(tp).expect("a target") += 1;
        }
    }

    // 3. A reader left with nothing gets the least-shared partition it can read.
    for m in members.iter().filter(|m| !m.topics.is_empty()) {
        if !out[m.id].is_empty() {
            continue;
        }
        let least = targets
            .iter()
            .filter(|tp| m.topics.contains(&tp.0))
            .min_by_key(|tp| (holders[*tp], **tp));
        if let Some(tp) = least {
            out.get_mut(m.id)
                .expect("every member has an entry")
                .insert(*tp);
            *holders.get_mut(tp).expect("a target") += 1;
        }
    }
    finish(out)
}

fn finish(out: BTreeMap<MemberId, BTreeSet<(TopicId, i32)>>) -> BTreeMap<MemberId, Partitions> {
    out.into_iter()
        .map(|(id, set)| {
            let mut parts = Partitions::new();
            for (t, p) in set {
                parts.entry(t).or_default().push(p);
            }
            (id, parts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u8) -> TopicId {
        TopicId::from_bytes([n; 16])
    }

    fn run(
        ids: &[MemberId],
        subs: &[&[TopicId]],
        current: &[Partitions],
        parts: &[(TopicId, u32)],
    ) -> BTreeMap<MemberId, Partitions> {
        let members: Vec<Subscriber<'_>> = ids
            .iter()
            .zip(subs)
            .zip(current)
            .map(|((id, s), c)| Subscriber {
                id,
                topics: s.iter().copied().collect(),
                current: c,
            })
            .collect();
        assign(&members, &parts.iter().copied().collect())
    }

    fn ids(n: usize) -> Vec<MemberId> {
        (0..n).map(|i| MemberId::new(format!("m{i}"))).collect()
    }

    fn count(a: &BTreeMap<MemberId, Partitions>, tp: (TopicId, i32)) -> usize {
        a.values()
            .filter(|p| p.get(&tp.0).is_some_and(|v| v.contains(&tp.1)))
            .count()
    }

    #[test]
    fn more_members_than_partitions_share_each_partition() {
        let t = topic(1);
        let m = ids(8);
        let empty = vec![Partitions::new(); 8];
        let a = run(&m, &[&[t][..]; 8], &empty, &[(t, 2)]);
        for p in a.values() {
            assert_eq!(p.values().map(Vec::len).sum::<usize>(), 1, "{a:?}");
        }
        assert_eq!(count(&a, (t, 0)), 4);
        assert_eq!(count(&a, (t, 1)), 4);
    }

    #[test]
    fn one_member_reads_every_partition_and_three_share_two() {
        let t = topic(1);
        let a = run(&ids(1), &[&[t]], &[Partitions::new()], &[(t, 4)]);
        assert_eq!(a[&MemberId::new("m0")][&t], vec![0, 1, 2, 3]);

        let a = run(
            &ids(3),
            &[&[t][..]; 3],
            &vec![Partitions::new(); 3],
            &[(t, 2)],
        );
        assert_eq!(count(&a, (t, 0)), 2);
        assert_eq!(count(&a, (t, 1)), 2);
        assert!(a.values().all(|p| !p.is_empty()));
    }

    #[test]
    fn what_members_hold_is_kept_when_one_joins() {
        let t = topic(1);
        let before = run(
            &ids(2),
            &[&[t][..]; 2],
            &vec![Partitions::new(); 2],
            &[(t, 4)],
        );
        let m = ids(3);
        let current: Vec<Partitions> = m
            .iter()
            .map(|id| before.get(id).cloned().unwrap_or_default())
            .collect();
        let after = run(&m, &[&[t][..]; 3], &current, &[(t, 4)]);
        for id in &m[..2] {
            let kept = after[id][&t]
                .iter()
                .filter(|p| before[id][&t].contains(p))
                .count();
            assert!(kept >= 1, "{id}: {before:?} -> {after:?}");
        }
        assert!(!after[&m[2]].is_empty());
        for p in 0..4 {
            assert_eq!(count(&after, (t, p)), 1);
        }
    }

    #[test]
    fn members_get_only_topics_they_subscribe_to() {
        let (a, b) = (topic(1), topic(2));
        let got = run(
            &ids(2),
            &[&[a], &[b]],
            &vec![Partitions::new(); 2],
            &[(a, 2), (b, 1)],
        );
        assert_eq!(
            got[&MemberId::new("m0")].keys().collect::<Vec<_>>(),
            vec![&a]
        );
        assert_eq!(
            got[&MemberId::new("m1")].keys().collect::<Vec<_>>(),
            vec![&b]
        );
        assert_eq!(count(&got, (a, 0)) + count(&got, (a, 1)), 2);
    }

    #[test]
    fn no_topics_no_assignment() {
        let got = run(&ids(2), &[&[], &[]], &vec![Partitions::new(); 2], &[]);
        assert!(got.values().all(|p| p.is_empty()));
    }
}
