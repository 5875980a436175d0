//! The client quotas set with AlterClientQuotas (PURE): which entity has which quota, checked
//! as Kafka 4.4's controller checks an alteration (`ClientQuotaControlManager`), described as
//! its brokers answer DescribeClientQuotas (`ClientQuotasImage.describe`), and resolved for a
//! request as its `ClientQuotaManager` does: the most specific entity with the quota wins.

use std::collections::BTreeMap;
use std::fmt;

/// A kind of quota entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityType {
    // In the order Kafka's HashMap of an entity lists them (its answers and messages).
    ClientId,
    User,
    Ip,
}

impl EntityType {
    pub fn parse(s: &str) -> Option<EntityType> {
        match s {
            "client-id" => Some(EntityType::ClientId),
            "user" => Some(EntityType::User),
            "ip" => Some(EntityType::Ip),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EntityType::ClientId => "client-id",
            EntityType::User => "user",
            EntityType::Ip => "ip",
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<EntityType> {
        [EntityType::ClientId, EntityType::User, EntityType::Ip]
            .get(usize::from(code))
            .copied()
    }
}

/// A quota entity: each of its types with a name, or `None` for that type's default.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entity(Vec<(EntityType, Option<String>)>);

impl Entity {
    /// An entity of these parts (sorted; each type once, the last of a type kept, as Kafka's
    /// request parsing keeps it).
    pub fn new(parts: impl IntoIterator<Item = (EntityType, Option<String>)>) -> Entity {
        let mut map: BTreeMap<EntityType, Option<String>> = BTreeMap::new();
        for (t, n) in parts {
            map.insert(t, n);
        }
        Entity(map.into_iter().collect())
    }

    pub fn parts(&self) -> &[(EntityType, Option<String>)] {
        &self.0
    }

    /// The name of type `t`: `None` if the entity has no such part, `Some(None)` for its
    /// default.
    pub fn get(&self, t: EntityType) -> Option<Option<&str>> {
        self.0
            .iter()
            .find(|(et, _)| *et == t)
            .map(|(_, n)| n.as_deref())
    }
}

/// Kafka's `ClientQuotaEntity.toString`, as its error messages print entities.
impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientQuotaEntity(entries={")?;
        for (i, (t, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={}", t.as_str(), n.as_deref().unwrap_or("null"))?;
        }
        f.write_str("})")
    }
}

/// The kind of a quota's value, which bounds what may be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Long,
    Int,
    Double,
}

/// The quota keys of user and client-id entities, in the order Kafka lists them.
const USER_CLIENT_KEYS: &[(&str, Kind)] = &[
    (REQUEST_PERCENTAGE, Kind::Double),
    (PRODUCER_BYTE_RATE, Kind::Long),
    (CONSUMER_BYTE_RATE, Kind::Long),
    (CONTROLLER_MUTATION_RATE, Kind::Double),
];
/// The quota keys of ip entities.
const IP_KEYS: &[(&str, Kind)] = &[(CONNECTION_CREATION_RATE, Kind::Int)];

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// The position of `key` in Kafka's listing order (unknown keys last).
fn key_rank(key: &str) -> usize {
    USER_CLIENT_KEYS
        .iter()
        .chain(IP_KEYS)
        .position(|(k, _)| *k == key)
        .unwrap_or(usize::MAX)
}

/// One entity's quotas, by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Values(pub BTreeMap<String, f64>);

/// Quotas are checked finite and positive before they are set, so equality is total.
impl Eq for Values {}

impl std::ops::Deref for Values {
    type Target = BTreeMap<String, f64>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Values {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<const N: usize> From<[(String, f64); N]> for Values {
    fn from(v: [(String, f64); N]) -> Values {
        Values(BTreeMap::from(v))
    }
}

/// One requested alteration: the entity as named (types as strings, unchecked) and its
/// operations (`None`: remove the key).
#[derive(Debug, Clone, PartialEq)]
pub struct Alteration {
    pub entity: Vec<(String, Option<String>)>,
    pub ops: Vec<(String, Option<f64>)>,
}

/// Why an alteration was refused: always INVALID_REQUEST in Kafka 4.4, with this message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

/// An entity as a request names it: each type (as a string) with a name, or `None` for the
/// type's default.
pub type Named = Vec<(String, Option<String>)>;

/// What the alterations of one entity did: the entity as named (one name per type), and
/// whether they were applied.
pub type Altered = (Named, Result<(), Invalid>);

/// An entity a DescribeClientQuotas filter matched, with its quotas in Kafka's order.
pub type Described<'a> = (&'a Entity, Vec<(&'a str, f64)>);

/// Every entity's quotas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaTable {
    entities: BTreeMap<Entity, Values>,
}

impl QuotaTable {
    pub fn new(stored: impl IntoIterator<Item = (Entity, Values)>) -> QuotaTable {
        QuotaTable {
            entities: stored.into_iter().filter(|(_, v)| !v.is_empty()).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    pub fn entities(&self) -> impl Iterator<Item = (&Entity, &Values)> {
        self.entities.iter()
    }

    /// Replaces `entity`'s quotas (none: the entity is gone).
    pub fn set(&mut self, entity: Entity, values: Values) {
        if values.is_empty() {
            self.entities.remove(&entity);
        } else {
            self.entities.insert(entity, values);
        }
    }

    /// The quota `key` of `entity`, if set.
    pub fn value(&self, entity: &Entity, key: &str) -> Option<f64> {
        self.entities.get(entity).and_then(|v| v.get(key)).copied()
    }

    /// Checks `alterations` as Kafka's controller does, entity by entity: the result of each
    /// entity (in the order first named) and the entities' new quotas to store (only entities
    /// that change).
    /// `resolves(host)`: whether an ip entity's name is an address or a name that resolves.
    /// As in Kafka, an entity named twice in one request, or with a key twice, is refused
    /// ("Ignoring duplicate entity"), while an earlier valid alteration of it still applies.
    pub fn alter(
        &self,
        alterations: &[Alteration],
        resolves: impl Fn(&str) -> bool,
    ) -> (Vec<Altered>, Vec<(Entity, Values)>) {
        // One result per entity (Kafka answers from a map of them), the last one standing.
        let mut results: Vec<(Named, Altered)> = Vec::new();
        let mut changed: BTreeMap<Entity, Values> = BTreeMap::new();
        for a in alterations {
            // Kafka's request parsing: one name per type, the last one named.
            let mut named: Vec<(String, Option<String>)> = Vec::new();
            for (t, n) in &a.entity {
                named.retain(|(t2, _)| t2 != t);
                named.push((t.clone(), n.clone()));
            }
            let mut key = named.clone();
            key.sort();
            let duplicate_key = a
                .ops
                .iter()
                .enumerate()
                .any(|(i, (k, _))| a.ops[..i].iter().any(|(k2, _)| k2 == k));
            let seen = results.iter().position(|(k, _)| *k == key);
            let result = if duplicate_key || seen.is_some() {
                Err(Invalid(format!(
                    "Ignoring duplicate entity {}",
                    display_named(&named)
                )))
            } else {
                self.alter_one(&named, &a.ops, &resolves, &mut changed)
            };
            match seen {
                Some(i) => results[i].1 .1 = result,
                None => results.push((key, (named, result))),
            }
        }
        (
            results.into_iter().map(|(_, r)| r).collect(),
            changed.into_iter().collect(),
        )
    }

    fn alter_one(
        &self,
        named: &[(String, Option<String>)],
        ops: &[(String, Option<f64>)],
        resolves: &impl Fn(&str) -> bool,
        changed: &mut BTreeMap<Entity, Values>,
    ) -> Result<(), Invalid> {
        let invalid = |m: String| Err(Invalid(m));
        if named.is_empty() {
            return invalid("Invalid empty client quota entity".into());
        }
        let mut parts = Vec::new();
        for (t, n) in named {
            let Some(et) = EntityType::parse(t) else {
                return invalid(format!("Unhandled client quota entity type: {t}"));
            };
            if n.as_deref() == Some("") {
                return invalid(format!("Empty {t} not supported"));
            }
            parts.push((et, n.clone()));
        }
        let entity = Entity::new(parts);
        let ip = entity.get(EntityType::Ip);
        let keys = match ip {
            Some(_) if entity.parts().len() > 1 => {
                return invalid(
                    "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                        .into(),
                )
            }
            Some(Some(host)) if !resolves(host) => {
                return invalid(format!("{host} is not a valid IP or resolvable host."))
            }
            Some(_) => IP_KEYS,
            None => USER_CLIENT_KEYS,
        };
        let mut values = self.entities.get(&entity).cloned().unwrap_or_default();
        for (key, value) in ops {
            match value {
                None => {
                    values.remove(key);
                }
                Some(v) => {
                    check_value(keys, key, *v)?;
                    values.insert(key.clone(), *v);
                }
            }
        }
        if self.entities.get(&entity).cloned().unwrap_or_default() != values {
            changed.insert(entity, values);
        }
        Ok(())
    }

    /// The entities a DescribeClientQuotas filter matches, in the table's order, with their
    /// values in Kafka's order. `components`: `(entity type, match type, match)`.
    pub fn describe(
        &self,
        components: &[(String, i8, Option<String>)],
        strict: bool,
    ) -> Result<Vec<Described<'_>>, DescribeError> {
        let mut exact: Vec<(EntityType, Option<&str>)> = Vec::new();
        let mut specified: Vec<EntityType> = Vec::new();
        for (t, match_type, name) in components {
            if t.is_empty() {
                return Err(DescribeError::Invalid("Invalid empty entity type.".into()));
            }
            let already =
                |et: EntityType| exact.iter().any(|(e, _)| *e == et) || specified.contains(&et);
            if EntityType::parse(t).is_some_and(already) {
                return Err(DescribeError::Invalid(format!(
                    "Entity type {t} cannot appear more than once in the filter."
                )));
            }
            let Some(et) = EntityType::parse(t) else {
                return Err(DescribeError::Unsupported(format!(
                    "Unsupported entity type {t}"
                )));
            };
            match (match_type, name) {
                (0, Some(n)) => exact.push((et, Some(n))),
                (0, None) => {
                    return Err(DescribeError::Invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    ))
                }
                (1, None) => exact.push((et, None)),
                (1, Some(_)) => {
                    return Err(DescribeError::Invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    ))
                }
                (2, None) => specified.push(et),
                (2, Some(_)) => return Err(DescribeError::Invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )),
                (m, _) => return Err(DescribeError::Invalid(format!("Unknown match type {m}"))),
            }
        }
        let named = |et: EntityType| exact.iter().any(|(e, _)| *e == et) || specified.contains(&et);
        if named(EntityType::Ip) && (named(EntityType::User) || named(EntityType::ClientId)) {
            return Err(DescribeError::Invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
                    .into(),
            ));
        }
        let wanted = exact.len() + specified.len();
        let matches = |e: &Entity| {
            if wanted == 0 {
                return !strict;
            }
            exact.iter().all(|(t, n)| e.get(*t) == Some(*n))
                && specified.iter().all(|t| e.get(*t).is_some())
                && (!strict || e.parts().len() == wanted)
        };
        Ok(self
            .entities
            .iter()
            .filter(|(e, _)| matches(e))
            .map(|(e, v)| {
                let mut values: Vec<(&str, f64)> =
                    v.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                values.sort_by_key(|(k, _)| key_rank(k));
                (e, values)
            })
            .collect())
    }

    /// The quota `key` that applies to `user` with `client_id`, and the entity level whose
    /// usage it bounds (Kafka's `ClientQuotaManager` metric tags): the most specific of
    /// user+client-id, user+default client-id, user, default user+client-id, default user +
    /// default client-id, default user, client-id, default client-id with the key set.
    pub fn resolve(&self, key: &str, user: &str, client_id: &str) -> Option<(f64, Usage)> {
        use EntityType::{ClientId, User};
        let u = || (User, Some(user.to_string()));
        let c = || (ClientId, Some(client_id.to_string()));
        let levels = [
            (vec![u(), c()], Usage::UserAndClient),
            (vec![u(), (ClientId, None)], Usage::UserAndClient),
            (vec![u()], Usage::User),
            (vec![(User, None), c()], Usage::UserAndClient),
            (vec![(User, None), (ClientId, None)], Usage::UserAndClient),
            (vec![(User, None)], Usage::User),
            (vec![c()], Usage::Client),
            (vec![(ClientId, None)], Usage::Client),
        ];
        levels
            .into_iter()
            .find_map(|(parts, usage)| Some((self.value(&Entity::new(parts), key)?, usage)))
    }
}

/// Whose usage a quota bounds: each user and client-id together, each user, or each
/// client-id (Kafka shares one sensor among what one level's metric tags name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Usage {
    UserAndClient,
    User,
    Client,
}

/// Why a DescribeClientQuotas filter is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescribeError {
    /// INVALID_REQUEST.
    Invalid(String),
    /// UNSUPPORTED_VERSION (an entity type Kafka does not know).
    Unsupported(String),
}

/// An entity as a request named it, as Kafka prints it (types it does not know included).
fn display_named(named: &[(String, Option<String>)]) -> String {
    let mut parts: Vec<&(String, Option<String>)> = named.iter().collect();
    // Kafka's HashMap order for the types it knows.
    parts.sort_by_key(|(t, _)| EntityType::parse(t).map_or(u8::MAX, EntityType::code));
    let inner: Vec<String> = parts
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", inner.join(", "))
}

/// Kafka's `validateQuotaKeyValue`.
fn check_value(keys: &[(&str, Kind)], key: &str, value: f64) -> Result<(), Invalid> {
    let invalid = |m: String| Err(Invalid(m));
    let Some((_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return invalid(format!("Invalid configuration key {key}"));
    };
    if !value.is_finite() {
        return invalid(format!("Quota {key} must be a finite number"));
    }
    if value <= 0.0 {
        return invalid(format!("Quota {key} must be greater than 0"));
    }
    let integral = |name: &str, max: f64| {
        if value > max {
            invalid(format!("Proposed value for {key} is too large for {name}."))
        } else if (value % 1.0).abs() > 1.0e-6 {
            invalid(format!("{key} cannot be a fractional value."))
        } else {
            Ok(())
        }
    };
    match kind {
        Kind::Double => Ok(()),
        Kind::Int => integral("an INT", 2_147_483_647.0),
        // Kafka compares with a float literal: 9.223372E18F.
        Kind::Long => integral("a LONG", f64::from(9.223_372E18_f32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        parts
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect()
    }

    fn set(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> Alteration {
        Alteration {
            entity: named(entity),
            ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    fn apply(t: &mut QuotaTable, a: &[Alteration]) -> Vec<Result<(), Invalid>> {
        let (results, changes) = t.alter(a, |h| h == "127.0.0.1" || h == "localhost");
        for (e, v) in changes {
            t.set(e, v);
        }
        results.into_iter().map(|(_, r)| r).collect()
    }

    fn err(m: &str) -> Result<(), Invalid> {
        Err(Invalid(m.into()))
    }

    #[test]
    fn alterations_are_checked_as_kafka_checks_them() {
        let mut t = QuotaTable::default();
        let r = apply(
            &mut t,
            &[
                set(&[], &[("producer_byte_rate", Some(1.0))]),
                set(&[("group", Some("g"))], &[]),
                set(&[("user", Some(""))], &[]),
                set(&[("ip", Some("1.2.3.4")), ("user", None)], &[]),
                set(&[("ip", Some("nowhere"))], &[]),
                set(&[("ip", None)], &[("producer_byte_rate", Some(1.0))]),
                set(
                    &[("user", Some("a"))],
                    &[("connection_creation_rate", Some(1.0))],
                ),
                set(
                    &[("user", Some("b"))],
                    &[("producer_byte_rate", Some(f64::NAN))],
                ),
                set(&[("user", Some("c"))], &[("producer_byte_rate", Some(0.0))]),
                set(&[("user", Some("d"))], &[("producer_byte_rate", Some(1.5))]),
                set(
                    &[("user", Some("e"))],
                    &[("producer_byte_rate", Some(1e19))],
                ),
                set(
                    &[("ip", Some("localhost"))],
                    &[("connection_creation_rate", Some(3e9))],
                ),
                set(
                    &[("user", Some("f")), ("client-id", Some("x"))],
                    &[
                        ("request_percentage", Some(1.5)),
                        ("request_percentage", Some(2.0)),
                    ],
                ),
            ],
        );
        assert_eq!(
            r,
            vec![
                err("Invalid empty client quota entity"),
                err("Unhandled client quota entity type: group"),
                err("Empty user not supported"),
                err("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
                err("nowhere is not a valid IP or resolvable host."),
                err("Invalid configuration key producer_byte_rate"),
                err("Invalid configuration key connection_creation_rate"),
                err("Quota producer_byte_rate must be a finite number"),
                err("Quota producer_byte_rate must be greater than 0"),
                err("producer_byte_rate cannot be a fractional value."),
                err("Proposed value for producer_byte_rate is too large for a LONG."),
                err("Proposed value for connection_creation_rate is too large for an INT."),
                err("Ignoring duplicate entity ClientQuotaEntity(entries={client-id=x, user=f})"),
            ]
        );
        assert!(t.is_empty());
    }

    #[test]
    fn set_remove_and_a_repeated_entity() {
        let mut t = QuotaTable::default();
        let r = apply(
            &mut t,
            &[
                set(
                    &[("user", Some("a"))],
                    &[("producer_byte_rate", Some(1024.0))],
                ),
                set(
                    &[("user", Some("a"))],
                    &[("consumer_byte_rate", Some(2048.0))],
                ),
            ],
        );
        // One answer for the entity: refused as a duplicate; yet the first alteration applies,
        // as in Kafka.
        assert_eq!(
            r,
            vec![err(
                "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"
            )]
        );
        let a = Entity::new([(EntityType::User, Some("a".into()))]);
        assert_eq!(t.value(&a, "producer_byte_rate"), Some(1024.0));
        assert_eq!(t.value(&a, "consumer_byte_rate"), None);
        // Removing a key that is not set (even an unknown one) is fine; the last key removed
        // removes the entity.
        let r = apply(
            &mut t,
            &[set(
                &[("user", Some("a"))],
                &[("producer_byte_rate", None), ("no_such_key", None)],
            )],
        );
        assert_eq!(r, vec![Ok(())]);
        assert!(t.is_empty());
    }

    fn table() -> QuotaTable {
        use EntityType::*;
        let e = |p: Vec<(EntityType, Option<&str>)>| {
            Entity::new(p.into_iter().map(|(t, n)| (t, n.map(str::to_string))))
        };
        let v = |k: &str, x: f64| Values::from([(k.to_string(), x)]);
        QuotaTable::new([
            (e(vec![(User, Some("alice"))]), v("producer_byte_rate", 1.0)),
            (e(vec![(User, None)]), v("producer_byte_rate", 2.0)),
            (
                e(vec![(User, Some("alice")), (ClientId, Some("app"))]),
                v("producer_byte_rate", 3.0),
            ),
            (e(vec![(ClientId, None)]), v("consumer_byte_rate", 4.0)),
            (
                e(vec![(ClientId, Some("app"))]),
                v("producer_byte_rate", 5.0),
            ),
            (
                e(vec![(Ip, Some("127.0.0.1"))]),
                v("connection_creation_rate", 6.0),
            ),
        ])
    }

    fn described(t: &QuotaTable, c: &[(&str, i8, Option<&str>)], strict: bool) -> Vec<String> {
        let c: Vec<(String, i8, Option<String>)> = c
            .iter()
            .map(|(t, m, n)| (t.to_string(), *m, n.map(str::to_string)))
            .collect();
        let mut out: Vec<String> = t
            .describe(&c, strict)
            .unwrap()
            .into_iter()
            .map(|(e, _)| e.to_string())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn describe_filters_as_kafka() {
        let t = table();
        assert_eq!(described(&t, &[], false).len(), 6);
        assert!(described(&t, &[], true).is_empty());
        assert_eq!(
            described(&t, &[("user", 0, Some("alice"))], false),
            vec![
                "ClientQuotaEntity(entries={client-id=app, user=alice})",
                "ClientQuotaEntity(entries={user=alice})"
            ]
        );
        assert_eq!(
            described(&t, &[("user", 0, Some("alice"))], true),
            vec!["ClientQuotaEntity(entries={user=alice})"]
        );
        assert_eq!(
            described(&t, &[("user", 1, None)], false),
            vec!["ClientQuotaEntity(entries={user=null})"]
        );
        // SPECIFIED matches any name of the type, the default too (as Kafka 4.4's image does).
        assert_eq!(described(&t, &[("user", 2, None)], false).len(), 3);
        assert_eq!(described(&t, &[("client-id", 2, None)], true).len(), 2);
        let bad = |c: &[(&str, i8, Option<&str>)]| {
            let c: Vec<(String, i8, Option<String>)> = c
                .iter()
                .map(|(t, m, n)| (t.to_string(), *m, n.map(str::to_string)))
                .collect();
            t.describe(&c, false).unwrap_err()
        };
        assert_eq!(
            bad(&[("", 0, Some("x"))]),
            DescribeError::Invalid("Invalid empty entity type.".into())
        );
        assert_eq!(
            bad(&[("group", 2, None)]),
            DescribeError::Unsupported("Unsupported entity type group".into())
        );
        assert_eq!(
            bad(&[("user", 2, None), ("user", 1, None)]),
            DescribeError::Invalid(
                "Entity type user cannot appear more than once in the filter.".into()
            )
        );
        assert!(matches!(
            bad(&[("user", 0, None)]),
            DescribeError::Invalid(_)
        ));
        assert!(matches!(
            bad(&[("user", 1, Some("a"))]),
            DescribeError::Invalid(_)
        ));
        assert!(matches!(
            bad(&[("user", 2, Some("a"))]),
            DescribeError::Invalid(_)
        ));
        assert_eq!(
            bad(&[("user", 3, None)]),
            DescribeError::Invalid("Unknown match type 3".into())
        );
        assert!(matches!(
            bad(&[("ip", 2, None), ("client-id", 2, None)]),
            DescribeError::Invalid(_)
        ));
    }

    #[test]
    fn the_most_specific_entity_with_the_key_applies() {
        let t = table();
        let p = "producer_byte_rate";
        assert_eq!(
            t.resolve(p, "alice", "app"),
            Some((3.0, Usage::UserAndClient))
        );
        assert_eq!(t.resolve(p, "alice", "other"), Some((1.0, Usage::User)));
        assert_eq!(t.resolve(p, "bob", "app"), Some((2.0, Usage::User)));
        let c = "consumer_byte_rate";
        assert_eq!(t.resolve(c, "alice", "app"), Some((4.0, Usage::Client)));
        assert_eq!(t.resolve("request_percentage", "alice", "app"), None);
        let only_client = QuotaTable::new([(
            Entity::new([(EntityType::ClientId, Some("app".into()))]),
            Values::from([(p.to_string(), 5.0)]),
        )]);
        assert_eq!(
            only_client.resolve(p, "bob", "app"),
            Some((5.0, Usage::Client))
        );
        assert_eq!(only_client.resolve(p, "bob", "other"), None);
    }
}
