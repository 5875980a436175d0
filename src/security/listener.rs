//! Listeners, with Apache Kafka's settings: `listeners` (`NAME://host:port`, comma-separated),
//! `advertised.listeners` (the same form, by name) and `listener.security.protocol.map`
//! (`NAME:PROTOCOL`). Without `listeners`, koord has the one PLAINTEXT listener of `listen` and
//! `advertised.listener`, as before.

use std::fmt;

/// A listener's security protocol (Kafka's `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether connections start with a TLS handshake.
    pub fn is_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL before being served.
    pub fn is_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One `NAME://host:port` entry of `listeners` or `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The listener name, upper case (Kafka's names are case-insensitive).
    pub name: String,
    /// Empty: every interface (Kafka's `PLAINTEXT://:9092`).
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}://[{}]:{}", self.name, self.host, self.port)
        } else {
            write!(f, "{}://{}:{}", self.name, self.host, self.port)
        }
    }
}

/// Parses a comma-separated `NAME://host:port` list; names must be distinct.
///
/// # Errors
/// A message naming the bad entry.
pub fn parse_endpoints(s: &str) -> Result<Vec<Endpoint>, String> {
    let mut out: Vec<Endpoint> = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, rest) = entry
            .split_once("://")
            .ok_or_else(|| format!("`{entry}` is not NAME://host:port"))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("`{entry}` has no port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("`{entry}`: bad port"))?;
        let name = name.trim().to_ascii_uppercase();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("`{entry}`: bad listener name"));
        }
        if out.iter().any(|e| e.name == name) {
            return Err(format!("listener {name} is named twice"));
        }
        out.push(Endpoint {
            name,
            host: host.to_string(),
            port,
        });
    }
    Ok(out)
}

/// Kafka's default `listener.security.protocol.map`: each protocol as a listener name of its own.
pub fn default_protocol_map() -> Vec<(String, SecurityProtocol)> {
    [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ]
    .into_iter()
    .map(|p| (p.name().to_string(), p))
    .collect()
}

/// Parses `NAME:PROTOCOL,...`.
///
/// # Errors
/// A message naming the bad entry.
pub fn parse_protocol_map(s: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| format!("`{entry}` is not NAME:PROTOCOL"))?;
        let protocol = SecurityProtocol::parse(protocol)
            .ok_or_else(|| format!("`{entry}`: unknown security protocol"))?;
        let name = name.trim().to_ascii_uppercase();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener {name} is mapped twice"));
        }
        out.push((name, protocol));
    }
    Ok(out)
}

/// A listener as koord binds and advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// What to bind: host (empty: every interface) and port.
    pub bind_host: String,
    pub bind_port: u16,
    /// What Metadata, FindCoordinator and DescribeCluster tell a client that came in here.
    pub advertised_host: String,
    pub advertised_port: i32,
}

impl Listener {
    /// The address to bind, as `ToSocketAddrs` takes it.
    pub fn bind_addr(&self) -> String {
        let host = if self.bind_host.is_empty() {
            "0.0.0.0"
        } else {
            self.bind_host.as_str()
        };
        if host.contains(':') {
            format!("[{host}]:{}", self.bind_port)
        } else {
            format!("{host}:{}", self.bind_port)
        }
    }

    /// This listener once bound to `local`: a listener without an advertised address of its
    /// own advertises its bind host (or, for a wildcard or port 0, what it was given).
    pub fn bound(&self, local: std::net::SocketAddr, advertised_given: bool) -> Listener {
        let mut l = self.clone();
        if !advertised_given {
            if l.advertised_host.is_empty() {
                l.advertised_host = local.ip().to_string();
            }
            if l.advertised_port == 0 {
                l.advertised_port = i32::from(local.port());
            }
        }
        l
    }
}

/// Resolves `listeners`, `advertised.listeners` and the protocol map into listeners.
///
/// # Errors
/// A listener name without a protocol, an advertised name that is not a listener.
pub fn resolve(
    listeners: &[Endpoint],
    advertised: &[Endpoint],
    map: &[(String, SecurityProtocol)],
) -> Result<Vec<(Listener, bool)>, String> {
    if let Some(a) = advertised
        .iter()
        .find(|a| !listeners.iter().any(|l| l.name == a.name))
    {
        return Err(format!(
            "advertised.listeners names {}, which is not in listeners",
            a.name
        ));
    }
    listeners
        .iter()
        .map(|l| {
            let protocol = map
                .iter()
                .find(|(n, _)| *n == l.name)
                .map(|(_, p)| *p)
                .ok_or_else(|| {
                    format!(
                        "listener {} has no security protocol in listener.security.protocol.map",
                        l.name
                    )
                })?;
            let adv = advertised.iter().find(|a| a.name == l.name);
            let (host, port) = match adv {
                Some(a) => (a.host.clone(), i32::from(a.port)),
                None => (l.host.clone(), i32::from(l.port)),
            };
            Ok((
                Listener {
                    name: l.name.clone(),
                    protocol,
                    bind_host: l.host.clone(),
                    bind_port: l.port,
                    advertised_host: host,
                    advertised_port: port,
                },
                adv.is_some(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_listener_lists() {
        let l =
            parse_endpoints("PLAINTEXT://:9092, sasl_ssl://localhost:9093,EXT://[::1]:1").unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!((l[0].host.as_str(), l[0].port), ("", 9092));
        assert_eq!(l[1].name, "SASL_SSL");
        assert_eq!(l[2].host, "::1");
        assert!(parse_endpoints("PLAINTEXT://a:1,PLAINTEXT://b:2").is_err());
        assert!(parse_endpoints("a:1").is_err());
        assert!(parse_endpoints("X://a:99999").is_err());
        assert!(parse_endpoints("X://a").is_err());
    }

    #[test]
    fn resolves_protocols_and_advertised_addresses() {
        let mut map = default_protocol_map();
        map.extend(parse_protocol_map("EXT:sasl_ssl").unwrap());
        let l = parse_endpoints("PLAINTEXT://127.0.0.1:9092,EXT://0.0.0.0:9093").unwrap();
        let a = parse_endpoints("EXT://broker.example:19093").unwrap();
        let r = resolve(&l, &a, &map).unwrap();
        assert_eq!(r[0].0.protocol, SecurityProtocol::Plaintext);
        assert!(!r[0].1);
        assert_eq!(r[1].0.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(
            (r[1].0.advertised_host.as_str(), r[1].0.advertised_port),
            ("broker.example", 19093)
        );
        let unknown = parse_endpoints("NOPE://:1").unwrap();
        assert!(resolve(&unknown, &[], &map).is_err());
        assert!(resolve(&l, &unknown, &map).is_err());
    }
}
