//! THE table of configuration keys ([`KEYS`]) and how each value is parsed and shown.

use super::*;
use crate::assignor::policy::{check_choice, check_server_protocol};

/// One configuration key.
pub struct Key {
    /// The dotted name used in the file and with `--set`.
    pub name: &'static str,
    /// The Apache Kafka broker setting this key mirrors, if any.
    pub kafka: Option<&'static str>,
    pub doc: &'static str,
    pub(super) apply: fn(&mut Config, &Value) -> Result<(), String>,
    pub(super) show: fn(&Config) -> Value,
}

impl Key {
    /// This key's effective value in `c`.
    pub fn value(&self, c: &Config) -> Value {
        (self.show)(c)
    }
}

fn int(v: &Value, min: i64, max: i64) -> Result<i64, String> {
    match v {
        Value::Integer(i) if (min..=max).contains(i) => Ok(*i),
        Value::Integer(i) => Err(format!("{i} is outside {min}..={max}")),
        other => Err(format!("expected an integer, got {}", other.type_str())),
    }
}

fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool()
        .ok_or_else(|| format!("expected true or false, got {}", v.type_str()))
}

fn string(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        // `--set node.id=...` style values arrive parsed; accept scalars written bare.
        Value::Integer(i) => Ok(i.to_string()),
        other => Err(format!("expected a string, got {}", other.type_str())),
    }
}

/// `PATTERN=ASSIGNOR` overrides: an array of strings, or one comma-separated string.
fn overrides(v: &Value) -> Result<Vec<Override>, String> {
    let known = Registry::builtin().names();
    string_list(v, "PATTERN=ASSIGNOR")?
        .iter()
        .map(|s| Override::parse(s, &known))
        .collect()
}

/// An array of strings, or one comma-separated string; `what` names an item in errors.
fn string_list(v: &Value, what: &str) -> Result<Vec<String>, String> {
    Ok(match v {
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(|s| s.trim().to_owned())
                    .ok_or_else(|| format!("expected {what} strings, got {}", i.type_str()))
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(format!(
                "expected an array of strings, got {}",
                other.type_str()
            ))
        }
    })
}

fn topic_spec(s: &str) -> Result<TopicSpec, String> {
    let (name, partitions) = match s.split_once(':') {
        Some((n, p)) => (
            n.trim(),
            p.trim()
                .parse::<i32>()
                .map_err(|_| format!("bad partition count in `{s}`"))?,
        ),
        None => (s.trim(), 1),
    };
    validate_topic(name, partitions)?;
    Ok(TopicSpec {
        name: name.to_string(),
        partitions,
    })
}

fn validate_topic(name: &str, partitions: i32) -> Result<(), String> {
    crate::metadata::validate_topic_name(name).map_err(|e| format!("topic `{name}`: {e}"))?;
    if !(1..=1_000_000).contains(&partitions) {
        return Err(format!(
            "topic `{name}`: partitions must be 1..=1000000, got {partitions}"
        ));
    }
    Ok(())
}

fn topics(v: &Value) -> Result<Vec<TopicSpec>, String> {
    let mut out = Vec::new();
    match v {
        // `--set topics=a:3,b` or `topics = "a:3,b"`
        Value::String(s) => {
            for part in s.split(',').filter(|p| !p.trim().is_empty()) {
                out.push(topic_spec(part)?);
            }
        }
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::String(s) => out.push(topic_spec(s)?),
                    Value::Table(t) => {
                        for k in t.keys() {
                            if k != "name" && k != "partitions" {
                                return Err(format!("unknown topic field `{k}`"));
                            }
                        }
                        let name = t
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or("each topic needs a string `name`")?;
                        let partitions = match t.get("partitions") {
                            None => 1,
                            Some(p) => int(p, 1, 1_000_000)? as i32,
                        };
                        validate_topic(name, partitions)?;
                        out.push(TopicSpec {
                            name: name.to_string(),
                            partitions,
                        });
                    }
                    other => {
                        return Err(format!("expected a topic table, got {}", other.type_str()))
                    }
                }
            }
        }
        other => {
            return Err(format!(
                "expected an array of topics, got {}",
                other.type_str()
            ))
        }
    }
    let mut names: Vec<&str> = out.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("topic `{}` is declared twice", w[0]));
    }
    Ok(out)
}

/// A key holding an integer field of [`Config`], accepted within `min..=max`.
/// A `learner.*` integer key: a field of [`crate::assignor::learner::Settings`].
macro_rules! learner_int_key {
    ($name:literal, $doc:literal, $field:ident: $ty:ty, $min:expr, $max:expr) => {
        Key {
            name: $name,
            kafka: None,
            doc: $doc,
            apply: |c, v| {
                c.learner.$field = int(v, $min, $max)? as $ty;
                Ok(())
            },
            show: |c| Value::Integer(c.learner.$field as i64),
        }
    };
}

macro_rules! int_key {
    ($name:literal, $kafka:expr, $doc:literal, $field:ident: $ty:ty, $min:expr, $max:expr) => {
        Key {
            name: $name,
            kafka: $kafka,
            doc: $doc,
            apply: |c, v| {
                c.$field = int(v, $min, $max)? as $ty;
                Ok(())
            },
            show: |c| Value::Integer(c.$field as i64),
        }
    };
}

/// Every configuration key. Order is the order `check-config` prints.
pub static KEYS: &[Key] = &[
    Key {
        name: "listen",
        kafka: Some("listeners"),
        doc: "address the listener binds (host:port)",
        apply: |c, v| {
            c.listen = string(v)?
                .parse()
                .map_err(|e| format!("not a socket address: {e}"))?;
            Ok(())
        },
        show: |c| Value::String(c.listen.to_string()),
    },
    Key {
        name: "advertised.listener",
        kafka: Some("advertised.listeners"),
        doc: "host:port clients are told to connect to; empty = the listen address",
        apply: |c, v| {
            let s = string(v)?;
            if s.is_empty() {
                c.advertised_listener = None;
                return Ok(());
            }
            let (host, port) = s.rsplit_once(':').ok_or("expected host:port")?;
            if host.is_empty() || port.parse::<u16>().is_err() {
                return Err("expected host:port".into());
            }
            c.advertised_listener = Some(s);
            Ok(())
        },
        show: |c| Value::String(c.advertised_listener.clone().unwrap_or_default()),
    },
    Key {
        name: "listeners",
        kafka: Some("listeners"),
        doc: "listeners as NAME://host:port, comma-separated (empty host: every interface); empty = one PLAINTEXT listener on `listen`",
        apply: |c, v| {
            c.listeners = crate::security::listener::parse_endpoints(&string_list(v, "listener")?.join(","))?;
            Ok(())
        },
        show: |c| Value::String(c.listeners.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")),
    },
    Key {
        name: "advertised.listeners",
        kafka: Some("advertised.listeners"),
        doc: "per listener name, the NAME://host:port clients that came in on it are told; a listener not named advertises its own address",
        apply: |c, v| {
            c.advertised_listeners = crate::security::listener::parse_endpoints(&string_list(v, "listener")?.join(","))?;
            Ok(())
        },
        show: |c| Value::String(c.advertised_listeners.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")),
    },
    Key {
        name: "listener.security.protocol.map",
        kafka: Some("listener.security.protocol.map"),
        doc: "NAME:PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); the default maps each protocol's name to itself",
        apply: |c, v| {
            c.listener_security_protocol_map = crate::security::listener::parse_protocol_map(&string_list(v, "NAME:PROTOCOL")?.join(","))?;
            Ok(())
        },
        show: |c| Value::String(c.listener_security_protocol_map.iter().map(|(n, p)| format!("{n}:{p}")).collect::<Vec<_>>().join(",")),
    },
    Key {
        name: "ssl.keystore.location",
        kafka: Some("ssl.keystore.location (ssl.keystore.type=PEM)"),
        doc: "PEM file with the TLS listeners' certificate chain (and private key, unless ssl.key.location); reread on SIGHUP",
        apply: |c, v| {
            let s = string(v)?;
            c.tls.keystore = (!s.is_empty()).then(|| PathBuf::from(s));
            Ok(())
        },
        show: |c| Value::String(c.tls.keystore.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
    },
    Key {
        name: "ssl.key.location",
        kafka: None,
        doc: "PEM file with the private key, if not in ssl.keystore.location; reread on SIGHUP",
        apply: |c, v| {
            let s = string(v)?;
            c.tls.key = (!s.is_empty()).then(|| PathBuf::from(s));
            Ok(())
        },
        show: |c| Value::String(c.tls.key.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
    },
    Key {
        name: "ssl.truststore.location",
        kafka: Some("ssl.truststore.location (ssl.truststore.type=PEM)"),
        doc: "PEM file with the CA certificates client certificates are checked against",
        apply: |c, v| {
            let s = string(v)?;
            c.tls.truststore = (!s.is_empty()).then(|| PathBuf::from(s));
            Ok(())
        },
        show: |c| Value::String(c.tls.truststore.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
    },
    Key {
        name: "ssl.client.auth",
        kafka: Some("ssl.client.auth"),
        doc: "none, requested or required: client certificates on TLS listeners; a certificate's subject is the principal",
        apply: |c, v| {
            let s = string(v)?;
            c.tls.client_auth = crate::security::tls::ClientAuth::parse(&s)
                .ok_or_else(|| format!("expected none, requested or required, got `{s}`"))?;
            Ok(())
        },
        show: |c| Value::String(c.tls.client_auth.name().to_string()),
    },
    Key {
        name: "sasl.enabled.mechanisms",
        kafka: Some("sasl.enabled.mechanisms"),
        doc: "SASL mechanisms SaslHandshake accepts: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN",
        apply: |c, v| {
            c.sasl_enabled_mechanisms = string_list(v, "mechanism")?
                .iter()
                .map(|m| crate::security::SaslMechanism::parse(m).ok_or_else(|| format!("unknown mechanism `{m}`")))
                .collect::<Result<_, _>>()?;
            Ok(())
        },
        show: |c| Value::String(c.sasl_enabled_mechanisms.iter().map(|m| m.name()).collect::<Vec<_>>().join(",")),
    },
    int_key!("connection.failed.authentication.delay.ms", Some("connection.failed.authentication.delay.ms"), "a failed SASL authentication is answered, and its connection closed, this much later (slows password guessing)", connection_failed_authentication_delay_ms: u64, 0, i32::MAX as i64),
    Key {
        name: "telemetry.metrics",
        kafka: None,
        doc: "metric name prefixes every client is asked to push (KIP-714), comma-separated; `*` = all, empty = none",
        apply: |c, v| {
            c.telemetry_metrics = string_list(v, "metric prefix")?;
            Ok(())
        },
        show: |c| Value::String(c.telemetry_metrics.join(",")),
    },
    int_key!("telemetry.push.interval.ms", None, "how often clients push their metrics", telemetry_push_interval_ms: u32, 100, 3_600_000),
    int_key!("telemetry.max.bytes", Some("telemetry.max.bytes"), "the largest metrics push accepted", telemetry_max_bytes: u32, 1, i32::MAX as i64),
    int_key!("quota.window.num", Some("quota.window.num"), "client quotas measure usage over this many samples", quota_window_num: u32, 1, i32::MAX as i64),
    int_key!("quota.window.size.seconds", Some("quota.window.size.seconds"), "the time span of each client quota sample", quota_window_size_seconds: u32, 1, i32::MAX as i64),
    int_key!("connections.max.reauth.ms", Some("connections.max.reauth.ms"), "a SASL session's lifetime (KIP-368): the client re-authenticates before it ends, or its connection is closed; 0 = unlimited", connections_max_reauth_ms: u64, 0, i64::MAX),
    Key {
        name: "sasl.admin.user",
        kafka: None,
        doc: "a SCRAM user (SCRAM-SHA-256 and -512, also good for PLAIN) created at start-up if the store has no credential for it; empty = none",
        apply: |c, v| {
            c.sasl_admin_user = string(v)?;
            Ok(())
        },
        show: |c| Value::String(c.sasl_admin_user.clone()),
    },
    Key {
        name: "sasl.admin.password",
        kafka: None,
        doc: "sasl.admin.user's password (used only when the user is created; check-config shows it as [hidden])",
        apply: |c, v| {
            c.sasl_admin_password = string(v)?;
            Ok(())
        },
        show: |c| Value::String(if c.sasl_admin_password.is_empty() { String::new() } else { "[hidden]".into() }),
    },
    Key {
        name: "authorizer.class.name",
        kafka: Some("authorizer.class.name"),
        doc: "empty = no authorizer (everything allowed, the ACL APIs answer SECURITY_DISABLED); org.apache.kafka.metadata.authorizer.StandardAuthorizer (or acl) = ACLs enforced",
        apply: |c, v| {
            let s = string(v)?;
            if !crate::security::authorizer::is_known(&s) {
                return Err(format!(
                    "unknown authorizer `{s}`; known: {}",
                    crate::security::authorizer::AUTHORIZER_NAMES.join(", ")
                ));
            }
            c.authorizer_class_name = s;
            Ok(())
        },
        show: |c| Value::String(c.authorizer_class_name.clone()),
    },
    Key {
        name: "super.users",
        kafka: Some("super.users"),
        doc: "principals the authorizer allows everything, semicolon-separated: User:alice;User:bob",
        apply: |c, v| {
            let s = string(v)?;
            let users: Vec<String> = s.split(';').map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned).collect();
            if let Some(bad) = users.iter().find(|u| crate::security::acl::parse_principal(u).is_none()) {
                return Err(format!("`{bad}` is not a principal (Type:name, e.g. User:alice)"));
            }
            c.super_users = users;
            Ok(())
        },
        show: |c| Value::String(c.super_users.join(";")),
    },
    Key {
        name: "allow.everyone.if.no.acl.found",
        kafka: Some("allow.everyone.if.no.acl.found"),
        doc: "with an authorizer: a resource without any ACL is open to everyone",
        apply: |c, v| {
            c.allow_everyone_if_no_acl_found = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.allow_everyone_if_no_acl_found),
    },
    Key {
        name: "http.listen",
        kafka: None,
        doc: "address the HTTP listener binds (/metrics, /healthz, /readyz, the status page); none = off",
        apply: |c, v| {
            let s = string(v)?;
            if s == "none" {
                c.http_listen = None;
                return Ok(());
            }
            c.http_listen = Some(
                s.parse()
                    .map_err(|e| format!("not a socket address (or none): {e}"))?,
            );
            Ok(())
        },
        show: |c| {
            Value::String(
                c.http_listen
                    .map_or_else(|| "none".to_owned(), |a| a.to_string()),
            )
        },
    },
    int_key!("node.id", Some("node.id"), "this node's broker id", node_id: i32, 0, i32::MAX as i64),
    Key {
        name: "upstream.bootstrap.servers",
        kafka: Some("bootstrap.servers (of the upstream cluster)"),
        doc: "gateway mode: the Kafka cluster koord fronts, host:port comma-separated; empty = standalone",
        apply: |c, v| {
            let servers = string_list(v, "server")?;
            for s in &servers {
                let (host, port) = s.rsplit_once(':').ok_or("expected host:port")?;
                if host.is_empty() || port.parse::<u16>().is_err() {
                    return Err(format!("{s}: expected host:port"));
                }
            }
            c.upstream_bootstrap_servers = servers;
            Ok(())
        },
        show: |c| Value::String(c.upstream_bootstrap_servers.join(",")),
    },
    Key {
        name: "upstream.groups.topic.name",
        kafka: Some("offsets.topic (koord's own, beside __consumer_offsets)"),
        doc: "gateway mode: the compacted upstream topic koord keeps its group records in (created if missing)",
        apply: |c, v| {
            let s = string(v)?;
            if s.is_empty() {
                return Err("must not be empty".into());
            }
            c.upstream_groups_topic = s;
            Ok(())
        },
        show: |c| Value::String(c.upstream_groups_topic.clone()),
    },
    int_key!("upstream.groups.topic.partitions", Some("offsets.topic.num.partitions"),
        "gateway mode: partitions of upstream.groups.topic.name when koord creates it (an existing topic keeps its count)",
        upstream_groups_topic_partitions: i32, 1, 10_000),
    int_key!("upstream.broker.port.base", None,
        "gateway mode: 0 presents each upstream broker on a free port picked at start-up; otherwise node id N (0-999) is presented on base + N (base + 1000 * i + N on listener i), the same after every restart",
        upstream_broker_port_base: u16, 0, 65_535),
    Key {
        name: "cluster.name",
        kafka: None,
        doc: "gateway mode: koord nodes with the same cluster.name in front of the same upstream share the groups (each group served by the node its shard of upstream.groups.topic.name is assigned to, through the upstream group koord-cluster-<name>), and take over from a node that fails; every node needs its own node.id; empty: this node serves every group alone",
        apply: |c, v| {
            c.cluster_name = string(v)?;
            Ok(())
        },
        show: |c| Value::String(c.cluster_name.clone()),
    },
    int_key!("cluster.session.timeout.ms", Some("session.timeout.ms (of a node in the nodes' upstream group)"),
        "cluster mode: a node not heard from by upstream for this long loses its shards to the others; it stops serving them on its own by then",
        cluster_session_timeout_ms: u64, 1_000, 300_000),
    int_key!("cluster.heartbeat.interval.ms", Some("heartbeat.interval.ms (of a node in the nodes' upstream group)"),
        "cluster mode: how often a node heartbeats in the nodes' upstream group (well under cluster.session.timeout.ms)",
        cluster_heartbeat_interval_ms: u64, 100, 60_000),
    int_key!("cluster.rebalance.timeout.ms", Some("max.poll.interval.ms (of a node in the nodes' upstream group)"),
        "cluster mode: how long a rebalance of the nodes' group waits for every node to rejoin (a node gives up a shard's groups only once their writes are upstream)",
        cluster_rebalance_timeout_ms: u64, 1_000, 25_000),
    int_key!("upstream.write.timeout.ms", Some("offsets.commit.timeout.ms"),
        "gateway mode: how long a group's operation upstream (records and offsets written or read) may retry while upstream moves or loads what it needs; then COORDINATOR_LOAD_IN_PROGRESS, which clients retry",
        upstream_write_timeout_ms: u64, 100, 600_000),
    Key {
        name: "upstream.security.protocol",
        kafka: Some("security.protocol (koord's, towards the upstream)"),
        doc: "gateway mode: how koord connects to the upstream: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        apply: |c, v| {
            let s = string(v)?;
            c.upstream_security.protocol = crate::security::SecurityProtocol::parse(&s)
                .ok_or_else(|| format!("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got `{s}`"))?;
            Ok(())
        },
        show: |c| Value::String(c.upstream_security.protocol.name().to_string()),
    },
    Key {
        name: "upstream.sasl.mechanism",
        kafka: Some("sasl.mechanism (koord's, towards the upstream)"),
        doc: "gateway mode, SASL upstream: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
        apply: |c, v| {
            let s = string(v)?;
            c.upstream_security.mechanism = crate::security::SaslMechanism::parse(&s)
                .ok_or_else(|| format!("expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got `{s}`"))?;
            Ok(())
        },
        show: |c| Value::String(c.upstream_security.mechanism.name().to_string()),
    },
    Key {
        name: "upstream.sasl.username",
        kafka: Some("sasl.jaas.config username (koord's, towards the upstream)"),
        doc: "gateway mode, SASL upstream: the user koord authenticates as; every forwarded request goes upstream as this user",
        apply: |c, v| {
            c.upstream_security.username = string(v)?;
            Ok(())
        },
        show: |c| Value::String(c.upstream_security.username.clone()),
    },
    Key {
        name: "upstream.sasl.password",
        kafka: Some("sasl.jaas.config password (koord's, towards the upstream)"),
        doc: "gateway mode, SASL upstream: that user's password (check-config shows it as [hidden])",
        apply: |c, v| {
            c.upstream_security.password = string(v)?;
            Ok(())
        },
        show: |c| Value::String(if c.upstream_security.password.is_empty() { String::new() } else { "[hidden]".into() }),
    },
    Key {
        name: "upstream.ssl.truststore.location",
        kafka: Some("ssl.truststore.location (type PEM; koord's, towards the upstream)"),
        doc: "gateway mode, SSL upstream: PEM CA certificates the upstream brokers' certificates are checked against (required: no system roots)",
        apply: |c, v| {
            let s = string(v)?;
            c.upstream_security.truststore = (!s.is_empty()).then(|| PathBuf::from(s));
            Ok(())
        },
        show: |c| Value::String(c.upstream_security.truststore.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
    },
    Key {
        name: "upstream.ssl.keystore.location",
        kafka: Some("ssl.keystore.location (type PEM; koord's, towards the upstream)"),
        doc: "gateway mode, SSL upstream: PEM certificate chain and private key koord presents, for brokers with ssl.client.auth; empty = none",
        apply: |c, v| {
            let s = string(v)?;
            c.upstream_security.keystore = (!s.is_empty()).then(|| PathBuf::from(s));
            Ok(())
        },
        show: |c| Value::String(c.upstream_security.keystore.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
    },
    Key {
        name: "upstream.ssl.endpoint.identification.algorithm",
        kafka: Some("ssl.endpoint.identification.algorithm (koord's, towards the upstream)"),
        doc: "gateway mode, SSL upstream: https = a broker's certificate must name the host koord connects to; empty = any certificate the truststore signed",
        apply: |c, v| {
            let s = string(v)?;
            c.upstream_security.verify_hostname = match s.trim() {
                "" => false,
                a if a.eq_ignore_ascii_case("https") => true,
                other => return Err(format!("expected https or empty, got `{other}`")),
            };
            Ok(())
        },
        show: |c| Value::String(if c.upstream_security.verify_hostname { "https".into() } else { String::new() }),
    },
    Key {
        name: "data.dir",
        kafka: Some("log.dirs"),
        doc: "directory for durable state (created if missing)",
        apply: |c, v| {
            let s = string(v)?;
            if s.is_empty() {
                return Err("must not be empty".into());
            }
            c.data_dir = PathBuf::from(s);
            Ok(())
        },
        show: |c| Value::String(c.data_dir.display().to_string()),
    },
    Key {
        name: "cluster.id",
        kafka: Some("cluster.id (meta.properties)"),
        doc: "cluster id; empty = generated once and kept in the data dir",
        apply: |c, v| {
            c.cluster_id = string(v)?;
            Ok(())
        },
        show: |c| Value::String(c.cluster_id.clone()),
    },
    int_key!("max.connections", Some("max.connections"), "connections served at once; more are closed on accept", max_connections: usize, 1, 1 << 30),
    int_key!("connections.max.idle.ms", Some("connections.max.idle.ms"), "a connection that sends no request for this long is closed", connections_max_idle_ms: u64, 1, i64::MAX),
    int_key!("socket.request.max.bytes", Some("socket.request.max.bytes"), "largest request frame accepted; a larger one closes the connection", socket_request_max_bytes: usize, 64, i32::MAX as i64),
    Key {
        name: "auto.create.topics.enable",
        kafka: Some("auto.create.topics.enable"),
        doc: "Metadata for an unknown topic creates it",
        apply: |c, v| {
            c.auto_create_topics_enable = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.auto_create_topics_enable),
    },
    Key {
        name: "errors.deadletterqueue.auto.create.topics.enable",
        kafka: Some("errors.deadletterqueue.auto.create.topics.enable"),
        doc: "a share group's dead-letter queue topic that does not exist is created (one with errors.deadletterqueue.group.enable=true) when its first record goes there",
        apply: |c, v| {
            c.errors_deadletterqueue_auto_create_topics_enable = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.errors_deadletterqueue_auto_create_topics_enable),
    },
    Key {
        name: "errors.deadletterqueue.topic.name.prefix",
        kafka: Some("errors.deadletterqueue.topic.name.prefix"),
        doc: "the prefix the name of every share group's dead-letter queue topic must have (\"\": any name)",
        apply: |c, v| {
            c.errors_deadletterqueue_topic_name_prefix = string(v)?;
            Ok(())
        },
        show: |c| Value::String(c.errors_deadletterqueue_topic_name_prefix.clone()),
    },
    int_key!("num.partitions", Some("num.partitions"), "partitions of auto-created topics and of CreateTopics without a count", num_partitions: i32, 1, 1_000_000),
    int_key!("offsets.topic.num.partitions", Some("offsets.topic.num.partitions"),
        "standalone: partitions of __consumer_offsets when koord creates it (a stored topic keeps its count); a group's commits are in partition abs(hashCode(group id)) % count, as in Kafka",
        offsets_topic_num_partitions: i32, 1, 10_000),
    int_key!("transaction.state.log.num.partitions", Some("transaction.state.log.num.partitions"),
        "standalone: partitions of __transaction_state when koord creates it (a stored topic keeps its count)",
        transaction_state_log_num_partitions: i32, 1, 10_000),
    Key {
        name: "log.retention.bytes",
        kafka: Some("log.retention.bytes"),
        doc: "bytes kept per in-memory partition log (oldest batches dropped); -1 = unbounded",
        apply: |c, v| {
            let n = int(v, -1, i64::MAX)?;
            if n == 0 {
                return Err("must be -1 or positive".into());
            }
            c.log_retention_bytes = n;
            Ok(())
        },
        show: |c| Value::Integer(c.log_retention_bytes),
    },
    Key {
        name: "topics",
        kafka: None,
        doc: "topics created at start-up: [[topics]] name, partitions",
        apply: |c, v| {
            c.topics = topics(v)?;
            Ok(())
        },
        show: |c| {
            Value::Array(
                c.topics
                    .iter()
                    .map(|t| Value::String(format!("{}:{}", t.name, t.partitions)))
                    .collect(),
            )
        },
    },
    int_key!("group.min.session.timeout.ms", Some("group.min.session.timeout.ms"), "smallest session timeout a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT)", group_min_session_timeout_ms: u64, 0, i32::MAX as i64),
    int_key!("group.max.session.timeout.ms", Some("group.max.session.timeout.ms"), "largest session timeout a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT)", group_max_session_timeout_ms: u64, 0, i32::MAX as i64),
    int_key!("group.initial.rebalance.delay.ms", Some("group.initial.rebalance.delay.ms"), "how long a rebalance out of Empty waits for more members to join", group_initial_rebalance_delay_ms: u64, 0, i32::MAX as i64),
    int_key!("group.max.size", Some("group.max.size"), "members a classic group may have (else GROUP_MAX_SIZE_REACHED)", group_max_size: usize, 1, i32::MAX as i64),
    int_key!("group.assignment.fallback.rejoins", None, "server-assigned generations in a row whose leader rejoins unchanged right after koord's assignment before that group's leader assigns instead (0: never)", group_assignment_fallback_rejoins: u32, 0, i32::MAX as i64),
    int_key!("group.rebalance.storm.per.minute", None, "more rebalances of one group than this within a minute are logged at info (0: never)", group_rebalance_storm_per_minute: u32, 0, i32::MAX as i64),
    int_key!("offsets.retention.minutes", Some("offsets.retention.minutes"), "how long committed offsets are kept once retention applies to them", offsets_retention_minutes: u64, 1, i32::MAX as i64),
    int_key!("offsets.retention.check.interval.ms", Some("offsets.retention.check.interval.ms"), "how often committed offsets are checked for expiry", offsets_retention_check_interval_ms: u64, 1, i64::MAX),
    int_key!("transaction.max.timeout.ms", Some("transaction.max.timeout.ms"), "longest transaction timeout a producer may ask for (else INVALID_TRANSACTION_TIMEOUT)", transaction_max_timeout_ms: i32, 1, i32::MAX as i64),
    int_key!("transaction.abort.timed.out.transaction.cleanup.interval.ms", Some("transaction.abort.timed.out.transaction.cleanup.interval.ms"), "how often open transactions past their timeout are aborted", transaction_abort_check_interval_ms: u64, 1, i32::MAX as i64),
    int_key!("transactional.id.expiration.ms", Some("transactional.id.expiration.ms"), "an idle transactional id is forgotten this long after its last change", transactional_id_expiration_ms: u64, 1, i32::MAX as i64),
    int_key!("transaction.remove.expired.transaction.cleanup.interval.ms", Some("transaction.remove.expired.transaction.cleanup.interval.ms"), "how often idle transactional ids are checked for expiry", transaction_expire_check_interval_ms: u64, 1, i32::MAX as i64),
    Key {
        name: "group.assignor",
        kafka: None,
        doc: "who assigns consumer groups: client (the leader, as in Kafka), or range, roundrobin, uniform, learner (members that choose the protocol learner always get it)",
        apply: |c, v| {
            let s = string(v)?;
            check_choice(&s, &Registry::builtin().names())?;
            c.group_assignor = s;
            Ok(())
        },
        show: |c| Value::String(c.group_assignor.clone()),
    },
    Key {
        name: "group.assignment.overrides",
        kafka: None,
        doc: "per-group exceptions to group.assignor: [\"PATTERN=ASSIGNOR\", ...], glob patterns, first match wins",
        apply: |c, v| {
            c.group_assignment_overrides = overrides(v)?;
            Ok(())
        },
        show: |c| {
            Value::Array(
                c.group_assignment_overrides
                    .iter()
                    .map(|o| Value::String(format!("{}={}", o.pattern, o.assignor)))
                    .collect(),
            )
        },
    },
    Key {
        name: "group.assignment.protocols",
        kafka: None,
        doc: "protocol (client assignor) names whose consumer groups koord assigns on the server, beyond Kafka's consumer assignors (range, roundrobin, sticky, cooperative-sticky) and koord's own; any other is assigned by the group's leader, as in Kafka",
        apply: |c, v| {
            let names = string_list(v, "protocol name")?;
            for name in &names {
                check_server_protocol(name)?;
            }
            c.group_assignment_protocols = names;
            Ok(())
        },
        show: |c| {
            Value::Array(
                c.group_assignment_protocols
                    .iter()
                    .cloned()
                    .map(Value::String)
                    .collect(),
            )
        },
    },
    int_key!("group.consumer.heartbeat.interval.ms", Some("group.consumer.heartbeat.interval.ms"), "how often members of consumer groups (KIP-848, group.protocol=consumer) heartbeat", group_consumer_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.consumer.session.timeout.ms", Some("group.consumer.session.timeout.ms"), "a consumer-group member that has not heartbeat for this long is removed", group_consumer_session_timeout_ms: u64, 1, i32::MAX as i64),
    int_key!("group.consumer.min.session.timeout.ms", Some("group.consumer.min.session.timeout.ms"), "the smallest group.consumer.session.timeout.ms allowed", group_consumer_min_session_timeout_ms: u64, 1, i32::MAX as i64),
    int_key!("group.consumer.max.session.timeout.ms", Some("group.consumer.max.session.timeout.ms"), "the largest group.consumer.session.timeout.ms allowed", group_consumer_max_session_timeout_ms: u64, 1, i32::MAX as i64),
    int_key!("group.consumer.min.heartbeat.interval.ms", Some("group.consumer.min.heartbeat.interval.ms"), "the smallest group.consumer.heartbeat.interval.ms allowed", group_consumer_min_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.consumer.max.heartbeat.interval.ms", Some("group.consumer.max.heartbeat.interval.ms"), "the largest group.consumer.heartbeat.interval.ms allowed", group_consumer_max_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.consumer.max.size", Some("group.consumer.max.size"), "members a consumer group may have (else GROUP_MAX_SIZE_REACHED)", group_consumer_max_size: usize, 1, i32::MAX as i64),
    Key {
        name: "group.consumer.assignors",
        kafka: Some("group.consumer.assignors"),
        doc: "server assignors consumer groups may choose (ServerAssignor, group.remote.assignor): uniform, range, roundrobin, learner; the first is used when members name none",
        apply: |c, v| {
            let names = string_list(v, "assignor name")?;
            if names.is_empty() {
                return Err("name at least one assignor".into());
            }
            for name in &names {
                check_choice(name, &Registry::builtin().names())?;
            }
            c.group_consumer_assignors = names;
            Ok(())
        },
        show: |c| {
            Value::Array(
                c.group_consumer_assignors
                    .iter()
                    .cloned()
                    .map(Value::String)
                    .collect(),
            )
        },
    },
    int_key!("group.share.session.timeout.ms", Some("group.share.session.timeout.ms"), "a share-group (KIP-932) member that has not heartbeat for this long is removed; the default of a group's share.session.timeout.ms", group_share_session_timeout_ms: i32, 1, i32::MAX as i64),
    int_key!("group.share.min.session.timeout.ms", Some("group.share.min.session.timeout.ms"), "the smallest share.session.timeout.ms a group may set", group_share_min_session_timeout_ms: i32, 1, i32::MAX as i64),
    int_key!("group.share.max.session.timeout.ms", Some("group.share.max.session.timeout.ms"), "the largest share.session.timeout.ms a group may set", group_share_max_session_timeout_ms: i32, 1, i32::MAX as i64),
    int_key!("group.share.heartbeat.interval.ms", Some("group.share.heartbeat.interval.ms"), "how often share-group members heartbeat; the default of a group's share.heartbeat.interval.ms", group_share_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.share.min.heartbeat.interval.ms", Some("group.share.min.heartbeat.interval.ms"), "the smallest share.heartbeat.interval.ms a group may set", group_share_min_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.share.max.heartbeat.interval.ms", Some("group.share.max.heartbeat.interval.ms"), "the largest share.heartbeat.interval.ms a group may set", group_share_max_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.share.record.lock.duration.ms", Some("group.share.record.lock.duration.ms"), "how long a share consumer holds a record it was given before it is released; the default of a group's share.record.lock.duration.ms", group_share_record_lock_duration_ms: i32, 1000, 3_600_000),
    int_key!("group.share.min.record.lock.duration.ms", Some("group.share.min.record.lock.duration.ms"), "the smallest share.record.lock.duration.ms a group may set", group_share_min_record_lock_duration_ms: i32, 1000, 30_000),
    int_key!("group.share.max.record.lock.duration.ms", Some("group.share.max.record.lock.duration.ms"), "the largest share.record.lock.duration.ms a group may set", group_share_max_record_lock_duration_ms: i32, 30000, 3_600_000),
    int_key!("group.share.delivery.count.limit", Some("group.share.delivery.count.limit"), "deliveries of a record to a share group before it is archived; the default of a group's share.delivery.count.limit", group_share_delivery_count_limit: i32, 2, 10),
    int_key!("group.share.min.delivery.count.limit", Some("group.share.min.delivery.count.limit"), "the smallest share.delivery.count.limit a group may set", group_share_min_delivery_count_limit: i32, 2, 5),
    int_key!("group.share.max.delivery.count.limit", Some("group.share.max.delivery.count.limit"), "the largest share.delivery.count.limit a group may set", group_share_max_delivery_count_limit: i32, 5, 25),
    int_key!("group.share.partition.max.record.locks", Some("group.share.partition.max.record.locks"), "records of one share-partition locked at once; the default of a group's share.partition.max.record.locks", group_share_partition_max_record_locks: i32, 100, 10_000),
    int_key!("group.share.min.partition.max.record.locks", Some("group.share.min.partition.max.record.locks"), "the smallest share.partition.max.record.locks a group may set", group_share_min_partition_max_record_locks: i32, 100, 2_000),
    int_key!("group.share.max.partition.max.record.locks", Some("group.share.max.partition.max.record.locks"), "the largest share.partition.max.record.locks a group may set", group_share_max_partition_max_record_locks: i32, 2000, 10_000),
    int_key!("group.share.max.size", Some("group.share.max.size"), "members a share group may have (else GROUP_MAX_SIZE_REACHED)", group_share_max_size: usize, 1, 1000),
    int_key!("group.streams.heartbeat.interval.ms", Some("group.streams.heartbeat.interval.ms"), "how often members of streams groups (KIP-1071, Kafka Streams with group.protocol=streams) heartbeat", group_streams_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.streams.waiting.heartbeat.interval.ms", None, "how often a streams-group member heartbeats while it waits for tasks another member is still giving up, so they move as soon as they are released", group_streams_waiting_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.streams.session.timeout.ms", Some("group.streams.session.timeout.ms"), "a streams-group member that has not heartbeat for this long is removed", group_streams_session_timeout_ms: u64, 1, i32::MAX as i64),
    int_key!("group.streams.max.size", Some("group.streams.max.size"), "members (stream threads) a streams group may have (else GROUP_MAX_SIZE_REACHED)", group_streams_max_size: usize, 1, i32::MAX as i64),
    int_key!("group.streams.num.standby.replicas", Some("group.streams.num.standby.replicas"), "standby replicas of each stateful task, on other Kafka Streams instances", group_streams_num_standby_replicas: usize, 0, 16),
    int_key!("group.streams.initial.rebalance.delay.ms", Some("group.streams.initial.rebalance.delay.ms"), "how long a new streams group's first assignment waits for more members to join", group_streams_initial_rebalance_delay_ms: u64, 0, i32::MAX as i64),
    int_key!("group.streams.min.session.timeout.ms", Some("group.streams.min.session.timeout.ms"), "the smallest streams.session.timeout.ms a group may set", group_streams_min_session_timeout_ms: i32, 1, i32::MAX as i64),
    int_key!("group.streams.max.session.timeout.ms", Some("group.streams.max.session.timeout.ms"), "the largest streams.session.timeout.ms a group may set", group_streams_max_session_timeout_ms: i32, 1, i32::MAX as i64),
    int_key!("group.streams.min.heartbeat.interval.ms", Some("group.streams.min.heartbeat.interval.ms"), "the smallest streams.heartbeat.interval.ms a group may set", group_streams_min_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.streams.max.heartbeat.interval.ms", Some("group.streams.max.heartbeat.interval.ms"), "the largest streams.heartbeat.interval.ms a group may set", group_streams_max_heartbeat_interval_ms: i32, 1, i32::MAX as i64),
    int_key!("group.streams.max.standby.replicas", Some("group.streams.max.standby.replicas"), "the most streams.num.standby.replicas a group may set", group_streams_max_standby_replicas: i32, 0, i32::MAX as i64),
    Key {
        name: "group.streams.assignor",
        kafka: None,
        doc: "who places streams-group tasks: learner (a moved stateful task is warmed up on its new owner first and moves once caught up, learner.max.learners at a time) or sticky (Kafka's: it moves at once)",
        apply: |c, v| {
            let s = string(v)?;
            check_choice(&s, &["learner", "sticky"])?;
            c.group_streams_assignor = s;
            Ok(())
        },
        show: |c| Value::String(c.group_streams_assignor.clone()),
    },
    Key {
        name: "group.consumer.migration.policy",
        kafka: Some("group.consumer.migration.policy"),
        doc: "online conversion between classic and consumer groups: bidirectional (a classic group becomes a consumer group when a consumer-protocol member joins it, and back when the last one leaves), upgrade, downgrade or disabled",
        apply: |c, v| {
            let s = string(v)?;
            c.group_consumer_migration_policy = crate::group::consumer::MigrationPolicy::parse(&s)
                .ok_or_else(|| {
                    format!("expected bidirectional, upgrade, downgrade or disabled, got `{s}`")
                })?;
            Ok(())
        },
        show: |c| Value::String(c.group_consumer_migration_policy.name().to_string()),
    },
    int_key!("offset.metadata.max.bytes", Some("offset.metadata.max.bytes"), "longest commit metadata (Java string length); longer gets OFFSET_METADATA_TOO_LARGE", offset_metadata_max_bytes: usize, 0, i32::MAX as i64),
    Key {
        name: "offsets.commit.sync",
        kafka: None,
        doc: "always: a write is synced to disk before it is acknowledged (one sync per group commit); never: left to the OS and to shutdown (tests that do not care about crashes)",
        apply: |c, v| {
            let s = string(v)?;
            c.offsets_commit_sync = crate::storage::SyncPolicy::parse(&s)
                .ok_or_else(|| format!("expected always or never, got `{s}`"))?;
            Ok(())
        },
        show: |c| Value::String(c.offsets_commit_sync.name().to_string()),
    },
    Key {
        name: "learner.mode",
        kafka: None,
        doc: "seed: owners give up tasks being learned at every join; ready-gated: koord revokes a task only once its learner is ready",
        apply: |c, v| {
            let s = string(v)?;
            c.learner.mode = crate::assignor::learner::Mode::parse(&s)
                .ok_or_else(|| format!("expected seed or ready-gated, got `{s}`"))?;
            Ok(())
        },
        show: |c| Value::String(c.learner.mode.as_str().to_owned()),
    },
    learner_int_key!("learner.max.learners", "learners a group may have at once (the group-wide budget)", max_learners: usize, 1, i32::MAX as i64),
    learner_int_key!("learner.acceptable.recovery.lag", "a learner that reports a lag at most this is ready", acceptable_recovery_lag: i64, 0, i64::MAX),
    learner_int_key!("learner.warmup.ms", "unmodified clients: a learner is ready this long after it was planned (0: at the next rebalance); an owner that got a partition cold less than this long ago moves it without a learner", warmup_ms: u64, 0, i64::MAX),
    Key {
        name: "learner.scale.down.timeout.ms",
        kafka: None,
        doc: "how long a leaving member is drained through learners before its learners are promoted ready or not; -1 is forever",
        apply: |c, v| {
            let ms = int(v, -1, i64::MAX)?;
            c.learner.scale_down_timeout_ms = u64::try_from(ms).ok();
            Ok(())
        },
        show: |c| Value::Integer(c.learner.scale_down_timeout_ms.map_or(-1, |ms| ms as i64)),
    },
    learner_int_key!("learner.probe.interval.ms", "while learners remain, koord re-evaluates at least this often", probe_interval_ms: u64, 1, i64::MAX),
];

pub(super) fn key(name: &str) -> Result<&'static Key, ConfigError> {
    KEYS.iter()
        .find(|k| k.name == name)
        .ok_or_else(|| ConfigError::UnknownKey(name.to_string()))
}

/// Walks a TOML table and yields `(dotted name, value)` for every leaf. Arrays are leaves.
pub(super) fn flatten<'a>(
    prefix: &str,
    table: &'a toml::Table,
    out: &mut Vec<(String, &'a Value)>,
) {
    for (k, v) in table {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(t) => flatten(&name, t, out),
            leaf => out.push((name, leaf)),
        }
    }
}
