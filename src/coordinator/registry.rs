//! The group kinds the coordinator serves, one entry each: how a kind's group is made new and
//! rebuilt from its stored records, with the settings it takes. The shell reaches a kind's own
//! requests through [`super::Coordinator::with_kind`], so a new kind adds its entry here and
//! its line to [`crate::vocab::stored::KINDS`], and names no command of the actor.

use super::core::Core;
use super::Settings;
use crate::group::consumer::ConsumerGroup;
use crate::group::share::ShareGroup;
use crate::group::streams::StreamsGroup;
use crate::group::{classic, consumer, share, streams, ClassicGroup, GroupId, Timestamp};
use crate::vocab::codec::DecodeError;
use crate::vocab::stored::{GroupKind, StoredRecord};

/// One kind of group, as the coordinator makes it.
pub(super) struct KindEntry {
    pub kind: GroupKind,
    /// A new, Empty group of the kind.
    pub create: fn(&GroupId, &Settings, Timestamp) -> Core,
    /// The group rebuilt from its stored records (`None`: they hold no group of this kind).
    pub restore: fn(&GroupId, &Settings, &[StoredRecord], Timestamp) -> Restored,
}

/// What [`KindEntry::restore`] made of a group's records.
pub(super) type Restored = Result<Option<Core>, DecodeError>;

/// Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
pub(super) static CLASSIC: KindEntry = KindEntry {
    kind: classic::codec::KIND,
    create: |id, s, now| Core::new(ClassicGroup::new(id.clone(), s.group_config(id), now)),
    restore: |id, s, records, now| {
        Ok(classic::codec::restore(records)?.map(|r| {
            Core::new(ClassicGroup::from_record(
                id.clone(),
                s.group_config(id),
                &r,
                now,
            ))
        }))
    },
};

/// Consumer groups (KIP-848).
pub(super) static CONSUMER: KindEntry = KindEntry {
    kind: consumer::codec::KIND,
    create: |id, s, _| Core::new(ConsumerGroup::new(id.clone(), s.consumer.clone())),
    restore: |id, s, records, now| {
        Ok(consumer::codec::restore(records)?.map(|(record, members)| {
            let config = s.consumer.clone();
            Core::new(ConsumerGroup::from_records(
                id.clone(),
                config,
                record,
                members,
                now,
            ))
        }))
    },
};

/// Streams groups (KIP-1071).
pub(super) static STREAMS: KindEntry = KindEntry {
    kind: streams::codec::KIND,
    create: |id, s, _| Core::new(StreamsGroup::new(id.clone(), s.streams.clone())),
    restore: |id, s, records, now| {
        Ok(streams::codec::restore(records)?.map(|(record, members)| {
            let config = s.streams.clone();
            Core::new(StreamsGroup::from_records(
                id.clone(),
                config,
                record,
                members,
                now,
            ))
        }))
    },
};

/// Share groups (KIP-932).
pub(super) static SHARE: KindEntry = KindEntry {
    kind: share::codec::KIND,
    create: |id, s, _| Core::new(ShareGroup::new(id.clone(), s.share.clone())),
    restore: |id, s, records, now| {
        Ok(
            share::codec::restore(records)?.map(|(record, members, partitions)| {
                Core::new(ShareGroup::from_records(
                    id.clone(),
                    s.share.clone(),
                    record,
                    members,
                    partitions,
                    now,
                ))
            }),
        )
    },
};

/// Every kind the coordinator serves.
pub(super) static KINDS: &[&KindEntry] = &[&CLASSIC, &CONSUMER, &STREAMS, &SHARE];

/// The entry of `kind`, if the coordinator serves it.
pub(super) fn entry(kind: GroupKind) -> Option<&'static KindEntry> {
    KINDS.iter().copied().find(|e| e.kind == kind)
}

/// A group rebuilt from its stored records, as the kind of the group's own record (one kind's
/// at a time: a group changing kind clears the old kind's records first). Offsets without a
/// group record are a simple classic group's.
pub(super) fn restore(
    id: &GroupId,
    settings: &Settings,
    records: &[StoredRecord],
    now: Timestamp,
) -> Result<Core, DecodeError> {
    for entry in KINDS {
        if let Some(group) = (entry.restore)(id, settings, records, now)? {
            return Ok(group);
        }
    }
    let config = settings.group_config(id);
    Ok(Core::new(ClassicGroup::new_simple(id.clone(), config, now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stored_kind_has_an_entry() {
        for kind in crate::vocab::stored::KINDS {
            assert!(entry(*kind).is_some(), "{} has no entry", kind.name);
        }
        assert_eq!(KINDS.len(), crate::vocab::stored::KINDS.len());
    }
}
