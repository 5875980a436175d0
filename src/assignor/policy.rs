//! Which assignor assigns which group: `group.assignor` (the default) and
//! `group.assignment.overrides` (`PATTERN=ASSIGNOR`, first match wins). `client` means the
//! group's leader assigns, as in Apache Kafka.
//!
//! Only where koord can produce the assignment the client expects: generations whose members
//! chose one of Kafka's consumer assignors ([`super::consumer::KAFKA_CONSUMER_PROTOCOLS`]), one of koord's own,
//! or a name listed in `group.assignment.protocols`. Any other protocol name (Kafka Streams'
//! `stream`, a custom client assignor) is assigned by the group's leader, as in Kafka: its
//! assignment carries user data only the client's own assignor can write.
//!
//! Patterns are globs over the whole group id: `*` matches any run of characters (also none),
//! `?` exactly one, anything else itself.

use std::sync::Arc;

use super::consumer::{server_protocols, ConsumerAssignor, TopicCatalog};
use super::server::AssignmentMode;
use super::Registry;
use crate::vocab::GroupId;

/// The assignment choice for a group: `client`, or a registered assignor's name.
pub const CLIENT: &str = "client";

/// Kafka Streams' protocol name: its leader's assignment carries Streams' task metadata.
pub const STREAMS_PROTOCOL: &str = "stream";

/// Checks a protocol name listed for server assignment (`group.assignment.protocols`).
///
/// # Errors
/// A message for an empty name, or for Kafka Streams' `stream`.
pub fn check_server_protocol(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty protocol name".into());
    }
    if name == STREAMS_PROTOCOL {
        return Err(format!(
            "protocol `{STREAMS_PROTOCOL}` is Kafka Streams': its assignment carries Streams' \
             task metadata (AssignmentInfo) that only its leader can write, so its groups are \
             always assigned by their leader"
        ));
    }
    Ok(())
}

/// One `PATTERN=ASSIGNOR` override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub pattern: String,
    pub assignor: String,
}

impl Override {
    /// Parses `PATTERN=ASSIGNOR`.
    ///
    /// # Errors
    /// A message for a missing `=`, an empty pattern or an unknown assignor.
    pub fn parse(s: &str, known: &[&str]) -> Result<Override, String> {
        let (pattern, assignor) = s
            .split_once('=')
            .ok_or_else(|| format!("expected PATTERN=ASSIGNOR, got `{s}`"))?;
        let (pattern, assignor) = (pattern.trim(), assignor.trim());
        if pattern.is_empty() {
            return Err(format!("empty group pattern in `{s}`"));
        }
        check_choice(assignor, known)?;
        Ok(Override {
            pattern: pattern.to_owned(),
            assignor: assignor.to_owned(),
        })
    }
}

/// Checks an assignment choice: `client` or one of `known`.
///
/// # Errors
/// A message listing the valid choices.
pub fn check_choice(name: &str, known: &[&str]) -> Result<(), String> {
    if name == CLIENT || known.contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "unknown assignor `{name}` (expected {CLIENT} or one of: {})",
            known.join(", ")
        ))
    }
}

/// Whether `pattern` (a glob with `*` and `?`) matches all of `text`.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Greedy match with backtracking to the last `*`: linear in practice, never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The configured choice of assignor per group, resolved against a registry.
#[derive(Debug, Clone)]
pub struct AssignmentPolicy {
    default: String,
    overrides: Vec<Override>,
    registry: Arc<Registry>,
    /// The protocol names assigned on the server.
    protocols: Arc<[String]>,
    topics: Arc<dyn TopicCatalog>,
}

impl AssignmentPolicy {
    pub fn new(
        default: &str,
        overrides: &[Override],
        registry: Registry,
        topics: Arc<dyn TopicCatalog>,
    ) -> AssignmentPolicy {
        AssignmentPolicy {
            default: default.to_owned(),
            overrides: overrides.to_vec(),
            protocols: server_protocols(&registry).into(),
            registry: Arc::new(registry),
            topics,
        }
    }

    /// Also assigns, on the server, groups whose members chose one of `names`
    /// (`group.assignment.protocols`, checked by [`check_server_protocol`]).
    pub fn with_protocols(mut self, names: &[String]) -> AssignmentPolicy {
        let mut all = self.protocols.to_vec();
        all.extend(
            names
                .iter()
                .filter(|n| !all.contains(n))
                .cloned()
                .collect::<Vec<_>>(),
        );
        self.protocols = all.into();
        self
    }

    /// The registered assignor called `name`.
    pub fn assignor(&self, name: &str) -> Option<Arc<dyn super::Assignor>> {
        self.registry.get(name)
    }

    /// The choice for `group`: the first matching override, else the default.
    pub fn choice_for(&self, group: &GroupId) -> &str {
        self.overrides
            .iter()
            .find(|o| glob_matches(&o.pattern, group.as_str()))
            .map_or(self.default.as_str(), |o| o.assignor.as_str())
    }

    /// How `group` is assigned. Server assignment applies to `consumer` groups only (the core
    /// asks [`super::server::ServerAssignor::serves`]); with `client`, only generations whose
    /// members chose an assignor that speaks its own protocol (`learner`) are assigned by koord.
    pub fn mode_for(&self, group: &GroupId) -> AssignmentMode {
        let configured = self.registry.get(self.choice_for(group));
        AssignmentMode::Server(Arc::new(ConsumerAssignor::with_registry(
            configured,
            self.registry.clone(),
            self.protocols.clone(),
            self.topics.clone(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn builtin() -> Vec<&'static str> {
        Registry::builtin().names()
    }

    #[test]
    fn globs() {
        for (p, t, m) in [
            ("*", "", true),
            ("*", "anything", true),
            ("orders-*", "orders-eu", true),
            ("orders-*", "orders", false),
            ("*-legacy", "billing-legacy", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("**", "x", true),
        ] {
            assert_eq!(glob_matches(p, t), m, "{p} ~ {t}");
        }
    }

    #[test]
    fn overrides_parse_and_first_match_wins() {
        assert!(Override::parse("orders-*", &builtin()).is_err());
        assert!(Override::parse("=range", &builtin()).is_err());
        assert!(Override::parse("x=sticky", &builtin()).is_err());
        let overrides = [
            Override::parse("orders-legacy=client", &builtin()).unwrap(),
            Override::parse("orders-* = range", &builtin()).unwrap(),
        ];
        let policy = AssignmentPolicy::new(
            "uniform",
            &overrides,
            Registry::builtin(),
            Arc::new(BTreeMap::<String, u32>::new()),
        );
        assert_eq!(policy.choice_for(&GroupId::new("orders-legacy")), "client");
        assert_eq!(policy.choice_for(&GroupId::new("orders-eu")), "range");
        assert_eq!(policy.choice_for(&GroupId::new("billing")), "uniform");
        let assignor_for = |group: &str, protocol: &str| match policy.mode_for(&GroupId::new(group))
        {
            AssignmentMode::Server(a) => a.assignor_for(protocol).map(str::to_owned),
            AssignmentMode::Client => panic!("consumer groups are served"),
        };
        assert_eq!(
            assignor_for("orders-legacy", "range"),
            None,
            "the leader assigns"
        );
        assert_eq!(
            assignor_for("orders-legacy", "learner").as_deref(),
            Some("learner"),
            "a protocol named learner is always the learner assignor's"
        );
        assert_eq!(
            assignor_for("orders-eu", "cooperative-sticky").as_deref(),
            Some("range")
        );
    }

    #[test]
    fn only_protocols_koord_can_stand_in_for_are_assigned_on_the_server() {
        let policy = AssignmentPolicy::new(
            "uniform",
            &[],
            Registry::builtin(),
            Arc::new(BTreeMap::<String, u32>::new()),
        );
        let assignor_for =
            |policy: &AssignmentPolicy, protocol: &str| match policy.mode_for(&GroupId::new("g")) {
                AssignmentMode::Server(a) => a.assignor_for(protocol).map(str::to_owned),
                AssignmentMode::Client => panic!("consumer groups are served"),
            };
        for protocol in [
            "range",
            "roundrobin",
            "sticky",
            "cooperative-sticky",
            "uniform",
        ] {
            assert_eq!(
                assignor_for(&policy, protocol).as_deref(),
                Some("uniform"),
                "{protocol}"
            );
        }
        assert_eq!(assignor_for(&policy, "learner").as_deref(), Some("learner"));
        // Kafka Streams and custom client assignors: the leader assigns, as in Kafka.
        assert_eq!(assignor_for(&policy, STREAMS_PROTOCOL), None);
        assert_eq!(assignor_for(&policy, "my-assignor"), None);
        let listed = policy.with_protocols(&["my-assignor".to_owned()]);
        assert_eq!(
            assignor_for(&listed, "my-assignor").as_deref(),
            Some("uniform")
        );
        assert_eq!(assignor_for(&listed, STREAMS_PROTOCOL), None);
    }

    #[test]
    fn streams_protocol_cannot_be_listed_for_server_assignment() {
        let e = check_server_protocol(STREAMS_PROTOCOL).unwrap_err();
        assert!(e.contains("Kafka Streams"), "{e}");
        assert!(check_server_protocol("").is_err());
        assert!(check_server_protocol("my-assignor").is_ok());
    }
}
