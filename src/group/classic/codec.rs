//! The classic group's stored record (its [`GroupMetadataRecord`]): the layout the embedded
//! store and gateway mode's topic keep it in.

use bytes::Bytes;

use crate::vocab::codec::{end, err, opt_str, DecodeError, Writer, V1};
use crate::vocab::reader::Reader;
use crate::vocab::stored::{GroupKind, StoredRecord};
use crate::vocab::{
    Generation, GroupMetadataRecord, InstanceId, MemberId, MemberRecord, Timestamp,
};

/// Group values since the learner assignor: V1's fields, then the server assignor's state and
/// follow-up. V1 group values are still read (no state, no follow-up).
const GROUP_V2: u8 = 2;

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

/// The classic group kind as stored: one record per group, its members inside it.
pub const KIND: GroupKind = crate::vocab::stored::CLASSIC;

/// The stored form of the group's record.
pub fn stored(record: &GroupMetadataRecord) -> StoredRecord {
    StoredRecord::group(KIND, encode_group(record))
}

/// The group's record from its stored records (`None` without one of this kind).
///
/// # Errors
/// The record does not decode.
pub fn restore(records: &[StoredRecord]) -> Result<Option<GroupMetadataRecord>, DecodeError> {
    records
        .iter()
        .find(|r| r.kind == KIND && r.is_group())
        .map(|r| decode_group(&r.value))
        .transpose()
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
    fn the_record_round_trips() {
        let g = group();
        assert_eq!(decode_group(&encode_group(&g)).unwrap(), g);
        assert_eq!(restore(&[stored(&g)]), Ok(Some(g)));
        assert_eq!(restore(&[]), Ok(None));
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
    }
}
