//! TLS for SSL and SASL_SSL listeners: a rustls server configuration (ring provider) from
//! PEM files, client certificates as `ssl.client.auth` asks, and reload of the files (SIGHUP)
//! without a restart: connections accepted afterwards use the new configuration, open ones
//! keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::Principal;

/// `ssl.client.auth`: whether clients present certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    #[default]
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Requested => "requested",
            ClientAuth::Required => "required",
        }
    }

    pub fn parse(s: &str) -> Option<ClientAuth> {
        [
            ClientAuth::None,
            ClientAuth::Requested,
            ClientAuth::Required,
        ]
        .into_iter()
        .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// The TLS settings of the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSettings {
    /// `ssl.keystore.location`: PEM with the certificate chain and the private key (Kafka's
    /// `ssl.keystore.type=PEM`); they may also be in two files, see `key`.
    pub keystore: Option<PathBuf>,
    /// `ssl.key.location`: the private key, when not in the keystore file.
    pub key: Option<PathBuf>,
    /// `ssl.truststore.location`: PEM CA certificates client certificates are checked against.
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The certificate chain and private key of a PEM keystore (`key`, if set, holds the key
/// instead), for a server's or a client's own identity.
///
/// # Errors
/// A file that cannot be read, or holds no certificate or no key.
pub(crate) fn identity(
    keystore: &Path,
    key: Option<&Path>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let pem = read(keystore)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", keystore.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", keystore.display()));
    }
    let key = match key {
        Some(path) => PrivateKeyDer::from_pem_slice(&read(path)?)
            .map_err(|e| format!("{}: no private key: {e}", path.display()))?,
        None => PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| format!("{}: no private key: {e}", keystore.display()))?,
    };
    Ok((certs, key))
}

/// The CA certificates of a PEM truststore.
///
/// # Errors
/// A file that cannot be read or holds a certificate that does not parse.
pub(crate) fn roots(truststore: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&read(truststore)?) {
        let cert = cert.map_err(|e| format!("{}: {e}", truststore.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", truststore.display()))?;
    }
    Ok(roots)
}

/// Builds the server configuration from the files `settings` names.
///
/// # Errors
/// A file that cannot be read or holds no certificate or key, a key that does not match, a
/// client authentication without a truststore.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let keystore = settings
        .keystore
        .as_deref()
        .ok_or("a TLS listener needs ssl.keystore.location")?;
    let (certs, key) = identity(keystore, settings.key.as_deref())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let trust = settings
                .truststore
                .as_deref()
                .ok_or("ssl.client.auth needs ssl.truststore.location")?;
            let roots = roots(trust)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{}: {e}", keystore.display()))?;
    Ok(Arc::new(config))
}

/// The node's TLS configuration, replaced whole by [`Tls::reload`].
pub struct Tls {
    settings: TlsSettings,
    current: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// # Errors
    /// As [`server_config`].
    pub fn new(settings: TlsSettings) -> Result<Tls, String> {
        let config = server_config(&settings)?;
        Ok(Tls {
            settings,
            current: RwLock::new(config),
        })
    }

    /// An acceptor with the configuration in force now.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }

    /// Reads the files again; on an error the configuration in force stays.
    ///
    /// # Errors
    /// As [`server_config`].
    pub fn reload(&self) -> Result<(), String> {
        let config = server_config(&self.settings)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = config;
        Ok(())
    }
}

/// The principal of a TLS connection: `User:<subject>` of the client certificate (RFC 4514,
/// as Kafka's default principal builder gives it), or ANONYMOUS without one.
pub fn principal(conn: &rustls::ServerConnection) -> Principal {
    conn.peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|der| subject(der))
        .map_or_else(Principal::anonymous, Principal::user)
}

/// The subject of a DER certificate as an RFC 4514 string (most specific name first).
pub fn subject(der: &[u8]) -> Option<String> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    Some(cert.tbs_certificate.subject.to_string())
}
