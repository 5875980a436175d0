//! A share group's stored records: the group's own, each member's (under its member id) and
//! each share partition's state (under [`partition_key`], which no member id takes: it starts
//! with a NUL).

use super::group::{ShareGroupRecord, ShareMember, ShareRecord};
use super::partition::{self, PartitionState};
use crate::vocab::codec::{count, end, err, opt_str, partitions, version, DecodeError, Writer, V1};
use crate::vocab::reader::Reader;
use crate::vocab::stored::{GroupKind, RecordChange, StoredRecord};
use crate::vocab::{MemberId, TopicId};

/// The share group kind as stored.
pub const KIND: GroupKind = crate::vocab::stored::SHARE;

/// The key of a share partition's state record.
pub fn partition_key(topic: TopicId, partition: i32) -> String {
    format!("\0{topic}:{partition}")
}

fn parse_partition_key(key: &str) -> Option<(TopicId, i32)> {
    let (topic, partition) = key.strip_prefix('\0')?.split_once(':')?;
    Some((topic.parse().ok()?, partition.parse().ok()?))
}

pub fn encode_group(g: &ShareGroupRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.i32(g.group_epoch);
    w.i32(g.assignment_epoch);
    w.u64(g.metadata_hash);
    w.0
}

pub fn decode_group(value: &[u8]) -> Result<ShareGroupRecord, DecodeError> {
    const WHAT: &str = "share group value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let record = ShareGroupRecord {
        group_epoch: r.i32(WHAT)?,
        assignment_epoch: r.i32(WHAT)?,
        metadata_hash: r.u64(WHAT)?,
    };
    end(&r, WHAT)?;
    Ok(record)
}

pub fn encode_member(m: &ShareMember) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.str(m.member_id.as_str());
    w.i32(m.member_epoch);
    w.i32(m.previous_member_epoch);
    w.opt_str(m.rack_id.as_deref());
    w.str(&m.client_id);
    w.str(&m.client_host);
    w.u32(m.subscribed_topic_names.len() as u32);
    for name in &m.subscribed_topic_names {
        w.str(name);
    }
    w.partitions(&m.assigned);
    w.0
}

pub fn decode_member(value: &[u8]) -> Result<ShareMember, DecodeError> {
    const WHAT: &str = "share member value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let member_id = MemberId::new(r.str_u32(WHAT)?);
    let member_epoch = r.i32(WHAT)?;
    let previous_member_epoch = r.i32(WHAT)?;
    let rack_id = opt_str(&mut r, WHAT)?;
    let client_id = r.str_u32(WHAT)?.to_owned();
    let client_host = r.str_u32(WHAT)?.to_owned();
    // Each name takes at least its 4-byte length.
    let names = count(&mut r, 4, WHAT)?;
    let mut subscribed_topic_names = Vec::with_capacity(names);
    for _ in 0..names {
        subscribed_topic_names.push(r.str_u32(WHAT)?.to_owned());
    }
    let assigned = partitions(&mut r, WHAT)?;
    end(&r, WHAT)?;
    Ok(ShareMember {
        member_id,
        member_epoch,
        previous_member_epoch,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        assigned,
    })
}

/// The stored form of a record the group wrote.
pub fn change(record: ShareRecord) -> RecordChange {
    match record {
        ShareRecord::Group(g) => RecordChange::Put(StoredRecord::group(KIND, encode_group(&g))),
        ShareRecord::Member(m) => RecordChange::Put(StoredRecord::member(
            KIND,
            m.member_id.as_str(),
            encode_member(&m),
        )),
        ShareRecord::RemoveMember(id) => RecordChange::Delete {
            kind: KIND,
            key: id.as_str().to_owned(),
        },
        ShareRecord::RemovePartition { topic, partition } => RecordChange::Delete {
            kind: KIND,
            key: partition_key(topic, partition),
        },
        ShareRecord::Clear => RecordChange::Clear,
        ShareRecord::Partition {
            topic,
            partition,
            state,
        } => RecordChange::Put(StoredRecord {
            kind: KIND,
            key: partition_key(topic, partition),
            value: partition::encode(&state).into(),
        }),
    }
}

/// A share group as its records stored it: its own record, its members, its partitions'
/// states.
pub type Restored = (
    ShareGroupRecord,
    Vec<ShareMember>,
    Vec<(TopicId, i32, PartitionState)>,
);

/// The group from its stored records of this kind (`None` without the group's record).
///
/// # Errors
/// A record does not decode, a member's record is stored under another member's key, or a
/// partition's key is not one.
pub fn restore(records: &[StoredRecord]) -> Result<Option<Restored>, DecodeError> {
    let Some(own) = records.iter().find(|r| r.kind == KIND && r.is_group()) else {
        return Ok(None);
    };
    let group = decode_group(&own.value)?;
    let mut members = Vec::new();
    let mut parts = Vec::new();
    for r in records.iter().filter(|r| r.kind == KIND && !r.is_group()) {
        if r.key.starts_with('\0') {
            let (topic, partition) = parse_partition_key(&r.key)
                .ok_or_else(|| err(format!("share partition key {:?}", r.key)))?;
            let state = partition::decode(&r.value)
                .map_err(|e| err(format!("share partition {topic}:{partition}: {e}")))?;
            parts.push((topic, partition, state));
            continue;
        }
        let m = decode_member(&r.value).map_err(|e| err(format!("member {}: {e}", r.key)))?;
        if m.member_id.as_str() != r.key {
            return Err(err(format!("member {} holds another's record", r.key)));
        }
        members.push(m);
    }
    Ok(Some((group, members, parts)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::share::partition::{RecordState, StateBatch};
    use crate::vocab::Partitions;

    fn member() -> ShareMember {
        let mut assigned = Partitions::new();
        assigned.insert(TopicId::from_bytes([7; 16]), vec![0, 2]);
        ShareMember {
            member_id: MemberId::new("m-1"),
            member_epoch: 3,
            previous_member_epoch: 2,
            rack_id: Some("r1".into()),
            client_id: "app".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            assigned,
        }
    }

    #[test]
    fn records_round_trip_through_their_stored_form() {
        let group = ShareGroupRecord {
            group_epoch: 4,
            assignment_epoch: 3,
            metadata_hash: 99,
        };
        let topic = TopicId::from_bytes([7; 16]);
        let state = PartitionState {
            start_offset: 10,
            batches: vec![StateBatch {
                first: 12,
                last: 14,
                state: RecordState::Acknowledged,
                delivery_count: 1,
            }],
        };
        let stored: Vec<StoredRecord> = [
            ShareRecord::Group(group),
            ShareRecord::Member(member()),
            ShareRecord::Partition {
                topic,
                partition: 2,
                state: state.clone(),
            },
        ]
        .into_iter()
        .map(|r| match change(r) {
            RecordChange::Put(s) => s,
            other => panic!("{other:?}"),
        })
        .collect();
        let (g, members, parts) = restore(&stored).unwrap().unwrap();
        assert_eq!(g, group);
        assert_eq!(members, vec![member()]);
        assert_eq!(parts, vec![(topic, 2, state)]);
    }

    #[test]
    fn damaged_records_are_refused_not_panicked_on() {
        let good = encode_member(&member());
        for cut in 0..good.len() {
            assert!(decode_member(&good[..cut]).is_err());
        }
        assert!(decode_group(&[1, 0, 0]).is_err());
        let bad_key = StoredRecord {
            kind: KIND,
            key: "\0nonsense".into(),
            value: vec![1].into(),
        };
        let own = StoredRecord::group(
            KIND,
            encode_group(&ShareGroupRecord {
                group_epoch: 1,
                assignment_epoch: 1,
                metadata_hash: 0,
            }),
        );
        assert!(restore(&[own.clone(), bad_key]).is_err());
        let stolen = StoredRecord::member(KIND, "other", good);
        assert!(restore(&[own, stolen]).is_err());
        assert_eq!(restore(&[]), Ok(None));
    }
}
