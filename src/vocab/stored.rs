//! A group's stored records as the store sees them: opaque values, each under its group, its
//! group kind and a key within the group. Each kind (a folder under `group/`) encodes and
//! decodes its own records; storage, the actor and gateway mode's topic never look inside.

use bytes::Bytes;

/// A kind of group as stored: one line below per kind, [`KINDS`] listing them (each kind's
/// folder under `group/` names its own as `codec::KIND` and encodes its records there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKind {
    /// The byte that names the kind in the store and in gateway mode's topic.
    pub id: u8,
    /// The key tag of the kind's member records in gateway mode's topic (unused by a kind that
    /// keeps its members inside the group's record, as the classic kind does).
    pub member_tag: u8,
    /// Its name in logs and errors.
    pub name: &'static str,
}

/// Classic groups: one record per group, the members inside it.
pub const CLASSIC: GroupKind = GroupKind {
    id: b'c',
    member_tag: b'M',
    name: "classic",
};
/// Consumer groups (KIP-848).
pub const CONSUMER: GroupKind = GroupKind {
    id: b'k',
    member_tag: b'C',
    name: "consumer",
};
/// Streams groups (KIP-1071).
pub const STREAMS: GroupKind = GroupKind {
    id: b's',
    member_tag: b'S',
    name: "streams",
};

/// Share groups (KIP-932): the group's record, its members' and its share partitions'.
pub const SHARE: GroupKind = GroupKind {
    id: b'q',
    member_tag: b'Q',
    name: "share",
};

/// Every group kind as stored. A new kind adds its line here.
pub const KINDS: &[GroupKind] = &[CLASSIC, CONSUMER, STREAMS, SHARE];

/// The kind stored under `id`.
pub fn kind_of(id: u8) -> Option<GroupKind> {
    KINDS.iter().copied().find(|k| k.id == id)
}

/// The kind whose member records carry `tag` in gateway mode's topic.
pub fn kind_of_member_tag(tag: u8) -> Option<GroupKind> {
    KINDS.iter().copied().find(|k| k.member_tag == tag)
}

/// One stored record of a group: the group's own record (key empty) or one member's (key its
/// member id), in its kind's encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub kind: GroupKind,
    pub key: String,
    pub value: Bytes,
}

impl StoredRecord {
    /// The group's own record of `kind`.
    pub fn group(kind: GroupKind, value: Vec<u8>) -> StoredRecord {
        StoredRecord {
            kind,
            key: String::new(),
            value: value.into(),
        }
    }

    /// A member's record of `kind`.
    pub fn member(kind: GroupKind, member: &str, value: Vec<u8>) -> StoredRecord {
        StoredRecord {
            kind,
            key: member.to_owned(),
            value: value.into(),
        }
    }

    /// Whether this is the group's own record (not a member's).
    pub fn is_group(&self) -> bool {
        self.key.is_empty()
    }
}

/// A change a group kind asks of its stored records, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordChange {
    /// Store this record (replacing the one of its kind and key).
    Put(StoredRecord),
    /// The record of this kind and key is gone (a member left).
    Delete { kind: GroupKind, key: String },
    /// Every record of the group is gone (not its offsets): the changes after it store the
    /// group whole again (its records rewritten after a write failed).
    Clear,
}

#[cfg(test)]
mod tests {
    /// Each kind has its own id and member tag, and none takes gateway mode's tags of its own
    /// (`G` a group's own record, `F` a shard's fence).
    #[test]
    fn kinds_are_told_apart_by_id_and_member_tag() {
        for (i, a) in super::KINDS.iter().enumerate() {
            assert_eq!(super::kind_of(a.id), Some(*a));
            assert_eq!(super::kind_of_member_tag(a.member_tag), Some(*a));
            assert!(![b'G', b'F'].contains(&a.member_tag), "{}", a.name);
            for b in &super::KINDS[i + 1..] {
                assert!(
                    a.id != b.id && a.member_tag != b.member_tag,
                    "{} {}",
                    a.name,
                    b.name
                );
            }
        }
        assert_eq!(super::kind_of(0), None);
    }
}
