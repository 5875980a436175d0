//! ACLs and the authorizer's decision, PURE (no I/O, no locks): Kafka's resource types,
//! operations, pattern types and permissions with their wire codes, the ACL bindings and the
//! filters of DescribeAcls / DeleteAcls, and [`AclSet::authorize`], which decides as Kafka's
//! `StandardAuthorizer` does:
//! - super users (`super.users`) may do everything;
//! - an ACL applies when its resource pattern matches (literal name, the literal wildcard `*`,
//!   or a prefix), its principal is the caller's or `User:*`, and its host is `*` or the
//!   client's address;
//! - a matching DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER also allows
//!   DESCRIBE, and of ALTER_CONFIGS also DESCRIBE_CONFIGS (implication is never applied to
//!   DENY); ALL matches every operation;
//! - a resource without any ACL (for anyone) is allowed only with
//!   `allow.everyone.if.no.acl.found`; a resource with ACLs none of which allow is denied.

use std::collections::BTreeSet;

/// The cluster resource's one valid name.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal resource name matching every resource, and the principal / host matching all.
pub const WILDCARD: &str = "*";
/// The principal matching every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Declares a Kafka enum with its wire codes; codes koord does not know read as `Unknown`.
macro_rules! codes {
    ($(#[$m:meta])* $name:ident { $($v:ident = $c:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($v),+ }

        impl $name {
            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$v => $c),+ }
            }

            /// The value of a wire code; a code Kafka does not define is `Unknown`, as Kafka's
            /// `fromCode` makes it.
            pub fn from_code(code: i8) -> $name {
                match code { $($c => $name::$v,)+ _ => $name::Unknown }
            }
        }
    };
}

codes!(
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0,
        Any = 1,
        Topic = 2,
        Group = 3,
        Cluster = 4,
        TransactionalId = 5,
        DelegationToken = 6,
        User = 7,
    }
);

codes!(
    /// Kafka's `AclOperation`.
    Operation {
        Unknown = 0,
        Any = 1,
        All = 2,
        Read = 3,
        Write = 4,
        Create = 5,
        Delete = 6,
        Alter = 7,
        Describe = 8,
        ClusterAction = 9,
        DescribeConfigs = 10,
        AlterConfigs = 11,
        IdempotentWrite = 12,
        CreateTokens = 13,
        DescribeTokens = 14,
        TwoPhaseCommit = 15,
    }
);

codes!(
    /// Kafka's `PatternType`. ANY and MATCH exist only in filters.
    PatternType {
        Unknown = 0,
        Any = 1,
        Match = 2,
        Literal = 3,
        Prefixed = 4,
    }
);

codes!(
    /// Kafka's `AclPermissionType`. ANY exists only in filters.
    Permission {
        Unknown = 0,
        Any = 1,
        Deny = 2,
        Allow = 3,
    }
);

impl ResourceType {
    /// The operations an ACL can grant on this resource type, as Kafka's authorized-operations
    /// bitfields enumerate them (`AclEntry.supportedOperations`).
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
                CreateTokens,
                DescribeTokens,
            ],
            ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }

    /// Every operation this resource type supports as one bitfield (bit = operation code), what
    /// Kafka reports as authorized operations without an authorizer.
    pub fn all_operations_bits(self) -> i32 {
        self.operations()
            .iter()
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

/// One ACL binding: a resource pattern and an access control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Acl {
    pub resource_type: ResourceType,
    /// LITERAL or PREFIXED.
    pub pattern: PatternType,
    pub name: String,
    /// `Type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// A client address or `*`.
    pub host: String,
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

/// Why an ACL cannot be created (Kafka answers INVALID_REQUEST with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAcl(pub String);

impl Acl {
    /// Kafka's checks of a new binding (the broker's CreateAcls checks, then the controller's
    /// `validateNewAcl`), in its order.
    ///
    /// # Errors
    /// The message Kafka gives for the first problem found.
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        let bad = |m: String| Err(InvalidAcl(m));
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return bad(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if self.name.is_empty() {
            return bad("Invalid empty resource name".into());
        }
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return bad(format!(
                "Invalid resourceType {}",
                upper(self.resource_type)
            ));
        }
        if !matches!(self.pattern, PatternType::Literal | PatternType::Prefixed) {
            return bad(format!("Invalid patternType {}", upper(self.pattern)));
        }
        if matches!(self.operation, Operation::Unknown | Operation::Any) {
            return bad(format!("Invalid operation {}", upper(self.operation)));
        }
        if !matches!(self.permission, Permission::Allow | Permission::Deny) {
            return bad(format!("Invalid permissionType {}", upper(self.permission)));
        }
        if parse_principal(&self.principal).is_none() {
            return bad(format!(
                "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
                self.principal
            ));
        }
        Ok(())
    }

    /// Whether this ACL's pattern covers the resource `name` of its type.
    fn covers(&self, name: &str) -> bool {
        match self.pattern {
            PatternType::Literal => self.name == name || self.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(self.name.as_str()),
            _ => false,
        }
    }
}

/// A code's name as Kafka writes it in messages (`UNKNOWN`).
fn upper(v: impl std::fmt::Debug) -> String {
    format!("{v:?}").to_uppercase()
}

/// `Type:name` split at the first colon; `None` without one (Kafka's `parseKafkaPrincipal`).
pub fn parse_principal(s: &str) -> Option<(&str, &str)> {
    s.split_once(':')
}

/// A filter of DescribeAcls / DeleteAcls (`AclBindingFilter`): `None` strings and the ANY codes
/// match everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    /// ANY, MATCH, LITERAL or PREFIXED.
    pub pattern: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    /// Whether a part of the filter is UNKNOWN: such a filter matches nothing, and DeleteAcls
    /// rejects it (`AclBindingFilter.isUnknown`).
    pub fn is_unknown(&self) -> bool {
        self.resource_type == ResourceType::Unknown
            || self.pattern == PatternType::Unknown
            || self.operation == Operation::Unknown
            || self.permission == Permission::Unknown
    }

    /// Whether `acl` matches (`AclBindingFilter.matches`). MATCH finds every ACL that would
    /// apply to the named resource: the literal name, the literal wildcard, and the prefixes
    /// of it.
    pub fn matches(&self, acl: &Acl) -> bool {
        if self.is_unknown() {
            return false;
        }
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        let name_ok = match (self.pattern, &self.name) {
            (PatternType::Any, None) | (PatternType::Match, None) => true,
            (PatternType::Any, Some(n)) => *n == acl.name,
            (PatternType::Match, Some(n)) => acl.covers(n),
            (p, n) => p == acl.pattern && n.as_ref().is_none_or(|n| *n == acl.name),
        };
        name_ok
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }
}

/// The authorizer's fixed settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `super.users`: principals (`User:name`) allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

/// Who asks: the principal (`User:name`) and the client's address as text.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

/// Every ACL, kept sorted so listings are stable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSet {
    acls: BTreeSet<Acl>,
}

impl AclSet {
    pub fn new(acls: impl IntoIterator<Item = Acl>) -> AclSet {
        AclSet {
            acls: acls.into_iter().collect(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Acl> {
        self.acls.iter()
    }

    pub fn len(&self) -> usize {
        self.acls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.acls.is_empty()
    }

    pub fn contains(&self, acl: &Acl) -> bool {
        self.acls.contains(acl)
    }

    /// Adds `acl`; false if it was there already.
    pub fn insert(&mut self, acl: Acl) -> bool {
        self.acls.insert(acl)
    }

    /// Removes `acl`; false if it was not there.
    pub fn remove(&mut self, acl: &Acl) -> bool {
        self.acls.remove(acl)
    }

    /// Every ACL `filter` matches, in order.
    pub fn matching<'a>(&'a self, filter: &'a AclFilter) -> impl Iterator<Item = &'a Acl> + 'a {
        self.acls.iter().filter(|a| filter.matches(a))
    }

    /// Whether `who` may do `op` on the resource `name` of type `rt`.
    pub fn authorize(
        &self,
        settings: &AuthorizerSettings,
        who: Requester<'_>,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        if settings.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let mut has_resource_acls = false;
        let mut allowed = false;
        for acl in self
            .acls
            .iter()
            .filter(|a| a.resource_type == rt && a.covers(name))
        {
            has_resource_acls = true;
            match decision(acl, who, op) {
                Some(Permission::Deny) => return false,
                Some(Permission::Allow) => allowed = true,
                _ => {}
            }
        }
        allowed || (!has_resource_acls && settings.allow_if_no_acl)
    }

    /// The operations of `rt` that `who` may do on `name`, as a bitfield (bit = code).
    pub fn authorized_operations(
        &self,
        settings: &AuthorizerSettings,
        who: Requester<'_>,
        rt: ResourceType,
        name: &str,
    ) -> i32 {
        rt.operations()
            .iter()
            .filter(|&&op| self.authorize(settings, who, op, rt, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// Whether `who` may do `op` on some resource of type `rt` (Kafka's
    /// `authorizeByResourceType`: an ALLOW on any pattern that no DENY of the same or a wider
    /// pattern cancels; used where any topic will do, e.g. idempotent InitProducerId).
    pub fn authorize_any(
        &self,
        settings: &AuthorizerSettings,
        who: Requester<'_>,
        op: Operation,
        rt: ResourceType,
    ) -> bool {
        if settings.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let applies = |a: &&Acl, p: Permission| {
            a.resource_type == rt && a.permission == p && decision(a, who, op) == Some(p)
        };
        let denies: Vec<&Acl> = self
            .acls
            .iter()
            .filter(|a| applies(a, Permission::Deny))
            .collect();
        // A DENY on the literal wildcard or a prefix covering an allowed pattern cancels it.
        let denied = |name: &str, pattern: PatternType| {
            denies.iter().any(|d| match d.pattern {
                PatternType::Literal if d.name == WILDCARD => true,
                PatternType::Literal => pattern == PatternType::Literal && d.name == name,
                PatternType::Prefixed => name.starts_with(d.name.as_str()),
                _ => false,
            })
        };
        if self
            .acls
            .iter()
            .filter(|a| applies(a, Permission::Allow))
            .any(|a| !denied(&a.name, a.pattern))
        {
            return true;
        }
        settings.allow_if_no_acl && !self.acls.iter().any(|a| a.resource_type == rt)
    }
}

/// What `acl` says about `who` doing `op` (its resource already matched): `None` when it does
/// not apply (other principal, other host, other operation).
fn decision(acl: &Acl, who: Requester<'_>, op: Operation) -> Option<Permission> {
    if acl.principal != who.principal && acl.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if acl.host != WILDCARD && acl.host != who.host {
        return None;
    }
    let op_matches = acl.operation == Operation::All
        || acl.operation == op
        || (acl.permission == Permission::Allow
            && match op {
                Operation::Describe => matches!(
                    acl.operation,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ),
                Operation::DescribeConfigs => acl.operation == Operation::AlterConfigs,
                _ => false,
            });
    op_matches.then_some(acl.permission)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        rt: ResourceType,
        pattern: PatternType,
        name: &str,
        principal: &str,
        op: Operation,
        permission: Permission,
    ) -> Acl {
        Acl {
            resource_type: rt,
            pattern,
            name: name.into(),
            principal: principal.into(),
            host: WILDCARD.into(),
            operation: op,
            permission,
        }
    }

    fn allow(rt: ResourceType, pattern: PatternType, name: &str, op: Operation) -> Acl {
        acl(rt, pattern, name, "User:alice", op, Permission::Allow)
    }

    const ALICE: Requester<'static> = Requester {
        principal: "User:alice",
        host: "10.0.0.1",
    };
    const BOB: Requester<'static> = Requester {
        principal: "User:bob",
        host: "10.0.0.1",
    };

    fn strict() -> AuthorizerSettings {
        AuthorizerSettings::default()
    }

    use Operation::*;
    use PatternType::{Literal, Prefixed};
    use ResourceType::{Cluster, Group, Topic};

    #[test]
    fn codes_round_trip_and_unknown_codes_read_as_unknown() {
        for c in 0..=7 {
            assert_eq!(ResourceType::from_code(c).code(), c);
        }
        for c in 0..=15 {
            assert_eq!(Operation::from_code(c).code(), c);
        }
        assert_eq!(ResourceType::from_code(99), ResourceType::Unknown);
        assert_eq!(Operation::from_code(-1), Operation::Unknown);
        assert_eq!(PatternType::from_code(5), PatternType::Unknown);
        assert_eq!(Permission::from_code(4), Permission::Unknown);
    }

    #[test]
    fn bitfields_without_acls_are_kafkas() {
        assert_eq!(Topic.all_operations_bits(), 3576);
        assert_eq!(Cluster.all_operations_bits(), 32672);
        assert_eq!(Group.all_operations_bits(), 3400);
    }

    #[test]
    fn read_write_delete_alter_imply_describe_but_deny_does_not_imply() {
        for op in [Read, Write, Delete, Alter] {
            let set = AclSet::new([allow(Topic, Literal, "t", op)]);
            assert!(
                set.authorize(&strict(), ALICE, Describe, Topic, "t"),
                "{op:?}"
            );
            assert!(set.authorize(&strict(), ALICE, op, Topic, "t"));
        }
        let set = AclSet::new([allow(Topic, Literal, "t", Create)]);
        assert!(!set.authorize(&strict(), ALICE, Describe, Topic, "t"));
        let set = AclSet::new([allow(Topic, Literal, "t", AlterConfigs)]);
        assert!(set.authorize(&strict(), ALICE, DescribeConfigs, Topic, "t"));
        assert!(!set.authorize(&strict(), ALICE, Describe, Topic, "t"));
        // READ does not imply WRITE.
        let set = AclSet::new([allow(Topic, Literal, "t", Read)]);
        assert!(!set.authorize(&strict(), ALICE, Write, Topic, "t"));
        // A DENY of READ does not deny DESCRIBE that an ALLOW of DESCRIBE grants.
        let set = AclSet::new([
            allow(Topic, Literal, "t", Describe),
            acl(Topic, Literal, "t", "User:alice", Read, Permission::Deny),
        ]);
        assert!(set.authorize(&strict(), ALICE, Describe, Topic, "t"));
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "t"));
    }

    #[test]
    fn all_grants_every_operation() {
        let set = AclSet::new([allow(Group, Literal, "g", All)]);
        for op in Group.operations() {
            assert!(set.authorize(&strict(), ALICE, *op, Group, "g"));
        }
        assert_eq!(
            set.authorized_operations(&strict(), ALICE, Group, "g"),
            Group.all_operations_bits()
        );
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns() {
        let set = AclSet::new([allow(Topic, Literal, "orders", Read)]);
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "orders"));
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "orders-eu"));
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "order"));
        let set = AclSet::new([allow(Topic, Prefixed, "orders", Read)]);
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "orders"));
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "orders-eu"));
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "order"));
        let set = AclSet::new([allow(Topic, Literal, "*", Read)]);
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "anything"));
        // A prefixed `*` is a prefix like any other, not a wildcard.
        let set = AclSet::new([allow(Topic, Prefixed, "*", Read)]);
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "anything"));
        // Resource types do not mix.
        let set = AclSet::new([allow(Group, Literal, "orders", Read)]);
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "orders"));
    }

    #[test]
    fn deny_overrides_allow_whatever_the_pattern() {
        let set = AclSet::new([
            allow(Topic, Literal, "*", Read),
            acl(
                Topic,
                Prefixed,
                "secret",
                "User:alice",
                Read,
                Permission::Deny,
            ),
        ]);
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "public"));
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "secret-1"));
        let set = AclSet::new([
            allow(Topic, Literal, "t", Read),
            acl(Topic, Literal, "*", "User:*", All, Permission::Deny),
        ]);
        assert!(!set.authorize(&strict(), ALICE, Read, Topic, "t"));
    }

    #[test]
    fn principals_match_exactly_or_by_wildcard() {
        let set = AclSet::new([allow(Topic, Literal, "t", Read)]);
        assert!(!set.authorize(&strict(), BOB, Read, Topic, "t"));
        let set = AclSet::new([acl(Topic, Literal, "t", "User:*", Read, Permission::Allow)]);
        assert!(set.authorize(&strict(), BOB, Read, Topic, "t"));
    }

    #[test]
    fn super_users_may_do_everything_even_against_a_deny() {
        let settings = AuthorizerSettings {
            super_users: vec!["User:bob".into()],
            allow_if_no_acl: false,
        };
        let set = AclSet::new([acl(Topic, Literal, "*", "User:*", All, Permission::Deny)]);
        assert!(set.authorize(&settings, BOB, Read, Topic, "t"));
        assert!(set.authorize(&settings, BOB, Alter, Cluster, CLUSTER_NAME));
        assert!(!set.authorize(&settings, ALICE, Read, Topic, "t"));
    }

    #[test]
    fn allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls() {
        let open = AuthorizerSettings {
            super_users: vec![],
            allow_if_no_acl: true,
        };
        let set = AclSet::new([allow(Topic, Literal, "t", Read)]);
        assert!(set.authorize(&open, BOB, Read, Topic, "other"));
        assert!(!set.authorize(&strict(), BOB, Read, Topic, "other"));
        // Some ACL on `t` (alice's), none for bob: denied even with the setting.
        assert!(!set.authorize(&open, BOB, Read, Topic, "t"));
        assert!(!set.authorize(&strict(), BOB, Read, Topic, "t"));
        assert!(AclSet::default().authorize(&open, BOB, Alter, Cluster, CLUSTER_NAME));
        assert!(!AclSet::default().authorize(&strict(), BOB, Alter, Cluster, CLUSTER_NAME));
    }

    #[test]
    fn hosts_match_exactly_or_by_wildcard() {
        let mut a = allow(Topic, Literal, "t", Read);
        a.host = "10.0.0.1".into();
        let set = AclSet::new([a.clone()]);
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "t"));
        let elsewhere = Requester {
            principal: "User:alice",
            host: "10.0.0.2",
        };
        assert!(!set.authorize(&strict(), elsewhere, Read, Topic, "t"));
        // A DENY for one host only.
        let mut d = acl(Topic, Literal, "t", "User:alice", Read, Permission::Deny);
        d.host = "10.0.0.2".into();
        let set = AclSet::new([allow(Topic, Literal, "t", Read), d]);
        assert!(set.authorize(&strict(), ALICE, Read, Topic, "t"));
        assert!(!set.authorize(&strict(), elsewhere, Read, Topic, "t"));
    }

    #[test]
    fn authorized_operations_follow_the_acls() {
        let set = AclSet::new([allow(Topic, Literal, "t", Read)]);
        assert_eq!(
            set.authorized_operations(&strict(), ALICE, Topic, "t"),
            (1 << 3) | (1 << 8)
        );
        assert_eq!(set.authorized_operations(&strict(), BOB, Topic, "t"), 0);
    }

    #[test]
    fn authorize_any_finds_an_allow_that_no_deny_cancels() {
        let set = AclSet::new([allow(Topic, Prefixed, "app-", Write)]);
        assert!(set.authorize_any(&strict(), ALICE, Write, Topic));
        assert!(!set.authorize_any(&strict(), BOB, Write, Topic));
        let set = AclSet::new([
            allow(Topic, Literal, "app-1", Write),
            acl(
                Topic,
                Prefixed,
                "app",
                "User:alice",
                Write,
                Permission::Deny,
            ),
        ]);
        assert!(!set.authorize_any(&strict(), ALICE, Write, Topic));
    }

    #[test]
    fn filters_match_as_kafkas() {
        let lit = allow(Topic, Literal, "orders", Read);
        let pre = allow(Topic, Prefixed, "ord", Read);
        let wild = allow(Topic, Literal, "*", Read);
        let any = AclFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern: PatternType::Any,
            principal: None,
            host: None,
            operation: Any,
            permission: Permission::Any,
        };
        for a in [&lit, &pre, &wild] {
            assert!(any.matches(a));
        }
        let exact = AclFilter {
            name: Some("orders".into()),
            ..any.clone()
        };
        assert!(exact.matches(&lit) && !exact.matches(&pre) && !exact.matches(&wild));
        let matching = AclFilter {
            pattern: PatternType::Match,
            ..exact.clone()
        };
        assert!(matching.matches(&lit) && matching.matches(&pre) && matching.matches(&wild));
        let prefixed = AclFilter {
            pattern: Prefixed,
            name: None,
            ..any.clone()
        };
        assert!(!prefixed.matches(&lit) && prefixed.matches(&pre));
        let unknown = AclFilter {
            resource_type: ResourceType::Unknown,
            ..any.clone()
        };
        assert!(unknown.is_unknown() && !unknown.matches(&lit));
        let by_principal = AclFilter {
            principal: Some("User:bob".into()),
            ..any.clone()
        };
        assert!(!by_principal.matches(&lit));
        let by_op = AclFilter {
            operation: Write,
            ..any
        };
        assert!(!by_op.matches(&lit));
    }

    #[test]
    fn validation_names_kafkas_reasons() {
        let ok = allow(Topic, Literal, "t", Read);
        assert!(ok.validate().is_ok());
        let cases = [
            Acl {
                resource_type: Cluster,
                ..ok.clone()
            },
            Acl {
                name: String::new(),
                ..ok.clone()
            },
            Acl {
                resource_type: ResourceType::Any,
                ..ok.clone()
            },
            Acl {
                pattern: PatternType::Match,
                ..ok.clone()
            },
            Acl {
                operation: Any,
                ..ok.clone()
            },
            Acl {
                permission: Permission::Any,
                ..ok.clone()
            },
            Acl {
                principal: "alice".into(),
                ..ok.clone()
            },
        ];
        for c in cases {
            assert!(c.validate().is_err(), "{c:?}");
        }
        let cluster = Acl {
            resource_type: Cluster,
            name: CLUSTER_NAME.into(),
            ..ok
        };
        assert!(cluster.validate().is_ok());
    }
}
