//! OffsetCommit (key 8), v2-9. An empty group id fails every partition with INVALID_GROUP_ID;
//! a partition of a topic or partition this node does not have gets UNKNOWN_TOPIC_OR_PARTITION
//! and is not passed on (Kafka's `KafkaApis` does the same before the coordinator); the rest go
//! to the group, which checks the committer and then each partition's metadata size.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::{check_group_id, opt_string};
use crate::broker::Broker;
use crate::coordinator::OffsetCommit;
use crate::group::{Generation, GroupError, MemberId, OffsetCommitAuth};
use crate::offsets::{PartitionCommit, TopicPartition};

pub async fn handle(
    broker: &Broker,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    // Results per (topic index, partition index in request) so the answer keeps request order.
    let mut errors: Vec<Vec<Option<GroupError>>> = req
        .topics
        .iter()
        .map(|t| vec![None; t.partitions.len()])
        .collect();
    let group = check_group_id(&req.group_id);
    let mut accepted = Vec::new();
    for (ti, topic) in req.topics.iter().enumerate() {
        let known = broker.topics.get(topic.name.as_str());
        for (pi, p) in topic.partitions.iter().enumerate() {
            if let Err(e) = &group {
                errors[ti][pi] = Some(*e);
                continue;
            }
            match &known {
                Some(t) if (0..t.partitions).contains(&p.partition_index) => {
                    accepted.push((
                        (ti, pi),
                        PartitionCommit {
                            tp: TopicPartition::new(topic.name.as_str(), p.partition_index),
                            offset: p.committed_offset,
                            leader_epoch: (p.committed_leader_epoch >= 0)
                                .then_some(p.committed_leader_epoch),
                            metadata: opt_string(&p.committed_metadata),
                        },
                    ));
                }
                _ => errors[ti][pi] = Some(GroupError::UnknownTopicOrPartition),
            }
        }
    }
    if let (Ok(group), false) = (group, accepted.is_empty()) {
        let (positions, partitions): (Vec<_>, Vec<_>) = accepted.into_iter().unzip();
        let commit = OffsetCommit {
            auth: OffsetCommitAuth {
                member_id: MemberId::new(req.member_id.as_str()),
                instance_id: super::instance_id(&req.group_instance_id),
                generation: Generation(req.generation_id_or_member_epoch),
                transactional: false,
            },
            partitions,
            retention_time_ms: if version <= 4 {
                req.retention_time_ms
            } else {
                -1
            },
            group_id_not_found_supported: version >= 9,
        };
        match broker.coordinator.commit_offsets(group, commit).await {
            Ok(results) => {
                for ((ti, pi), (_, e)) in positions.into_iter().zip(results) {
                    errors[ti][pi] = e;
                }
            }
            Err(e) => {
                for (ti, pi) in positions {
                    errors[ti][pi] = Some(e);
                }
            }
        }
    }
    let topics = req
        .topics
        .into_iter()
        .zip(errors)
        .map(|(t, errs)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(errs)
                        .map(|(p, e)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(e.map_or(0, |e| e.code()))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
