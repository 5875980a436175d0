//! ApiVersions (key 18): the served APIs and versions, straight from
//! [`crate::server::dispatch::SUPPORTED`].

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use crate::server::dispatch::SUPPORTED;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|s| {
            ApiVersion::default()
                .with_api_key(s.key as i16)
                .with_min_version(s.min)
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

pub fn handle(req: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default()
        .with_api_keys(api_keys())
        .with_finalized_features_epoch(-1);
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
    fn software_fields_follow_kafka_pattern() {
        for ok in ["a", "apache-kafka-java", "4.4.0", "librdkafka", "x.y-z9"] {
            assert!(valid_software_field(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "a_b", ".x"] {
            assert!(!valid_software_field(bad), "{bad}");
        }
    }
}
