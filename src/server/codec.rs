//! Request decoding and response encoding.
//!
//! Header versions come from the crate (`ApiKey::request_header_version` /
//! `response_header_version`); nothing here hardcodes a flexible-version cut-off. Two Kafka
//! rules need care:
//! - ApiVersions responses always use response header v0 (KIP-511); the crate's
//!   `response_header_version` already says so.
//! - ApiVersions at a version the server does not support is not decoded: it is answered with a
//!   v0 body carrying UNSUPPORTED_VERSION and the supported list, so the client can pick a
//!   version (Kafka's `RequestContext`). Only the correlation id, which sits at the same place
//!   in every request header version, is read.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

use crate::api;

/// A request that cannot be served: the connection is closed.
#[derive(Debug, Error)]
pub enum CodecError {
    #[error("frame of {0} bytes is too short for a request header")]
    Short(usize),
    #[error("unknown API key {0}")]
    UnknownKey(i16),
    #[error("API {key:?} is not served")]
    NotServed { key: ApiKey },
    #[error("API {key:?} v{version} is not served")]
    UnsupportedVersion { key: ApiKey, version: i16 },
    #[error("cannot decode {key:?} v{version}: {source:#}")]
    Decode {
        key: ApiKey,
        version: i16,
        source: anyhow::Error,
    },
    #[error("cannot encode {key:?} v{version} response: {source:#}")]
    Encode {
        key: ApiKey,
        version: i16,
        source: anyhow::Error,
    },
}

/// A decoded request frame.
#[derive(Debug)]
pub enum Decoded {
    Request {
        header: RequestHeader,
        body: Box<RequestKind>,
    },
    /// ApiVersions at a version outside the served range: answer with [`unsupported_api_versions`].
    UnsupportedApiVersions { correlation_id: i32, version: i16 },
}

/// Decodes one request frame (without its length prefix).
///
/// # Errors
/// Any [`CodecError`]; the caller closes the connection.
pub fn decode_request(mut frame: Bytes) -> Result<Decoded, CodecError> {
    if frame.len() < 8 {
        return Err(CodecError::Short(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|()| CodecError::UnknownKey(raw_key))?;
    let Some(served) = api::supported(key) else {
        return Err(CodecError::NotServed { key });
    };
    if !(served.min..=served.max).contains(&version) {
        if key == ApiKey::ApiVersions {
            let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            return Ok(Decoded::UnsupportedApiVersions {
                correlation_id,
                version,
            });
        }
        return Err(CodecError::UnsupportedVersion { key, version });
    }
    let decode_err = |source| CodecError::Decode {
        key,
        version,
        source,
    };
    let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
        .map_err(decode_err)?;
    let body = RequestKind::decode(key, &mut frame, version).map_err(decode_err)?;
    Ok(Decoded::Request {
        header,
        body: Box::new(body),
    })
}

/// Encodes a response frame, length prefix included.
///
/// # Errors
/// [`CodecError::Encode`] when the body sets a field its version cannot carry: a bug in the
/// handler, answered by closing the connection rather than sending a wrong answer.
pub fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, CodecError> {
    let mut out = BytesMut::with_capacity(64);
    encode_response_into(&mut out, key, version, correlation_id, body)?;
    Ok(out.freeze())
}

/// [`encode_response`] appended to `out` (a connection's buffer of answers not yet written,
/// reused from request to request). On an error `out` is left as it was.
///
/// # Errors
/// As [`encode_response`].
pub fn encode_response_into(
    out: &mut BytesMut,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<(), CodecError> {
    let start = out.len();
    out.put_i32(0);
    let encoded = ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(out, key.response_header_version(version))
        .and_then(|()| body.encode(out, version));
    if let Err(source) = encoded {
        out.truncate(start);
        return Err(CodecError::Encode {
            key,
            version,
            source,
        });
    }
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The answer to ApiVersions at an unsupported version: a v0 body with UNSUPPORTED_VERSION and
/// the supported list, behind a v0 response header.
pub fn unsupported_api_versions(correlation_id: i32) -> Result<Bytes, CodecError> {
    let body = crate::api::api_versions::unsupported();
    encode_response(
        ApiKey::ApiVersions,
        0,
        correlation_id,
        &ResponseKind::ApiVersions(body),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsRequest;
    use kafka_protocol::protocol::StrBytes;

    fn frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let mut b = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("t")))
            .encode(&mut b, key.request_header_version(version))
            .unwrap();
        body.encode(&mut b, version).unwrap();
        b.freeze()
    }

    #[test]
    fn api_versions_round_trip_at_every_version() {
        for v in 0..=4 {
            let req = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("koord-test"))
                .with_client_software_version(StrBytes::from_static_str("1.0"));
            let Decoded::Request { header, body } =
                decode_request(frame(ApiKey::ApiVersions, v, &req)).unwrap()
            else {
                panic!("v{v} not decoded as a request")
            };
            assert_eq!(header.correlation_id, 7);
            assert!(matches!(*body, RequestKind::ApiVersions(_)));
        }
    }

    #[test]
    fn api_versions_at_unknown_version_is_answered_not_decoded() {
        let mut f = BytesMut::new();
        f.put_i16(ApiKey::ApiVersions as i16);
        f.put_i16(127);
        f.put_i32(42);
        f.put_slice(b"\xff\xffgarbage");
        match decode_request(f.freeze()).unwrap() {
            Decoded::UnsupportedApiVersions {
                correlation_id,
                version,
            } => assert_eq!((correlation_id, version), (42, 127)),
            other => panic!("{other:?}"),
        }
        let bytes = unsupported_api_versions(42).unwrap();
        // length, correlation id (header v0, no tagged fields), error code 35.
        assert_eq!(&bytes[4..8], &42i32.to_be_bytes());
        assert_eq!(&bytes[8..10], &35i16.to_be_bytes());
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert!(matches!(
            decode_request(Bytes::from_static(b"\x00\x12")),
            Err(CodecError::Short(2))
        ));
        let unknown = Bytes::from_static(b"\x7f\x00\x00\x00\x00\x00\x00\x01");
        assert!(matches!(
            decode_request(unknown),
            Err(CodecError::UnknownKey(0x7f00))
        ));
        // Metadata v1 with a header that claims a 30000-byte client id.
        let garbage = Bytes::from_static(b"\x00\x03\x00\x01\x00\x00\x00\x01\x75\x30abc");
        assert!(matches!(
            decode_request(garbage),
            Err(CodecError::Decode { .. })
        ));
        // Produce v2 is below the served range.
        let old = Bytes::from_static(b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00");
        assert!(matches!(
            decode_request(old),
            Err(CodecError::UnsupportedVersion { version: 2, .. })
        ));
    }
}
