//! Security: listeners per security protocol, TLS, SASL authentication and the credentials it
//! checks against.
//!
//! - [`listener`]: Kafka's `listeners` / `advertised.listeners` /
//!   `listener.security.protocol.map`, resolved into the [`Listener`]s koord binds.
//! - [`tls`]: rustls server configurations from PEM files, client certificates
//!   (`ssl.client.auth`) and reload on SIGHUP.
//! - [`scram`]: the SCRAM-SHA-256/512 server exchange (RFC 5802/7677) and stored credentials.
//! - [`plain`]: the PLAIN mechanism's token (RFC 4616).
//! - [`client`]: koord as a client of a secured Kafka (gateway mode's upstream): TLS client
//!   configuration and SASL identity from the `upstream.` settings.
//! - [`credentials`]: the SCRAM users, loaded from the store and changed by
//!   AlterUserScramCredentials; PLAIN passwords are checked against them too.
//! - [`acl`]: ACLs and Kafka's authorization rules, pure; [`authorizer`]: the node's ACLs and
//!   whether an authorizer is configured at all (`authorizer.class.name`).
//! - [`session`]: one connection's authentication state: what may be served before
//!   authentication, SaslHandshake / SaslAuthenticate, re-authentication (KIP-368).
//!
//! Every request is dispatched with the connection's [`Principal`], so an authorizer can be a
//! layer over dispatch.

pub mod acl;
pub mod authorizer;
pub mod client;
pub mod credentials;
pub mod listener;
pub mod plain;
pub mod scram;
pub mod session;
pub mod tls;

pub use credentials::Credentials;
pub use listener::{Listener, SecurityProtocol};

use std::fmt;
use std::sync::Arc;

/// Who a connection authenticated as: Kafka's `KafkaPrincipal` of type `User`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// `User:name`, made once: the authorizer compares this text with ACL principals on every
    /// check, and a connection's requests share it.
    text: Arc<str>,
}

const USER_PREFIX: &str = "User:";

impl Principal {
    /// The principal of an unauthenticated connection (PLAINTEXT, SSL without a client
    /// certificate), as Kafka names it.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    pub fn user(name: impl AsRef<str>) -> Principal {
        Principal {
            text: format!("{USER_PREFIX}{}", name.as_ref()).into(),
        }
    }

    /// The user name: a SASL user, a certificate's subject, or `ANONYMOUS`.
    pub fn name(&self) -> &str {
        &self.text[USER_PREFIX.len()..]
    }

    /// `User:name`, as ACLs name principals.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A SASL mechanism koord serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    Scram(scram::ScramMechanism),
}

impl SaslMechanism {
    /// Every mechanism koord serves, in the order of `sasl.enabled.mechanisms`' default.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Scram(scram::ScramMechanism::Sha512),
        SaslMechanism::Scram(scram::ScramMechanism::Sha256),
        SaslMechanism::Plain,
    ];

    /// The mechanism's IANA name, as SaslHandshake carries it.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism named `name` (exactly, as Kafka compares them).
    pub fn parse(name: &str) -> Option<SaslMechanism> {
        SaslMechanism::ALL.into_iter().find(|m| m.name() == name)
    }
}
