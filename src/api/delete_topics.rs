//! DeleteTopics (key 20), v1-6: deletes topics by name (v1-5: `topic_names`) and, from v6, by
//! name or id (`topics`), following Kafka's `ControllerApis.deleteTopics`.
//!
//! A topic's stored record is deleted durably before the reply ([`Broker::delete_topic`]), then
//! the topic and its partition logs, then groups' committed offsets and share states of it, as
//! in Kafka 4.4 ([`crate::coordinator::Coordinator::topic_deleted`]). Errors:
//! an entry with both a name and an id, or with neither, is INVALID_REQUEST; a name or id given
//! twice is INVALID_REQUEST for it; an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
//! UNKNOWN_TOPIC_ID; a failed store write is KAFKA_STORAGE_ERROR (retriable), the topic kept.
//! `timeout_ms` is accepted: one node, the deletion is complete when the reply goes out.
//!
//! Results come in Kafka's order: malformed entries, duplicates, unknown ids, unknown names,
//! then the deleted topics; each carries the name and, from v6, the id.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};

/// Names or ids as Kafka collects them: a value given twice moves to `duplicates`.
struct Provided<T: Ord + Clone + std::hash::Hash> {
    once: BTreeSet<T>,
    duplicates: BTreeSet<T>,
    seen: HashSet<T>,
    order: Vec<T>,
}

impl<T: Ord + Clone + std::hash::Hash> Provided<T> {
    fn new() -> Self {
        Provided {
            once: BTreeSet::new(),
            duplicates: BTreeSet::new(),
            seen: HashSet::new(),
            order: Vec::new(),
        }
    }

    fn add(&mut self, v: T) {
        if self.seen.insert(v.clone()) {
            self.once.insert(v.clone());
            self.order.push(v);
        } else {
            self.once.remove(&v);
            self.duplicates.insert(v);
        }
    }

    /// The values given once, in request order.
    fn single(&self) -> impl Iterator<Item = &T> {
        self.order.iter().filter(|v| self.once.contains(*v))
    }
}

fn result(
    name: Option<&str>,
    id: Uuid,
    error: Option<(ResponseError, &str)>,
) -> DeletableTopicResult {
    let r = DeletableTopicResult::default()
        .with_name(name.map(|n| TopicName(str_bytes(n))))
        .with_topic_id(id);
    match error {
        None => r.with_error_message(None),
        Some((e, message)) => r
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(message))),
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
    _version: i16,
) -> DeleteTopicsResponse {
    let mut responses = Vec::new();
    let mut names = Provided::new();
    let mut ids = Provided::new();
    for n in &req.topic_names {
        names.add(n.as_str().to_string());
    }
    for t in &req.topics {
        match (&t.name, t.topic_id.is_nil()) {
            (None, true) => responses.push(result(
                None,
                Uuid::nil(),
                Some((
                    ResponseError::InvalidRequest,
                    "Neither topic name nor id were specified.",
                )),
            )),
            (None, false) => ids.add(t.topic_id),
            (Some(n), true) => names.add(n.as_str().to_string()),
            (Some(n), false) => responses.push(result(
                Some(n.as_str()),
                t.topic_id,
                Some((
                    ResponseError::InvalidRequest,
                    "You may not specify both topic name and topic id.",
                )),
            )),
        }
    }
    for n in &names.duplicates {
        let e = (ResponseError::InvalidRequest, "Duplicate topic name.");
        responses.push(result(Some(n), Uuid::nil(), Some(e)));
    }
    for id in &ids.duplicates {
        let e = (ResponseError::InvalidRequest, "Duplicate topic id.");
        responses.push(result(None, *id, Some(e)));
    }
    // Resolve every topic to delete to its name; a topic named and identified is deleted once.
    let mut to_delete: BTreeMap<String, Uuid> = BTreeMap::new();
    let mut order = Vec::new();
    // As Kafka: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (a name is checked before
    // it is looked up; an id after, and the answer does not name the topic).
    let may_delete = |name: &str| ctx.may(broker, Operation::Delete, ResourceType::Topic, name);
    let denied = (
        ResponseError::TopicAuthorizationFailed,
        "Authorization failed.",
    );
    for id in ids.single() {
        match broker.topics.get_by_id(*id) {
            Some(t) if !may_delete(&t.name) => responses.push(result(None, *id, Some(denied))),
            Some(t) => {
                if to_delete.insert(t.name.clone(), t.id).is_none() {
                    order.push(t.name);
                }
            }
            None => responses.push(result(
                None,
                *id,
                Some((
                    ResponseError::UnknownTopicId,
                    "This server does not host this topic ID.",
                )),
            )),
        }
    }
    for n in names.single() {
        if !may_delete(n) {
            responses.push(result(Some(n), Uuid::nil(), Some(denied)));
            continue;
        }
        match broker.topics.get(n) {
            Some(t) => {
                if to_delete.insert(t.name.clone(), t.id).is_none() {
                    order.push(t.name);
                }
            }
            None => responses.push(result(
                Some(n),
                Uuid::nil(),
                Some((
                    ResponseError::UnknownTopicOrPartition,
                    "This server does not host this topic-partition.",
                )),
            )),
        }
    }
    for name in order {
        let id = to_delete.get(&name).copied().unwrap_or_default();
        let outcome = match broker.delete_topic(&name).await {
            Ok(Some(_)) => None,
            Ok(None) => Some((
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            )),
            Err(e) => {
                tracing::warn!(topic = name, "topic not deleted: {e}");
                Some((
                    ResponseError::KafkaStorageError,
                    "Disk error when trying to access log file on the disk.",
                ))
            }
        };
        responses.push(result(Some(&name), id, outcome));
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use crate::metadata::name_based_id as topic_id;
    use bytes::BytesMut;
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::protocol::Encodable;

    fn by_names(names: &[&str]) -> DeleteTopicsRequest {
        DeleteTopicsRequest::default()
            .with_timeout_ms(1000)
            .with_topic_names(names.iter().map(|n| TopicName(str_bytes(*n))).collect())
    }

    fn by_states(states: &[(Option<&str>, Uuid)]) -> DeleteTopicsRequest {
        DeleteTopicsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(
                states
                    .iter()
                    .map(|(n, id)| {
                        DeleteTopicState::default()
                            .with_name(n.map(|n| TopicName(str_bytes(n))))
                            .with_topic_id(*id)
                    })
                    .collect(),
            )
    }

    fn answers(resp: &DeleteTopicsResponse) -> Vec<(Option<String>, Uuid, i16)> {
        resp.responses
            .iter()
            .map(|r| {
                (
                    r.name.as_ref().map(|n| n.as_str().to_string()),
                    r.topic_id,
                    r.error_code,
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn encodes_at_every_served_version() {
        for v in 1..=6 {
            let b = broker();
            let req = if v >= 6 {
                by_states(&[(Some("t"), Uuid::nil()), (Some("nope"), Uuid::nil())])
            } else {
                by_names(&["t", "nope"])
            };
            let resp = handle(&b, &crate::api::testing::ctx(&b), req, v).await;
            let unknown = ResponseError::UnknownTopicOrPartition.code();
            assert_eq!(
                answers(&resp),
                vec![
                    (Some("nope".into()), Uuid::nil(), unknown),
                    (Some("t".into()), topic_id("t"), 0)
                ],
                "v{v}"
            );
            assert!(b.topics.get("t").is_none(), "v{v}");
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }

    #[tokio::test]
    async fn by_id_and_malformed_entries() {
        let b = broker();
        let t = topic_id("t");
        let other = Uuid::from_u128(7);
        let invalid = ResponseError::InvalidRequest.code();
        let resp = handle(
            &b,
            &crate::api::testing::ctx(&b),
            by_states(&[
                (None, Uuid::nil()),
                (Some("t"), t),
                (Some("x"), Uuid::nil()),
                (Some("x"), Uuid::nil()),
                (None, other),
                (None, t),
            ]),
            6,
        )
        .await;
        assert_eq!(
            answers(&resp),
            vec![
                (None, Uuid::nil(), invalid),
                (Some("t".into()), t, invalid),
                (Some("x".into()), Uuid::nil(), invalid),
                (None, other, ResponseError::UnknownTopicId.code()),
                (Some("t".into()), t, 0),
            ]
        );
        assert!(b.topics.get_by_id(t).is_none());
        let p = b.topics.create("t", 2).unwrap();
        assert_eq!(
            b.logs.partition(&p, 0).unwrap().lock().log_end_offset(),
            0,
            "a re-created topic starts empty"
        );
    }
}
