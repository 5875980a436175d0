//! CreateTopics (key 19), with Kafka's validation: legal names, no duplicates in one request,
//! a positive partition count or -1 for `num.partitions`, a replication factor of 1 or -1 (one
//! broker), manual assignments naming this broker only, `validate_only` creating nothing.
//! Topic configs are validated as Kafka validates them (INVALID_CONFIG), stored with the topic
//! and applied to its logs ([`crate::metadata::topic_config`]); v5+ replies list every topic
//! config with its effective value and source.

use std::collections::HashMap;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::metadata::topic_config::{effective, validate, TopicConfigs, DEFS};
use crate::metadata::{validate_topic_name, CreateError};

type Failure = (ResponseError, String);

/// The partition count a valid request asks for.
fn partitions(broker: &Broker, t: &CreatableTopic) -> Result<i32, Failure> {
    let node = broker.node_id();
    if !t.assignments.is_empty() {
        if t.num_partitions != -1 || t.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
            ));
        }
        let mut seen: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
        seen.sort_unstable();
        if seen.iter().enumerate().any(|(i, p)| *p != i as i32) {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                "Partitions should be a consecutive 0-based integer sequence".into(),
            ));
        }
        for a in &t.assignments {
            if a.broker_ids.is_empty() || a.broker_ids.iter().any(|b| b.0 != node) {
                return Err((
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "The manual partition assignment includes a partition with no replicas or an unknown broker; only broker {node} exists."
                    ),
                ));
            }
            if a.broker_ids.len() > 1 {
                return Err((
                    ResponseError::InvalidReplicaAssignment,
                    "The manual partition assignment includes the same broker twice".into(),
                ));
            }
        }
        return Ok(t.assignments.len() as i32);
    }
    let n = match t.num_partitions {
        -1 => broker.config.num_partitions,
        n if n <= 0 => {
            return Err((
                ResponseError::InvalidPartitions,
                "Number of partitions was set to an invalid non-positive value.".into(),
            ))
        }
        n => n,
    };
    match t.replication_factor {
        -1 | 1 => Ok(n),
        r if r <= 0 => Err((
            ResponseError::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.".into(),
        )),
        r => Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "Unable to replicate the partition {r} time(s): The target replication factor of {r} cannot be reached because only 1 broker(s) are registered."
            ),
        )),
    }
}

/// The request's configs, validated by name and value as Kafka's `LogConfig.validate` does.
fn configs(t: &CreatableTopic) -> Result<TopicConfigs, Failure> {
    let mut out = TopicConfigs::new();
    for c in &t.configs {
        let name = c.name.as_str();
        let Some(value) = c.value.as_ref() else {
            return Err((
                ResponseError::InvalidConfig,
                format!("Null value not supported for topic configs: {name}"),
            ));
        };
        validate(name, value.as_str()).map_err(|m| (ResponseError::InvalidConfig, m))?;
        out.insert(name.to_string(), value.as_str().to_string());
    }
    Ok(out)
}

/// Every topic config of a topic with `configs`, as a CreateTopics v5+ reply lists them.
fn described(broker: &Broker, configs: &TopicConfigs) -> Vec<CreatableTopicConfigs> {
    DEFS.iter()
        .map(|d| {
            let (value, source) = effective(d, configs, &broker.config.topic_defaults());
            CreatableTopicConfigs::default()
                .with_name(str_bytes(d.name))
                .with_value(Some(str_bytes(value)))
                .with_read_only(false)
                .with_config_source(source as i8)
                .with_is_sensitive(false)
        })
        .collect()
}

async fn create(
    broker: &Broker,
    t: &CreatableTopic,
    validate_only: bool,
) -> Result<(uuid::Uuid, i32, TopicConfigs), Failure> {
    let name = t.name.as_str();
    validate_topic_name(name).map_err(|m| (ResponseError::InvalidTopicException, m))?;
    let exists = || {
        (
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        )
    };
    if broker.topics.get(name).is_some() {
        return Err(exists());
    }
    let n = partitions(broker, t)?;
    let configs = configs(t)?;
    if validate_only {
        return Ok((crate::metadata::new_topic_id(), n, configs));
    }
    match broker.create_topic(name, n, configs.clone()).await {
        Ok((topic, stored)) => {
            tracing::info!(topic = name, partitions = n, "created topic");
            if let Err(e) = stored {
                tracing::error!(topic = name, "topic not stored: {e}");
                return Err((ResponseError::KafkaStorageError, e.to_string()));
            }
            Ok((topic.id, n, configs))
        }
        Err(CreateError::AlreadyExists) => Err(exists()),
        Err(CreateError::InvalidName(m)) => Err((ResponseError::InvalidTopicException, m)),
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &req.topics {
        *counts.entry(t.name.as_str()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        results.push({
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let outcome = if counts[t.name.as_str()] > 1 {
                Err((
                    ResponseError::InvalidRequest,
                    format!(
                        "Create topics request contains multiple entries for the topic {}",
                        t.name.as_str()
                    ),
                ))
            } else if !ctx.may_create_topic(broker, &t.name) {
                // As Kafka: CREATE on the cluster or on the topic.
                Err((
                    ResponseError::TopicAuthorizationFailed,
                    "Authorization failed.".to_owned(),
                ))
            } else {
                create(broker, t, req.validate_only).await
            };
            match outcome {
                Ok((id, n, configs)) => {
                    let mut r = result.with_error_message(None);
                    if version >= 5 {
                        r = r
                            .with_num_partitions(n)
                            .with_replication_factor(1)
                            .with_configs(Some(described(broker, &configs)));
                    }
                    if version >= 7 {
                        r = r.with_topic_id(id);
                    }
                    r
                }
                Err((e, msg)) => {
                    let mut r = result
                        .with_error_code(e.code())
                        .with_error_message(Some(str_bytes(msg)));
                    if version >= 5 {
                        r = r.with_configs(None);
                    }
                    r
                }
            }
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}
