//! The authorizer's shell: on when `authorizer.class.name` names one (Kafka's
//! `StandardAuthorizer`, or koord's short name `acl`), off otherwise, and then everything is
//! authorized, as in Kafka without an authorizer. Holds the ACLs in memory (loaded from the
//! store at start-up; CreateAcls / DeleteAcls change them once their writes are durable) and
//! answers [`Authorizer::authorize`] with the pure rules of [`super::acl`].

use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use super::acl::{Acl, AclSet, AuthorizerSettings, Operation, Requester, ResourceType};

/// The values of `authorizer.class.name` that turn the authorizer on: Kafka's KRaft
/// authorizer and its ZooKeeper-era predecessor (both mean "ACLs as Kafka keeps them"), and
/// koord's short name.
pub const AUTHORIZER_NAMES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "acl",
];

/// Whether `name` (a value of `authorizer.class.name`) is one koord serves; empty is "none".
pub fn is_known(name: &str) -> bool {
    name.is_empty() || AUTHORIZER_NAMES.contains(&name)
}

/// The node's authorizer.
#[derive(Debug, Default)]
pub struct Authorizer {
    /// Off: every action is allowed and the ACL APIs answer SECURITY_DISABLED.
    enabled: bool,
    settings: AuthorizerSettings,
    acls: RwLock<AclSet>,
    /// Held by CreateAcls / DeleteAcls from reading the ACLs to applying their change, so two
    /// changes cannot interleave between check and write.
    pub writes: tokio::sync::Mutex<()>,
}

impl Authorizer {
    /// An authorizer that allows everything (none configured).
    pub fn disabled() -> Authorizer {
        Authorizer::default()
    }

    /// An authorizer deciding with `settings` over the stored `acls`.
    pub fn enabled(settings: AuthorizerSettings, acls: Vec<Acl>) -> Authorizer {
        Authorizer {
            enabled: true,
            settings,
            acls: RwLock::new(AclSet::new(acls)),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The ACLs now. Held briefly; nothing may be awaited while it is held.
    pub fn acls(&self) -> RwLockReadGuard<'_, AclSet> {
        self.acls.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies a durable change: `added` ACLs in, `removed` ones out.
    pub fn apply(&self, added: &[Acl], removed: &[Acl]) {
        let mut set = self.acls.write().unwrap_or_else(PoisonError::into_inner);
        for a in removed {
            set.remove(a);
        }
        for a in added {
            set.insert(a.clone());
        }
    }

    /// Whether `who` (a principal and its client's address, as text made once per
    /// connection: nothing is allocated per check) may do `op` on the resource `name` of type
    /// `rt`. Always true when the authorizer is off.
    pub fn authorize(
        &self,
        who: Requester<'_>,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        !self.enabled || self.acls().authorize(&self.settings, who, op, rt, name)
    }

    /// Whether `op` is allowed on some resource of type `rt` (Kafka's `authorizeByResourceType`).
    pub fn authorize_any(&self, who: Requester<'_>, op: Operation, rt: ResourceType) -> bool {
        !self.enabled || self.acls().authorize_any(&self.settings, who, op, rt)
    }

    /// The authorized-operations bitfield of a resource: every operation of its type when the
    /// authorizer is off (Kafka's answer without an authorizer).
    pub fn authorized_operations(&self, who: Requester<'_>, rt: ResourceType, name: &str) -> i32 {
        if !self.enabled {
            return rt.all_operations_bits();
        }
        self.acls()
            .authorized_operations(&self.settings, who, rt, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{PatternType, Permission, CLUSTER_NAME};
    use crate::security::Principal;

    const HOST: &str = "127.0.0.1";

    fn who<'a>(p: &'a Principal, host: &'static str) -> Requester<'a> {
        Requester {
            principal: p.as_str(),
            host,
        }
    }

    #[test]
    fn disabled_allows_everything_and_reports_every_operation() {
        let a = Authorizer::disabled();
        let p = Principal::user("anyone");
        assert!(a.authorize(
            who(&p, HOST),
            Operation::Alter,
            ResourceType::Cluster,
            CLUSTER_NAME
        ));
        assert_eq!(
            a.authorized_operations(who(&p, HOST), ResourceType::Topic, "t"),
            ResourceType::Topic.all_operations_bits()
        );
    }

    #[test]
    fn enabled_decides_by_acls_and_changes_apply() {
        let read = Acl {
            resource_type: ResourceType::Group,
            pattern: PatternType::Literal,
            name: "g".into(),
            principal: "User:alice".into(),
            host: "127.0.0.1".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        let a = Authorizer::enabled(AuthorizerSettings::default(), vec![read.clone()]);
        let alice = Principal::user("alice");
        let read_g =
            |host| a.authorize(who(&alice, host), Operation::Read, ResourceType::Group, "g");
        assert!(read_g(HOST));
        assert!(!read_g("10.1.1.1"));
        a.apply(&[], &[read]);
        assert!(!read_g(HOST));
    }

    #[test]
    fn known_names() {
        assert!(is_known(""));
        assert!(is_known(
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        ));
        assert!(!is_known("com.example.Mine"));
    }
}
