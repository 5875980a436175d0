//! One connection's authentication, as Kafka's `SaslServerAuthenticator` runs it.
//!
//! On a SASL listener a connection starts unauthenticated: ApiVersions and SaslHandshake are
//! answered, any other request closes the connection. SaslHandshake v1 picks the mechanism and
//! the tokens follow in SaslAuthenticate requests; after SaslHandshake v0 they follow as raw
//! length-prefixed frames. Failed authentication is answered with SASL_AUTHENTICATION_FAILED
//! (v1; v0 gets no answer) and the connection is closed. With `connections.max.reauth.ms` the
//! session has a lifetime (SessionLifetimeMs): the client authenticates again on the same
//! connection (KIP-368) as the same user, and a connection that lets its session expire is
//! closed at its next request. On other listeners a connection is authenticated from the start
//! (ANONYMOUS, or the TLS client certificate's subject) and the SASL requests are answered with
//! ILLEGAL_SASL_STATE.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::scram::{self, ServerFirst};
use super::{Credentials, Principal, SaslMechanism, SecurityProtocol};

/// What to do with a request, before it is decoded further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Dispatch it with [`Session::principal`].
    Serve,
    /// SaslHandshake or SaslAuthenticate: [`Session::handshake`] / [`Session::authenticate`].
    Sasl,
    /// Close the connection without an answer.
    Close(&'static str),
}

/// Where the exchange stands.
#[derive(Debug)]
enum State {
    /// Authenticated (or nothing to authenticate), serving requests.
    Ready,
    /// A SASL connection before its SaslHandshake.
    AwaitHandshake,
    /// A mechanism was chosen; tokens follow (raw frames after SaslHandshake v0).
    AwaitToken {
        mechanism: SaslMechanism,
        raw: bool,
        scram: Option<Box<ServerFirst>>,
    },
}

/// How one token went.
enum Progress {
    /// Send this challenge, expect another token.
    Challenge(Vec<u8>),
    /// Authenticated as this user; send this last token.
    Done(String, Vec<u8>),
    /// Failed, with the message for the client.
    Failed(String),
}

/// One connection's authentication state.
#[derive(Debug)]
pub struct Session {
    sasl: bool,
    enabled: Vec<SaslMechanism>,
    reauth: Option<Duration>,
    state: State,
    /// Whom requests are served as; meaningful once `authenticated`.
    principal: Principal,
    authenticated: bool,
    /// The mechanism of the last authentication (re-authentication must use the same).
    mechanism: Option<SaslMechanism>,
    /// When the session ends (`connections.max.reauth.ms` after authentication).
    expires: Option<Instant>,
    /// The client authenticated with SaslAuthenticate v1+, so it can re-authenticate.
    can_reauthenticate: bool,
}

impl Session {
    /// A new connection's session on a listener of `protocol`; `tls_principal` is the client
    /// certificate's principal on a TLS listener.
    pub fn new(
        protocol: SecurityProtocol,
        tls_principal: Option<Principal>,
        enabled: Vec<SaslMechanism>,
        reauth_ms: u64,
    ) -> Session {
        let sasl = protocol.is_sasl();
        Session {
            sasl,
            enabled,
            reauth: (reauth_ms > 0).then(|| Duration::from_millis(reauth_ms)),
            state: if sasl {
                State::AwaitHandshake
            } else {
                State::Ready
            },
            principal: tls_principal.unwrap_or_else(Principal::anonymous),
            authenticated: !sasl,
            mechanism: None,
            expires: None,
            can_reauthenticate: false,
        }
    }

    /// Whom the connection's requests are served as.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Whether the next frame is a raw SASL token (after SaslHandshake v0), not a request.
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::AwaitToken { raw: true, .. })
    }

    /// Whether a request of `key` may be served now.
    pub fn admit(&self, key: ApiKey, now: Instant) -> Admit {
        if matches!(key, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
            return Admit::Sasl;
        }
        if !matches!(self.state, State::Ready) {
            // Before authentication, and between re-authentication's handshake and its
            // tokens, only ApiVersions (Kafka: "Unexpected Kafka request of type ... during
            // SASL handshake").
            return if key == ApiKey::ApiVersions && !self.authenticated {
                Admit::Serve
            } else {
                Admit::Close("request during SASL authentication")
            };
        }
        if self.expires.is_some_and(|e| now >= e) {
            return Admit::Close("SASL session expired");
        }
        Admit::Serve
    }

    fn mechanisms(&self) -> Vec<StrBytes> {
        self.enabled
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect()
    }

    /// Answers SaslHandshake; `true`: close the connection after the answer.
    pub fn handshake(
        &mut self,
        req: &SaslHandshakeRequest,
        version: i16,
    ) -> (SaslHandshakeResponse, bool) {
        let resp = SaslHandshakeResponse::default().with_mechanisms(self.mechanisms());
        let illegal = |close| {
            (
                SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::IllegalSaslState.code()),
                close,
            )
        };
        if !self.sasl {
            return illegal(false);
        }
        let reauthenticating = match self.state {
            State::AwaitHandshake => false,
            State::Ready if self.can_reauthenticate && version >= 1 => true,
            State::Ready => return illegal(false),
            State::AwaitToken { .. } => return illegal(true),
        };
        let chosen = SaslMechanism::parse(req.mechanism.as_str())
            .filter(|m| self.enabled.contains(m))
            .filter(|m| !reauthenticating || self.mechanism == Some(*m));
        let Some(mechanism) = chosen else {
            return (
                resp.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                true,
            );
        };
        self.state = State::AwaitToken {
            mechanism,
            raw: version == 0,
            scram: None,
        };
        (resp, false)
    }

    /// Answers SaslAuthenticate; `None`: close without an answer; `Some((_, true))`: close
    /// after the answer.
    pub async fn authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
        version: i16,
        credentials: &Arc<Credentials>,
        now: Instant,
    ) -> Option<(SaslAuthenticateResponse, bool)> {
        match self.state {
            State::AwaitToken { raw: false, .. } => {}
            State::Ready if self.authenticated => {
                return Some((
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::IllegalSaslState.code())
                        .with_error_message(Some(StrBytes::from_static_str(
                            "SaslAuthenticate request received after successful authentication",
                        ))),
                    false,
                ))
            }
            _ => return None,
        }
        match self.step(&req.auth_bytes, credentials).await {
            Progress::Challenge(token) => Some((
                SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(token)),
                false,
            )),
            Progress::Done(user, token) => match self.complete(user, now, version >= 1) {
                Ok(lifetime) => {
                    let mut resp =
                        SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(token));
                    if version >= 1 {
                        resp.session_lifetime_ms = lifetime;
                    }
                    Some((resp, false))
                }
                Err(message) => Some((failed(message), true)),
            },
            Progress::Failed(message) => Some((failed(message), true)),
        }
    }

    /// A raw token after SaslHandshake v0: the answer to send as a raw frame, or `None` to
    /// close (a failure gets no answer in v0).
    pub async fn raw_token(
        &mut self,
        token: &[u8],
        credentials: &Arc<Credentials>,
        now: Instant,
    ) -> Option<Vec<u8>> {
        match self.step(token, credentials).await {
            Progress::Challenge(t) => Some(t),
            Progress::Done(user, t) => self.complete(user, now, false).ok().map(|_| t),
            Progress::Failed(_) => None,
        }
    }

    /// Runs one token through the chosen mechanism.
    async fn step(&mut self, token: &[u8], credentials: &Arc<Credentials>) -> Progress {
        let State::AwaitToken {
            mechanism, scram, ..
        } = &mut self.state
        else {
            return Progress::Failed("unexpected SASL token".into());
        };
        let mechanism = *mechanism;
        let invalid = || {
            format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                mechanism.name()
            )
        };
        match (mechanism, scram.take()) {
            (SaslMechanism::Plain, _) => match super::plain::parse(token) {
                Ok(t) => match check_password(credentials, t.user, t.password).await {
                    Some(user) => Progress::Done(user, Vec::new()),
                    None => Progress::Failed(
                        "Authentication failed: Invalid username or password".into(),
                    ),
                },
                Err(message) => Progress::Failed(message.into()),
            },
            (SaslMechanism::Scram(m), None) => {
                match ServerFirst::handle(
                    m,
                    token,
                    |user| credentials.get(user, m),
                    &scram::server_nonce(),
                ) {
                    Ok((state, challenge)) => {
                        *scram = Some(Box::new(state));
                        Progress::Challenge(challenge)
                    }
                    Err(_) => Progress::Failed(invalid()),
                }
            }
            (SaslMechanism::Scram(_), Some(state)) => match state.finish(token) {
                Ok(last) => Progress::Done(state.user().to_string(), last),
                Err(_) => Progress::Failed(invalid()),
            },
        }
    }

    /// Ends a successful exchange as `user`: the session lifetime in ms (0: none).
    ///
    /// # Errors
    /// Re-authentication as another user.
    fn complete(
        &mut self,
        user: String,
        now: Instant,
        supports_reauth: bool,
    ) -> Result<i64, String> {
        let State::AwaitToken { mechanism, .. } = self.state else {
            return Err("unexpected SASL state".into());
        };
        if self.authenticated && self.principal.name() != user {
            return Err(format!(
                "Cannot change principals during re-authentication from User:{}: User:{user}",
                self.principal.name()
            ));
        }
        self.principal = Principal::user(user);
        self.authenticated = true;
        self.mechanism = Some(mechanism);
        self.can_reauthenticate = supports_reauth;
        // A lifetime beyond what the clock can represent never ends.
        self.expires = self.reauth.and_then(|d| now.checked_add(d));
        self.state = State::Ready;
        Ok(self.reauth.map_or(0, |d| d.as_millis() as i64))
    }
}

/// PLAIN's password check, off the runtime's workers: it runs PBKDF2 with the credential's
/// iterations (milliseconds of CPU), which must not stall the other connections of a worker.
/// The user if the password is right.
async fn check_password(
    credentials: &Arc<Credentials>,
    user: String,
    password: String,
) -> Option<String> {
    let credentials = credentials.clone();
    tokio::task::spawn_blocking(move || {
        credentials.check_password(&user, &password).then_some(user)
    })
    .await
    .ok()
    .flatten()
}

fn failed(message: String) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::{client, ScramCredential, ScramMechanism};

    fn creds() -> Arc<Credentials> {
        let m = ScramMechanism::Sha512;
        Arc::new(Credentials::new(vec![(
            "alice".into(),
            m,
            ScramCredential::from_password(m, "secret", 4096),
        )]))
    }

    fn session(reauth_ms: u64) -> Session {
        Session::new(
            SecurityProtocol::SaslPlaintext,
            None,
            SaslMechanism::ALL.to_vec(),
            reauth_ms,
        )
    }

    fn handshake(s: &mut Session, mech: &str) -> (i16, bool) {
        let (r, close) = s.handshake(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mech.into())),
            1,
        );
        (r.error_code, close)
    }

    async fn token(
        s: &mut Session,
        c: &Arc<Credentials>,
        t: &[u8],
        now: Instant,
    ) -> (SaslAuthenticateResponse, bool) {
        s.authenticate(
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(t)),
            2,
            c,
            now,
        )
        .await
        .expect("an answer")
    }

    #[test]
    fn only_api_versions_and_the_handshake_before_authentication() {
        let s = session(0);
        let now = Instant::now();
        assert_eq!(s.admit(ApiKey::ApiVersions, now), Admit::Serve);
        assert_eq!(s.admit(ApiKey::SaslHandshake, now), Admit::Sasl);
        assert!(matches!(s.admit(ApiKey::Metadata, now), Admit::Close(_)));
        let plain = Session::new(SecurityProtocol::Plaintext, None, vec![], 0);
        assert_eq!(plain.admit(ApiKey::Metadata, now), Admit::Serve);
        assert_eq!(plain.principal(), &Principal::anonymous());
    }

    #[tokio::test]
    async fn scram_exchange_then_reauthentication_and_expiry() {
        let c = creds();
        let mut s = session(1000);
        let now = Instant::now();
        assert_eq!(handshake(&mut s, "SCRAM-SHA-512"), (0, false));
        let first = client::first("alice", "nonce");
        let (r, close) = token(&mut s, &c, first.as_bytes(), now).await;
        assert_eq!((r.error_code, close), (0, false));
        let sf = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
        let (fin, expected) = client::fin(ScramMechanism::Sha512, "secret", &first, &sf).unwrap();
        let (r, close) = token(&mut s, &c, fin.as_bytes(), now).await;
        assert_eq!(
            (r.error_code, close, r.session_lifetime_ms),
            (0, false, 1000)
        );
        assert_eq!(r.auth_bytes.to_vec(), expected);
        assert_eq!(s.principal().to_string(), "User:alice");
        assert_eq!(s.admit(ApiKey::Metadata, now), Admit::Serve);
        let later = now + Duration::from_millis(1000);
        assert!(matches!(s.admit(ApiKey::Metadata, later), Admit::Close(_)));
        // Re-authentication with another mechanism is refused; with the same it renews.
        assert_eq!(
            handshake(&mut s, "PLAIN"),
            (ResponseError::UnsupportedSaslMechanism.code(), true)
        );
        let mut s2 = session(1000);
        handshake(&mut s2, "PLAIN");
        let (r, _) = token(&mut s2, &c, b"\0alice\0secret", now).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(handshake(&mut s2, "PLAIN"), (0, false));
        let (r, _) = token(&mut s2, &c, b"\0alice\0secret", later).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(s2.admit(ApiKey::Metadata, later), Admit::Serve);
    }

    #[tokio::test]
    async fn bad_credentials_fail_and_close() {
        let c = creds();
        let now = Instant::now();
        for (mech, t) in [
            ("PLAIN", &b"\0alice\0wrong"[..]),
            ("PLAIN", b"\0bob\0secret"),
            ("PLAIN", b"garbage"),
            ("SCRAM-SHA-512", b"n,,n=bob,r=x"),
            ("SCRAM-SHA-512", b"\xff\x00"),
            ("SCRAM-SHA-256", b"n,,n=alice,r=x"),
        ] {
            let mut s = session(0);
            assert_eq!(handshake(&mut s, mech), (0, false));
            let (r, close) = token(&mut s, &c, t, now).await;
            assert_eq!(
                (r.error_code, close),
                (ResponseError::SaslAuthenticationFailed.code(), true),
                "{mech} {t:?}"
            );
        }
        let mut s = session(0);
        assert_eq!(
            handshake(&mut s, "GSSAPI"),
            (ResponseError::UnsupportedSaslMechanism.code(), true)
        );
        // SaslAuthenticate before the handshake: closed without an answer.
        let mut s = session(0);
        assert!(s
            .authenticate(&SaslAuthenticateRequest::default(), 1, &c, now)
            .await
            .is_none());
    }

    #[tokio::test]
    async fn re_authentication_as_another_user_fails() {
        let m = ScramMechanism::Sha512;
        let c = creds();
        c.apply(&[crate::security::credentials::CredentialChange::Put {
            user: "bob".into(),
            mechanism: m,
            credential: ScramCredential::from_password(m, "pw", 4096),
        }]);
        let mut s = session(60_000);
        let now = Instant::now();
        handshake(&mut s, "PLAIN");
        assert_eq!(
            token(&mut s, &c, b"\0alice\0secret", now)
                .await
                .0
                .error_code,
            0
        );
        handshake(&mut s, "PLAIN");
        let (r, close) = token(&mut s, &c, b"\0bob\0pw", now).await;
        assert_eq!(
            (r.error_code, close),
            (ResponseError::SaslAuthenticationFailed.code(), true)
        );
    }

    #[tokio::test]
    async fn a_huge_session_lifetime_never_ends_and_never_overflows() {
        let c = creds();
        let mut s = session(i64::MAX as u64);
        let now = Instant::now();
        handshake(&mut s, "PLAIN");
        let (r, _) = token(&mut s, &c, b"\0alice\0secret", now).await;
        assert_eq!((r.error_code, r.session_lifetime_ms), (0, i64::MAX));
        assert_eq!(s.admit(ApiKey::Metadata, now), Admit::Serve);
    }
}
