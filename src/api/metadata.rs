//! Metadata (key 3): this node is the only broker, the controller and the leader of every
//! partition. Topics are looked up by name (or by id from v12); unknown names are created with
//! `num.partitions` when `auto.create.topics.enable` and the request allow it.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::{str_bytes, AUTHORIZED_OPERATIONS_OMITTED};
use crate::broker::Broker;
use crate::metadata::{is_internal, CreateError, Topic, LEADER_EPOCH};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};

fn topic_entry(
    topic: &Topic,
    version: i16,
    node: BrokerId,
    ops: Option<i32>,
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
        .with_is_internal(is_internal(&topic.name))
        .with_partitions(partitions);
    if version >= 10 {
        entry.topic_id = topic.id;
    }
    if let (true, Some(ops)) = (version >= 8, ops) {
        entry.topic_authorized_operations = ops;
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

/// Answers Metadata; the listener the client came in on is advertised.
///
/// Authorization as Kafka's: every topic (null list) leaves out the topics the principal may
/// not DESCRIBE; a named one it may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED, as does a
/// missing one it could auto-create but may not CREATE (on the cluster or the topic). An
/// auto-created topic is answered once it is stored.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let listener = &*ctx.listener;
    let node = BrokerId(broker.node_id());
    let with_ops = req.include_topic_authorized_operations;
    let describable = |name: &str| ctx.may(broker, Operation::Describe, ResourceType::Topic, name);
    let ops = |name: &str| with_ops.then(|| ctx.operations(broker, ResourceType::Topic, name));
    let entry = |t: &Topic| topic_entry(t, version, node, ops(&t.name));
    let denied = |name: Option<TopicName>, id| {
        topic_error(name, id, ResponseError::TopicAuthorizationFailed, version)
    };
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
            .filter(|t| describable(&t.name))
            .map(&entry)
            .collect(),
        Some(wanted) => {
            let mut out = Vec::with_capacity(wanted.len());
            for t in wanted {
                out.push(match t.name {
                    // A lookup by id may come with an empty name rather than a null one.
                    Some(name) if !name.is_empty() || t.topic_id.is_nil() => {
                        if !describable(&name) {
                            // Not even whether it is internal (Kafka 4.4's KafkaApis).
                            out.push(denied(Some(name), uuid::Uuid::nil()));
                            continue;
                        }
                        if auto_create
                            && broker.config.auto_create_topics_enable
                            && broker.topics.get(&name).is_none()
                            && !ctx.may_create_topic(broker, &name)
                        {
                            // Kafka marks an internal name here (it may describe it).
                            let internal = is_internal(&name);
                            out.push(
                                denied(Some(name), uuid::Uuid::nil()).with_is_internal(internal),
                            );
                            continue;
                        }
                        match broker.topic_for_metadata(&name, auto_create).await {
                            Ok(Some(topic)) => entry(&topic),
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
                        Some(topic) if !describable(&topic.name) => denied(None, t.topic_id),
                        Some(topic) => entry(&topic),
                        None => {
                            topic_error(None, t.topic_id, ResponseError::UnknownTopicId, version)
                        }
                    },
                    _ => topic_error(None, t.topic_id, ResponseError::InvalidRequest, version),
                });
            }
            out
        }
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
            if ctx.may_cluster(broker, Operation::Describe) {
                ctx.operations(broker, ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            }
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
    }
    resp
}
