//! The byte layout of stored keys and values. Every value starts with a format version byte;
//! decoding checks every length against what is left, so a damaged value is an error that names
//! what is wrong, never a panic or an unchecked allocation.

use bytes::Bytes;

use crate::metadata::topic_config::TopicConfigs;
use crate::security::acl::{Acl, Operation, PatternType, Permission, ResourceType};
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::vocab::reader::{ReadError, Reader};
use crate::vocab::streams::{
    CopartitionGroup, Endpoint, StreamsGroupRecord, StreamsMember, StreamsMemberState, Subtopology,
    TaskId, TaskSet, TopicInfo, Topology,
};
use crate::vocab::{
    ClassicMemberMetadata, ConsumerGroupRecord, ConsumerMember, ConsumerMemberState, Generation,
    GroupMetadataRecord, InstanceId, MemberId, MemberRecord, Partitions, Protocol, Timestamp,
    TopicId,
};
use crate::vocab::{OffsetAndMetadata, TopicPartition, TxnRecord, TxnState};

/// The version byte every value starts with.
const V1: u8 = 1;
/// Group values since the learner assignor: V1's fields, then the server assignor's state and
/// follow-up. V1 group values are still read (no state, no follow-up).
const GROUP_V2: u8 = 2;
/// Topic values since topic configs: V1's partition count, then the configs. V1 is still read.
const TOPIC_V2: u8 = 2;

/// Why a stored key or value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

fn err(what: impl Into<String>) -> DecodeError {
    DecodeError(what.into())
}

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        // Kafka strings and byte fields are far below 4 GiB (request frames are capped).
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
        }
    }
}

/// The store's own messages, naming the value (each decoder's `what`) rather than the field.
impl From<ReadError> for DecodeError {
    fn from(e: ReadError) -> DecodeError {
        match e {
            ReadError::Short { what, needed, left } => err(format!(
                "{what} is truncated (needs {needed} more bytes, has {left})"
            )),
            ReadError::NotUtf8 { what } => err(format!("{what}: a string is not UTF-8")),
            ReadError::NegativeLength { what, len } => {
                err(format!("{what}: negative length {len}"))
            }
        }
    }
}

fn opt_str(r: &mut Reader, what: &'static str) -> Result<Option<String>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.str_u32(what)?.to_owned())),
        t => Err(err(format!("{what}: bad option tag {t}"))),
    }
}

fn version(r: &mut Reader, what: &'static str) -> Result<(), DecodeError> {
    match r.u8(what)? {
        V1 => Ok(()),
        v => Err(err(format!("{what}: unknown format version {v}"))),
    }
}

fn end(r: &Reader, what: &'static str) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(err(format!("{what}: {} trailing bytes", r.remaining())))
    }
}

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

pub fn encode_group(g: &GroupMetadataRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(GROUP_V2);
    w.opt_str(g.protocol_type.as_deref());
    w.i32(g.generation.0);
    w.opt_str(g.protocol_name.as_deref());
    w.opt_str(g.leader.as_ref().map(|l| l.as_str()));
    w.u64(g.state_timestamp.as_millis());
    w.u32(g.members.len() as u32);
    for m in &g.members {
        w.str(m.member_id.as_str());
        w.opt_str(m.instance_id.as_ref().map(|i| i.as_str()));
        w.str(&m.client_id);
        w.str(&m.client_host);
        w.u64(m.rebalance_timeout_ms);
        w.u64(m.session_timeout_ms);
        w.bytes(&m.subscription);
        w.bytes(&m.assignment);
    }
    w.bytes(&g.assignor_state);
    match g.follow_up {
        Some(at) => {
            w.u8(1);
            w.u64(at.as_millis());
        }
        None => w.u8(0),
    }
    w.0
}

pub fn decode_group(value: &[u8]) -> Result<GroupMetadataRecord, DecodeError> {
    const WHAT: &str = "group value";
    let mut r = Reader::new(value);
    let version = r.u8(WHAT)?;
    if version != V1 && version != GROUP_V2 {
        return Err(err(format!("{WHAT}: unknown format version {version}")));
    }
    let protocol_type = opt_str(&mut r, WHAT)?;
    let generation = Generation(r.i32(WHAT)?);
    let protocol_name = opt_str(&mut r, WHAT)?;
    let leader = opt_str(&mut r, WHAT)?.map(MemberId::new);
    let state_timestamp = Timestamp(r.u64(WHAT)?);
    let count = r.u32(WHAT)? as usize;
    // Each member takes at least 40 bytes: a count beyond that is damage, not a reason to
    // reserve memory.
    let mut members = Vec::with_capacity(count.min(r.remaining() / 40));
    for _ in 0..count {
        members.push(MemberRecord {
            member_id: MemberId::new(r.str_u32(WHAT)?),
            instance_id: opt_str(&mut r, WHAT)?.map(InstanceId::new),
            client_id: r.str_u32(WHAT)?.to_owned(),
            client_host: r.str_u32(WHAT)?.to_owned(),
            rebalance_timeout_ms: r.u64(WHAT)?,
            session_timeout_ms: r.u64(WHAT)?,
            subscription: Bytes::copy_from_slice(r.bytes_u32(WHAT)?),
            assignment: Bytes::copy_from_slice(r.bytes_u32(WHAT)?),
        });
    }
    let (assignor_state, follow_up) = if version == GROUP_V2 {
        let state = Bytes::copy_from_slice(r.bytes_u32(WHAT)?);
        let follow_up = match r.u8(WHAT)? {
            0 => None,
            1 => Some(Timestamp(r.u64(WHAT)?)),
            t => return Err(err(format!("{WHAT}: bad option tag {t}"))),
        };
        (state, follow_up)
    } else {
        (Bytes::new(), None)
    };
    end(&r, WHAT)?;
    Ok(GroupMetadataRecord {
        protocol_type,
        generation,
        protocol_name,
        leader,
        state_timestamp,
        members,
        assignor_state,
        follow_up,
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

/// Topic values since topic configs: V1's partition count, then the explicitly set configs.
pub fn encode_topic(partitions: i32, configs: &TopicConfigs) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(TOPIC_V2);
    w.i32(partitions);
    w.u32(configs.len() as u32);
    for (name, value) in configs {
        w.str(name);
        w.str(value);
    }
    w.0
}

/// The partition count and configs of a topic value (V1: no configs).
pub fn decode_topic(value: &[u8]) -> Result<(i32, TopicConfigs), DecodeError> {
    const WHAT: &str = "topic value";
    let mut r = Reader::new(value);
    let version = r.u8(WHAT)?;
    if version != V1 && version != TOPIC_V2 {
        return Err(err(format!("{WHAT}: unknown format version {version}")));
    }
    let n = r.i32(WHAT)?;
    let mut configs = TopicConfigs::new();
    if version == TOPIC_V2 {
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
    Ok((n, configs))
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

/// The key of one consumer-group member: group, member id (a group's members are contiguous).
pub fn consumer_member_key(group: &str, member: &str) -> Vec<u8> {
    let mut w = Writer::default();
    w.str(group);
    w.str(member);
    w.0
}

/// The group id and member id of a consumer-group member key.
pub fn decode_consumer_member_key(key: &[u8]) -> Result<(&str, &str), DecodeError> {
    const WHAT: &str = "consumer member key";
    let mut r = Reader::new(key);
    let group = r.str_u32(WHAT)?;
    let member = r.str_u32(WHAT)?;
    end(&r, WHAT)?;
    Ok((group, member))
}

// ---------------------------------------------------------------------------------------------
// Streams groups (KIP-1071): the group record by group id, each member's by group and member id
// (the consumer member key layout).
// ---------------------------------------------------------------------------------------------

impl Writer {
    fn tasks(&mut self, tasks: &std::collections::BTreeSet<TaskId>) {
        self.u32(tasks.len() as u32);
        for t in tasks {
            self.str(&t.subtopology);
            self.i32(t.partition);
        }
    }
    fn task_set(&mut self, s: &TaskSet) {
        self.tasks(&s.active);
        self.tasks(&s.standby);
        self.tasks(&s.warmup);
    }
    fn task_offsets(&mut self, offsets: &std::collections::BTreeMap<TaskId, i64>) {
        self.u32(offsets.len() as u32);
        for (t, o) in offsets {
            self.str(&t.subtopology);
            self.i32(t.partition);
            self.i64(*o);
        }
    }
    fn pairs(&mut self, pairs: &[(String, String)]) {
        self.u32(pairs.len() as u32);
        for (k, v) in pairs {
            self.str(k);
            self.str(v);
        }
    }
    fn topic_infos(&mut self, topics: &[TopicInfo]) {
        self.u32(topics.len() as u32);
        for t in topics {
            self.str(&t.name);
            self.i32(t.partitions);
            self.i32(i32::from(t.replication_factor));
            self.pairs(&t.configs);
        }
    }
}

/// A count of items each at least `min` bytes long, checked against what is left.
fn count(r: &mut Reader, min: usize, what: &'static str) -> Result<usize, DecodeError> {
    let n = r.u32(what)? as usize;
    if n > r.remaining() / min.max(1) {
        return Err(err(format!("{what}: {n} items in {} bytes", r.remaining())));
    }
    Ok(n)
}

fn tasks(
    r: &mut Reader,
    what: &'static str,
) -> Result<std::collections::BTreeSet<TaskId>, DecodeError> {
    let n = count(r, 8, what)?;
    let mut out = std::collections::BTreeSet::new();
    for _ in 0..n {
        let subtopology = r.str_u32(what)?.to_owned();
        out.insert(TaskId::new(subtopology, r.i32(what)?));
    }
    Ok(out)
}

fn task_set(r: &mut Reader, what: &'static str) -> Result<TaskSet, DecodeError> {
    Ok(TaskSet {
        active: tasks(r, what)?,
        standby: tasks(r, what)?,
        warmup: tasks(r, what)?,
    })
}

fn task_offsets(
    r: &mut Reader,
    what: &'static str,
) -> Result<std::collections::BTreeMap<TaskId, i64>, DecodeError> {
    let n = count(r, 16, what)?;
    let mut out = std::collections::BTreeMap::new();
    for _ in 0..n {
        let subtopology = r.str_u32(what)?.to_owned();
        let partition = r.i32(what)?;
        out.insert(TaskId::new(subtopology, partition), r.i64(what)?);
    }
    Ok(out)
}

fn pairs(r: &mut Reader, what: &'static str) -> Result<Vec<(String, String)>, DecodeError> {
    let n = count(r, 8, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.str_u32(what)?.to_owned();
        out.push((k, r.str_u32(what)?.to_owned()));
    }
    Ok(out)
}

fn strings(r: &mut Reader, what: &'static str) -> Result<Vec<String>, DecodeError> {
    let n = count(r, 4, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.str_u32(what)?.to_owned());
    }
    Ok(out)
}

fn topic_infos(r: &mut Reader, what: &'static str) -> Result<Vec<TopicInfo>, DecodeError> {
    let n = count(r, 16, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str_u32(what)?.to_owned();
        let partitions = r.i32(what)?;
        let replication_factor = i16::try_from(r.i32(what)?)
            .map_err(|_| err(format!("{what}: bad replication factor")))?;
        out.push(TopicInfo {
            name,
            partitions,
            replication_factor,
            configs: pairs(r, what)?,
        });
    }
    Ok(out)
}

pub fn encode_streams_group(g: &StreamsGroupRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.i32(g.group_epoch);
    w.i32(g.assignment_epoch);
    w.u64(g.metadata_hash);
    match &g.topology {
        None => w.u8(0),
        Some(t) => {
            w.u8(1);
            w.i32(t.epoch);
            w.u32(t.subtopologies.len() as u32);
            for s in &t.subtopologies {
                w.str(&s.id);
                w.u32(s.source_topics.len() as u32);
                for n in &s.source_topics {
                    w.str(n);
                }
                w.u32(s.repartition_sink_topics.len() as u32);
                for n in &s.repartition_sink_topics {
                    w.str(n);
                }
                w.topic_infos(&s.repartition_source_topics);
                w.topic_infos(&s.changelog_topics);
                w.u32(s.copartition_groups.len() as u32);
                for c in &s.copartition_groups {
                    for list in [&c.source_topics, &c.repartition_source_topics] {
                        w.u32(list.len() as u32);
                        for &i in list {
                            w.i32(i32::from(i));
                        }
                    }
                }
            }
        }
    }
    w.0
}

fn indexes(r: &mut Reader, what: &'static str) -> Result<Vec<i16>, DecodeError> {
    let n = count(r, 4, what)?;
    (0..n)
        .map(|_| i16::try_from(r.i32(what)?).map_err(|_| err(format!("{what}: bad topic index"))))
        .collect()
}

pub fn decode_streams_group(value: &[u8]) -> Result<StreamsGroupRecord, DecodeError> {
    const WHAT: &str = "streams group value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let group_epoch = r.i32(WHAT)?;
    let assignment_epoch = r.i32(WHAT)?;
    let metadata_hash = r.u64(WHAT)?;
    let topology = match r.u8(WHAT)? {
        0 => None,
        1 => {
            let epoch = r.i32(WHAT)?;
            let n = count(&mut r, 24, WHAT)?;
            let mut subtopologies = Vec::with_capacity(n);
            for _ in 0..n {
                let id = r.str_u32(WHAT)?.to_owned();
                let source_topics = strings(&mut r, WHAT)?;
                let repartition_sink_topics = strings(&mut r, WHAT)?;
                let repartition_source_topics = topic_infos(&mut r, WHAT)?;
                let changelog_topics = topic_infos(&mut r, WHAT)?;
                let groups = count(&mut r, 8, WHAT)?;
                let mut copartition_groups = Vec::with_capacity(groups);
                for _ in 0..groups {
                    copartition_groups.push(CopartitionGroup {
                        source_topics: indexes(&mut r, WHAT)?,
                        repartition_source_topics: indexes(&mut r, WHAT)?,
                    });
                }
                subtopologies.push(Subtopology {
                    id,
                    source_topics,
                    repartition_sink_topics,
                    repartition_source_topics,
                    changelog_topics,
                    copartition_groups,
                });
            }
            Some(Topology {
                epoch,
                subtopologies,
            })
        }
        t => return Err(err(format!("{WHAT}: bad option tag {t}"))),
    };
    end(&r, WHAT)?;
    Ok(StreamsGroupRecord {
        group_epoch,
        assignment_epoch,
        metadata_hash,
        topology,
    })
}

pub fn encode_streams_member(m: &StreamsMember) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.str(m.member_id.as_str());
    w.i32(m.member_epoch);
    w.i32(m.previous_member_epoch);
    w.u8(m.state.code());
    w.opt_str(m.instance_id.as_ref().map(|i| i.as_str()));
    w.opt_str(m.rack_id.as_deref());
    w.str(&m.client_id);
    w.str(&m.client_host);
    w.i32(m.rebalance_timeout_ms);
    w.i32(m.topology_epoch);
    w.str(&m.process_id);
    match &m.user_endpoint {
        None => w.u8(0),
        Some(e) => {
            w.u8(1);
            w.str(&e.host);
            w.u32(u32::from(e.port));
        }
    }
    w.pairs(&m.client_tags);
    w.task_offsets(&m.task_offsets);
    w.task_offsets(&m.task_end_offsets);
    w.task_set(&m.assigned);
    w.task_set(&m.pending_revocation);
    w.task_set(&m.target);
    w.0
}

pub fn decode_streams_member(value: &[u8]) -> Result<StreamsMember, DecodeError> {
    const WHAT: &str = "streams member value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let member_id = MemberId::new(r.str_u32(WHAT)?);
    let member_epoch = r.i32(WHAT)?;
    let previous_member_epoch = r.i32(WHAT)?;
    let code = r.u8(WHAT)?;
    let state = StreamsMemberState::from_code(code)
        .ok_or_else(|| err(format!("{WHAT}: unknown member state {code}")))?;
    let instance_id = opt_str(&mut r, WHAT)?.map(InstanceId::new);
    let rack_id = opt_str(&mut r, WHAT)?;
    let client_id = r.str_u32(WHAT)?.to_owned();
    let client_host = r.str_u32(WHAT)?.to_owned();
    let rebalance_timeout_ms = r.i32(WHAT)?;
    let topology_epoch = r.i32(WHAT)?;
    let process_id = r.str_u32(WHAT)?.to_owned();
    let user_endpoint = match r.u8(WHAT)? {
        0 => None,
        1 => {
            let host = r.str_u32(WHAT)?.to_owned();
            let port = u16::try_from(r.u32(WHAT)?).map_err(|_| err(format!("{WHAT}: bad port")))?;
            Some(Endpoint { host, port })
        }
        t => return Err(err(format!("{WHAT}: bad option tag {t}"))),
    };
    let client_tags = pairs(&mut r, WHAT)?;
    let offsets = task_offsets(&mut r, WHAT)?;
    let end_offsets = task_offsets(&mut r, WHAT)?;
    let assigned = task_set(&mut r, WHAT)?;
    let pending_revocation = task_set(&mut r, WHAT)?;
    let target = task_set(&mut r, WHAT)?;
    end(&r, WHAT)?;
    Ok(StreamsMember {
        member_id,
        member_epoch,
        previous_member_epoch,
        state,
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        topology_epoch,
        process_id,
        user_endpoint,
        client_tags,
        task_offsets: offsets,
        task_end_offsets: end_offsets,
        assigned,
        pending_revocation,
        target,
    })
}

pub fn encode_consumer_group(g: &ConsumerGroupRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.i32(g.group_epoch);
    w.i32(g.assignment_epoch);
    w.u64(g.metadata_hash);
    w.bytes(&g.assignor_state);
    w.0
}

pub fn decode_consumer_group(value: &[u8]) -> Result<ConsumerGroupRecord, DecodeError> {
    const WHAT: &str = "consumer group value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let record = ConsumerGroupRecord {
        group_epoch: r.i32(WHAT)?,
        assignment_epoch: r.i32(WHAT)?,
        metadata_hash: r.u64(WHAT)?,
        assignor_state: Bytes::copy_from_slice(r.bytes_u32(WHAT)?),
    };
    end(&r, WHAT)?;
    Ok(record)
}

impl Writer {
    fn partitions(&mut self, p: &Partitions) {
        self.u32(p.len() as u32);
        for (topic, parts) in p {
            self.0.extend_from_slice(topic.as_bytes());
            self.u32(parts.len() as u32);
            for &part in parts {
                self.i32(part);
            }
        }
    }
}

fn partitions(r: &mut Reader, what: &'static str) -> Result<Partitions, DecodeError> {
    let topics = r.u32(what)?;
    let mut out = Partitions::new();
    for _ in 0..topics {
        let id: [u8; 16] = r
            .take(16, what)?
            .try_into()
            .map_err(|_| err(format!("{what}: bad topic id")))?;
        let count = r.u32(what)? as usize;
        // Each partition takes 4 bytes: a count beyond what is left is damage.
        if count > r.remaining() / 4 {
            return Err(err(format!(
                "{what}: {count} partitions in {} bytes",
                r.remaining()
            )));
        }
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            parts.push(r.i32(what)?);
        }
        out.insert(TopicId::from_bytes(id), parts);
    }
    Ok(out)
}

pub fn encode_consumer_member(m: &ConsumerMember) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.str(m.member_id.as_str());
    w.opt_str(m.instance_id.as_ref().map(|i| i.as_str()));
    w.opt_str(m.rack_id.as_deref());
    w.str(&m.client_id);
    w.str(&m.client_host);
    w.i32(m.rebalance_timeout_ms);
    w.u32(m.subscribed_topic_names.len() as u32);
    for name in &m.subscribed_topic_names {
        w.str(name);
    }
    w.opt_str(m.subscribed_topic_regex.as_deref());
    w.opt_str(m.server_assignor.as_deref());
    w.i32(m.member_epoch);
    w.i32(m.previous_member_epoch);
    w.u8(m.state.code());
    w.partitions(&m.assigned);
    w.partitions(&m.pending_revocation);
    w.partitions(&m.target);
    // Appended later: a record written before it ends here (a consumer-protocol member).
    if let Some(classic) = &m.classic {
        w.u64(classic.session_timeout_ms);
        w.u32(classic.protocols.len() as u32);
        for p in &classic.protocols {
            w.str(&p.name);
            w.bytes(&p.metadata);
        }
    }
    w.0
}

pub fn decode_consumer_member(value: &[u8]) -> Result<ConsumerMember, DecodeError> {
    const WHAT: &str = "consumer member value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let member_id = MemberId::new(r.str_u32(WHAT)?);
    let instance_id = opt_str(&mut r, WHAT)?.map(InstanceId::new);
    let rack_id = opt_str(&mut r, WHAT)?;
    let client_id = r.str_u32(WHAT)?.to_owned();
    let client_host = r.str_u32(WHAT)?.to_owned();
    let rebalance_timeout_ms = r.i32(WHAT)?;
    let names = r.u32(WHAT)? as usize;
    // Each name takes at least its 4-byte length.
    let mut subscribed_topic_names = Vec::with_capacity(names.min(r.remaining() / 4));
    for _ in 0..names {
        subscribed_topic_names.push(r.str_u32(WHAT)?.to_owned());
    }
    let subscribed_topic_regex = opt_str(&mut r, WHAT)?;
    let server_assignor = opt_str(&mut r, WHAT)?;
    let member_epoch = r.i32(WHAT)?;
    let previous_member_epoch = r.i32(WHAT)?;
    let code = r.u8(WHAT)?;
    let state = ConsumerMemberState::from_code(code)
        .ok_or_else(|| err(format!("{WHAT}: unknown member state {code}")))?;
    let assigned = partitions(&mut r, WHAT)?;
    let pending_revocation = partitions(&mut r, WHAT)?;
    let target = partitions(&mut r, WHAT)?;
    let classic = if r.remaining() == 0 {
        None
    } else {
        let session_timeout_ms = r.u64(WHAT)?;
        let count = r.u32(WHAT)? as usize;
        // Each protocol takes at least its two 4-byte lengths.
        let mut protocols = Vec::with_capacity(count.min(r.remaining() / 8));
        for _ in 0..count {
            let name = r.str_u32(WHAT)?.to_owned();
            let metadata = Bytes::copy_from_slice(r.bytes_u32(WHAT)?);
            protocols.push(Protocol::new(name, metadata));
        }
        Some(ClassicMemberMetadata {
            session_timeout_ms,
            protocols,
        })
    };
    end(&r, WHAT)?;
    Ok(ConsumerMember {
        member_id,
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        subscribed_topic_names,
        subscribed_topic_regex,
        server_assignor,
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
        target,
        classic,
    })
}

/// A transactional id's state: ids and epochs, timeout, state, the open transaction's
/// partitions and groups, its start and the last update.
pub fn encode_txn(t: &TxnRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
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
    w.0
}

pub fn decode_txn(value: &[u8]) -> Result<TxnRecord, DecodeError> {
    const WHAT: &str = "transaction value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
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
    end(&r, WHAT)?;
    Ok(TxnRecord {
        transactional_id,
        producer_id,
        previous_producer_id,
        producer_epoch,
        last_producer_epoch,
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

    fn group() -> GroupMetadataRecord {
        GroupMetadataRecord {
            protocol_type: Some("consumer".into()),
            generation: Generation(7),
            protocol_name: Some("range".into()),
            leader: Some(MemberId::new("m1")),
            state_timestamp: Timestamp(123),
            members: vec![MemberRecord {
                member_id: MemberId::new("m1"),
                instance_id: Some(InstanceId::new("i1")),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 60_000,
                session_timeout_ms: 10_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
            assignor_state: Bytes::from_static(b"learner state"),
            follow_up: Some(Timestamp(456)),
        }
    }

    #[test]
    fn values_round_trip() {
        let g = group();
        assert_eq!(decode_group(&encode_group(&g)).unwrap(), g);
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
        assert_eq!(
            decode_topic(&encode_topic(12, &configs)).unwrap(),
            (12, configs)
        );
        // A V1 record, written before topic configs, still loads: no configs.
        assert_eq!(
            decode_topic(&encode_topic_v1(7)).unwrap(),
            (7, TopicConfigs::new())
        );
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
    fn every_truncation_and_garbage_is_an_error_not_a_panic() {
        let value = encode_group(&group());
        for n in 0..value.len() {
            assert!(decode_group(&value[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut huge = vec![V1, 0, 0, 0, 0, 0];
        huge.extend_from_slice(&[0; 10]);
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_group(&huge).is_err());
        assert!(decode_offset(&[2]).is_err());
        assert!(decode_offset_key(&[0, 0, 0, 9, 1]).is_err());
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
            msg(decode_topic(&[9])),
            Some("topic value: unknown format version 9".into())
        );
        assert_eq!(
            msg(decode_topic(&[V1, 0, 0, 0, 1, 0])),
            Some("topic value: 1 trailing bytes".into())
        );
    }

    #[test]
    fn consumer_records_round_trip_and_every_truncation_is_an_error() {
        let topic = TopicId::from_u128(7);
        let member = ConsumerMember {
            instance_id: Some(InstanceId::new("i")),
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: Some("x.*".into()),
            server_assignor: Some("range".into()),
            member_epoch: 4,
            previous_member_epoch: 3,
            state: ConsumerMemberState::UnrevokedPartitions,
            assigned: [(topic, vec![0, 2])].into_iter().collect(),
            pending_revocation: [(topic, vec![1])].into_iter().collect(),
            target: [(topic, vec![0])].into_iter().collect(),
            ..ConsumerMember::new(MemberId::new("m"))
        };
        let bytes = encode_consumer_member(&member);
        assert_eq!(decode_consumer_member(&bytes), Ok(member));
        for n in 0..bytes.len() {
            assert!(decode_consumer_member(&bytes[..n]).is_err(), "{n}");
        }
        let group = ConsumerGroupRecord {
            group_epoch: 5,
            assignment_epoch: 4,
            metadata_hash: 99,
            assignor_state: Bytes::from_static(b"state"),
        };
        let bytes = encode_consumer_group(&group);
        assert_eq!(decode_consumer_group(&bytes), Ok(group));
        for n in 0..bytes.len() {
            assert!(decode_consumer_group(&bytes[..n]).is_err(), "{n}");
        }
        let key = consumer_member_key("g", "m");
        assert_eq!(decode_consumer_member_key(&key), Ok(("g", "m")));
    }

    #[test]
    fn a_classic_protocol_member_round_trips_and_is_read_without_its_trailer_as_before() {
        let plain = ConsumerMember {
            target: [(TopicId::from_u128(7), vec![0])].into_iter().collect(),
            ..ConsumerMember::new(MemberId::new("m"))
        };
        let classic = ConsumerMember {
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                protocols: vec![
                    Protocol::new("cooperative-sticky", Bytes::from_static(b"\0\x03sub")),
                    Protocol::new("range", Bytes::new()),
                ],
            }),
            ..plain.clone()
        };
        let bytes = encode_consumer_member(&classic);
        assert_eq!(decode_consumer_member(&bytes), Ok(classic));
        // A record written before classic members existed is a consumer-protocol member.
        let old = encode_consumer_member(&plain);
        assert_eq!(&bytes[..old.len()], &old[..]);
        assert_eq!(decode_consumer_member(&old), Ok(plain));
        for n in (0..bytes.len()).filter(|&n| n != old.len()) {
            assert!(decode_consumer_member(&bytes[..n]).is_err(), "{n}");
        }
    }
}
