//! Which assignor assigns which group: `group.assignor` (the default) and
//! `group.assignment.overrides` (`PATTERN=ASSIGNOR`, first match wins). `client` means the
//! group's leader assigns, as in Apache Kafka.
//!
//! Patterns are globs over the whole group id: `*` matches any run of characters (also none),
//! `?` exactly one, anything else itself.

use std::sync::Arc;

use super::consumer::{ConsumerAssignor, TopicCatalog};
use super::server::AssignmentMode;
use super::Registry;
use crate::vocab::GroupId;

/// The assignment choice for a group: `client`, or a registered assignor's name.
pub const CLIENT: &str = "client";

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
            registry: Arc::new(registry),
            topics,
        }
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
}
