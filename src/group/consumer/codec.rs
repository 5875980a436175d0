//! A consumer group's stored records (KIP-848): the group's own and each member's.

use bytes::Bytes;

use crate::vocab::codec::{end, err, opt_str, partitions, version, DecodeError, Writer, V1};
use crate::vocab::reader::Reader;
use crate::vocab::stored::{GroupKind, RecordChange, StoredRecord};
use crate::vocab::{
    ClassicMemberMetadata, ConsumerGroupRecord, ConsumerMember, ConsumerMemberState, InstanceId,
    MemberId, Protocol,
};

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

/// The consumer group kind as stored.
pub const KIND: GroupKind = crate::vocab::stored::CONSUMER;

/// The stored form of a record the group wrote.
pub fn change(record: super::ConsumerRecord) -> RecordChange {
    use super::ConsumerRecord;
    match record {
        ConsumerRecord::Group(g) => {
            RecordChange::Put(StoredRecord::group(KIND, encode_consumer_group(&g)))
        }
        ConsumerRecord::Member(m) => RecordChange::Put(StoredRecord::member(
            KIND,
            m.member_id.as_str(),
            encode_consumer_member(&m),
        )),
        ConsumerRecord::RemoveMember(id) => RecordChange::Delete {
            kind: KIND,
            key: id.as_str().to_owned(),
        },
    }
}

/// The group's record and its members' from its stored records of this kind (`None` without
/// the group's record: members left over from a group that changed kind).
///
/// # Errors
/// A record does not decode, or a member's record is stored under another member's key.
pub fn restore(
    records: &[StoredRecord],
) -> Result<Option<(ConsumerGroupRecord, Vec<ConsumerMember>)>, DecodeError> {
    crate::group::modern::restore(KIND, records, decode_consumer_group, decode_consumer_member)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TopicId;

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

    #[test]
    fn restore_reads_the_group_and_its_members_and_refuses_a_member_under_another_s_key() {
        let group = ConsumerGroupRecord {
            group_epoch: 2,
            ..ConsumerGroupRecord::default()
        };
        let m = ConsumerMember::new(MemberId::new("m"));
        let own = StoredRecord::group(KIND, encode_consumer_group(&group));
        let member = StoredRecord::member(KIND, "m", encode_consumer_member(&m));
        let other_kind = StoredRecord::member(crate::vocab::stored::STREAMS, "x", vec![9]);
        let records = [own.clone(), member, other_kind];
        assert_eq!(restore(&records), Ok(Some((group, vec![m.clone()]))));
        assert_eq!(
            restore(&records[1..]),
            Ok(None),
            "members without their group"
        );
        let misplaced = StoredRecord::member(KIND, "n", encode_consumer_member(&m));
        assert_eq!(
            restore(&[own, misplaced]).unwrap_err().0,
            "member n holds another's record"
        );
    }
}
