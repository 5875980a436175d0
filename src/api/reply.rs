//! The per-topic, per-partition replies of OffsetCommit and OffsetDelete: every requested
//! partition gets an error code, topics and partitions in request order, whether it failed in
//! `api/` or was passed on to the coordinator.

use super::code;
use crate::group::GroupError;

/// The outcome of each requested partition, gathered in request order. A partition that passes
/// the API's own checks carries an item (what goes to the coordinator) until its answer is back.
pub(crate) struct PartitionReplies<T> {
    /// Per request topic, per request partition: its index and error code (0: success).
    topics: Vec<Vec<(i32, i16)>>,
    /// Where each passed partition sits in `topics`, in the order passed.
    passed: Vec<(usize, usize)>,
    items: Vec<T>,
}

impl<T> PartitionReplies<T> {
    pub(crate) fn new() -> PartitionReplies<T> {
        PartitionReplies {
            topics: Vec::new(),
            passed: Vec::new(),
            items: Vec::new(),
        }
    }

    /// Starts the next request topic, whose partitions are then added in request order.
    pub(crate) fn topic(&mut self) -> TopicReplies<'_, T> {
        self.topics.push(Vec::new());
        TopicReplies {
            t: self.topics.len() - 1,
            replies: self,
        }
    }

    /// The passed items, in the order passed (taken: a second call gives none).
    pub(crate) fn take_items(&mut self) -> Vec<T> {
        std::mem::take(&mut self.items)
    }

    /// The coordinator's errors for the passed partitions, in the order passed.
    pub(crate) fn answer(&mut self, errors: impl IntoIterator<Item = Option<GroupError>>) {
        self.answer_codes(errors.into_iter().map(code));
    }

    /// As [`PartitionReplies::answer`], with error codes (a backend's, passed on as they came).
    pub(crate) fn answer_codes(&mut self, codes: impl IntoIterator<Item = i16>) {
        for ((t, p), c) in self.passed.iter().zip(codes) {
            self.topics[*t][*p].1 = c;
        }
    }

    /// The response topics: `topic` makes one from the request topic's `names` entry and its
    /// response partitions, `partition` one response partition from its index and error code.
    pub(crate) fn into_topics<N, RT, RP>(
        self,
        names: impl IntoIterator<Item = N>,
        mut topic: impl FnMut(N, Vec<RP>) -> RT,
        mut partition: impl FnMut(i32, i16) -> RP,
    ) -> Vec<RT> {
        names
            .into_iter()
            .zip(self.topics)
            .map(|(name, partitions)| {
                let partitions = partitions
                    .into_iter()
                    .map(|(index, c)| partition(index, c))
                    .collect();
                topic(name, partitions)
            })
            .collect()
    }
}

/// One request topic of a [`PartitionReplies`], taking its partitions in request order.
pub(crate) struct TopicReplies<'r, T> {
    replies: &'r mut PartitionReplies<T>,
    t: usize,
}

impl<T> TopicReplies<'_, T> {
    /// The next partition failed with `error`.
    pub(crate) fn fail(&mut self, partition: i32, error: GroupError) {
        self.replies.topics[self.t].push((partition, error.code()));
    }

    /// The next partition goes on to the coordinator as `item`; it succeeds unless
    /// [`PartitionReplies::answer`] says otherwise.
    pub(crate) fn pass(&mut self, partition: i32, item: T) {
        let partitions = &mut self.replies.topics[self.t];
        self.replies.passed.push((self.t, partitions.len()));
        partitions.push((partition, 0));
        self.replies.items.push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_every_partition_in_request_order() {
        let mut r = PartitionReplies::new();
        let mut a = r.topic();
        a.pass(0, "a0");
        a.fail(1, GroupError::UnknownTopicOrPartition);
        a.pass(2, "a2");
        r.topic();
        r.topic().pass(5, "c5");
        assert_eq!(r.take_items(), vec!["a0", "a2", "c5"]);
        r.answer([None, Some(GroupError::OffsetMetadataTooLarge), None]);
        let topics = r.into_topics(["a", "b", "c"], |n, ps| (n, ps), |i, code| (i, code));
        assert_eq!(
            topics,
            vec![
                ("a", vec![(0, 0), (1, 3), (2, 12)]),
                ("b", vec![]),
                ("c", vec![(5, 0)]),
            ]
        );
    }

    #[test]
    fn a_whole_call_error_answers_every_passed_partition() {
        let mut r = PartitionReplies::new();
        let mut t = r.topic();
        t.fail(0, GroupError::InvalidGroupId);
        t.pass(1, ());
        r.answer(std::iter::repeat(Some(GroupError::NotCoordinator)));
        let topics = r.into_topics(["t"], |_, ps| ps, |i, code| (i, code));
        assert_eq!(topics, vec![vec![(0, 24), (1, 16)]]);
    }
}
