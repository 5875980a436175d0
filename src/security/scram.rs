//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as a pure state
//! machine: [`ServerFirst::handle`] takes the client-first message and returns the
//! server-first, [`ServerFirst::finish`] takes the client-final message and returns the
//! authenticated user and the server-final. No channel binding (Kafka offers none). The
//! primitives (PBKDF2, HMAC, SHA-2) are RustCrypto's. The client side, [`client::ClientFirst`],
//! is what the gateway authenticates to its upstream with.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// The iteration counts Kafka accepts for a credential (`ScramMechanism` min/max).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;

/// A SCRAM hash, with Kafka's type codes (`ScramMechanism`: 1 SHA-256, 2 SHA-512).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's wire code (DescribeUserScramCredentials, AlterUserScramCredentials).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramMechanism::Sha512 => {
                let mut out = vec![0; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }

    fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        const ANY_KEY: &str = "HMAC takes a key of any length";
        match self {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect(ANY_KEY);
                parts.iter().for_each(|p| m.update(p));
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect(ANY_KEY);
                parts.iter().for_each(|p| m.update(p));
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}

/// What the server keeps of a password (RFC 5802 section 3): never the password itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials carries).
    pub fn from_salted(
        mechanism: ScramMechanism,
        salted: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted, &[b"Client Key"]);
        ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, &[b"Server Key"]),
            iterations,
        }
    }

    /// The credential of a password, with a fresh random salt.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> ScramCredential {
        let salt = random_bytes(32);
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        ScramCredential::from_salted(mechanism, &salted, salt, iterations)
    }

    /// Whether `password` is the one this credential was made from (PLAIN checks passwords
    /// against the SCRAM credentials), compared in constant time.
    pub fn verify_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        let salted = mechanism.salted_password(password.as_bytes(), &self.salt, self.iterations);
        let client_key = mechanism.hmac(&salted, &[b"Client Key"]);
        mechanism.hash(&client_key).ct_eq(&self.stored_key).into()
    }
}

/// `n` random bytes from the OS (salts, nonces).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = vec![0; n];
    // Without the OS's randomness no secret can be made; a zero salt would be silently weak.
    getrandom::fill(&mut out).expect("the OS random number generator");
    out
}

/// A fresh server nonce: printable, without ','.
pub fn server_nonce() -> String {
    B64.encode(random_bytes(24))
}

/// Why an exchange failed. Each is answered with SASL_AUTHENTICATION_FAILED.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("invalid SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("channel binding is not supported")]
    ChannelBinding,
    #[error("authorization id differs from the user name")]
    AuthzId,
    #[error("unsupported SCRAM extension")]
    Extension,
    #[error("invalid user credentials")]
    UnknownUser,
    #[error("invalid user credentials")]
    BadProof,
    /// Client side: the server ended the exchange with `e=<message>`.
    #[error("the server refused: {0}")]
    Refused(String),
    /// Client side: a server-first whose iteration count is below Kafka's minimum (a server
    /// could otherwise make a stolen exchange cheap to brute-force).
    #[error("the server asks for {0} iterations, fewer than {MIN_ITERATIONS}")]
    TooFewIterations(u32),
    /// Client side: the server-final's signature is not the one a server that knows the
    /// password would send.
    #[error("the server's signature is wrong (it does not know the password)")]
    ServerSignature,
}

/// The exchange after the server-first message: what the client-final must match.
#[derive(Debug, Clone)]
pub struct ServerFirst {
    mechanism: ScramMechanism,
    user: String,
    gs2_header: String,
    nonce: String,
    /// `client-first-bare "," server-first`: the start of the AuthMessage.
    auth_start: String,
    credential: ScramCredential,
}

/// The client's `client-first-message`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClientFirst {
    gs2_header: String,
    user: String,
    nonce: String,
    bare: String,
}

fn parse_client_first(msg: &[u8]) -> Result<ClientFirst, ScramError> {
    let msg = std::str::from_utf8(msg).map_err(|_| ScramError::Malformed("not UTF-8"))?;
    // gs2-header = gs2-cbind-flag "," [ authzid ] ","
    let (flag, rest) = msg
        .split_once(',')
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => return Err(ScramError::ChannelBinding),
        _ => return Err(ScramError::Malformed("bad channel binding flag")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(sasl_name(
            a.strip_prefix("a=")
                .ok_or(ScramError::Malformed("bad authzid"))?,
        )?),
    };
    let mut attrs = bare.split(',');
    let user = attrs
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or(ScramError::Malformed("no user name"))?;
    let user = sasl_name(user)?;
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b','))
        .ok_or(ScramError::Malformed("no client nonce"))?;
    // Extensions: Kafka's only one is tokenauth (delegation tokens), which koord does not have.
    for ext in attrs {
        match ext.split_once('=') {
            Some(("tokenauth", "true")) => return Err(ScramError::Extension),
            Some((k, _)) if !k.is_empty() => {}
            _ => return Err(ScramError::Malformed("bad extension")),
        }
    }
    if authzid.as_ref().is_some_and(|a| *a != user) {
        return Err(ScramError::AuthzId);
    }
    Ok(ClientFirst {
        gs2_header: format!("{flag},{},", authzid_raw(rest)),
        user,
        nonce: nonce.to_string(),
        bare: bare.to_string(),
    })
}

/// The authzid field as the client wrote it (the GS2 header is echoed back base64'd).
fn authzid_raw(after_flag: &str) -> &str {
    after_flag.split_once(',').map_or("", |(a, _)| a)
}

/// Decodes a `saslname`: `=2C` is ',', `=3D` is '='; any other '=' is an error.
fn sasl_name(s: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3);
        match esc {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in a name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramError::Malformed("empty name"));
    }
    Ok(out)
}

impl ServerFirst {
    /// Handles the client-first message: looks the user up and answers with the server-first
    /// message (`r=<nonce>,s=<salt>,i=<iterations>`). `server_nonce` is appended to the
    /// client's nonce (random in service, fixed in tests).
    ///
    /// # Errors
    /// A malformed message, channel binding asked for, or an unknown user (Kafka fails the
    /// exchange there too).
    pub fn handle(
        mechanism: ScramMechanism,
        msg: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<(ServerFirst, Vec<u8>), ScramError> {
        let first = parse_client_first(msg)?;
        let credential = lookup(&first.user).ok_or(ScramError::UnknownUser)?;
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let state = ServerFirst {
            mechanism,
            user: first.user,
            gs2_header: first.gs2_header,
            nonce,
            auth_start: format!("{},{server_first}", first.bare),
            credential,
        };
        Ok((state, server_first.into_bytes()))
    }

    /// The user this exchange is for.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Handles the client-final message (`c=<binding>,r=<nonce>,p=<proof>`): checks the
    /// binding, the nonce and the proof, and returns the server-final (`v=<signature>`).
    ///
    /// # Errors
    /// A malformed message, a changed nonce or binding, or a wrong proof (wrong password).
    pub fn finish(&self, msg: &[u8]) -> Result<Vec<u8>, ScramError> {
        let msg = std::str::from_utf8(msg).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = msg
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or(ScramError::Malformed("no channel binding"))?;
        if B64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(ScramError::Malformed("channel binding differs"));
        }
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no nonce"))?;
        if nonce != self.nonce {
            return Err(ScramError::Malformed("nonce differs"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let m = self.mechanism;
        let auth_message = format!("{},{without_proof}", self.auth_start);
        let signature = m.hmac(&self.credential.stored_key, &[auth_message.as_bytes()]);
        if proof.len() != signature.len() {
            return Err(ScramError::BadProof);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        if !bool::from(m.hash(&client_key).ct_eq(&self.credential.stored_key)) {
            return Err(ScramError::BadProof);
        }
        let server_signature = m.hmac(&self.credential.server_key, &[auth_message.as_bytes()]);
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// The client side of an exchange: [`client::ClientFirst`] for the gateway's upstream
/// connections; [`client::first`] and [`client::fin`] for the wire tests.
pub mod client {
    use super::*;

    /// The client-first message for `user` with `nonce`.
    pub fn first(user: &str, nonce: &str) -> String {
        format!(
            "n,,n={},r={nonce}",
            user.replace('=', "=3D").replace(',', "=2C")
        )
    }

    /// The client-final message answering `server_first`, and the server signature expected.
    pub fn fin(
        m: ScramMechanism,
        password: &str,
        client_first: &str,
        server_first: &str,
    ) -> Option<(String, Vec<u8>)> {
        let (nonce, salt, iterations) = parse_server_first(server_first).ok()?;
        let bare = client_first.strip_prefix("n,,")?;
        Some(final_message(
            m,
            password,
            bare,
            server_first,
            &nonce,
            &salt,
            iterations,
        ))
    }

    /// The server-first's nonce, salt and iteration count.
    fn parse_server_first(server_first: &str) -> Result<(String, Vec<u8>, u32), ScramError> {
        if let Some(e) = server_first.strip_prefix("e=") {
            return Err(ScramError::Refused(e.to_string()));
        }
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for a in server_first.split(',') {
            match a.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v.to_string()),
                Some(("s=", v)) => salt = B64.decode(v).ok(),
                Some(("i=", v)) => iterations = v.parse().ok(),
                _ => {}
            }
        }
        match (nonce, salt, iterations) {
            (Some(n), Some(s), Some(i)) if !s.is_empty() => Ok((n, s, i)),
            _ => Err(ScramError::Malformed(
                "server-first without nonce, salt or iterations",
            )),
        }
    }

    /// The client-final message and the server-final expected (RFC 5802 section 3).
    fn final_message(
        m: ScramMechanism,
        password: &str,
        bare: &str,
        server_first: &str,
        nonce: &str,
        salt: &[u8],
        iterations: u32,
    ) -> (String, Vec<u8>) {
        let salted = m.salted_password(password.as_bytes(), salt, iterations);
        let client_key = m.hmac(&salted, &[b"Client Key"]);
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{bare},{server_first},{without_proof}");
        let signature = m.hmac(&stored_key, &[auth.as_bytes()]);
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.hmac(&salted, &[b"Server Key"]);
        let expected = format!("v={}", B64.encode(m.hmac(&server_key, &[auth.as_bytes()])));
        (
            format!("{without_proof},p={}", B64.encode(proof)),
            expected.into_bytes(),
        )
    }

    /// A client exchange after its client-first message, as Kafka's `ScramSaslClient` runs it:
    /// the server-first must extend the client's nonce and ask for at least
    /// [`MIN_ITERATIONS`]; the server-final must carry the signature only a server that knows
    /// the password can compute.
    #[derive(Debug, Clone)]
    pub struct ClientFirst {
        mechanism: ScramMechanism,
        password: String,
        /// `n=<user>,r=<nonce>`: the start of the AuthMessage.
        bare: String,
        nonce: String,
    }

    /// The exchange after the client-final message: what the server-final must be.
    #[derive(Debug, Clone)]
    pub struct ClientFinal {
        expected: Vec<u8>,
    }

    impl ClientFirst {
        /// Starts an exchange for `user` with `nonce` (printable, without ','; random in
        /// service, fixed in tests); returns the client-first message to send.
        pub fn new(
            mechanism: ScramMechanism,
            user: &str,
            password: &str,
            nonce: &str,
        ) -> (ClientFirst, Vec<u8>) {
            let msg = first(user, nonce);
            let state = ClientFirst {
                mechanism,
                password: password.to_string(),
                bare: msg["n,,".len()..].to_string(),
                nonce: nonce.to_string(),
            };
            (state, msg.into_bytes())
        }

        /// Handles the server-first message; returns the client-final message to send.
        ///
        /// # Errors
        /// A malformed or refusing server-first, a nonce that does not extend the client's, or
        /// too few iterations.
        pub fn handle(self, server_first: &[u8]) -> Result<(ClientFinal, Vec<u8>), ScramError> {
            let text = std::str::from_utf8(server_first)
                .map_err(|_| ScramError::Malformed("not UTF-8"))?;
            let (nonce, salt, iterations) = parse_server_first(text)?;
            if nonce.len() <= self.nonce.len() || !nonce.starts_with(&self.nonce) {
                return Err(ScramError::Malformed(
                    "server nonce does not extend the client's",
                ));
            }
            if iterations < MIN_ITERATIONS {
                return Err(ScramError::TooFewIterations(iterations));
            }
            let (msg, expected) = final_message(
                self.mechanism,
                &self.password,
                &self.bare,
                text,
                &nonce,
                &salt,
                iterations,
            );
            Ok((ClientFinal { expected }, msg.into_bytes()))
        }
    }

    impl ClientFinal {
        /// Checks the server-final message.
        ///
        /// # Errors
        /// The server refused (`e=`), or its signature is wrong.
        pub fn finish(&self, server_final: &[u8]) -> Result<(), ScramError> {
            if let Some(e) = server_final.strip_prefix(b"e=") {
                return Err(ScramError::Refused(String::from_utf8_lossy(e).into_owned()));
            }
            if server_final.ct_eq(&self.expected).into() {
                Ok(())
            } else {
                Err(ScramError::ServerSignature)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil".
    #[test]
    fn rfc7677_test_vector() {
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let credential = ScramCredential::from_salted(m, &salted, salt, 4096);
        let (state, server_first) = ServerFirst::handle(
            m,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            |u| (u == "user").then(|| credential.clone()),
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(server_first).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let server_final = state
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(
            String::from_utf8(server_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        assert_eq!(state.user(), "user");
        assert!(credential.verify_password(m, "pencil"));
        assert!(!credential.verify_password(m, "pencil2"));
    }

    /// RFC 7677 section 3 from the client's side: the client-final and the server-final of
    /// the RFC's exchange.
    #[test]
    fn rfc7677_test_vector_client_side() {
        let m = ScramMechanism::Sha256;
        let (state, first) = client::ClientFirst::new(m, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let (fin, msg) = state
            .handle(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            String::from_utf8(msg).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            fin.finish(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Ok(())
        );
        assert_eq!(
            fin.finish(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(ScramError::ServerSignature)
        );
        assert_eq!(
            fin.finish(b"e=invalid-proof"),
            Err(ScramError::Refused("invalid-proof".into()))
        );
    }

    /// The client against koord's own server side, both mechanisms; and what a client must
    /// refuse of a server: a nonce not its own, too few iterations, garbage.
    #[test]
    fn client_exchange_against_the_server_and_bad_servers() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = ScramCredential::from_password(m, "secret", 4096);
            for (password, ok) in [("secret", true), ("wrong", false)] {
                let (c, first) = client::ClientFirst::new(m, "a,b", password, "cnonce");
                let (s, sf) = ServerFirst::handle(
                    m,
                    &first,
                    |u| (u == "a,b").then(|| cred.clone()),
                    "snonce",
                )
                .unwrap();
                let (cf, fin) = c.handle(&sf).unwrap();
                match s.finish(&fin) {
                    Ok(server_final) => {
                        assert!(ok);
                        assert_eq!(cf.finish(&server_final), Ok(()));
                    }
                    Err(e) => {
                        assert!(!ok);
                        assert_eq!(e, ScramError::BadProof);
                    }
                }
            }
        }
        let start = || client::ClientFirst::new(ScramMechanism::Sha512, "u", "p", "abc").0;
        let salt = "s=c2FsdA==";
        assert!(matches!(
            start().handle(format!("r=xyzdef,{salt},i=4096").as_bytes()),
            Err(ScramError::Malformed(_))
        ));
        assert!(matches!(
            start().handle(format!("r=abc,{salt},i=4096").as_bytes()),
            Err(ScramError::Malformed(_))
        ));
        assert_eq!(
            start()
                .handle(format!("r=abcdef,{salt},i=1").as_bytes())
                .map(|_| ()),
            Err(ScramError::TooFewIterations(1))
        );
        assert_eq!(
            start().handle(b"e=unknown-user").map(|_| ()),
            Err(ScramError::Refused("unknown-user".into()))
        );
        for bad in [
            &b""[..],
            b"r=abcdef",
            b"r=abcdef,s=!!,i=4096",
            b"\xff",
            b"r=abcdef,s=c2FsdA==,i=x",
        ] {
            assert!(start().handle(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn wrong_password_and_changed_messages_fail() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = ScramCredential::from_password(m, "secret", 4096);
            let first = client::first("alice", "abc");
            let (state, sf) =
                ServerFirst::handle(m, first.as_bytes(), |_| Some(cred.clone()), "xyz").unwrap();
            let sf = String::from_utf8(sf).unwrap();
            let (good, expected) = client::fin(m, "secret", &first, &sf).unwrap();
            assert_eq!(state.finish(good.as_bytes()).unwrap(), expected);
            let (bad, _) = client::fin(m, "wrong", &first, &sf).unwrap();
            assert_eq!(state.finish(bad.as_bytes()), Err(ScramError::BadProof));
            let other_nonce = good.replace("r=abcxyz", "r=abcxyq");
            assert!(state.finish(other_nonce.as_bytes()).is_err());
            let other_binding = good.replace("c=biws", "c=eSws");
            assert!(state.finish(other_binding.as_bytes()).is_err());
        }
    }

    #[test]
    fn client_first_parsing() {
        let ok = parse_client_first(b"n,,n=a=2Cb=3Dc,r=xyz").unwrap();
        assert_eq!(ok.user, "a,b=c");
        assert_eq!(ok.gs2_header, "n,,");
        let with_authzid = parse_client_first(b"n,a=bob,n=bob,r=x").unwrap();
        assert_eq!(with_authzid.gs2_header, "n,a=bob,");
        assert_eq!(
            parse_client_first(b"n,a=eve,n=bob,r=x"),
            Err(ScramError::AuthzId)
        );
        assert_eq!(
            parse_client_first(b"p=tls-unique,,n=bob,r=x"),
            Err(ScramError::ChannelBinding)
        );
        assert_eq!(
            parse_client_first(b"n,,n=bob,r=x,tokenauth=true"),
            Err(ScramError::Extension)
        );
        for bad in [
            &b""[..],
            b"n",
            b"n,,",
            b"n,,n=,r=x",
            b"n,,n=a=zz,r=x",
            b"n,,n=a",
            b"n,,n=a,r=",
            b"x,,n=a,r=b",
            b"\xff\xfe",
        ] {
            assert!(parse_client_first(bad).is_err(), "{bad:?}");
        }
    }

    /// Arbitrary bytes into both steps: errors, never a panic.
    #[test]
    fn fuzzed_messages_never_panic() {
        use proptest::prelude::*;
        let cred =
            ScramCredential::from_salted(ScramMechanism::Sha256, &[1; 32], vec![2; 16], 4096);
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(
                &(
                    proptest::collection::vec(any::<u8>(), 0..200),
                    "[ -~]{0,120}",
                ),
                |(bytes, text)| {
                    let _ = ServerFirst::handle(
                        ScramMechanism::Sha256,
                        &bytes,
                        |_| Some(cred.clone()),
                        "n",
                    );
                    let _ = ServerFirst::handle(
                        ScramMechanism::Sha256,
                        text.as_bytes(),
                        |_| Some(cred.clone()),
                        "n",
                    );
                    let (state, _) = ServerFirst::handle(
                        ScramMechanism::Sha256,
                        b"n,,n=u,r=c",
                        |_| Some(cred.clone()),
                        "s",
                    )
                    .unwrap();
                    let _ = state.finish(&bytes);
                    let _ = state.finish(text.as_bytes());
                    let _ = state.finish(format!("c=biws,r=cs,p={text}").as_bytes());
                    Ok(())
                },
            )
            .unwrap();
    }
}
