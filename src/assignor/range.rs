//! Kafka's `RangeAssignor`: per topic, the subscribed members in `MemberInfo` order each take a
//! contiguous range; the first `partitions % members` take one more. Members subscribed to the
//! same topics get the same partition numbers of each (co-partitioning). Not sticky, so every
//! rebalance is a full reassignment.

use std::collections::HashMap;

use super::{Assignment, Assignor, GroupSpec, Partition, TopicIndex};

#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl RangeAssignor {
    /// Calls `f(topic, member, range)` for every member's range of every topic, topics in
    /// index order. `buckets` are members with one subscription, each in member order;
    /// `topic_buckets` the buckets subscribed to each topic.
    fn for_each_range(
        &self,
        spec: &GroupSpec,
        buckets: &[Vec<usize>],
        topic_buckets: &[Vec<usize>],
        rank: &[usize],
        mut f: impl FnMut(usize, usize, std::ops::Range<usize>),
    ) {
        let mut merged: Vec<usize> = Vec::new();
        for (topic, in_buckets) in topic_buckets.iter().enumerate() {
            let members: &[usize] = match in_buckets.as_slice() {
                [] => continue,
                [b] => &buckets[*b],
                several => {
                    merged.clear();
                    merged.extend(several.iter().flat_map(|&b| buckets[b].iter().copied()));
                    merged.sort_unstable_by_key(|&m| rank[m]);
                    &merged
                }
            };
            let partitions = spec.topics[topic].partitions as usize;
            let per = partitions / members.len();
            let extra = partitions % members.len();
            // With fewer partitions than members, only the first `extra` get any.
            let takers = if per == 0 { extra } else { members.len() };
            for (k, &m) in members[..takers].iter().enumerate() {
                let start = k * per + k.min(extra);
                f(topic, m, start..start + per + usize::from(k < extra));
            }
        }
    }
}

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(&self, spec: &GroupSpec) -> Assignment {
        // Members with the same subscription form a bucket, each in member order. A topic's
        // subscribers are the buckets that include it: one bucket's list as it is (every topic
        // of a homogeneous group), several merged by member order. No per-topic sort.
        let order = spec.member_order();
        let mut rank = vec![0usize; spec.members.len()];
        for (r, &m) in order.iter().enumerate() {
            rank[m] = r;
        }
        let mut bucket_of: HashMap<&[TopicIndex], usize> = HashMap::new();
        // Members sharing one subscription allocation skip hashing its contents.
        let mut bucket_of_ptr: HashMap<*const TopicIndex, usize> = HashMap::new();
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        let mut topic_buckets: Vec<Vec<usize>> = vec![Vec::new(); spec.topics.len()];
        for &m in &order {
            let subscription = &spec.members[m].subscription[..];
            let b = match bucket_of_ptr.get(&subscription.as_ptr()) {
                Some(&b) => b,
                None => {
                    let b = *bucket_of.entry(subscription).or_insert_with(|| {
                        for &t in subscription {
                            topic_buckets[t as usize].push(buckets.len());
                        }
                        buckets.push(Vec::new());
                        buckets.len() - 1
                    });
                    bucket_of_ptr.insert(subscription.as_ptr(), b);
                    b
                }
            };
            buckets[b].push(m);
        }
        // Two passes over the same ranges: count each member's partitions, then write them into
        // one flat list at each member's offset (no per-member vectors to grow).
        let mut counts = vec![0u32; spec.members.len()];
        self.for_each_range(spec, &buckets, &topic_buckets, &rank, |_, m, range| {
            counts[m] += range.len() as u32;
        });
        let mut spans = Vec::with_capacity(counts.len());
        let mut cursor = Vec::with_capacity(counts.len());
        let mut total = 0u32;
        for &n in &counts {
            spans.push((total, total + n));
            cursor.push(total as usize);
            total += n;
        }
        let mut partitions = vec![Partition::new(0, 0); total as usize];
        // Topics in index order and partitions ascending: every member's span comes out sorted.
        self.for_each_range(spec, &buckets, &topic_buckets, &rank, |topic, m, range| {
            for p in range {
                partitions[cursor[m]] = Partition::new(topic as u32, p as u32);
                cursor[m] += 1;
            }
        });
        Assignment::from_spans(partitions, spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignor::testing::spec;

    fn p(t: u32, n: u32) -> Partition {
        Partition::new(t, n)
    }

    #[test]
    fn ranges_per_topic_with_the_remainder_to_the_first_members() {
        // Kafka's RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions, with 3 partitions
        // each: c0 gets t0-0,1 and t1-0,1; c1 gets t0-2 and t1-2.
        let s = spec(&[3, 3], &[vec![0, 1], vec![0, 1]], &[]);
        let a = RangeAssignor.assign(&s);
        assert_eq!(a[0], vec![p(0, 0), p(0, 1), p(1, 0), p(1, 1)]);
        assert_eq!(a[1], vec![p(0, 2), p(1, 2)]);
    }

    #[test]
    fn only_subscribers_of_a_topic_share_it() {
        let s = spec(&[2, 4], &[vec![0], vec![0, 1], vec![1]], &[]);
        let a = RangeAssignor.assign(&s);
        assert_eq!(a[0], vec![p(0, 0)]);
        assert_eq!(a[1], vec![p(0, 1), p(1, 0), p(1, 1)]);
        assert_eq!(a[2], vec![p(1, 2), p(1, 3)]);
    }

    #[test]
    fn more_members_than_partitions_leaves_the_last_ones_empty() {
        let s = spec(&[1], &[vec![0], vec![0], vec![0]], &[]);
        let a = RangeAssignor.assign(&s);
        assert_eq!(a, vec![vec![p(0, 0)], vec![], vec![]]);
    }
}
