//! SASL for the wire tests (tests/security.rs, tests/acls.rs): SaslHandshake and
//! SaslAuthenticate with PLAIN or SCRAM-SHA-256/512, the SCRAM client side from koord's own
//! exchange (`koord::security::scram::client`), checked against the server's signature.

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use koord::security::scram::{client, ScramMechanism};

use super::{err, s, Client};

/// SaslHandshake v1 for `mechanism`.
pub fn handshake(c: &mut Client, mechanism: &str) -> SaslHandshakeResponse {
    c.send(
        1,
        &SaslHandshakeRequest::default().with_mechanism(s(mechanism)),
    )
}

/// SaslAuthenticate v2 with `token`.
pub fn authenticate(c: &mut Client, token: &[u8]) -> SaslAuthenticateResponse {
    c.send(
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token)),
    )
}

/// The SCRAM mechanism named `name`; `None` for PLAIN (or anything else).
pub fn scram_mechanism(name: &str) -> Option<ScramMechanism> {
    match name {
        "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
        "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
        _ => None,
    }
}

/// Handshake and authentication as `user` with `mechanism` (PLAIN or SCRAM); the last
/// SaslAuthenticate response (the first failed one). A successful SCRAM exchange must end
/// with the server's correct signature.
pub fn login(
    c: &mut Client,
    mechanism: &str,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    let h = handshake(c, mechanism);
    assert_eq!(err(h.error_code), None, "handshake {mechanism}: {h:?}");
    let Some(m) = scram_mechanism(mechanism) else {
        return authenticate(c, format!("\0{user}\0{password}").as_bytes());
    };
    let first = client::first(user, "koordwiretestnonce");
    let r = authenticate(c, first.as_bytes());
    if r.error_code != 0 {
        return r;
    }
    let server_first = String::from_utf8(r.auth_bytes.to_vec()).expect("UTF-8 server-first");
    let (fin, expected) =
        client::fin(m, password, &first, &server_first).expect("a well-formed server-first");
    let r = authenticate(c, fin.as_bytes());
    if r.error_code == 0 {
        assert_eq!(r.auth_bytes.to_vec(), expected, "the server's signature");
    }
    r
}
