//! OffsetDelete (key 47), v0: removes a group's committed offsets for partitions it does not
//! consume. Group errors (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID) are top-level;
//! per partition, GROUP_SUBSCRIBED_TO_TOPIC for a topic the group subscribes to and
//! UNKNOWN_TOPIC_OR_PARTITION for one this node does not have.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::check_group_id;
use crate::broker::Broker;
use crate::group::GroupError;
use crate::offsets::TopicPartition;

pub async fn handle(
    broker: &Broker,
    req: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let group = match check_group_id(&req.group_id) {
        Ok(g) => g,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let mut errors: Vec<Vec<Option<GroupError>>> = Vec::new();
    let mut known = Vec::new();
    for (ti, topic) in req.topics.iter().enumerate() {
        let exists = broker.topics.get(topic.name.as_str());
        errors.push(Vec::new());
        for (pi, p) in topic.partitions.iter().enumerate() {
            match &exists {
                Some(t) if (0..t.partitions).contains(&p.partition_index) => {
                    errors[ti].push(None);
                    known.push((
                        (ti, pi),
                        TopicPartition::new(topic.name.as_str(), p.partition_index),
                    ));
                }
                _ => errors[ti].push(Some(GroupError::UnknownTopicOrPartition)),
            }
        }
    }
    let (positions, partitions): (Vec<_>, Vec<_>) = known.into_iter().unzip();
    match broker.coordinator.delete_offsets(group, partitions).await {
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
        Ok(results) => {
            for ((ti, pi), (_, e)) in positions.into_iter().zip(results) {
                errors[ti][pi] = e;
            }
        }
    }
    let topics = req
        .topics
        .into_iter()
        .zip(errors)
        .map(|(t, errs)| {
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(errs)
                        .map(|(p, e)| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(e.map_or(0, |e| e.code()))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
