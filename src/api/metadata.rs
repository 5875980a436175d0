//! Metadata (key 3): this node is the only broker, the controller and the leader of every
//! partition. Topics are looked up by name (or by id from v12); unknown names are created with
//! `num.partitions` when `auto.create.topics.enable` and the request allow it.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;

use super::{str_bytes, AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS, TOPIC_OPERATIONS};
use crate::broker::Broker;
use crate::metadata::{CreateError, Topic, LEADER_EPOCH};

fn topic_entry(
    topic: &Topic,
    version: i16,
    node: BrokerId,
    with_ops: bool,
) -> MetadataResponseTopic {
    let partitions = (0..topic.partitions)
        .map(|p| {
            let part = MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(node)
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node]);
            if version >= 7 {
                part.with_leader_epoch(LEADER_EPOCH)
            } else {
                part
            }
        })
        .collect();
    let mut entry = MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(topic.name.clone()))))
        .with_partitions(partitions);
    if version >= 10 {
        entry.topic_id = topic.id;
    }
    if version >= 8 && with_ops {
        entry.topic_authorized_operations = TOPIC_OPERATIONS;
    }
    entry
}

fn topic_error(
    name: Option<TopicName>,
    id: uuid::Uuid,
    error: ResponseError,
    version: i16,
) -> MetadataResponseTopic {
    let mut entry = MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name);
    if version >= 10 {
        entry.topic_id = id;
    }
    entry
}

/// Answers Metadata; `listener` is the one the client came in on, which is advertised.
pub fn handle(
    broker: &Broker,
    listener: &crate::security::Listener,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let node = BrokerId(broker.node_id());
    let with_ops = req.include_topic_authorized_operations;
    // v0-3 always allow auto-creation; the flag exists from v4.
    let auto_create = version < 4 || req.allow_auto_topic_creation;
    let requested = match req.topics {
        None => None,
        // In v0 an empty list means every topic.
        Some(t) if version == 0 && t.is_empty() => None,
        Some(t) => Some(t),
    };
    let topics = match requested {
        None => broker
            .topics
            .all()
            .iter()
            .map(|t| topic_entry(t, version, node, with_ops))
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|t| match t.name {
                // A lookup by id may come with an empty name rather than a null one.
                Some(name) if !name.is_empty() || t.topic_id.is_nil() => {
                    match broker.topic_for_metadata(&name, auto_create) {
                        Ok(Some(topic)) => topic_entry(&topic, version, node, with_ops),
                        Ok(None) => topic_error(
                            Some(name),
                            uuid::Uuid::nil(),
                            ResponseError::UnknownTopicOrPartition,
                            version,
                        ),
                        Err(CreateError::InvalidName(_)) => topic_error(
                            Some(name),
                            uuid::Uuid::nil(),
                            ResponseError::InvalidTopicException,
                            version,
                        ),
                        // Created and gone again cannot happen (no deletion); answer as unknown.
                        Err(CreateError::AlreadyExists) => topic_error(
                            Some(name),
                            uuid::Uuid::nil(),
                            ResponseError::UnknownTopicOrPartition,
                            version,
                        ),
                    }
                }
                _ if !t.topic_id.is_nil() => match broker.topics.get_by_id(t.topic_id) {
                    Some(topic) => topic_entry(&topic, version, node, with_ops),
                    None => topic_error(None, t.topic_id, ResponseError::UnknownTopicId, version),
                },
                _ => topic_error(None, t.topic_id, ResponseError::InvalidRequest, version),
            })
            .collect(),
    };
    let broker_entry = MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(str_bytes(listener.advertised_host.clone()))
        .with_port(listener.advertised_port);
    let mut resp = MetadataResponse::default()
        .with_brokers(vec![broker_entry])
        .with_topics(topics);
    if version >= 1 {
        resp.controller_id = node;
    }
    if version >= 2 {
        resp.cluster_id = Some(str_bytes(broker.cluster_id.clone()));
    }
    if (8..=10).contains(&version) {
        resp.cluster_authorized_operations = if req.include_cluster_authorized_operations {
            CLUSTER_OPERATIONS
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
    }
    resp
}
