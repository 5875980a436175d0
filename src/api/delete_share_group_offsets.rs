//! DeleteShareGroupOffsets (key 92), v0: `kafka-share-groups --delete-offsets` and
//! `Admin.deleteShareGroupOffsets`. The state of every partition of each named topic goes from
//! an Empty share group, stored before the answer; the group then starts those partitions where
//! `share.auto.offset.reset` says when it reads them again.
//!
//! As Kafka 4.4 answers: DELETE on the group (checked for the whole request), READ on each topic
//! (TOPIC_AUTHORIZATION_FAILED; those topics first in the answer); then the deleted topics, and
//! after them those Kafka cannot delete: a topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION)
//! or that the group has no state for (the same code, "There is no offset information to
//! delete."). A group that does not exist or is of another kind is GROUP_ID_NOT_FOUND, one with
//! members NON_EMPTY_GROUP, for the whole request.

use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};

use super::alter_share_group_offsets::refusal;
use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::group::share::ShareGroup;
use crate::group::GroupError;
use crate::security::acl::{Operation, ResourceType};
use crate::vocab::errors::kafka_message;
use crate::vocab::TopicId;

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteShareGroupOffsetsRequest,
    _version: i16,
) -> DeleteShareGroupOffsetsResponse {
    let id = match super::check_group_id(&req.group_id) {
        Ok(id) => id,
        Err(e) => return refused(e.code(), None),
    };
    let unknown = GroupError::UnknownTopicOrPartition.code();
    let topic_error = |entry: DeleteShareGroupOffsetsResponseTopic, code: i16, message: &str| {
        entry
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message.to_owned())))
    };
    let mut responses = Vec::new();
    // The authorized topics in order: each one's entry and, if it exists, its id.
    let mut asked = Vec::new();
    for t in &req.topics {
        let entry =
            DeleteShareGroupOffsetsResponseTopic::default().with_topic_name(t.topic_name.clone());
        if !ctx.may(broker, Operation::Read, ResourceType::Topic, &t.topic_name) {
            let code = GroupError::TopicAuthorizationFailed.code();
            responses.push(topic_error(entry, code, kafka_message(code).unwrap_or("")));
            continue;
        }
        let topic = broker.topics.get(&t.topic_name).map(|t| t.id);
        asked.push((entry, topic));
    }
    let topics: Vec<TopicId> = asked.iter().filter_map(|(_, id)| *id).collect();
    let done = broker
        .coordinator
        .with_kind(id.clone(), false, move |g: &mut ShareGroup, _, _| {
            g.delete_offsets(&topics)
        })
        .await;
    match done {
        Ok(Ok(had)) => {
            let mut had = had.into_iter();
            let mut errors = Vec::new();
            for (entry, topic) in asked {
                match topic {
                    None => errors.push(topic_error(
                        entry,
                        unknown,
                        kafka_message(unknown).unwrap_or(""),
                    )),
                    Some(topic) if had.next() == Some(true) => {
                        responses.push(entry.with_topic_id(topic));
                    }
                    Some(_) => errors.push(topic_error(
                        entry,
                        unknown,
                        "There is no offset information to delete.",
                    )),
                }
            }
            responses.extend(errors);
            DeleteShareGroupOffsetsResponse::default().with_responses(responses)
        }
        Ok(Err(e)) => refused(e.code(), None),
        Err(r) => {
            let (code, message) = refusal(&id, r);
            refused(code, message)
        }
    }
}

/// The whole request refused: the code with its message (Kafka's own wording unless given).
fn refused(code: i16, message: Option<String>) -> DeleteShareGroupOffsetsResponse {
    DeleteShareGroupOffsetsResponse::default()
        .with_error_code(code)
        .with_error_message(
            message
                .map(str_bytes)
                .or_else(|| kafka_message(code).map(str_bytes)),
        )
}
