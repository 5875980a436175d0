//! Kafka's `RangeAssignor`: per topic, the subscribed members in `MemberInfo` order each take a
//! contiguous range; the first `partitions % members` take one more. Members subscribed to the
//! same topics get the same partition numbers of each (co-partitioning). Not sticky, so every
//! rebalance is a full reassignment.

use super::{Assignment, Assignor, GroupSpec, Partition};

#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(&self, spec: &GroupSpec) -> Assignment {
        let mut rank = vec![0usize; spec.members.len()];
        for (r, &m) in spec.member_order().iter().enumerate() {
            rank[m] = r;
        }
        let mut out: Vec<Vec<Partition>> = vec![Vec::new(); spec.members.len()];
        for (topic, mut members) in spec.subscribers().into_iter().enumerate() {
            if members.is_empty() {
                continue;
            }
            members.sort_unstable_by_key(|&m| rank[m]);
            let partitions = spec.topics[topic].partitions as usize;
            let per = partitions / members.len();
            let extra = partitions % members.len();
            for (k, &m) in members.iter().enumerate() {
                let start = k * per + k.min(extra);
                let len = per + usize::from(k < extra);
                out[m].extend((start..start + len).map(|p| Partition::new(topic as u32, p as u32)));
            }
        }
        for list in &mut out {
            list.sort_unstable();
        }
        Assignment::from_lists(out)
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
