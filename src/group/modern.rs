//! What the modern group kinds share (KIP-848 consumer groups, KIP-1071 streams groups), as
//! Apache Kafka's `ModernGroup` is shared by its consumer and streams groups: the id, the group
//! and assignment epochs, the members by id with the static members' index, the keyed timers,
//! and the records and events produced since they were last taken. Each kind holds one
//! [`Modern`] and adds its own: its subscriptions or topology, its target assignment, its
//! reconciliation.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use super::timers::TimerTable;
use crate::vocab::codec::DecodeError;
use crate::vocab::stored::{GroupKind, StoredRecord};
use crate::vocab::{GroupError, GroupId, InstanceId, MemberId, Timestamp};

/// Why a heartbeat was refused: Kafka's error code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub error: GroupError,
    pub message: Option<String>,
}

impl Refusal {
    pub fn new(error: GroupError, message: impl Into<String>) -> Refusal {
        Refusal {
            error,
            message: Some(message.into()),
        }
    }

    pub(crate) fn invalid(message: &str) -> Refusal {
        Refusal::new(GroupError::InvalidRequest, message)
    }
}

impl From<GroupError> for Refusal {
    fn from(error: GroupError) -> Refusal {
        Refusal {
            error,
            message: None,
        }
    }
}

/// A member of a modern group: what the shared part needs of it.
pub trait ModernMember {
    fn member_id(&self) -> &MemberId;
    /// A static member's `group.instance.id`.
    fn instance_id(&self) -> Option<&InstanceId>;
}

/// The shared part of a modern group, with members `M`, records `R` (what the store keeps),
/// events `E` (what the shell logs and shows) and timer keys `T`.
#[derive(Debug)]
pub struct Modern<M, R, E, T> {
    pub id: GroupId,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<MemberId, M>,
    /// Each static member's current member id.
    pub static_members: HashMap<InstanceId, MemberId>,
    pub timers: TimerTable<T>,
    pub records: Vec<R>,
    pub events: Vec<E>,
    /// Deleted (DeleteGroups): it answers nothing more.
    pub dead: bool,
}

impl<M: ModernMember, R, E, T: Clone + Eq + Hash + Ord> Modern<M, R, E, T> {
    pub fn new(id: GroupId) -> Self {
        Modern {
            id,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            timers: TimerTable::default(),
            records: Vec::new(),
            events: Vec::new(),
            dead: false,
        }
    }

    pub fn id(&self) -> &GroupId {
        &self.id
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    pub fn members(&self) -> impl ExactSizeIterator<Item = &M> {
        self.members.values()
    }

    pub fn member(&self, id: &MemberId) -> Option<&M> {
        self.members.get(id)
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Records to persist, in order, since the last call.
    pub fn take_records(&mut self) -> Vec<R> {
        std::mem::take(&mut self.records)
    }

    /// Events since the last call, in order.
    pub fn take_events(&mut self) -> Vec<E> {
        std::mem::take(&mut self.events)
    }

    /// When the earliest timer fires.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next_deadline()
    }

    /// Inserts or replaces a member, keeping the static index; returns the member it replaced.
    pub fn insert_member(&mut self, member: M) -> Option<M> {
        if let Some(instance) = member.instance_id() {
            self.static_members
                .insert(instance.clone(), member.member_id().clone());
        }
        self.members.insert(member.member_id().clone(), member)
    }

    /// Removes a member, and its static index entry while it is still this member's.
    pub fn remove_member(&mut self, id: &MemberId) -> Option<M> {
        let member = self.members.remove(id)?;
        if let Some(instance) = member.instance_id() {
            if self.static_members.get(instance) == Some(id) {
                self.static_members.remove(instance);
            }
        }
        Some(member)
    }

    /// UNKNOWN_MEMBER_ID for `member`, in Kafka's words.
    pub fn unknown_member(&self, member: &MemberId) -> Refusal {
        Refusal::new(
            GroupError::UnknownMemberId,
            format!("Member {member} is not a member of group {}.", self.id),
        )
    }
}

/// A modern kind's group record and members' from its stored records of `kind` (`None`
/// without the group's record: members left over from a group that changed kind), each
/// decoded by the kind.
///
/// # Errors
/// A record does not decode, or a member's record is stored under another member's key.
pub fn restore<G, M: ModernMember>(
    kind: GroupKind,
    records: &[StoredRecord],
    group: impl Fn(&[u8]) -> Result<G, DecodeError>,
    member: impl Fn(&[u8]) -> Result<M, DecodeError>,
) -> Result<Option<(G, Vec<M>)>, DecodeError> {
    let Some(own) = records.iter().find(|r| r.kind == kind && r.is_group()) else {
        return Ok(None);
    };
    let record = group(&own.value)?;
    let mut members = Vec::new();
    for r in records.iter().filter(|r| r.kind == kind && !r.is_group()) {
        let m = member(&r.value).map_err(|e| DecodeError(format!("member {}: {e}", r.key)))?;
        if m.member_id().as_str() != r.key {
            return Err(DecodeError(format!(
                "member {} holds another's record",
                r.key
            )));
        }
        members.push(m);
    }
    Ok(Some((record, members)))
}
