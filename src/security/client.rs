//! koord as a client of a secured Kafka cluster (gateway mode's upstream): the settings, in
//! Kafka's client spelling under `upstream.` (`security.protocol`, `sasl.mechanism`,
//! `sasl.username`/`sasl.password` for what a JAAS line would say, `ssl.truststore.location`,
//! `ssl.keystore.location`, `ssl.endpoint.identification.algorithm`), and what every connection
//! is made with: a rustls client configuration (ring provider, the truststore's CAs, a client
//! certificate if one is given) and the SASL identity. The SASL exchange itself runs over an
//! upstream connection (`crate::gateway::upstream::connect`); its SCRAM steps are
//! [`super::scram::client`].

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::{
    self, CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme,
};
use tokio_rustls::TlsConnector;

use super::{SaslMechanism, SecurityProtocol};

/// The client settings, as configured.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// `sasl.mechanism` (Kafka's default, GSSAPI, is not offered: PLAIN is koord's).
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
    /// `ssl.truststore.location`: PEM CA certificates the server's certificate is checked
    /// against (required for SSL and SASL_SSL: koord carries no system roots).
    pub truststore: Option<PathBuf>,
    /// `ssl.keystore.location`: PEM certificate chain and private key, for servers that ask
    /// for a client certificate.
    pub keystore: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the server's certificate must name
    /// the host connected to) or empty (any certificate the truststore signed).
    pub verify_hostname: bool,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            protocol: SecurityProtocol::Plaintext,
            mechanism: SaslMechanism::Plain,
            username: String::new(),
            password: String::new(),
            truststore: None,
            keystore: None,
            verify_hostname: true,
        }
    }
}

/// The password is never shown.
impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSettings")
            .field("protocol", &self.protocol)
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("truststore", &self.truststore)
            .field("keystore", &self.keystore)
            .field("verify_hostname", &self.verify_hostname)
            .finish_non_exhaustive()
    }
}

impl ClientSettings {
    /// What the protocol needs and is missing.
    ///
    /// # Errors
    /// A message naming the missing key.
    pub fn check(&self, prefix: &str) -> Result<(), String> {
        let p = self.protocol;
        if p.is_sasl() && (self.username.is_empty() || self.password.is_empty()) {
            return Err(format!(
                "{prefix}security.protocol={p} needs {prefix}sasl.username and {prefix}sasl.password"
            ));
        }
        if p.is_tls() && self.truststore.is_none() {
            return Err(format!(
                "{prefix}security.protocol={p} needs {prefix}ssl.truststore.location (PEM CA certificates)"
            ));
        }
        Ok(())
    }
}

/// The SASL identity a connection authenticates with.
#[derive(Clone)]
pub struct SaslIdentity {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl fmt::Debug for SaslIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslIdentity")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// What every client connection is made with, built once from [`ClientSettings`].
#[derive(Clone, Default)]
pub struct ClientSecurity {
    pub tls: Option<TlsConnector>,
    pub sasl: Option<SaslIdentity>,
}

impl fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

impl ClientSecurity {
    /// PLAINTEXT: no TLS, no SASL.
    pub fn plaintext() -> ClientSecurity {
        ClientSecurity::default()
    }

    /// Reads the files `settings` names.
    ///
    /// # Errors
    /// As [`ClientSettings::check`], or a file that cannot be read or holds no certificate.
    pub fn new(settings: &ClientSettings, prefix: &str) -> Result<ClientSecurity, String> {
        settings.check(prefix)?;
        let tls = if settings.protocol.is_tls() {
            Some(TlsConnector::from(client_config(settings)?))
        } else {
            None
        };
        let sasl = settings.protocol.is_sasl().then(|| SaslIdentity {
            mechanism: settings.mechanism,
            username: settings.username.clone(),
            password: settings.password.clone(),
        });
        Ok(ClientSecurity { tls, sasl })
    }
}

/// The name a TLS connection to `host` checks the certificate against (a DNS name or an IP
/// address).
///
/// # Errors
/// A host that is neither.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: not a TLS server name: {e}"))
}

/// The rustls client configuration of `settings`.
///
/// # Errors
/// A truststore or keystore that cannot be read or holds nothing usable.
pub fn client_config(settings: &ClientSettings) -> Result<Arc<ClientConfig>, String> {
    let trust = settings
        .truststore
        .as_deref()
        .ok_or("a TLS client needs ssl.truststore.location")?;
    let roots = super::tls::roots(trust)?;
    if roots.is_empty() {
        return Err(format!("{}: no CA certificate", trust.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.verify_hostname {
        webpki
    } else {
        Arc::new(AnyHostname(webpki))
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match &settings.keystore {
        None => builder.with_no_client_auth(),
        Some(keystore) => {
            let (certs, key) = super::tls::identity(keystore, None)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("{}: {e}", keystore.display()))?
        }
    };
    Ok(Arc::new(config))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the certificate chain is verified against
/// the truststore as always; only a certificate that does not name the host is accepted.
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain first and the name last: a name error means the chain is
        // good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_say_what_the_protocol_is_missing() {
        let mut s = ClientSettings::default();
        assert_eq!(s.check("upstream."), Ok(()));
        s.protocol = SecurityProtocol::SaslSsl;
        let e = s.check("upstream.").unwrap_err();
        assert!(e.contains("upstream.sasl.username"), "{e}");
        s.username = "koord".into();
        s.password = "pw".into();
        let e = s.check("upstream.").unwrap_err();
        assert!(e.contains("upstream.ssl.truststore.location"), "{e}");
        s.truststore = Some("/nonexistent/ca.pem".into());
        assert_eq!(s.check("upstream."), Ok(()));
        let e = ClientSecurity::new(&s, "upstream.").unwrap_err();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        assert!(
            !format!("{s:?}").contains("pw"),
            "the password is never shown"
        );
        s.protocol = SecurityProtocol::SaslPlaintext;
        let sec = ClientSecurity::new(&s, "upstream.").unwrap();
        assert!(sec.tls.is_none());
        assert_eq!(sec.sasl.map(|i| i.username), Some("koord".to_string()));
    }

    #[test]
    fn server_names_are_hosts_or_addresses() {
        assert!(server_name("127.0.0.1").is_ok());
        assert!(server_name("[::1]").is_ok());
        assert!(server_name("kafka-1.example").is_ok());
        assert!(server_name("not a host").is_err());
    }
}
