//! IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND and SUBTRACT on a topic's
//! configs (APPEND and SUBTRACT on list configs only, starting from the effective value), the
//! result validated as CreateTopics validates and stored durably before the reply;
//! `validate_only` changes nothing. Broker settings are refused as in AlterConfigs. A GROUP
//! resource's configs change the same way, validated as Kafka's `GroupConfig.validate` does
//! and stored durably before the reply.

use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::ResponseError;

use super::alter_configs::{alter_group, alter_resource, Failure};
use super::context::RequestContext;
use super::describe_configs::{topic, GROUP};
use super::str_bytes;
use crate::broker::Broker;
use crate::metadata::group_config::GroupConfigMap;
use crate::metadata::topic_config::{def, effective, is_list, list_items, TopicConfigs};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Topic `name`'s configs after `ops`.
fn apply(broker: &Broker, name: &str, ops: &[AlterableConfig]) -> Result<TopicConfigs, Failure> {
    let topic = topic(broker, name)?;
    let mut configs = broker.topics.configs(&topic.name);
    for op in ops {
        let key = op.name.as_str();
        let value = op.value.as_ref().map(|v| v.as_str());
        let Some(d) = def(key) else {
            return Err((
                ResponseError::InvalidConfig,
                format!("Unknown topic config name: {key}"),
            ));
        };
        match op.config_operation {
            SET => {
                let Some(v) = value else {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for : {key}"),
                    ));
                };
                configs.insert(key.to_string(), v.to_string());
            }
            DELETE => {
                configs.remove(key);
            }
            APPEND | SUBTRACT => {
                if !is_list(key) {
                    return Err((
                        ResponseError::InvalidConfig,
                        format!(
                            "Can't {} to key {key} because its type is not LIST.",
                            if op.config_operation == APPEND {
                                "APPEND"
                            } else {
                                "SUBTRACT"
                            }
                        ),
                    ));
                }
                let current = effective(d, &configs, &broker.config.topic_defaults()).0;
                let mut items: Vec<String> = list_items(&current).map(str::to_owned).collect();
                for item in value.map(list_items).into_iter().flatten() {
                    if op.config_operation == APPEND {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                configs.insert(key.to_string(), items.join(","));
            }
            // Kafka fails to map an unknown operation: UNKNOWN_SERVER_ERROR, no message.
            _ => return Err((ResponseError::UnknownServerError, String::new())),
        }
    }
    Ok(configs)
}

/// Group `name`'s configs after `ops`, from `configs` (as Kafka's controller applies them;
/// names are checked by the validation that follows).
fn apply_group(
    mut configs: GroupConfigMap,
    ops: &[AlterableConfig],
) -> Result<GroupConfigMap, Failure> {
    for op in ops {
        let key = op.name.as_str();
        let value = op.value.as_ref().map(|v| v.as_str());
        match op.config_operation {
            SET => {
                let Some(v) = value else {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for : {key}"),
                    ));
                };
                configs.insert(key.to_string(), v.to_string());
            }
            DELETE => {
                configs.remove(key);
            }
            // Kafka 4.4's controller knows no group config as a LIST (its config schema has
            // no GROUP definitions): APPEND and SUBTRACT are refused for every key, even
            // streams.rack.aware.assignment.tags.
            APPEND | SUBTRACT => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!(
                        "Can't {} to key {key} because its type is not LIST.",
                        if op.config_operation == APPEND {
                            "APPEND"
                        } else {
                            "SUBTRACT"
                        }
                    ),
                ));
            }
            _ => return Err((ResponseError::UnknownServerError, String::new())),
        }
    }
    Ok(configs)
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let name = r.resource_name.as_str();
        let outcome = if r.resource_type == GROUP {
            alter_group(
                broker,
                ctx,
                name,
                r.configs.iter().map(|c| c.name.as_str()),
                |current| apply_group(current, &r.configs),
                req.validate_only,
            )
            .await
        } else {
            alter_resource(
                broker,
                ctx,
                r.resource_type,
                name,
                r.configs.iter().map(|c| c.name.as_str()),
                || apply(broker, name, &r.configs),
                req.validate_only,
            )
            .await
        };
        let resp = AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name);
        responses.push(match outcome {
            Ok(()) => resp.with_error_message(None),
            Err((e, m)) if m.is_empty() => resp.with_error_code(e.code()).with_error_message(None),
            Err((e, m)) => resp
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(m))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
