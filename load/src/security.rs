//! The client side of a secured listener, for measuring what security costs a server
//! (bench/tls.sh): TLS with rustls (the server's certificate checked against a CA file) and
//! SASL with PLAIN or SCRAM-SHA-256/512 (RFC 5802/7677), before any other request of a
//! connection. The SCRAM primitives (PBKDF2, HMAC, SHA-2) are RustCrypto's; only the message
//! exchange is written here. The salted password is computed once per salt and iteration count
//! and reused by every connection (RFC 5802 allows a client to cache it): koord-load opens
//! thousands of connections and measures the server, not its own PBKDF2.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use sha2::{Digest, Sha256, Sha512};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

use crate::conn::Conn;

/// Kafka's `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

/// Kafka's `sasl.mechanism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mechanism {
    #[value(name = "PLAIN")]
    Plain,
    #[value(name = "SCRAM-SHA-256")]
    ScramSha256,
    #[value(name = "SCRAM-SHA-512")]
    ScramSha512,
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// How every connection of this run is secured.
pub struct Security {
    /// The TLS client and the name the server's certificate must carry.
    pub tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    sasl: Option<Sasl>,
}

/// Salted passwords by (salt, iterations).
type SaltedCache = Mutex<HashMap<(Vec<u8>, u32), Arc<Vec<u8>>>>;

struct Sasl {
    mechanism: Mechanism,
    user: String,
    password: String,
    salted: SaltedCache,
}

static SECURITY: OnceLock<Security> = OnceLock::new();

/// The run's security; PLAINTEXT unless [`configure`] set another.
pub fn get() -> Option<&'static Security> {
    SECURITY.get()
}

/// Sets the run's security (once, before the first connection).
///
/// # Errors
/// A missing CA file or user for the protocol, or an unreadable CA file.
pub fn configure(
    protocol: Protocol,
    ca: Option<&std::path::Path>,
    server_name: &str,
    mechanism: Mechanism,
    user: Option<&str>,
    password: Option<&str>,
) -> Result<()> {
    let tls = match protocol {
        Protocol::Ssl | Protocol::SaslSsl => {
            let ca = ca.context("--ssl-ca is required for SSL and SASL_SSL")?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca)
                .with_context(|| format!("read {}", ca.display()))?
            {
                roots.add(cert.with_context(|| format!("a certificate in {}", ca.display()))?)?;
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
            let name = ServerName::try_from(server_name.to_owned())
                .map_err(|e| anyhow!("server name {server_name}: {e}"))?;
            Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
        }
        Protocol::Plaintext | Protocol::SaslPlaintext => None,
    };
    let sasl = match protocol {
        Protocol::SaslPlaintext | Protocol::SaslSsl => Some(Sasl {
            mechanism,
            user: user.context("--sasl-user is required for SASL")?.to_owned(),
            password: password
                .context("--sasl-password is required for SASL")?
                .to_owned(),
            salted: Mutex::default(),
        }),
        Protocol::Plaintext | Protocol::Ssl => None,
    };
    SECURITY
        .set(Security { tls, sasl })
        .map_err(|_| anyhow!("security configured twice"))
}

/// A connection to `addr`, secured (TLS) and authenticated (SASL) as the run is configured:
/// the one place a load connection is made.
pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Conn> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    stream.set_nodelay(true)?;
    let security = get();
    let conn = match security.and_then(|s| s.tls.as_ref()) {
        Some((tls, name)) => {
            let stream = tls
                .connect(name.clone(), stream)
                .await
                .with_context(|| format!("TLS handshake with {addr}"))?;
            let (rd, wr) = tokio::io::split(stream);
            Conn::spawn(rd, wr, client_id)
        }
        None => {
            let (rd, wr) = stream.into_split();
            Conn::spawn(rd, wr, client_id)
        }
    };
    if let Some(s) = security {
        s.authenticate(&conn).await?;
    }
    Ok(conn)
}

impl Security {
    /// Authenticates a new connection (SaslHandshake v1, then SaslAuthenticate v2 tokens), if
    /// the protocol asks for SASL.
    pub async fn authenticate(&self, conn: &Conn) -> Result<()> {
        let Some(sasl) = &self.sasl else {
            return Ok(());
        };
        let name = sasl.mechanism.name();
        let h = conn
            .call(
                1,
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(name)),
            )
            .await?;
        if h.error_code != 0 {
            bail!("SaslHandshake {name}: error {}", h.error_code);
        }
        let send = |token: Vec<u8>| async move {
            let r = conn
                .call(
                    2,
                    &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                )
                .await?;
            if r.error_code != 0 {
                bail!(
                    "SaslAuthenticate: error {} {:?}",
                    r.error_code,
                    r.error_message
                );
            }
            Ok(r.auth_bytes)
        };
        let scram = match sasl.mechanism {
            Mechanism::Plain => {
                send(format!("\0{}\0{}", sasl.user, sasl.password).into_bytes()).await?;
                return Ok(());
            }
            Mechanism::ScramSha256 => Scram::Sha256,
            Mechanism::ScramSha512 => Scram::Sha512,
        };
        let mut nonce = [0u8; 18];
        getrandom::fill(&mut nonce).map_err(|e| anyhow!("nonce: {e}"))?;
        let bare = format!(
            "n={},r={}",
            sasl.user.replace('=', "=3D").replace(',', "=2C"),
            B64.encode(nonce)
        );
        let server_first = send(format!("n,,{bare}").into_bytes()).await?;
        let server_first = std::str::from_utf8(&server_first).context("server-first")?;
        let (fin, expected) = scram.client_final(sasl, &bare, server_first)?;
        let server_final = send(fin.into_bytes()).await?;
        if server_final.as_ref() != expected.as_slice() {
            bail!("SCRAM: the server's signature is wrong");
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Scram {
    Sha256,
    Sha512,
}

impl Scram {
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Scram::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            Scram::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        const ANY_KEY: &str = "HMAC takes a key of any length";
        match self {
            Scram::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect(ANY_KEY);
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Scram::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect(ANY_KEY);
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Scram::Sha256 => Sha256::digest(data).to_vec(),
            Scram::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// The client-final message answering `server_first` (RFC 5802 section 3), and the
    /// server-final message a server that knows the password sends back.
    fn client_final(
        self,
        sasl: &Sasl,
        bare: &str,
        server_first: &str,
    ) -> Result<(String, Vec<u8>)> {
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v),
                Some(("s=", v)) => salt = Some(B64.decode(v).context("SCRAM salt")?),
                Some(("i=", v)) => iterations = Some(v.parse::<u32>().context("SCRAM iterations")?),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            bail!("SCRAM: a server-first without nonce, salt or iterations: {server_first}");
        };
        let client_nonce = bare.rsplit_once(",r=").map_or("", |(_, n)| n);
        if !nonce.starts_with(client_nonce) {
            bail!("SCRAM: the server's nonce does not extend ours");
        }
        let salted = {
            let key = (salt, iterations);
            let cached = crate::member_lock(&sasl.salted).get(&key).cloned();
            match cached {
                Some(s) => s,
                None => {
                    let s = Arc::new(self.salted_password(
                        sasl.password.as_bytes(),
                        &key.0,
                        iterations,
                    ));
                    crate::member_lock(&sasl.salted).insert(key, s.clone());
                    s
                }
            }
        };
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = self.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{bare},{server_first},{without_proof}");
        let signature = self.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = self.hmac(&salted, b"Server Key");
        let expected = format!("v={}", B64.encode(self.hmac(&server_key, auth.as_bytes())));
        Ok((
            format!("{without_proof},p={}", B64.encode(proof)),
            expected.into_bytes(),
        ))
    }
}
