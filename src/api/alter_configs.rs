//! AlterConfigs (key 33), v0-2: replaces a topic's whole set of configs, validated as
//! CreateTopics validates them, stored durably before the reply; `validate_only` changes
//! nothing. Broker settings are koord's static configuration: a change is refused as Kafka
//! refuses a config it cannot update dynamically. A GROUP resource's configs are replaced as a
//! topic's are, validated as Kafka's `GroupConfig.validate` does.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::describe_configs::{broker_name, topic, BROKER, GROUP, TOPIC};
use super::str_bytes;
use crate::broker::Broker;
use crate::metadata::group_config::GroupConfigMap;
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

/// One GROUP resource of AlterConfigs or IncrementalAlterConfigs: ALTER_CONFIGS on the group,
/// Kafka's duplicate-key check, then the group's new configs from `change` (each API computes
/// them its own way from the current ones), validated against the broker's bounds and stored
/// durably before the reply. The group need not exist, and its configs outlive it (Kafka).
pub(crate) async fn alter_group<'a>(
    broker: &Broker,
    ctx: &RequestContext,
    name: &str,
    keys: impl Iterator<Item = &'a str>,
    change: impl FnOnce(GroupConfigMap) -> Result<GroupConfigMap, Failure>,
    validate_only: bool,
) -> Result<(), Failure> {
    if let Some(e) = ctx.config_denied(broker, Operation::AlterConfigs, GROUP, name) {
        return Err((e, e.to_string()));
    }
    no_duplicates(keys)?;
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Default group resources are not allowed.".into(),
        ));
    }
    let defaults = broker.group_configs.defaults().clone();
    broker
        .change_group_configs(
            name,
            validate_only,
            |current| {
                let configs = change(current)?;
                defaults
                    .validate(&configs)
                    .map_err(|m| (ResponseError::InvalidConfig, m))?;
                Ok(configs)
            },
            |e| (ResponseError::KafkaStorageError, e.to_string()),
        )
        .await
}

/// The configs AlterConfigs names, replacing the whole set: null values are refused, all
/// named at once as Kafka's `ControllerConfigurationValidator` names them (`what`: "topic" or
/// "group").
fn replacement(
    configs: &[kafka_protocol::messages::alter_configs_request::AlterableConfig],
    what: &str,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let nulls: Vec<&str> = configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err((
            ResponseError::InvalidConfig,
            format!(
                "Null value not supported for {what} configs: {}",
                nulls.join(",")
            ),
        ));
    }
    Ok(configs
        .iter()
        .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
        .collect())
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
        // AlterConfigs replaces the whole set.
        let outcome = if r.resource_type == GROUP {
            alter_group(
                broker,
                ctx,
                r.resource_name.as_str(),
                r.configs.iter().map(|c| c.name.as_str()),
                |_current| replacement(&r.configs, "group"),
                req.validate_only,
            )
            .await
        } else {
            alter_resource(
                broker,
                ctx,
                r.resource_type,
                r.resource_name.as_str(),
                r.configs.iter().map(|c| c.name.as_str()),
                || replacement(&r.configs, "topic"),
                req.validate_only,
            )
            .await
        };
        responses.push(response(r.resource_type, r.resource_name, outcome));
    }
    AlterConfigsResponse::default().with_responses(responses)
}
