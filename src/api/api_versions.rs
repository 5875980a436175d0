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

pub fn handle(req: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default()
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
        );
    if version >= 3
        && !(valid_software_field(&req.client_software_name)
            && valid_software_field(&req.client_software_version))
    {
        resp.error_code = ResponseError::InvalidRequest.code();
    }
    resp
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
}
