//! Keyed timers of one group (Kafka `CoordinatorTimer`, quinn's `TimerTable`).
//!
//! The core owns the table and is the source of truth: setting a key replaces its deadline,
//! cancelling removes it. Every change is also reported as [`TimerChange`] so a shell that keeps
//! one tokio sleep per key can mirror it; a shell that prefers a single sleep uses
//! [`crate::group::ClassicGroup::next_deadline`]. Either way an expiry is delivered back as an
//! input and re-checked against this table, so a stale or duplicated expiry does nothing.

use std::collections::BTreeSet;
use std::hash::Hash;

use crate::vocab::{IdMap, MemberId, Timestamp};

/// What a timer is for. One deadline per key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKey {
    /// The member's session: reset by heartbeats, by JoinGroup/SyncGroup replies and by offset
    /// commits; for a new member parked in JoinGroup it is the 5-minute join timeout instead, and
    /// for a KIP-394 pending member the session timeout of its MEMBER_ID_REQUIRED reply.
    Heartbeat(MemberId),
    /// `group.initial.rebalance.delay.ms` of a rebalance that started from Empty.
    InitialDelay,
    /// The rebalance timeout of the join phase (max RebalanceTimeoutMs over members).
    Join,
    /// Members of a new generation that have not sent SyncGroup within the rebalance timeout.
    PendingSync,
    /// The server assignor's follow-up: koord starts a rebalance by itself (a learner of an
    /// unmodified client is warm, a leaver's deadline passed, a probe came due).
    FollowUp,
}

/// A timer change the shell may mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerChange {
    /// Arm (or re-arm: replaces any previous deadline of the same key).
    Set { key: TimerKey, deadline: Timestamp },
    /// Disarm; a no-op if the key is not armed.
    Cancel { key: TimerKey },
}

/// The armed timers of one group, by key (a classic group's [`TimerKey`]s by default).
///
/// Every change costs O(log n) in the group's size, whichever deadline it moves: the deadlines
/// are also kept in order (`order`), so the earliest is at hand after a heartbeat moved the
/// earliest one out (heartbeats arrive roughly in deadline order, so most of them do).
#[derive(Debug, Clone)]
pub struct TimerTable<K = TimerKey> {
    deadlines: IdMap<K, Timestamp>,
    /// `deadlines` ordered by deadline, ties by key (the firing order).
    order: BTreeSet<(Timestamp, K)>,
}

impl<K> Default for TimerTable<K> {
    fn default() -> Self {
        TimerTable {
            deadlines: IdMap::default(),
            order: BTreeSet::new(),
        }
    }
}

impl<K: Clone + Eq + Hash + Ord> TimerTable<K> {
    /// Arms `key` at `deadline`, replacing any earlier deadline for it.
    pub fn set(&mut self, key: K, deadline: Timestamp) {
        match self.deadlines.insert(key.clone(), deadline) {
            Some(old) if old == deadline => {}
            old => self.reorder(key, old, Some(deadline)),
        }
    }

    /// Moves an armed key's deadline without rebuilding the key; false if it is not armed.
    pub fn reset(&mut self, key: &K, deadline: Timestamp) -> bool {
        match self.deadlines.get_mut(key) {
            Some(d) => {
                let old = std::mem::replace(d, deadline);
                if old != deadline {
                    self.reorder(key.clone(), Some(old), Some(deadline));
                }
                true
            }
            None => false,
        }
    }

    /// Disarms `key`; returns whether it was armed.
    pub fn cancel(&mut self, key: &K) -> bool {
        let old = self.deadlines.remove(key);
        if old.is_some() {
            self.reorder(key.clone(), old, None);
        }
        old.is_some()
    }

    /// Keeps `order` right after `key`'s deadline went from `old` to `new`.
    fn reorder(&mut self, key: K, old: Option<Timestamp>, new: Option<Timestamp>) {
        match (old, new) {
            (Some(o), Some(n)) => {
                self.order.remove(&(o, key.clone()));
                self.order.insert((n, key));
            }
            (Some(o), None) => {
                self.order.remove(&(o, key));
            }
            (None, Some(n)) => {
                self.order.insert((n, key));
            }
            (None, None) => {}
        }
    }

    pub fn deadline(&self, key: &K) -> Option<Timestamp> {
        self.deadlines.get(key).copied()
    }

    /// The earliest deadline (no key: nothing cloned).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.order.first().map(|(d, _)| *d)
    }

    /// The earliest deadline, ties broken by key order so that firing order is deterministic.
    pub fn next(&self) -> Option<(K, Timestamp)> {
        self.order.first().map(|(d, k)| (k.clone(), *d))
    }

    /// Removes `key` if it is armed with a deadline at or before `now`: the re-check that makes
    /// stale expiries harmless.
    pub fn take_if_expired(&mut self, key: &K, now: Timestamp) -> bool {
        match self.deadlines.get(key) {
            Some(d) if *d <= now => {
                let old = self.deadlines.remove(key);
                self.reorder(key.clone(), old, None);
                true
            }
            _ => false,
        }
    }

    pub fn len(&self) -> usize {
        self.deadlines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }

    /// Every armed key, in key order (for describing and testing).
    pub fn keys(&self) -> Vec<K> {
        let mut keys: Vec<_> = self.deadlines.keys().cloned().collect();
        keys.sort();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_cancel_removes_and_stale_expiry_is_ignored() {
        let mut t = TimerTable::default();
        t.set(TimerKey::Join, Timestamp(100));
        t.set(TimerKey::Join, Timestamp(200));
        assert_eq!(t.deadline(&TimerKey::Join), Some(Timestamp(200)));
        // The old deadline fires: re-checked, nothing happens.
        assert!(!t.take_if_expired(&TimerKey::Join, Timestamp(100)));
        assert!(t.take_if_expired(&TimerKey::Join, Timestamp(200)));
        assert!(!t.take_if_expired(&TimerKey::Join, Timestamp(300)));
        t.set(TimerKey::PendingSync, Timestamp(5));
        t.set(TimerKey::InitialDelay, Timestamp(5));
        assert_eq!(t.next(), Some((TimerKey::InitialDelay, Timestamp(5))));
        assert!(t.cancel(&TimerKey::InitialDelay));
        assert!(!t.cancel(&TimerKey::InitialDelay));
        assert_eq!(t.len(), 1);
    }

    /// The earliest deadline is kept through every kind of change, as a scan would find it.
    #[test]
    fn next_deadline_follows_every_change() {
        let mut t = TimerTable::default();
        let scan = |t: &TimerTable| {
            assert_eq!(
                t.order.len(),
                t.deadlines.len(),
                "one ordered entry per key"
            );
            t.deadlines.values().min().copied()
        };
        let m = |i: u8| TimerKey::Heartbeat(MemberId::new(format!("m{i}")));
        assert_eq!(t.next_deadline(), None);
        for i in 0..5u8 {
            t.set(m(i), Timestamp(100 + u64::from(i)));
        }
        assert_eq!(t.next_deadline(), Some(Timestamp(100)));
        // Heartbeats in turn push the earliest out, one member at a time.
        let mut at = 200;
        for round in 0..3u8 {
            for i in 0..5u8 {
                at += 1;
                if round == 1 {
                    assert!(t.reset(&m(i), Timestamp(at)));
                } else {
                    t.set(m(i), Timestamp(at));
                }
                assert_eq!(t.next_deadline(), scan(&t));
            }
        }
        // Moved earlier, equal, cancelled, expired, unknown key.
        t.set(TimerKey::Join, Timestamp(50));
        assert_eq!(t.next_deadline(), Some(Timestamp(50)));
        t.set(TimerKey::PendingSync, Timestamp(50));
        assert!(t.cancel(&TimerKey::Join));
        assert_eq!(t.next_deadline(), Some(Timestamp(50)));
        assert!(t.take_if_expired(&TimerKey::PendingSync, Timestamp(60)));
        assert_eq!(t.next_deadline(), scan(&t));
        assert!(!t.reset(&TimerKey::FollowUp, Timestamp(1)));
        assert_eq!(t.next_deadline(), scan(&t));
        for i in 0..5u8 {
            assert!(t.cancel(&m(i)));
            assert_eq!(t.next_deadline(), scan(&t));
        }
        assert_eq!(t.next_deadline(), None);
    }
}
