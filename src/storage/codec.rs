//! The byte layout of stored keys and values. Every value starts with a format version byte;
//! decoding checks every length against what is left, so a damaged value is an error that names
//! what is wrong, never a panic or an unchecked allocation.

use uuid::Uuid;

use crate::metadata::topic_config::TopicConfigs;
use crate::metadata::{name_based_id, Topic};
use crate::quota::{Entity, EntityType, Values};
use crate::security::acl::{Acl, Operation, PatternType, Permission, ResourceType};
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::vocab::codec::{end, err, version, DecodeError, Writer, V1};
use crate::vocab::reader::Reader;
use crate::vocab::{OffsetAndMetadata, Timestamp, TopicPartition, TxnRecord, TxnState};

/// Topic values with configs (V2), then with ids (V3); V1 and V2 are still read.
const TOPIC_V2: u8 = 2;
const TOPIC_V3: u8 = 3;

/// The key prefix of every offset of `group`.
pub fn group_prefix(group: &str) -> Vec<u8> {
    let mut w = Writer::default();
    w.str(group);
    w.0
}

/// The key of one committed offset: group, topic, partition (ordered by all three).
pub fn offset_key(group: &str, tp: &TopicPartition) -> Vec<u8> {
    let mut key = Vec::new();
    offset_key_into(&mut key, group, tp);
    key
}

/// [`offset_key`] written over `buf` (the storage task reuses one buffer for a whole batch).
pub fn offset_key_into(buf: &mut Vec<u8>, group: &str, tp: &TopicPartition) {
    buf.clear();
    buf.reserve(4 + group.len() + 4 + tp.topic.len() + 4);
    let mut w = Writer(std::mem::take(buf));
    w.str(group);
    w.str(&tp.topic);
    // Flipping the sign bit makes the big-endian bytes sort like the signed numbers.
    w.u32((tp.partition as u32) ^ 0x8000_0000);
    *buf = w.0;
}

/// The group id (borrowed from the key: start-up compares it with the previous key's before
/// allocating anything) and the partition of an offset key.
pub fn decode_offset_key(key: &[u8]) -> Result<(&str, TopicPartition), DecodeError> {
    const WHAT: &str = "offset key";
    let mut r = Reader::new(key);
    let group = r.str_u32(WHAT)?;
    let topic = r.str_u32(WHAT)?.to_owned();
    let partition = (r.u32(WHAT)? ^ 0x8000_0000) as i32;
    end(&r, WHAT)?;
    Ok((group, TopicPartition { topic, partition }))
}

/// The key prefix of every pending transactional offset of `producer_id` in `group`.
pub fn pending_prefix(group: &str, producer_id: i64) -> Vec<u8> {
    let mut w = Writer::default();
    w.str(group);
    w.u64((producer_id as u64) ^ 0x8000_0000_0000_0000);
    w.0
}

/// The key of one pending transactional offset: group, producer id, topic, partition.
pub fn pending_key(group: &str, producer_id: i64, tp: &TopicPartition) -> Vec<u8> {
    let mut key = pending_prefix(group, producer_id);
    let mut w = Writer(std::mem::take(&mut key));
    w.str(&tp.topic);
    w.u32((tp.partition as u32) ^ 0x8000_0000);
    w.0
}

/// The group, producer id and partition of a pending-offset key.
pub fn decode_pending_key(key: &[u8]) -> Result<(&str, i64, TopicPartition), DecodeError> {
    const WHAT: &str = "pending offset key";
    let mut r = Reader::new(key);
    let group = r.str_u32(WHAT)?;
    let producer_id = (r.u64(WHAT)? ^ 0x8000_0000_0000_0000) as i64;
    let topic = r.str_u32(WHAT)?.to_owned();
    let partition = (r.u32(WHAT)? ^ 0x8000_0000) as i32;
    end(&r, WHAT)?;
    Ok((group, producer_id, TopicPartition { topic, partition }))
}

/// A pending offset's value: whether it is superseded, then the offset's own value.
pub fn encode_pending(offset: &OffsetAndMetadata, superseded: bool) -> Vec<u8> {
    let mut value = vec![u8::from(superseded)];
    value.extend(encode_offset(offset));
    value
}

pub fn decode_pending(value: &[u8]) -> Result<(OffsetAndMetadata, bool), DecodeError> {
    match value.split_first() {
        Some((0, rest)) => Ok((decode_offset(rest)?, false)),
        Some((1, rest)) => Ok((decode_offset(rest)?, true)),
        Some((t, _)) => Err(err(format!(
            "pending offset value: bad superseded flag {t}"
        ))),
        None => Err(err("pending offset value is empty")),
    }
}

pub fn encode_offset(o: &OffsetAndMetadata) -> Vec<u8> {
    let mut value = Vec::new();
    encode_offset_into(&mut value, o);
    value
}

/// [`encode_offset`] written over `buf` (the storage task reuses one buffer for a whole batch).
pub fn encode_offset_into(buf: &mut Vec<u8>, o: &OffsetAndMetadata) {
    buf.clear();
    buf.reserve(1 + 8 + 4 + 8 + 9 + 4 + o.metadata.len());
    let mut w = Writer(std::mem::take(buf));
    w.u8(V1);
    w.i64(o.offset);
    w.i32(o.leader_epoch.unwrap_or(-1));
    w.u64(o.commit_timestamp.as_millis());
    match o.expire_timestamp {
        None => w.u8(0),
        Some(t) => {
            w.u8(1);
            w.u64(t.as_millis());
        }
    }
    w.str(&o.metadata);
    *buf = w.0;
}

pub fn decode_offset(value: &[u8]) -> Result<OffsetAndMetadata, DecodeError> {
    const WHAT: &str = "offset value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let offset = r.i64(WHAT)?;
    let epoch = r.i32(WHAT)?;
    let commit_timestamp = Timestamp(r.u64(WHAT)?);
    let expire_timestamp = match r.u8(WHAT)? {
        0 => None,
        1 => Some(Timestamp(r.u64(WHAT)?)),
        t => return Err(err(format!("{WHAT}: bad expiry tag {t}"))),
    };
    let metadata = r.str_u32(WHAT)?.to_owned();
    end(&r, WHAT)?;
    Ok(OffsetAndMetadata {
        offset,
        leader_epoch: (epoch >= 0).then_some(epoch),
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

/// The topic value at V1: the partition count only. Still read; written by tests.
#[cfg(test)]
pub(crate) fn encode_topic_v1(partitions: i32) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.i32(partitions);
    w.0
}

/// The topic value at V2 (before ids): the partition count, then the configs. Still read;
/// written by tests.
#[cfg(test)]
pub(crate) fn encode_topic_v2(partitions: i32, configs: &TopicConfigs) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(TOPIC_V2);
    w.i32(partitions);
    write_topic_configs(&mut w, configs);
    w.0
}

/// Topic values since topic ids (V3): the partition count, the id, then the explicitly set
/// configs. The name is the key.
pub fn encode_topic(topic: &Topic, configs: &TopicConfigs) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(TOPIC_V3);
    w.i32(topic.partitions);
    let (high, low) = topic.id.as_u64_pair();
    w.u64(high);
    w.u64(low);
    write_topic_configs(&mut w, configs);
    w.0
}

/// A topic value's configs (V2, V3): their count, then each name and value.
fn write_topic_configs(w: &mut Writer, configs: &TopicConfigs) {
    w.u32(configs.len() as u32);
    for (name, value) in configs {
        w.str(name);
        w.str(value);
    }
}

/// Topic `name` and its configs from its stored value (V1: no configs; V1 and V2: no id, so the
/// topic keeps the one koord gave it then, [`name_based_id`]).
pub fn decode_topic(name: &str, value: &[u8]) -> Result<(Topic, TopicConfigs), DecodeError> {
    const WHAT: &str = "topic value";
    let mut r = Reader::new(value);
    let version = r.u8(WHAT)?;
    if !matches!(version, V1 | TOPIC_V2 | TOPIC_V3) {
        return Err(err(format!("{WHAT}: unknown format version {version}")));
    }
    let n = r.i32(WHAT)?;
    let id = if version == TOPIC_V3 {
        Uuid::from_u64_pair(r.u64(WHAT)?, r.u64(WHAT)?)
    } else {
        name_based_id(name)
    };
    let mut configs = TopicConfigs::new();
    if version != V1 {
        let count = r.u32(WHAT)?;
        for _ in 0..count {
            let name = r.str_u32(WHAT)?.to_owned();
            let value = r.str_u32(WHAT)?.to_owned();
            configs.insert(name, value);
        }
    }
    end(&r, WHAT)?;
    if n < 1 {
        return Err(err(format!("{WHAT}: partition count {n}")));
    }
    if id.is_nil() {
        return Err(err(format!("{WHAT}: the nil topic id")));
    }
    let topic = Topic {
        name: name.to_string(),
        id,
        partitions: n,
    };
    Ok((topic, configs))
}

/// Group config values: a format version, then the configs set on the group.
pub fn encode_group_configs(configs: &crate::metadata::group_config::GroupConfigMap) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.u32(configs.len() as u32);
    for (name, value) in configs {
        w.str(name);
        w.str(value);
    }
    w.0
}

/// The configs of a group config value.
pub fn decode_group_configs(
    value: &[u8],
) -> Result<crate::metadata::group_config::GroupConfigMap, DecodeError> {
    const WHAT: &str = "group config value";
    let mut r = Reader::new(value);
    let version = r.u8(WHAT)?;
    if version != V1 {
        return Err(err(format!("{WHAT}: unknown format version {version}")));
    }
    let mut configs = crate::metadata::group_config::GroupConfigMap::new();
    let count = r.u32(WHAT)?;
    for _ in 0..count {
        let name = r.str_u32(WHAT)?.to_owned();
        let value = r.str_u32(WHAT)?.to_owned();
        configs.insert(name, value);
    }
    end(&r, WHAT)?;
    Ok(configs)
}

/// The key of a client quota entity: its parts' count, then each part's type code and
/// optional name (`None`: the type's default).
pub fn client_quota_key(entity: &Entity) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(entity.parts().len() as u8);
    for (t, name) in entity.parts() {
        w.u8(t.code());
        w.opt_str(name.as_deref());
    }
    w.0
}

/// The entity of a client quota key; a type this build does not know is an error.
pub fn decode_client_quota_key(key: &[u8]) -> Result<Entity, DecodeError> {
    const WHAT: &str = "client quota key";
    let mut r = Reader::new(key);
    let n = r.u8(WHAT)?;
    let mut parts = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let code = r.u8(WHAT)?;
        let t = EntityType::from_code(code)
            .ok_or_else(|| err(format!("{WHAT}: unknown entity type {code}")))?;
        parts.push((t, crate::vocab::codec::opt_str(&mut r, WHAT)?));
    }
    end(&r, WHAT)?;
    Ok(Entity::new(parts))
}

/// An entity's client quotas: a format version, then each key and its value (the bits of an
/// f64).
pub fn encode_client_quotas(values: &Values) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.u32(values.len() as u32);
    for (key, value) in values.iter() {
        w.str(key);
        w.u64(value.to_bits());
    }
    w.0
}

pub fn decode_client_quotas(value: &[u8]) -> Result<Values, DecodeError> {
    const WHAT: &str = "client quota value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let n = crate::vocab::codec::count(&mut r, 12, WHAT)?;
    let mut values = Values::default();
    for _ in 0..n {
        let key = r.str_u32(WHAT)?.to_owned();
        values.insert(key, f64::from_bits(r.u64(WHAT)?));
    }
    end(&r, WHAT)?;
    Ok(values)
}

/// The key of a SCRAM credential: the mechanism's code, then the user name.
pub fn credential_key(user: &str, mechanism: ScramMechanism) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + user.len());
    k.push(mechanism.code() as u8);
    k.extend_from_slice(user.as_bytes());
    k
}

/// The user and mechanism of a credential key.
pub fn decode_credential_key(key: &[u8]) -> Result<(String, ScramMechanism), DecodeError> {
    let (&code, user) = key
        .split_first()
        .ok_or_else(|| err("credential key: empty"))?;
    let mechanism = ScramMechanism::from_code(code as i8)
        .ok_or_else(|| err(format!("credential key: unknown mechanism {code}")))?;
    let user = std::str::from_utf8(user).map_err(|_| err("credential key: user not UTF-8"))?;
    Ok((user.to_owned(), mechanism))
}

/// A SCRAM credential: version, iterations, salt, stored key, server key.
pub fn encode_credential(c: &ScramCredential) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.u32(c.iterations);
    w.bytes(&c.salt);
    w.bytes(&c.stored_key);
    w.bytes(&c.server_key);
    w.0
}

pub fn decode_credential(value: &[u8]) -> Result<ScramCredential, DecodeError> {
    const WHAT: &str = "credential value";
    let mut r = Reader::new(value);
    let version = r.u8(WHAT)?;
    if version != V1 {
        return Err(err(format!("{WHAT}: unknown format version {version}")));
    }
    let iterations = r.u32(WHAT)?;
    let salt = r.bytes_u32(WHAT)?.to_vec();
    let stored_key = r.bytes_u32(WHAT)?.to_vec();
    let server_key = r.bytes_u32(WHAT)?.to_vec();
    end(&r, WHAT)?;
    Ok(ScramCredential {
        salt,
        stored_key,
        server_key,
        iterations,
    })
}

/// The value of a stored ACL: its format version (the binding is the key).
pub const ACL_VALUE: &[u8] = &[V1];

/// The key of an ACL binding: resource type, pattern type, operation, permission (one byte
/// each), then resource name, principal and host (length-prefixed).
pub fn acl_key(a: &Acl) -> Vec<u8> {
    let mut w = Writer::default();
    for code in [
        a.resource_type.code(),
        a.pattern.code(),
        a.operation.code(),
        a.permission.code(),
    ] {
        w.u8(code as u8);
    }
    w.str(&a.name);
    w.str(&a.principal);
    w.str(&a.host);
    w.0
}

/// The ACL binding of a key; a code this build does not know is an error (the file was
/// written by a newer koord, or is damaged).
pub fn decode_acl_key(key: &[u8]) -> Result<Acl, DecodeError> {
    const WHAT: &str = "acl key";
    let mut r = Reader::new(key);
    let mut code = || r.u8(WHAT).map(|c| c as i8);
    let (rt, pt, op, perm) = (code()?, code()?, code()?, code()?);
    let acl = Acl {
        resource_type: ResourceType::from_code(rt),
        pattern: PatternType::from_code(pt),
        operation: Operation::from_code(op),
        permission: Permission::from_code(perm),
        name: r.str_u32(WHAT)?.to_owned(),
        principal: r.str_u32(WHAT)?.to_owned(),
        host: r.str_u32(WHAT)?.to_owned(),
    };
    end(&r, WHAT)?;
    acl.validate().map_err(|e| err(format!("{WHAT}: {e}")))?;
    Ok(acl)
}

/// The key of one of a group's records: group, kind, record key (a group's records are
/// contiguous, after its offsets' shared prefix).
pub fn group_record_key(group: &str, kind: u8, key: &str) -> Vec<u8> {
    let mut w = Writer::default();
    w.str(group);
    w.u8(kind);
    w.str(key);
    w.0
}

/// The group id, kind and record key of a [`group_record_key`].
pub fn decode_group_record_key(key: &[u8]) -> Result<(&str, u8, &str), DecodeError> {
    const WHAT: &str = "group record key";
    let mut r = Reader::new(key);
    let group = r.str_u32(WHAT)?;
    let kind = r.u8(WHAT)?;
    let record = r.str_u32(WHAT)?;
    end(&r, WHAT)?;
    Ok((group, kind, record))
}

/// The group id and member id of a member key of format 1's per-kind member tables (read
/// once, when such a store is opened and converted).
pub fn decode_member_key_v1(key: &[u8]) -> Result<(&str, &str), DecodeError> {
    const WHAT: &str = "member key";
    let mut r = Reader::new(key);
    let group = r.str_u32(WHAT)?;
    let member = r.str_u32(WHAT)?;
    end(&r, WHAT)?;
    Ok((group, member))
}

/// Transaction values since transaction version 2: V1's fields, then the next producer id of
/// an ending transaction. V1 is still read (no next producer id).
const TXN_V2: u8 = 2;

/// A transactional id's state: ids and epochs, timeout, state, the open transaction's
/// partitions and groups, its start and the last update, the next producer id.
pub fn encode_txn(t: &TxnRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(TXN_V2);
    w.str(&t.transactional_id);
    w.i64(t.producer_id);
    w.i64(t.previous_producer_id);
    w.i32(i32::from(t.producer_epoch));
    w.i32(i32::from(t.last_producer_epoch));
    w.i32(t.timeout_ms);
    w.u8(t.state.code());
    w.u32(t.partitions.len() as u32);
    for p in &t.partitions {
        w.str(&p.topic);
        w.i32(p.partition);
    }
    w.u32(t.groups.len() as u32);
    for g in &t.groups {
        w.str(g);
    }
    w.u64(t.started.as_millis());
    w.u64(t.updated.as_millis());
    w.i64(t.next_producer_id);
    w.0
}

pub fn decode_txn(value: &[u8]) -> Result<TxnRecord, DecodeError> {
    const WHAT: &str = "transaction value";
    let mut r = Reader::new(value);
    let format = r.u8(WHAT)?;
    if format != V1 && format != TXN_V2 {
        return Err(err(format!("{WHAT}: unknown format version {format}")));
    }
    let transactional_id = r.str_u32(WHAT)?.to_owned();
    let producer_id = r.i64(WHAT)?;
    let previous_producer_id = r.i64(WHAT)?;
    let epoch = |v: i32| i16::try_from(v).map_err(|_| err(format!("{WHAT}: epoch {v}")));
    let producer_epoch = epoch(r.i32(WHAT)?)?;
    let last_producer_epoch = epoch(r.i32(WHAT)?)?;
    let timeout_ms = r.i32(WHAT)?;
    let code = r.u8(WHAT)?;
    let state = TxnState::from_code(code).ok_or_else(|| err(format!("{WHAT}: state {code}")))?;
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..r.u32(WHAT)? {
        let topic = r.str_u32(WHAT)?.to_owned();
        let partition = r.i32(WHAT)?;
        partitions.insert(TopicPartition { topic, partition });
    }
    let mut groups = std::collections::BTreeSet::new();
    for _ in 0..r.u32(WHAT)? {
        groups.insert(r.str_u32(WHAT)?.to_owned());
    }
    let started = Timestamp(r.u64(WHAT)?);
    let updated = Timestamp(r.u64(WHAT)?);
    let next_producer_id = if format == TXN_V2 {
        r.i64(WHAT)?
    } else {
        crate::vocab::txn::NO_PRODUCER_ID
    };
    end(&r, WHAT)?;
    Ok(TxnRecord {
        transactional_id,
        producer_id,
        previous_producer_id,
        producer_epoch,
        last_producer_epoch,
        next_producer_id,
        timeout_ms,
        state,
        partitions,
        groups,
        started,
        updated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let o = OffsetAndMetadata {
            offset: 42,
            leader_epoch: Some(3),
            metadata: "meta".into(),
            commit_timestamp: Timestamp(9),
            expire_timestamp: Some(Timestamp(10)),
        };
        assert_eq!(decode_offset(&encode_offset(&o)).unwrap(), o);
        let o = OffsetAndMetadata {
            leader_epoch: None,
            expire_timestamp: None,
            ..o
        };
        assert_eq!(decode_offset(&encode_offset(&o)).unwrap(), o);
        let configs: TopicConfigs = [("retention.ms".to_string(), "1000".to_string())].into();
        let topic = Topic {
            name: "t".into(),
            id: Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
            partitions: 12,
        };
        assert_eq!(
            decode_topic("t", &encode_topic(&topic, &configs)).unwrap(),
            (topic.clone(), configs.clone())
        );
        // Records written before topic ids still load, with the id koord derived then.
        let before_ids = |partitions| Topic {
            name: "t".into(),
            id: name_based_id("t"),
            partitions,
        };
        assert_eq!(
            decode_topic("t", &encode_topic_v2(12, &configs)).unwrap(),
            (before_ids(12), configs)
        );
        // A V1 record, written before topic configs: no configs either.
        assert_eq!(
            decode_topic("t", &encode_topic_v1(7)).unwrap(),
            (before_ids(7), TopicConfigs::new())
        );
    }

    #[test]
    fn transaction_values_round_trip_and_v1_still_loads() {
        let t = TxnRecord {
            transactional_id: "tx".into(),
            producer_id: 7,
            previous_producer_id: 6,
            producer_epoch: 32767,
            last_producer_epoch: 32766,
            next_producer_id: 8,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [TopicPartition::new("t", 1)].into(),
            groups: ["g".to_string()].into(),
            started: Timestamp(5),
            updated: Timestamp(6),
        };
        let bytes = encode_txn(&t);
        assert_eq!(decode_txn(&bytes).unwrap(), t);
        // V1, written before transaction version 2: no next producer id.
        let mut v1 = bytes[..bytes.len() - 8].to_vec();
        v1[0] = V1;
        let expected = TxnRecord {
            next_producer_id: crate::vocab::txn::NO_PRODUCER_ID,
            ..t
        };
        assert_eq!(decode_txn(&v1).unwrap(), expected);
        for n in 0..bytes.len() {
            assert!(decode_txn(&bytes[..n]).is_err(), "{n}");
        }
        let mut v3 = bytes.clone();
        v3[0] = 3;
        assert!(decode_txn(&v3).is_err());
    }

    #[test]
    fn every_truncation_and_garbage_is_an_error_not_a_panic() {
        assert!(decode_offset(&[2]).is_err());
        assert!(decode_offset_key(&[0, 0, 0, 9, 1]).is_err());
        let key = group_record_key("g", b'k', "m");
        assert_eq!(decode_group_record_key(&key), Ok(("g", b'k', "m")));
        for n in 0..key.len() {
            assert!(decode_group_record_key(&key[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn offset_keys_sort_by_group_topic_partition_and_round_trip() {
        let tp = |t: &str, p| TopicPartition::new(t, p);
        let keys = [
            offset_key("g", &tp("a", -1)),
            offset_key("g", &tp("a", 0)),
            offset_key("g", &tp("a", 10)),
            offset_key("g", &tp("b", 0)),
        ];
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert!(keys.iter().all(|k| k.starts_with(&group_prefix("g"))));
        assert!(!offset_key("gg", &tp("a", 0)).starts_with(&group_prefix("g")));
        assert_eq!(decode_offset_key(&keys[2]).unwrap(), ("g", tp("a", 10)));
    }

    #[test]
    fn errors_name_the_value_and_what_is_wrong() {
        fn msg<T>(r: Result<T, DecodeError>) -> Option<String> {
            r.err().map(|e| e.0)
        }
        assert_eq!(
            msg(decode_offset(&[V1, 0, 0])),
            Some("offset value is truncated (needs 8 more bytes, has 2)".into())
        );
        assert_eq!(
            msg(decode_offset_key(&[0, 0, 0, 1, 0xff])),
            Some("offset key: a string is not UTF-8".into())
        );
        assert_eq!(
            msg(decode_topic("t", &[9])),
            Some("topic value: unknown format version 9".into())
        );
        assert_eq!(
            msg(decode_topic("t", &[V1, 0, 0, 0, 1, 0])),
            Some("topic value: 1 trailing bytes".into())
        );
        let mut nil_id = vec![TOPIC_V3, 0, 0, 0, 1];
        nil_id.extend([0; 20]);
        assert_eq!(
            msg(decode_topic("t", &nil_id)),
            Some("topic value: the nil topic id".into())
        );
    }
}
