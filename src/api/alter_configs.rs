//! AlterConfigs (key 33), v0-2: replaces a topic's whole set of configs, validated as
//! CreateTopics validates them, stored durably before the reply; `validate_only` changes
//! nothing. Broker settings are koord's static configuration: a change is refused as Kafka
//! refuses a config it cannot update dynamically.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::describe_configs::{broker_name, topic, BROKER, TOPIC};
use super::str_bytes;
use crate::broker::Broker;
use crate::metadata::topic_config::{validate, TopicConfigs};
use crate::security::acl::Operation;

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

/// One resource of AlterConfigs or IncrementalAlterConfigs, with the config keys it names:
/// Kafka's duplicate-key check first, then by resource type; a topic's new configs come from
/// `topic_configs` (each API computes them its own way).
pub(crate) async fn alter_resource<'a>(
    broker: &Broker,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    keys: impl Iterator<Item = &'a str> + Clone,
    topic_configs: impl FnOnce() -> Result<TopicConfigs, Failure>,
    validate_only: bool,
) -> Result<(), Failure> {
    // As Kafka: ALTER_CONFIGS on the topic or the cluster, before anything else.
    if let Some(e) = ctx.config_denied(broker, Operation::AlterConfigs, resource_type, name) {
        return Err((e, e.to_string()));
    }
    no_duplicates(keys.clone())?;
    match resource_type {
        TOPIC => alter_topic(broker, name, topic_configs()?, validate_only).await,
        BROKER => alter_broker(broker, name, keys),
        t => Err((
            ResponseError::InvalidRequest,
            format!("Unsupported resource type {t}"),
        )),
    }
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
    ctx: &RequestContext,
    req: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        // AlterConfigs replaces the whole set; null values are refused, all named at once as
        // Kafka's ControllerConfigurationValidator names them.
        let replacement = || {
            let nulls: Vec<&str> = r
                .configs
                .iter()
                .filter(|c| c.value.is_none())
                .map(|c| c.name.as_str())
                .collect();
            if !nulls.is_empty() {
                return Err((
                    ResponseError::InvalidConfig,
                    format!(
                        "Null value not supported for topic configs: {}",
                        nulls.join(",")
                    ),
                ));
            }
            Ok(r.configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect::<TopicConfigs>())
        };
        let outcome = alter_resource(
            broker,
            ctx,
            r.resource_type,
            r.resource_name.as_str(),
            r.configs.iter().map(|c| c.name.as_str()),
            replacement,
            req.validate_only,
        )
        .await;
        responses.push(response(r.resource_type, r.resource_name, outcome));
    }
    AlterConfigsResponse::default().with_responses(responses)
}
