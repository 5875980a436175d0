//! AlterConfigs (key 33), v0-2: replaces a topic's whole set of configs, validated as
//! CreateTopics validates them, stored durably before the reply; `validate_only` changes
//! nothing. Broker settings are koord's static configuration: a change is refused as Kafka
//! refuses a config it cannot update dynamically.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::describe_configs::{broker_name, topic, BROKER, TOPIC};
use super::str_bytes;
use crate::broker::Broker;
use crate::metadata::topic_config::{validate, TopicConfigs};

pub(crate) type Failure = (ResponseError, String);

/// Validates `configs` and, unless `validate_only`, makes them topic `name`'s configs.
pub(crate) async fn alter_topic(
    broker: &Broker,
    name: &str,
    configs: TopicConfigs,
    validate_only: bool,
) -> Result<(), Failure> {
    let topic = topic(broker, name)?;
    for (k, v) in &configs {
        validate(k, v).map_err(|m| (ResponseError::InvalidConfig, m))?;
    }
    if validate_only {
        return Ok(());
    }
    broker
        .set_topic_configs(&topic, configs)
        .await
        .map_err(|e| (ResponseError::KafkaStorageError, e.to_string()))
}

/// koord's broker settings cannot change at run time.
pub(crate) fn alter_broker<'a>(
    broker: &Broker,
    name: &str,
    names: impl Iterator<Item = &'a str>,
) -> Result<(), Failure> {
    broker_name(broker, name)?;
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        return Ok(());
    }
    Err((
        ResponseError::InvalidRequest,
        format!(
            "Cannot update these configs dynamically: [{}]",
            names.join(", ")
        ),
    ))
}

/// The duplicate-key check Kafka makes before anything else.
pub(crate) fn no_duplicates<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), Failure> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        // Kafka's message does not name the key.
        if !seen.insert(n) {
            return Err((
                ResponseError::InvalidRequest,
                "Error due to duplicate config keys".to_string(),
            ));
        }
    }
    Ok(())
}

pub(crate) fn response(
    resource_type: i8,
    resource_name: StrBytes,
    outcome: Result<(), Failure>,
) -> AlterConfigsResourceResponse {
    let r = AlterConfigsResourceResponse::default()
        .with_resource_type(resource_type)
        .with_resource_name(resource_name);
    match outcome {
        Ok(()) => r.with_error_message(None),
        Err((e, m)) => r
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(m))),
    }
}

pub async fn handle(
    broker: &Broker,
    req: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let name = r.resource_name.as_str();
        let outcome = match no_duplicates(r.configs.iter().map(|c| c.name.as_str())) {
            Err(e) => Err(e),
            Ok(()) => match r.resource_type {
                TOPIC => {
                    let mut configs = TopicConfigs::new();
                    let mut null = None;
                    for c in &r.configs {
                        match &c.value {
                            Some(v) => {
                                configs.insert(c.name.to_string(), v.to_string());
                            }
                            None => null = Some(c.name.to_string()),
                        }
                    }
                    match null {
                        Some(n) => Err((
                            ResponseError::InvalidConfig,
                            format!("Null value not supported for topic configs: {n}"),
                        )),
                        None => alter_topic(broker, name, configs, req.validate_only).await,
                    }
                }
                BROKER => alter_broker(broker, name, r.configs.iter().map(|c| c.name.as_str())),
                t => Err((
                    ResponseError::InvalidRequest,
                    format!("Unsupported resource type {t}"),
                )),
            },
        };
        responses.push(response(r.resource_type, r.resource_name, outcome));
    }
    AlterConfigsResponse::default().with_responses(responses)
}
