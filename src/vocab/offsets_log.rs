//! Kafka's `__consumer_offsets` record format (Kafka 4.4's group coordinator records), for the
//! topic standalone koord serves beside its own store (`crate::offsets_topic`).
//!
//! A key is the record type (`CoordinatorRecordType`) as an int16, then the key's fields at key
//! version 0; a value is its version, then its fields; a tombstone has no value. koord writes
//! what Kafka 4.4's `GroupCoordinatorRecordHelpers` writes:
//! - an offset commit: `OffsetCommitKey` (type 1: group, topic, partition) and `OffsetCommitValue`
//!   version 4 (flexible: offset, leader epoch, compact metadata, commit timestamp, no tagged
//!   fields), or version 1 when the commit carried an expire timestamp (OffsetCommit v2-4);
//! - a classic group: `GroupMetadataKey` (type 2: group) and `GroupMetadataValue` version 3
//!   (protocol type, generation, protocol, leader, current state timestamp, the members with
//!   their subscription for the group's protocol and their assignment).
//!
//! And `__transaction_state`'s, as Kafka 4.4's `TransactionLog` writes it with transaction
//! version 2 finalized: `TransactionLogKey` (type 0: transactional id) and `TransactionLogValue`
//! version 1 (flexible: producer id and epoch, timeout, state, the transaction's partitions by
//! topic, last update and start timestamps; tagged previous and next producer id).

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use super::txn::{TxnRecord, TxnState, NO_PRODUCER_ID};
use super::{partition_of, GroupMetadataRecord, OffsetAndMetadata};

/// `CoordinatorRecordType.OFFSET_COMMIT`.
pub const OFFSET_COMMIT: i16 = 1;
/// `CoordinatorRecordType.GROUP_METADATA`.
pub const GROUP_METADATA: i16 = 2;

/// A Kafka STRING: int16 length, then UTF-8 (longer strings are cut at what the length holds,
/// which Kafka's own limits never reach).
fn string(buf: &mut BytesMut, s: &str) {
    let len = s.len().min(i16::MAX as usize);
    buf.put_i16(len as i16);
    buf.put_slice(&s.as_bytes()[..len]);
}

/// A nullable Kafka STRING: length -1 for null.
fn nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => string(buf, s),
        None => buf.put_i16(-1),
    }
}

/// A Kafka BYTES: int32 length, then the bytes.
fn bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
    buf.put_slice(b);
}

fn unsigned_varint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// The key of `group`'s committed offset of `topic`-`partition`.
pub fn offset_commit_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(10 + group.len() + topic.len());
    buf.put_i16(OFFSET_COMMIT);
    string(&mut buf, group);
    string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

/// The value of a committed offset.
pub fn offset_commit_value(offset: &OffsetAndMetadata) -> Bytes {
    let mut buf = BytesMut::with_capacity(32 + offset.metadata.len());
    let leader_epoch = offset.leader_epoch.unwrap_or(-1);
    let commit_timestamp = offset.commit_timestamp.as_millis() as i64;
    match offset.expire_timestamp {
        Some(expire) => {
            buf.put_i16(1);
            buf.put_i64(offset.offset);
            string(&mut buf, &offset.metadata);
            buf.put_i64(commit_timestamp);
            buf.put_i64(expire.as_millis() as i64);
        }
        None => {
            buf.put_i16(4);
            buf.put_i64(offset.offset);
            buf.put_i32(leader_epoch);
            // COMPACT_STRING: unsigned varint length + 1.
            unsigned_varint(&mut buf, offset.metadata.len() as u32 + 1);
            buf.put_slice(offset.metadata.as_bytes());
            buf.put_i64(commit_timestamp);
            // No tagged fields.
            unsigned_varint(&mut buf, 0);
        }
    }
    buf.freeze()
}

/// The key of `group`'s metadata record.
pub fn group_metadata_key(group: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + group.len());
    buf.put_i16(GROUP_METADATA);
    string(&mut buf, group);
    buf.freeze()
}

/// The value of a classic group's metadata record.
pub fn group_metadata_value(group: &GroupMetadataRecord) -> Bytes {
    let size: usize = group
        .members
        .iter()
        .map(|m| 40 + m.member_id.as_str().len() + m.subscription.len() + m.assignment.len())
        .sum();
    let mut buf = BytesMut::with_capacity(64 + size);
    buf.put_i16(3);
    string(&mut buf, group.protocol_type.as_deref().unwrap_or_default());
    buf.put_i32(group.generation.0);
    nullable_string(&mut buf, group.protocol_name.as_deref());
    nullable_string(&mut buf, group.leader.as_ref().map(|l| l.as_str()));
    buf.put_i64(group.state_timestamp.as_millis() as i64);
    buf.put_i32(i32::try_from(group.members.len()).unwrap_or(i32::MAX));
    for m in &group.members {
        string(&mut buf, m.member_id.as_str());
        nullable_string(&mut buf, m.instance_id.as_ref().map(|i| i.as_str()));
        string(&mut buf, &m.client_id);
        string(&mut buf, &m.client_host);
        buf.put_i32(i32::try_from(m.rebalance_timeout_ms).unwrap_or(i32::MAX));
        buf.put_i32(i32::try_from(m.session_timeout_ms).unwrap_or(i32::MAX));
        bytes(&mut buf, &m.subscription);
        bytes(&mut buf, &m.assignment);
    }
    buf.freeze()
}

/// `CoordinatorRecordType.TRANSACTION_LOG`.
pub const TRANSACTION_LOG: i16 = 0;

/// A COMPACT_STRING: unsigned varint length + 1, then UTF-8.
fn compact_string(buf: &mut BytesMut, s: &str) {
    unsigned_varint(buf, u32::try_from(s.len() + 1).unwrap_or(u32::MAX));
    buf.put_slice(s.as_bytes());
}

/// The key of a transactional id's record.
pub fn transaction_log_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(TRANSACTION_LOG);
    string(&mut buf, transactional_id);
    buf.freeze()
}

/// The value of a transactional id's record. The groups of the transaction (AddOffsetsToTxn,
/// TxnOffsetCommit v5) are listed as Kafka lists them: their `__consumer_offsets` partitions,
/// of `offsets_partitions`. The client's transaction version is not kept by koord (Kafka's
/// tagged field is left out: version 0, as Kafka reads an older record).
pub fn transaction_log_value(txn: &TxnRecord, offsets_partitions: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(64 + 16 * txn.partitions.len());
    buf.put_i16(1);
    buf.put_i64(txn.producer_id);
    buf.put_i16(txn.producer_epoch);
    buf.put_i32(txn.timeout_ms);
    buf.put_i8(txn.state.code() as i8);
    if txn.state == TxnState::Empty {
        // A null array.
        unsigned_varint(&mut buf, 0);
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &txn.partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        for group in &txn.groups {
            by_topic
                .entry("__consumer_offsets")
                .or_default()
                .push(partition_of(group, offsets_partitions));
        }
        unsigned_varint(
            &mut buf,
            u32::try_from(by_topic.len() + 1).unwrap_or(u32::MAX),
        );
        for (topic, mut partitions) in by_topic {
            partitions.sort_unstable();
            partitions.dedup();
            compact_string(&mut buf, topic);
            unsigned_varint(
                &mut buf,
                u32::try_from(partitions.len() + 1).unwrap_or(u32::MAX),
            );
            for p in partitions {
                buf.put_i32(p);
            }
            unsigned_varint(&mut buf, 0);
        }
    }
    buf.put_i64(txn.updated.as_millis() as i64);
    let started = if txn.state == TxnState::Empty {
        -1
    } else {
        txn.started.as_millis() as i64
    };
    buf.put_i64(started);
    // Tagged fields: 0 previousProducerId, 1 nextProducerId, when set.
    let tagged: Vec<(u32, i64)> = [(0, txn.previous_producer_id), (1, txn.next_producer_id)]
        .into_iter()
        .filter(|(_, id)| *id != NO_PRODUCER_ID)
        .collect();
    unsigned_varint(&mut buf, tagged.len() as u32);
    for (tag, id) in tagged {
        unsigned_varint(&mut buf, tag);
        unsigned_varint(&mut buf, 8);
        buf.put_i64(id);
    }
    buf.freeze()
}

/// The group of a key written here (an offset commit's or a group's metadata), if it is one.
pub fn group_of_key(key: &[u8]) -> Option<&str> {
    let kind = i16::from_be_bytes(key.get(..2)?.try_into().ok()?);
    if kind != OFFSET_COMMIT && kind != GROUP_METADATA {
        return None;
    }
    let len = usize::try_from(i16::from_be_bytes(key.get(2..4)?.try_into().ok()?)).ok()?;
    std::str::from_utf8(key.get(4..4 + len)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Generation, InstanceId, MemberId, MemberRecord, Timestamp, TopicPartition};

    #[test]
    fn offset_commit_records_are_kafkas_bytes() {
        // OffsetCommitKey, type 1: group "g", topic "t", partition 3.
        assert_eq!(
            offset_commit_key("g", "t", 3).as_ref(),
            [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]
        );
        let offset = OffsetAndMetadata {
            offset: 42,
            leader_epoch: Some(5),
            metadata: "m".into(),
            commit_timestamp: Timestamp(1000),
            expire_timestamp: None,
        };
        // OffsetCommitValue v4: offset, leader epoch, compact string "m", timestamp, no tags.
        let mut want = vec![0, 4];
        want.extend(42i64.to_be_bytes());
        want.extend(5i32.to_be_bytes());
        want.extend([2, b'm']);
        want.extend(1000i64.to_be_bytes());
        want.push(0);
        assert_eq!(offset_commit_value(&offset).as_ref(), want);
        // With an expire timestamp (OffsetCommit v2-4's retention): v1, no leader epoch.
        let expiring = OffsetAndMetadata {
            expire_timestamp: Some(Timestamp(9000)),
            leader_epoch: None,
            ..offset
        };
        let mut want = vec![0, 1];
        want.extend(42i64.to_be_bytes());
        want.extend([0, 1, b'm']);
        want.extend(1000i64.to_be_bytes());
        want.extend(9000i64.to_be_bytes());
        assert_eq!(offset_commit_value(&expiring).as_ref(), want);
    }

    fn txn(state: TxnState) -> TxnRecord {
        TxnRecord {
            transactional_id: "tx".into(),
            producer_id: 7,
            previous_producer_id: NO_PRODUCER_ID,
            producer_epoch: 3,
            last_producer_epoch: -1,
            next_producer_id: NO_PRODUCER_ID,
            timeout_ms: 60_000,
            state,
            partitions: [TopicPartition::new("t", 1), TopicPartition::new("t", 0)]
                .into_iter()
                .collect(),
            groups: ["g".to_string()].into_iter().collect(),
            started: Timestamp(1_000),
            updated: Timestamp(2_000),
        }
    }

    #[test]
    fn transaction_log_records_are_kafkas_bytes() {
        // TransactionLogKey, type 0: transactional id "tx".
        assert_eq!(transaction_log_key("tx").as_ref(), [0, 0, 0, 2, b't', b'x']);
        // TransactionLogValue v1, Ongoing: producer id, epoch, timeout, state 1, the partitions
        // by topic (compact arrays), the group as its __consumer_offsets partition (of 50),
        // last update, start, no tagged fields.
        let mut want = vec![0, 1];
        want.extend(7i64.to_be_bytes());
        want.extend(3i16.to_be_bytes());
        want.extend(60_000i32.to_be_bytes());
        want.push(1);
        want.push(3); // two topics
        want.extend([19]);
        want.extend(b"__consumer_offsets");
        want.push(2);
        want.extend(partition_of("g", 50).to_be_bytes());
        want.push(0);
        want.extend([2, b't', 3]);
        want.extend(0i32.to_be_bytes());
        want.extend(1i32.to_be_bytes());
        want.push(0);
        want.extend(2_000i64.to_be_bytes());
        want.extend(1_000i64.to_be_bytes());
        want.push(0);
        assert_eq!(
            transaction_log_value(&txn(TxnState::Ongoing), 50).as_ref(),
            want
        );
        // Empty: a null partition array and no start; a rotated producer id's previous and next
        // ids as tagged fields 0 and 1.
        let empty = TxnRecord {
            state: TxnState::Empty,
            previous_producer_id: 5,
            next_producer_id: 9,
            ..txn(TxnState::Empty)
        };
        let mut want = vec![0, 1];
        want.extend(7i64.to_be_bytes());
        want.extend(3i16.to_be_bytes());
        want.extend(60_000i32.to_be_bytes());
        want.push(0);
        want.push(0);
        want.extend(2_000i64.to_be_bytes());
        want.extend((-1i64).to_be_bytes());
        want.push(2);
        want.extend([0, 8]);
        want.extend(5i64.to_be_bytes());
        want.extend([1, 8]);
        want.extend(9i64.to_be_bytes());
        assert_eq!(transaction_log_value(&empty, 50).as_ref(), want);
    }

    #[test]
    fn group_metadata_records_are_kafkas_bytes() {
        assert_eq!(group_metadata_key("g").as_ref(), [0, 2, 0, 1, b'g']);
        let group = GroupMetadataRecord {
            protocol_type: Some("consumer".into()),
            generation: Generation(7),
            protocol_name: Some("range".into()),
            leader: Some(MemberId::new("m1")),
            state_timestamp: Timestamp(123),
            members: vec![MemberRecord {
                member_id: MemberId::new("m1"),
                instance_id: Some(InstanceId::new("i")),
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout_ms: 300,
                session_timeout_ms: 45,
                subscription: Bytes::from_static(&[1, 2]),
                assignment: Bytes::from_static(&[3]),
            }],
            assignor_state: Bytes::from_static(b"not in Kafka's record"),
            follow_up: None,
        };
        let mut want = vec![0, 3, 0, 8];
        want.extend(b"consumer");
        want.extend(7i32.to_be_bytes());
        want.extend([0, 5]);
        want.extend(b"range");
        want.extend([0, 2, b'm', b'1']);
        want.extend(123i64.to_be_bytes());
        want.extend(1i32.to_be_bytes());
        want.extend([0, 2, b'm', b'1', 0, 1, b'i', 0, 1, b'c', 0, 2, b'/', b'h']);
        want.extend(300i32.to_be_bytes());
        want.extend(45i32.to_be_bytes());
        want.extend([0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 3]);
        assert_eq!(group_metadata_value(&group).as_ref(), want);
        // An empty group (no protocol, no leader): "" and nulls, as Kafka writes it.
        let empty = GroupMetadataRecord {
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: Vec::new(),
            ..group
        };
        let mut want = vec![0, 3, 0, 0];
        want.extend(7i32.to_be_bytes());
        want.extend([0xff, 0xff, 0xff, 0xff]);
        want.extend(123i64.to_be_bytes());
        want.extend(0i32.to_be_bytes());
        assert_eq!(group_metadata_value(&empty).as_ref(), want);
    }

    #[test]
    fn the_group_of_a_key() {
        assert_eq!(group_of_key(&offset_commit_key("grp", "t", 0)), Some("grp"));
        assert_eq!(group_of_key(&group_metadata_key("grp")), Some("grp"));
        assert_eq!(group_of_key(&[0, 3, 0, 1, b'g']), None);
        assert_eq!(group_of_key(&[0, 1, 0, 9, b'g']), None);
        assert_eq!(group_of_key(&[]), None);
    }
}
