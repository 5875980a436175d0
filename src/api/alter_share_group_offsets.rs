//! AlterShareGroupOffsets (key 91), v0: `kafka-share-groups --reset-offsets` and
//! `Admin.alterShareGroupOffsets`. Each named partition of an Empty share group starts over at
//! the given offset with nothing in flight (a negative one: where `share.auto.offset.reset`
//! puts it at the next read), stored before the answer. A group that does not exist is created
//! Empty, as in Kafka.
//!
//! As Kafka 4.4 answers: READ on the group (checked for the whole request), then per topic
//! READ (TOPIC_AUTHORIZATION_FAILED) and existence (UNKNOWN_TOPIC_OR_PARTITION) for each of its
//! partitions, those topics first; a partition past the topic's count is
//! UNKNOWN_TOPIC_OR_PARTITION. A group with members is NON_EMPTY_GROUP, a group of another
//! kind GROUP_ID_NOT_FOUND ("Group G is not a share group."), both for the whole request.

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::share::ShareGroup;
use crate::group::{GroupError, GroupId};
use crate::security::acl::Operation;
use crate::vocab::errors::kafka_message;
use crate::vocab::TopicId;

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterShareGroupOffsetsRequest,
    _version: i16,
) -> AlterShareGroupOffsetsResponse {
    let id = match super::check_group_id(&req.group_id) {
        Ok(id) => id,
        Err(e) => return refused(e.code(), None),
    };
    let partition = |index: i32, code: i16| {
        AlterShareGroupOffsetsResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(code)
            .with_error_message(kafka_message(code).filter(|_| code != 0).map(str_bytes))
    };
    let mut refused_topics = Vec::new();
    let mut altered = Vec::new();
    let mut offsets = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.as_str();
        let topic =
            super::resolve_topic_for(broker, ctx, Operation::Read, false, TopicId::nil(), name);
        let entry =
            AlterShareGroupOffsetsResponseTopic::default().with_topic_name(t.topic_name.clone());
        match topic {
            Err(e) => refused_topics.push(
                entry
                    .with_topic_id(broker.topics.get(name).map_or(TopicId::nil(), |t| t.id))
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| partition(p.partition_index, e.code()))
                            .collect(),
                    ),
            ),
            Ok(topic) => {
                let count = topic.partitions;
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        if (0..count).contains(&p.partition_index) {
                            offsets.push((topic.id, p.partition_index, p.start_offset));
                            partition(p.partition_index, 0)
                        } else {
                            partition(
                                p.partition_index,
                                GroupError::UnknownTopicOrPartition.code(),
                            )
                        }
                    })
                    .collect();
                altered.push(entry.with_topic_id(topic.id).with_partitions(partitions));
            }
        }
    }
    let done = broker
        .coordinator
        .with_kind(id.clone(), true, move |g: &mut ShareGroup, _, _| {
            g.alter_offsets(&offsets)
        })
        .await;
    match done {
        Ok(Ok(())) => {
            // Kafka merges the coordinator's topics into the ones refused first, by name.
            let mut responses = refused_topics;
            for topic in altered {
                match responses
                    .iter_mut()
                    .find(|r| r.topic_name == topic.topic_name)
                {
                    Some(r) => r.partitions.extend(topic.partitions),
                    None => responses.push(topic),
                }
            }
            AlterShareGroupOffsetsResponse::default().with_responses(responses)
        }
        Ok(Err(e)) => refused(e.code(), None),
        Err(r) => {
            let (code, message) = refusal(&id, r);
            refused(code, message)
        }
    }
}

/// How Kafka 4.4 refuses a share group's offsets call for the group: its code and, when not
/// the code's own wording, its message.
pub(super) fn refusal(id: &GroupId, r: KindRefusal) -> (i16, Option<String>) {
    match r {
        KindRefusal::Error(e) => (e.code(), None),
        KindRefusal::OtherKind => (
            GroupError::GroupIdNotFound.code(),
            Some(format!("Group {id} is not a share group.")),
        ),
        KindRefusal::Missing => (
            GroupError::GroupIdNotFound.code(),
            Some(format!("Group {id} not found.")),
        ),
    }
}

/// The whole request refused: the code with its message (Kafka's own wording unless given).
fn refused(code: i16, message: Option<String>) -> AlterShareGroupOffsetsResponse {
    AlterShareGroupOffsetsResponse::default()
        .with_error_code(code)
        .with_error_message(
            message
                .map(str_bytes)
                .or_else(|| kafka_message(code).map(str_bytes)),
        )
}
