//! DescribeConfigs (key 32), v1-4, as Kafka's `ConfigHelper` answers it: a topic's every config
//! (or those asked for) with its effective value, source (DYNAMIC_TOPIC_CONFIG when set on the
//! topic, else STATIC_BROKER_CONFIG or DEFAULT_CONFIG), synonyms and documentation when asked;
//! the broker's own settings under the Kafka names koord's configuration mirrors, read-only;
//! a group's every group config (Kafka 4.4's `GroupConfig`, internal ones only when set) with
//! its effective value and source (GROUP_CONFIG when set on the group, else its broker
//! synonym's: STATIC_BROKER_CONFIG where koord's configuration differs from Kafka's default,
//! else DEFAULT_CONFIG), as Kafka's `ConfigHelper.createGroupConfigEntry` answers.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::config::{Config, KEYS};
use crate::metadata::group_config::GROUP_DEFS;
use crate::metadata::topic_config::{broker_default, effective, Source, DEFS};
use crate::metadata::validate_topic_name;
use crate::security::acl::Operation;

/// `ConfigResource.Type` codes.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const GROUP: i8 = 32;

/// `DescribeConfigsResponse.ConfigSource` GROUP_CONFIG: set on the group.
const GROUP_CONFIG: i8 = 8;

type Failure = (ResponseError, String);

/// The topic a config request names: it must exist (AlterConfigs says so in Kafka's words;
/// DescribeConfigs gives no message, as Kafka).
pub(crate) fn topic(broker: &Broker, name: &str) -> Result<crate::metadata::Topic, Failure> {
    validate_topic_name(name).map_err(|m| (ResponseError::InvalidTopicException, m))?;
    broker.topics.get(name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("The topic '{name}' does not exist."),
        )
    })
}

/// Kafka's check of a BROKER resource name: empty (the cluster default) or this node's id.
pub(crate) fn broker_name(broker: &Broker, name: &str) -> Result<(), Failure> {
    if name.is_empty() {
        return Ok(());
    }
    match name.parse::<i32>() {
        Ok(id) if id == broker.node_id() => Ok(()),
        Ok(_) => Err((
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                broker.node_id()
            ),
        )),
        Err(_) => Err((
            ResponseError::InvalidRequest,
            format!("Broker id must be an integer, but it is: {name}"),
        )),
    }
}

fn wanted(keys: &Option<Vec<kafka_protocol::protocol::StrBytes>>, name: &str) -> bool {
    keys.as_ref()
        .is_none_or(|k| k.is_empty() || k.iter().any(|k| k.as_str() == name))
}

fn synonym(name: &str, value: String, source: Source) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(str_bytes(name))
        .with_value(Some(str_bytes(value)))
        .with_source(source as i8)
}

fn topic_configs(
    broker: &Broker,
    name: &str,
    keys: &Option<Vec<kafka_protocol::protocol::StrBytes>>,
    synonyms: bool,
    docs: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, Failure> {
    let topic = topic(broker, name)?;
    let configs = broker.topics.configs(&topic.name);
    Ok(DEFS
        .iter()
        .filter(|d| wanted(keys, d.name))
        .map(|d| {
            let (value, source) = effective(d, &configs, &broker.config.topic_defaults());
            let mut r = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(d.name))
                .with_value(Some(str_bytes(value.clone())))
                .with_read_only(false)
                .with_config_source(source as i8)
                .with_is_sensitive(false)
                .with_config_type(d.kind.code())
                .with_documentation(docs.then(|| str_bytes(d.doc)));
            if synonyms {
                let mut list = Vec::new();
                if source == Source::Topic {
                    list.push(synonym(d.name, value, Source::Topic));
                }
                // Kafka lists broker synonyms only where the broker's configuration sets them.
                if let Some(b) = d.broker {
                    let (v, s) = broker_default(d, &broker.config.topic_defaults());
                    if s == Source::StaticBroker {
                        list.push(synonym(b, v, s));
                    }
                }
                r = r.with_synonyms(list);
            }
            r
        })
        .collect())
}

fn group_configs(
    broker: &Broker,
    name: &str,
    keys: &Option<Vec<kafka_protocol::protocol::StrBytes>>,
    synonyms: bool,
    docs: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, Failure> {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Group name must not be empty".into(),
        ));
    }
    let configs = broker.group_configs.configs(name);
    let defaults = broker.group_configs.defaults();
    let kafka_defaults = crate::metadata::group_config::GroupDefaults::default();
    Ok(GROUP_DEFS
        .iter()
        // Internal configs only when set (koord's configuration sets none of their synonyms).
        .filter(|d| !d.internal || configs.contains_key(d.name))
        .filter(|d| wanted(keys, d.name))
        .map(|d| {
            let (value, set) = defaults.effective(d, &configs);
            let mut list = Vec::new();
            if set {
                list.push(
                    DescribeConfigsSynonym::default()
                        .with_name(str_bytes(d.name))
                        .with_value(value.clone().map(str_bytes))
                        .with_source(GROUP_CONFIG),
                );
            }
            match d.broker {
                Some(b) => {
                    let ours = defaults.broker_value(b);
                    if ours.is_some() && ours != kafka_defaults.broker_value(b) {
                        list.push(synonym(b, ours.unwrap_or_default(), Source::StaticBroker));
                    }
                    list.push(synonym(b, d.broker_default.to_string(), Source::Default));
                }
                None => {
                    if let Some(v) = d.default {
                        list.push(synonym(d.name, v.to_string(), Source::Default));
                    }
                }
            }
            let source = list.first().map_or(Source::Default as i8, |s| s.source);
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(d.name))
                .with_value(value.map(str_bytes))
                .with_read_only(false)
                .with_config_source(source)
                .with_is_sensitive(false)
                .with_config_type(d.kind.code())
                .with_documentation(docs.then(|| str_bytes(d.doc)))
                .with_synonyms(if synonyms { list } else { Vec::new() })
        })
        .collect())
}

/// A koord setting's value as Kafka shows a config value.
fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn broker_configs(
    broker: &Broker,
    name: &str,
    keys: &Option<Vec<kafka_protocol::protocol::StrBytes>>,
    synonyms: bool,
    docs: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, Failure> {
    broker_name(broker, name)?;
    if name.is_empty() {
        // The cluster-wide default holds only dynamic defaults, which koord has none of.
        return Ok(Vec::new());
    }
    let defaults = Config::default();
    Ok(KEYS
        .iter()
        .filter_map(|k| k.kafka.filter(|n| !n.contains(' ')).map(|n| (k, n)))
        .filter(|(_, n)| wanted(keys, n))
        .map(|(k, n)| {
            let value = k.value(&broker.config);
            let source = if value == k.value(&defaults) {
                Source::Default
            } else {
                Source::StaticBroker
            };
            let config_type = match value {
                toml::Value::Boolean(_) => 1,
                toml::Value::Integer(_) => 5,
                toml::Value::Array(_) => 7,
                _ => 2,
            };
            let value = shown(&value);
            let mut r = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(n))
                .with_value(Some(str_bytes(value.clone())))
                .with_read_only(true)
                .with_config_source(source as i8)
                .with_is_sensitive(false)
                .with_config_type(config_type)
                .with_documentation(docs.then(|| str_bytes(k.doc)));
            if synonyms {
                r = r.with_synonyms(vec![synonym(n, value, source)]);
            }
            r
        })
        .collect())
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.as_str();
            // As Kafka: DESCRIBE_CONFIGS on the topic or the cluster, before anything else.
            let denied =
                ctx.config_denied(broker, Operation::DescribeConfigs, r.resource_type, name);
            let configs = match (denied, r.resource_type) {
                (Some(e), _) => Err((e, e.to_string())),
                (None, TOPIC) => topic_configs(
                    broker,
                    name,
                    &r.configuration_keys,
                    req.include_synonyms,
                    req.include_documentation,
                ),
                (None, GROUP) => group_configs(
                    broker,
                    name,
                    &r.configuration_keys,
                    req.include_synonyms,
                    req.include_documentation,
                ),
                (None, BROKER) => broker_configs(
                    broker,
                    name,
                    &r.configuration_keys,
                    req.include_synonyms,
                    req.include_documentation,
                ),
                (None, t) => Err((
                    ResponseError::InvalidRequest,
                    format!("Unsupported resource type {t}"),
                )),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match configs {
                Ok(c) => result.with_configs(c),
                // Kafka answers an unknown topic with the code alone.
                Err((e @ ResponseError::UnknownTopicOrPartition, _)) => {
                    result.with_error_code(e.code()).with_error_message(None)
                }
                Err((e, m)) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(m))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
