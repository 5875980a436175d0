//! Moving one member from its current assignment towards its target (Kafka's
//! `CurrentAssignmentBuilder`): partitions it must give up are revoked first, and a partition is
//! granted only once no other member holds it, so no partition ever has two owners.

use std::collections::HashMap;

use crate::vocab::{ConsumerMember, ConsumerMemberState, Partitions, TopicId};

/// Who holds each partition now: the epoch at which its holder got it (Kafka's partition
/// epochs). A partition in some member's assigned or pending-revocation set is held.
pub type Holders = HashMap<(TopicId, i32), i32>;

/// What a member reports holding in a heartbeat; `None` when the field was left out.
pub type Owned<'a> = Option<&'a Partitions>;

/// The member's next state towards `target` at `target_epoch`, or `None` when nothing changes.
pub fn reconcile(
    member: &ConsumerMember,
    target_epoch: i32,
    target: &Partitions,
    holders: &Holders,
    owned: Owned<'_>,
) -> Option<ConsumerMember> {
    if member.state == ConsumerMemberState::Stable && member.member_epoch == target_epoch {
        return None;
    }
    let next = match member.state {
        ConsumerMemberState::Stable => next_assignment(
            member,
            member.member_epoch,
            target_epoch,
            target,
            holders,
            owned,
        ),
        ConsumerMemberState::UnrevokedPartitions => {
            // It moves on only once its heartbeat no longer shows what it had to revoke.
            if still_owns(owned, &member.pending_revocation) {
                return None;
            }
            next_assignment(
                member,
                member.member_epoch + 1,
                target_epoch,
                target,
                holders,
                owned,
            )
        }
        ConsumerMemberState::UnreleasedPartitions => next_assignment(
            member,
            member.member_epoch,
            target_epoch,
            target,
            holders,
            owned,
        ),
    };
    (next != *member).then_some(next)
}

/// Whether `owned` (what the member reports) still has any of `revoking`. A member that did not
/// report what it owns is assumed to own everything.
fn still_owns(owned: Owned<'_>, revoking: &Partitions) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, parts)| {
        revoking
            .get(topic)
            .is_some_and(|r| parts.iter().any(|p| r.binary_search(p).is_ok()))
    })
}

/// Kafka's `computeNextAssignment`.
fn next_assignment(
    member: &ConsumerMember,
    epoch: i32,
    target_epoch: i32,
    target: &Partitions,
    holders: &Holders,
    owned: Owned<'_>,
) -> ConsumerMember {
    let mut assigned = Partitions::new();
    let mut revoking = Partitions::new();
    let mut pending = Partitions::new();
    let mut unreleased = false;
    let empty: Vec<i32> = Vec::new();
    let topics: std::collections::BTreeSet<&TopicId> =
        target.keys().chain(member.assigned.keys()).collect();
    for &topic in topics {
        let want = target.get(&topic).unwrap_or(&empty);
        let has = member.assigned.get(&topic).unwrap_or(&empty);
        let kept: Vec<i32> = has
            .iter()
            .copied()
            .filter(|p| want.binary_search(p).is_ok())
            .collect();
        let gone: Vec<i32> = has
            .iter()
            .copied()
            .filter(|p| want.binary_search(p).is_err())
            .collect();
        let mut new = Vec::new();
        for &p in want {
            if kept.binary_search(&p).is_ok() {
                continue;
            }
            if holders.contains_key(&(topic, p)) {
                unreleased = true;
            } else {
                new.push(p);
            }
        }
        if !kept.is_empty() {
            assigned.insert(topic, kept);
        }
        if !gone.is_empty() {
            revoking.insert(topic, gone);
        }
        if !new.is_empty() {
            pending.insert(topic, new);
        }
    }
    let mut next = member.clone();
    if !revoking.is_empty() && still_owns(owned, &revoking) {
        // It stays at its epoch and must revoke first.
        next.state = ConsumerMemberState::UnrevokedPartitions;
        set_epoch(&mut next, epoch);
        next.assigned = assigned;
        next.pending_revocation = revoking;
        return next;
    }
    for (topic, mut parts) in pending {
        let list = assigned.entry(topic).or_default();
        list.append(&mut parts);
        list.sort_unstable();
    }
    next.state = if unreleased {
        ConsumerMemberState::UnreleasedPartitions
    } else {
        ConsumerMemberState::Stable
    };
    set_epoch(&mut next, target_epoch);
    next.assigned = assigned;
    next.pending_revocation = Partitions::new();
    next
}

/// Kafka's `updateMemberEpoch`: the epoch it had becomes the previous one (a heartbeat at the
/// previous epoch is accepted, for the case of a lost response).
fn set_epoch(member: &mut ConsumerMember, epoch: i32) {
    member.previous_member_epoch = member.member_epoch;
    member.member_epoch = epoch;
}
