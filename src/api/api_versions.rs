//! ApiVersions (key 18): the served APIs and versions, straight from
//! [`crate::api::SUPPORTED`].

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::supported::SUPPORTED;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|s| {
            // Kafka 4.x rejects Produce below v3 but still advertises it from v0, because
            // older librdkafka releases treat a Produce minimum above 0 as "no Produce"
            // (KAFKA-18659). A v0-2 Produce request still closes the connection.
            let min = if s.key == ApiKey::Produce { 0 } else { s.min };
            ApiVersion::default()
                .with_api_key(s.key as i16)
                .with_min_version(min)
                .with_max_version(s.max)
        })
        .collect()
}

/// Kafka's rule for v3+ client software name and version: `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    let inner_ok = |c: &u8| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.';
    match b {
        [] => false,
        [one] => one.is_ascii_alphanumeric(),
        [first, middle @ .., last] => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && middle.iter().all(inner_ok)
        }
    }
}

/// The feature levels koord serves, supported and finalized alike: `streams.version` 1 (streams
/// groups, KIP-1071), which Kafka Streams looks for before it uses `group.protocol=streams`;
/// `share.version` 2 (share groups, KIP-932, with level 2's dead-letter queues, KIP-1191: Kafka
/// 4.4's default); `transaction.version` 2 (KIP-890 part 2: Kafka 4.4's default; a producer
/// then adds partitions through Produce v12+ and TxnOffsetCommit v5, and EndTxn v5 bumps its
/// epoch).
const FEATURES: &[(&str, i16)] = &[
    ("share.version", 2),
    ("streams.version", 1),
    (TRANSACTION_VERSION, 2),
];

/// The feature that tells producers which transaction protocol the cluster runs.
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// `resp` without the feature `name`, supported or finalized: a mode where another part of
/// the system (the upstream cluster in gateway mode) runs that protocol.
pub fn without_feature(mut resp: ApiVersionsResponse, name: &str) -> ApiVersionsResponse {
    resp.supported_features.retain(|f| f.name.as_str() != name);
    resp.finalized_features.retain(|f| f.name.as_str() != name);
    resp
}

/// Who answers (KIP-1242): the cluster id and node id a v5+ client may name to make sure it
/// reached the node it meant. `None` where the answer stands for nodes of another cluster
/// (gateway mode), which is not checked.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub cluster_id: &'a str,
    pub node_id: i32,
}

/// ApiVersions, in Kafka's order (`KafkaApis.handleApiVersionsRequest`): a request that is not
/// valid (`ApiVersionsRequest.isValid`: v3+ client software fields of Kafka's form; v5+ a
/// cluster id and a node id both given or neither) is INVALID_REQUEST; then a v5+ request that
/// names a cluster id other than this cluster's, or a node id other than this node's, is
/// REBOOTSTRAP_REQUIRED: the client's metadata is stale. Both errors answer no API list, as
/// Kafka's `getErrorResponse`.
pub fn handle(
    req: &ApiVersionsRequest,
    version: i16,
    identity: Option<Identity<'_>>,
) -> ApiVersionsResponse {
    let invalid = (version >= 5 && req.cluster_id.is_some() != (req.node_id != -1))
        || (version >= 3
            && !(valid_software_field(&req.client_software_name)
                && valid_software_field(&req.client_software_version)));
    let stale = version >= 5
        && identity.is_some_and(|me| {
            req.cluster_id
                .as_ref()
                .is_some_and(|c| c.as_str() != me.cluster_id || req.node_id != me.node_id)
        });
    if invalid || stale {
        let e = if invalid {
            ResponseError::InvalidRequest
        } else {
            ResponseError::RebootstrapRequired
        };
        return ApiVersionsResponse::default().with_error_code(e.code());
    }
    ApiVersionsResponse::default()
        .with_api_keys(api_keys())
        .with_supported_features(
            FEATURES
                .iter()
                .map(|(name, level)| {
                    SupportedFeatureKey::default()
                        .with_name(super::str_bytes(*name))
                        .with_min_version(0)
                        .with_max_version(*level)
                })
                .collect(),
        )
        // Finalized features count only with an epoch of 0 or more; koord's never change.
        .with_finalized_features_epoch(0)
        .with_finalized_features(
            FEATURES
                .iter()
                .map(|(name, level)| {
                    FinalizedFeatureKey::default()
                        .with_name(super::str_bytes(*name))
                        .with_min_version_level(*level)
                        .with_max_version_level(*level)
                })
                .collect(),
        )
}

/// The v0 body for an ApiVersions request at a version koord does not serve.
pub fn unsupported() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_is_advertised_from_v0_like_kafka() {
        let produce = api_keys()
            .into_iter()
            .find(|k| k.api_key == ApiKey::Produce as i16)
            .unwrap();
        assert_eq!((produce.min_version, produce.max_version), (0, 13));
        assert!(!crate::api::is_supported(ApiKey::Produce, 2));
    }

    #[test]
    fn software_fields_follow_kafka_pattern() {
        for ok in ["a", "apache-kafka-java", "4.4.0", "librdkafka", "x.y-z9"] {
            assert!(valid_software_field(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "a_b", ".x"] {
            assert!(!valid_software_field(bad), "{bad}");
        }
    }

    #[test]
    fn v5_naming_another_cluster_or_node_is_rebootstrap_required() {
        use kafka_protocol::protocol::StrBytes;
        let me = Identity {
            cluster_id: "c1",
            node_id: 1,
        };
        let req = |cluster: Option<&'static str>, node: i32| {
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("t"))
                .with_client_software_version(StrBytes::from_static_str("1"))
                .with_cluster_id(cluster.map(StrBytes::from_static_str))
                .with_node_id(node)
        };
        let rebootstrap = ResponseError::RebootstrapRequired.code();
        let invalid = ResponseError::InvalidRequest.code();
        for (cluster, node, v, expected) in [
            (Some("c1"), 1, 5, 0),
            (None, -1, 5, 0),
            (None, 7, 5, invalid),
            (Some("c1"), -1, 5, invalid),
            (Some("c2"), 1, 5, rebootstrap),
            (Some("c1"), 2, 5, rebootstrap),
            (Some("c2"), 2, 4, 0),
        ] {
            let resp = handle(&req(cluster, node), v, Some(me));
            assert_eq!(resp.error_code, expected, "{cluster:?} {node} v{v}");
            assert_eq!(resp.api_keys.is_empty(), expected != 0);
        }
        assert_eq!(
            handle(&req(Some("c2"), 2), 5, None).error_code,
            0,
            "not checked"
        );
    }
}
