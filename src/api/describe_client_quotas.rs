//! DescribeClientQuotas (key 48), v0-1: the client quotas set, as Kafka 4.4's brokers answer
//! from their metadata image (`ClientQuotasImage.describe`), what `kafka-configs --describe
//! --entity-type users|clients|ips` sends. DESCRIBE_CONFIGS on the cluster is checked first
//! (CLUSTER_AUTHORIZATION_FAILED). A bad filter fails the whole request: INVALID_REQUEST, or
//! UNSUPPORTED_VERSION for an entity type Kafka does not know, with Kafka's message and no
//! entries.

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::broker::Broker;
use crate::quota::DescribeError;

pub fn handle(
    broker: &Broker,
    req: DescribeClientQuotasRequest,
    _version: i16,
) -> DescribeClientQuotasResponse {
    let components: Vec<(String, i8, Option<String>)> = req
        .components
        .iter()
        .map(|c| {
            (
                c.entity_type.to_string(),
                c.match_type,
                c._match.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    let table = broker.quotas.table();
    match table.describe(&components, req.strict) {
        Ok(found) => DescribeClientQuotasResponse::default().with_entries(Some(
            found
                .into_iter()
                .map(|(entity, values)| {
                    EntryData::default()
                        .with_entity(
                            entity
                                .parts()
                                .iter()
                                .map(|(t, n)| {
                                    EntityData::default()
                                        .with_entity_type(str_bytes(t.as_str()))
                                        .with_entity_name(n.clone().map(str_bytes))
                                })
                                .collect(),
                        )
                        .with_values(
                            values
                                .into_iter()
                                .map(|(k, v)| {
                                    ValueData::default().with_key(str_bytes(k)).with_value(v)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )),
        Err(e) => {
            let (code, message) = match e {
                DescribeError::Invalid(m) => (ResponseError::InvalidRequest, m),
                DescribeError::Unsupported(m) => (ResponseError::UnsupportedVersion, m),
            };
            DescribeClientQuotasResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(message)))
                .with_entries(None)
        }
    }
}
