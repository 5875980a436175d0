//! Wire tests of authentication: SaslHandshake (key 17), SaslAuthenticate (key 36) with PLAIN
//! and SCRAM-SHA-256/512, what is served before authentication, the SCRAM user APIs
//! (DescribeUserScramCredentials 50, AlterUserScramCredentials 51), and a TLS listener.
//!
//! Against koord, each test starts its own koord with a PLAINTEXT and a SASL_PLAINTEXT
//! listener and the user `alice` (sasl.admin.user). With `KOORD_BOOTSTRAP` (the PLAINTEXT
//! listener) and `KOORD_SASL_BOOTSTRAP` (a SASL_PLAINTEXT listener with PLAIN and SCRAM, where
//! `alice` has the same password) the same tests run against another server:
//! `KAFKA_SECURITY=sasl scripts/kafka.sh start` sets Apache Kafka 4.4 up that way. What needs
//! koord's own configuration (a restart, a TLS listener, re-authentication timing) is skipped
//! there.

mod common;

use std::io::Read;
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use common::sasl::{authenticate, handshake, login};
use common::{err, s, Client, Koord};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeClusterRequest, DescribeClusterResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::ResponseError;
use koord::security::scram::ScramMechanism;

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
const SASL_ENV: &str = "KOORD_SASL_BOOTSTRAP";

/// A server with a SASL_PLAINTEXT listener: the server and that listener's address.
struct Sasl {
    server: Koord,
    addr: SocketAddr,
}

impl Sasl {
    fn start(test: &str, extra: &[&str]) -> Option<Sasl> {
        if common::bootstrap().is_some() {
            let Some(sasl) = std::env::var(SASL_ENV).ok().filter(|v| !v.is_empty()) else {
                eprintln!("SKIPPED {test}: {SASL_ENV} names no SASL_PLAINTEXT listener");
                return None;
            };
            let addr = sasl
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .expect("KOORD_SASL_BOOTSTRAP resolves");
            return Some(Sasl {
                server: Koord::start(&[]),
                addr,
            });
        }
        let port = common::free_port();
        let extra: Vec<String> = extra.iter().map(|e| e.to_string()).collect();
        let server = Koord::spawn_with(move |addr| {
            let mut sets = vec![
                format!("listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://127.0.0.1:{port}"),
                format!("sasl.admin.user={USER}"),
                format!("sasl.admin.password={PASSWORD}"),
                // Failures answered at once (a test below sets a delay and checks it).
                "connection.failed.authentication.delay.ms=0".to_string(),
            ];
            sets.extend(extra.iter().cloned());
            sets
        });
        Some(Sasl {
            server,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }

    fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    /// A connection authenticated as `user` with `mechanism`.
    fn login(&self, mechanism: &str, user: &str, password: &str) -> Client {
        let mut c = self.connect();
        let r = login(&mut c, mechanism, user, password);
        assert_eq!(err(r.error_code), None, "{mechanism} as {user}: {r:?}");
        c
    }
}

/// A request that needs authentication: Metadata for no topics.
fn metadata(c: &mut Client) -> kafka_protocol::messages::MetadataResponse {
    c.send(12, &MetadataRequest::default().with_topics(Some(vec![])))
}

#[test]
fn plain_authenticates_and_the_sasl_listener_is_advertised() {
    let Some(sasl) = Sasl::start("plain_authenticates", &[]) else {
        return;
    };
    let mut c = sasl.connect();
    // ApiVersions is served before authentication.
    assert_eq!(err(c.api_versions(3).error_code), None);
    let h = handshake(&mut c, "PLAIN");
    assert_eq!(err(h.error_code), None);
    let names: Vec<&str> = h.mechanisms.iter().map(|m| m.as_str()).collect();
    for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        assert!(names.contains(&m), "{m} not in {names:?}");
    }
    let r = authenticate(&mut c, format!("\0{USER}\0{PASSWORD}").as_bytes());
    assert_eq!(err(r.error_code), None, "{r:?}");
    let md = metadata(&mut c);
    assert_eq!(md.brokers.len(), 1);
    assert_eq!(
        md.brokers[0].port,
        i32::from(sasl.addr.port()),
        "the listener the client came in on"
    );
    let fc: FindCoordinatorResponse = c.send(
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![s(&common::unique("g"))]),
    );
    assert_eq!(
        fc.coordinators[0].port,
        i32::from(sasl.addr.port()),
        "{fc:?}"
    );
    let dc: DescribeClusterResponse = c.send(0, &DescribeClusterRequest::default());
    assert_eq!(dc.brokers[0].port, i32::from(sasl.addr.port()), "{dc:?}");
    let plain = metadata(&mut sasl.server.connect());
    assert_eq!(plain.brokers[0].port, i32::from(sasl.server.addr().port()));
}

#[test]
fn scram_sha_256_and_512_authenticate() {
    let Some(sasl) = Sasl::start("scram_authenticates", &[]) else {
        return;
    };
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let mut c = sasl.login(mechanism, USER, PASSWORD);
        assert_eq!(metadata(&mut c).brokers.len(), 1, "{mechanism}");
    }
}

#[test]
fn bad_credentials_fail_and_close() {
    let Some(sasl) = Sasl::start("bad_credentials", &[]) else {
        return;
    };
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        for (user, password) in [(USER, "wrong"), ("nobody", PASSWORD)] {
            let mut c = sasl.connect();
            let r = login(&mut c, mechanism, user, password);
            assert_eq!(
                err(r.error_code),
                Some(ResponseError::SaslAuthenticationFailed),
                "{mechanism} {user}/{password}: {r:?}"
            );
            assert!(r.error_message.is_some(), "{r:?}");
            c.expect_closed();
        }
    }
}

#[test]
fn unknown_mechanism_is_unsupported_with_the_enabled_list() {
    let Some(sasl) = Sasl::start("unknown_mechanism", &[]) else {
        return;
    };
    for mechanism in ["GSSAPI-NOT-ENABLED", "scram-sha-512"] {
        let mut c = sasl.connect();
        let h = handshake(&mut c, mechanism);
        assert_eq!(
            err(h.error_code),
            Some(ResponseError::UnsupportedSaslMechanism),
            "{mechanism}"
        );
        let names: Vec<&str> = h.mechanisms.iter().map(|m| m.as_str()).collect();
        assert!(
            names.contains(&"SCRAM-SHA-512") && names.contains(&"PLAIN"),
            "{names:?}"
        );
        c.expect_closed();
    }
}

#[test]
fn a_request_before_authentication_closes_the_connection() {
    let Some(sasl) = Sasl::start("request_before_authentication", &[]) else {
        return;
    };
    let mut c = sasl.connect();
    assert!(
        c.try_send(12, &MetadataRequest::default().with_topics(Some(vec![])))
            .is_err(),
        "Metadata before authentication must not be answered"
    );
    // Between the handshake and the tokens: Kafka answers with the request's error response
    // (nothing in it) and closes; koord closes at once. Either way nothing is served.
    let mut c = sasl.connect();
    assert_eq!(err(handshake(&mut c, "PLAIN").error_code), None);
    if let Ok(r) = c.try_send(12, &MetadataRequest::default().with_topics(Some(vec![]))) {
        eprintln!("answered between handshake and tokens: {r:?}");
        assert!(r.brokers.is_empty() && r.topics.is_empty(), "{r:?}");
        c.expect_closed();
    }
    // SaslAuthenticate without a handshake.
    let mut c = sasl.connect();
    assert!(c
        .try_send(
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0a\0b"))
        )
        .is_err());
}

#[test]
fn sasl_apis_are_advertised_and_illegal_on_a_plaintext_listener() {
    let Some(sasl) = Sasl::start("sasl_on_plaintext", &[]) else {
        return;
    };
    for addr in [sasl.server.addr(), sasl.addr] {
        let versions = Client::connect(addr).api_versions(3);
        for (key, max) in [
            (ApiKey::SaslHandshake, 1),
            (ApiKey::SaslAuthenticate, 2),
            (ApiKey::DescribeUserScramCredentials, 0),
            (ApiKey::AlterUserScramCredentials, 0),
        ] {
            let k = versions
                .api_keys
                .iter()
                .find(|k| k.api_key == key as i16)
                .unwrap_or_else(|| panic!("{key:?} not advertised on {addr}"));
            assert_eq!((k.min_version, k.max_version), (0, max), "{key:?}");
        }
    }
    let mut c = sasl.server.connect();
    let h = handshake(&mut c, "PLAIN");
    assert_eq!(err(h.error_code), Some(ResponseError::IllegalSaslState));
    let r = authenticate(&mut c, b"\0alice\0x");
    assert_eq!(err(r.error_code), Some(ResponseError::IllegalSaslState));
    // The connection is still served.
    assert_eq!(metadata(&mut c).brokers.len(), 1);
}

/// AlterUserScramCredentials's upsertion for `user`: the client salts and hashes.
fn upsertion(
    user: &str,
    m: ScramMechanism,
    password: &str,
    iterations: i32,
) -> ScramCredentialUpsertion {
    let salt = b"koord-wire-test-salt".to_vec();
    let salted = m.salted_password(password.as_bytes(), &salt, iterations.max(1) as u32);
    ScramCredentialUpsertion::default()
        .with_name(s(user))
        .with_mechanism(m.code())
        .with_iterations(iterations)
        .with_salt(Bytes::from(salt))
        .with_salted_password(Bytes::from(salted))
}

fn describe(c: &mut Client, users: &[&str]) -> DescribeUserScramCredentialsResponse {
    c.send(
        0,
        &DescribeUserScramCredentialsRequest::default().with_users(Some(
            users
                .iter()
                .map(|u| UserName::default().with_name(s(u)))
                .collect(),
        )),
    )
}

/// Describes `user` until its credentials are `want` (Kafka applies an alteration through its
/// metadata log, so a describe right after it may not see it yet).
fn await_described(c: &mut Client, user: &str, want: &[(i8, i32)]) {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        let r = describe(c, &[user]);
        let got: Vec<(i8, i32)> = r.results[0]
            .credential_infos
            .iter()
            .map(|i| (i.mechanism, i.iterations))
            .collect();
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{user}: {got:?}, want {want:?}: {r:?}"
        );
        std::thread::yield_now();
    }
}

#[test]
fn scram_users_are_altered_described_and_used() {
    let Some(sasl) = Sasl::start("scram_users", &[]) else {
        return;
    };
    let mut admin = sasl.login("SCRAM-SHA-512", USER, PASSWORD);
    let bob = common::unique("bob");
    let m = ScramMechanism::Sha512;
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion(
            &bob,
            m,
            "bob-secret",
            4096,
        )]),
    );
    assert_eq!(r.results.len(), 1);
    assert_eq!(err(r.results[0].error_code), None, "{r:?}");
    await_described(&mut admin, &bob, &[(2, 4096)]);
    let mut c = sasl.login("SCRAM-SHA-512", &bob, "bob-secret");
    assert_eq!(metadata(&mut c).brokers.len(), 1);
    // No SHA-256 credential for bob.
    let r = login(&mut sasl.connect(), "SCRAM-SHA-256", &bob, "bob-secret");
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::SaslAuthenticationFailed)
    );

    // Errors: an unknown user, too few iterations, an unknown mechanism, deleting what is not
    // there, the same credential twice.
    let r = describe(&mut admin, &["nobody-at-all"]);
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::ResourceNotFound)
    );
    let r = describe(&mut admin, &[&bob, &bob]);
    assert_eq!(r.results.len(), 1, "{r:?}");
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::DuplicateResource)
    );
    let carol = common::unique("carol");
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsertion(&carol, m, "pw", 100)]),
    );
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::UnacceptableCredential),
        "{r:?}"
    );
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsertion(&carol, m, "pw", 4096).with_mechanism(7)]),
    );
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::UnsupportedSaslMechanism),
        "{r:?}"
    );
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(s(&carol))
                .with_mechanism(1),
        ]),
    );
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::ResourceNotFound),
        "{r:?}"
    );
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            upsertion(&carol, m, "pw", 4096),
            upsertion(&carol, m, "pw2", 4096),
        ]),
    );
    assert_eq!(r.results.len(), 1, "{r:?}");
    assert_eq!(
        err(r.results[0].error_code),
        Some(ResponseError::DuplicateResource),
        "{r:?}"
    );
    await_described(&mut admin, &carol, &[]);

    // Deleted: bob can no longer log in.
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(s(&bob))
                .with_mechanism(2),
        ]),
    );
    assert_eq!(err(r.results[0].error_code), None, "{r:?}");
    await_described(&mut admin, &bob, &[]);
    // Kafka's authenticators read credentials from the metadata image a moment after
    // DescribeUserScramCredentials shows the deletion: log in until refused (koord refuses the
    // first attempt), bounded by the deadline.
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        let r = login(&mut sasl.connect(), "SCRAM-SHA-512", &bob, "bob-secret");
        if err(r.error_code) == Some(ResponseError::SaslAuthenticationFailed) {
            break;
        }
        assert_eq!(err(r.error_code), None, "{r:?}");
        assert!(
            std::time::Instant::now() < deadline,
            "bob can still log in after his credential was deleted"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn fuzzed_tokens_fail_alone() {
    let Some(sasl) = Sasl::start("fuzzed_tokens", &[]) else {
        return;
    };
    let mut held = sasl.login("PLAIN", USER, PASSWORD);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..30 {
        let mut token = Vec::new();
        for _ in 0..(i * 7 % 90) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            token.push(seed as u8);
        }
        if i % 3 == 0 {
            token.splice(0..0, b"n,,n=alice,r=".iter().copied());
        }
        let mechanism = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"][i % 3];
        let mut c = sasl.connect();
        assert_eq!(err(handshake(&mut c, mechanism).error_code), None);
        let r = authenticate(&mut c, &token);
        if r.error_code == 0 {
            // A SCRAM client-first that parsed: the final message is garbage.
            let r = authenticate(&mut c, &token);
            assert_eq!(
                err(r.error_code),
                Some(ResponseError::SaslAuthenticationFailed)
            );
        } else {
            assert_eq!(
                err(r.error_code),
                Some(ResponseError::SaslAuthenticationFailed),
                "{token:?}"
            );
        }
        c.expect_closed();
    }
    // Another connection was not disturbed.
    assert_eq!(metadata(&mut held).brokers.len(), 1);
}

#[test]
fn reauthentication_keeps_the_connection_and_its_user() {
    let Some(sasl) = Sasl::start("reauthentication", &["connections.max.reauth.ms=600000"]) else {
        return;
    };
    if !sasl.server.is_owned() {
        eprintln!("SKIPPED reauthentication: needs connections.max.reauth.ms on the server");
        return;
    }
    let mut c = sasl.connect();
    let r = login(&mut c, "SCRAM-SHA-256", USER, PASSWORD);
    assert_eq!(r.session_lifetime_ms, 600_000);
    assert_eq!(metadata(&mut c).brokers.len(), 1);
    let r = login(&mut c, "SCRAM-SHA-256", USER, PASSWORD);
    assert_eq!(err(r.error_code), None);
    assert_eq!(metadata(&mut c).brokers.len(), 1);
}

#[test]
fn credentials_survive_a_restart() {
    let Some(mut sasl) = Sasl::start("credentials_survive_a_restart", &[]) else {
        return;
    };
    if !sasl.server.is_owned() {
        eprintln!("SKIPPED credentials_survive_a_restart: needs its own koord");
        return;
    }
    let mut admin = sasl.login("PLAIN", USER, PASSWORD);
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion(
            "dave",
            ScramMechanism::Sha256,
            "dave-secret",
            4096,
        )]),
    );
    assert_eq!(err(r.results[0].error_code), None);
    drop(admin);
    sasl.server.terminate();
    sasl.server.restart();
    let mut c = sasl.login("SCRAM-SHA-256", "dave", "dave-secret");
    assert_eq!(metadata(&mut c).brokers.len(), 1);
    sasl.login("PLAIN", "dave", "dave-secret");
}

/// A CA and a server certificate for 127.0.0.1, made with openssl in `dir`; the keystore path.
fn make_certificates(dir: &std::path::Path) -> std::path::PathBuf {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=koord-test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        "-out",
        "server.pem",
    ]);
    let mut keystore = std::fs::read(dir.join("server.pem")).unwrap();
    keystore.extend(std::fs::read(dir.join("server.key")).unwrap());
    std::fs::write(dir.join("keystore.pem"), keystore).unwrap();
    dir.join("keystore.pem")
}

#[test]
fn plaintext_to_a_tls_listener_is_closed() {
    if common::bootstrap().is_some() {
        eprintln!("SKIPPED plaintext_to_a_tls_listener_is_closed: needs its own koord");
        return;
    }
    let dir = std::env::temp_dir().join(common::unique("koord-tls"));
    std::fs::create_dir_all(&dir).unwrap();
    let keystore = make_certificates(&dir);
    let port = common::free_port();
    let server = Koord::spawn_with(move |addr| {
        vec![
            format!("listeners=PLAINTEXT://{addr},SASL_SSL://127.0.0.1:{port}"),
            format!("ssl.keystore.location={}", keystore.display()),
        ]
    });
    let tls = SocketAddr::from(([127, 0, 0, 1], port));
    // A client that starts a TLS record and stops, held open: it stalls nobody.
    let mut stalled = Client::connect(tls);
    stalled
        .send_bytes(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .unwrap();
    // Garbage of every length: each connection is closed, koord stays up.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for n in [1usize, 5, 64, 300, 5000] {
        let mut c = Client::connect(tls);
        let garbage: Vec<u8> = (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let _ = c.send_bytes(&garbage);
        let mut rest = Vec::new();
        let _ = c.stream().try_clone().unwrap().read_to_end(&mut rest);
    }
    let mut c = Client::connect(tls);
    // An ApiVersions request in plaintext: TLS takes it for a bad record and gives up.
    let frame = common::frame(ApiKey::ApiVersions, 0, 1, |_| Ok(()));
    c.send_bytes(&frame).unwrap();
    let mut rest = Vec::new();
    let _ = c.stream().try_clone().unwrap().read_to_end(&mut rest);
    assert!(
        rest.is_empty() || rest[0] == 0x15,
        "no Kafka answer, at most a TLS alert: {rest:?}"
    );
    // The plaintext listener still serves.
    assert_eq!(metadata(&mut server.connect()).brokers.len(), 1);
    drop(stalled);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn handshake_v0_takes_raw_tokens() {
    let Some(sasl) = Sasl::start("handshake_v0", &[]) else {
        return;
    };
    let raw = |token: &[u8]| {
        let mut f = (token.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(token);
        f
    };
    let mut c = sasl.connect();
    let h: SaslHandshakeResponse = c.send(
        0,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(err(h.error_code), None);
    c.send_bytes(&raw(format!("\0{USER}\0{PASSWORD}").as_bytes()))
        .unwrap();
    let answer = c.read_frame().unwrap().expect("a raw answer");
    assert!(answer.is_empty(), "PLAIN's empty last token: {answer:?}");
    assert_eq!(metadata(&mut c).brokers.len(), 1);

    // A wrong password gets no answer in v0: the connection is closed.
    let mut c = sasl.connect();
    let h: SaslHandshakeResponse = c.send(
        0,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(err(h.error_code), None);
    c.send_bytes(&raw(format!("\0{USER}\0wrong").as_bytes()))
        .unwrap();
    c.expect_closed();
}

#[test]
fn a_user_removed_while_connected_fails_at_reauthentication() {
    let Some(sasl) = Sasl::start("user_removed", &["connections.max.reauth.ms=600000"]) else {
        return;
    };
    if !sasl.server.is_owned() {
        eprintln!("SKIPPED user_removed: needs connections.max.reauth.ms on the server");
        return;
    }
    let mut admin = sasl.login("PLAIN", USER, PASSWORD);
    let m = ScramMechanism::Sha512;
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion(
            "erin",
            m,
            "erin-secret",
            4096,
        )]),
    );
    assert_eq!(err(r.results[0].error_code), None);
    let mut erin = sasl.login("SCRAM-SHA-512", "erin", "erin-secret");
    let r = admin.send(
        0,
        &AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(s("erin"))
                .with_mechanism(m.code()),
        ]),
    );
    assert_eq!(err(r.results[0].error_code), None);
    // Still served until the session is renewed; the renewal fails and closes.
    assert_eq!(metadata(&mut erin).brokers.len(), 1);
    let r = login(&mut erin, "SCRAM-SHA-512", "erin", "erin-secret");
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::SaslAuthenticationFailed)
    );
    erin.expect_closed();
}

#[test]
fn failed_authentication_is_answered_after_the_delay() {
    let Some(sasl) = Sasl::start(
        "failed_authentication_delay",
        &["connection.failed.authentication.delay.ms=300"],
    ) else {
        return;
    };
    if !sasl.server.is_owned() {
        eprintln!("SKIPPED failed_authentication_delay: needs its own koord");
        return;
    }
    let mut c = sasl.connect();
    assert_eq!(err(handshake(&mut c, "PLAIN").error_code), None);
    let sent = std::time::Instant::now();
    let r = authenticate(&mut c, b"\0alice\0wrong");
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::SaslAuthenticationFailed)
    );
    assert!(
        sent.elapsed() >= std::time::Duration::from_millis(300),
        "answered after {:?}",
        sent.elapsed()
    );
    c.expect_closed();
}
