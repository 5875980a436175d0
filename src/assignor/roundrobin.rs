//! Kafka's `RoundRobinAssignor`: every partition of every subscribed topic, topics by name and
//! partitions in order, dealt to the members in `MemberInfo` order, skipping members not
//! subscribed to the partition's topic. Not sticky.

use super::{Assignment, Assignor, GroupSpec, Partition};

#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn assign(&self, spec: &GroupSpec) -> Assignment {
        let mut out: Vec<Vec<Partition>> = vec![Vec::new(); spec.members.len()];
        let order = spec.member_order();
        if order.is_empty() {
            return Assignment::from_lists(out);
        }
        let subscribers = spec.subscribers();
        let mut topics: Vec<usize> = (0..spec.topics.len())
            .filter(|&t| !subscribers[t].is_empty())
            .collect();
        topics.sort_unstable_by(|&a, &b| spec.topics[a].name.cmp(&spec.topics[b].name));
        let mut next = 0usize;
        for t in topics {
            let topic = t as u32;
            for partition in 0..spec.topics[t].partitions {
                // Some member is subscribed (the topic is in the spec because of it), so this
                // finds one within a lap.
                while spec.members[order[next]]
                    .subscription
                    .binary_search(&topic)
                    .is_err()
                {
                    next = (next + 1) % order.len();
                }
                out[order[next]].push(Partition::new(topic, partition));
                next = (next + 1) % order.len();
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
    fn deals_partitions_in_turn() {
        // Kafka's RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions.
        let s = spec(&[3, 3], &[vec![0, 1], vec![0, 1]], &[]);
        let a = RoundRobinAssignor.assign(&s);
        assert_eq!(a[0], vec![p(0, 0), p(0, 2), p(1, 1)]);
        assert_eq!(a[1], vec![p(0, 1), p(1, 0), p(1, 2)]);
    }

    #[test]
    fn skips_members_not_subscribed() {
        // Kafka's testMultipleConsumersMixedTopics: t0 (3) for c0, c1, c2 all; t1 (2) for c1.
        let s = spec(&[3, 2], &[vec![0], vec![0, 1], vec![0]], &[]);
        let a = RoundRobinAssignor.assign(&s);
        assert_eq!(a[0], vec![p(0, 0)]);
        assert_eq!(a[1], vec![p(0, 1), p(1, 0), p(1, 1)]);
        assert_eq!(a[2], vec![p(0, 2)]);
    }
}
