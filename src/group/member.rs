//! One member of a classic group (Kafka `ClassicGroupMember`).

use bytes::Bytes;

use super::types::RequestToken;
use crate::vocab::{InstanceId, MemberId, Protocol};

/// A JoinGroup request waiting for the join phase to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkedJoin {
    pub token: RequestToken,
    /// The request may carry SkipAssignment (JoinGroup v9+), so a leader can be told to skip
    /// computing an assignment (KIP-814 static leader replacement, server-side assignment).
    pub supports_skip_assignment: bool,
}

/// A member of the group: everything Kafka keeps in `ClassicGroupMember`, with the parked
/// replies as tokens instead of futures.
#[derive(Debug, Clone)]
pub struct Member {
    pub id: MemberId,
    /// Set for static members (KIP-345); the group maps it back to `id`.
    pub instance_id: Option<InstanceId>,
    pub client_id: String,
    pub client_host: String,
    /// How long the join phase may wait for this member; the group uses the max over members.
    pub rebalance_timeout_ms: u64,
    /// How long without a heartbeat (or Join/Sync reply, or commit) before the member is removed.
    pub session_timeout_ms: u64,
    /// The offered protocols, in the member's order of preference (it votes for the first one
    /// every member supports).
    pub protocols: Vec<Protocol>,
    /// The assignment of the current generation (empty until the leader's SyncGroup is stored).
    pub assignment: Bytes,
    /// A JoinGroup parked until the join phase completes.
    pub awaiting_join: Option<ParkedJoin>,
    /// A SyncGroup parked until the leader's assignment is stored.
    pub awaiting_sync: Option<RequestToken>,
    /// Added in the current join phase and not yet answered. A new member's session timer is
    /// the new-member join timeout, and it expires even while parked (Kafka `isNew`).
    pub is_new: bool,
}

impl Member {
    /// Whether the member offers exactly these protocols (names and metadata, same order):
    /// Kafka's `matches`, which decides whether a JoinGroup changes anything.
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    /// The metadata this member offered for `protocol` (empty if it offers no such protocol).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    /// The member's vote: its most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))
    }

    /// Kafka `hasSatisfiedHeartbeat` when the session timer fires: a new member is expired even
    /// while parked (5-minute join timeout); an existing member parked in Join or Sync is not,
    /// as its session restarts when the parked request is answered.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }

    pub fn is_static(&self) -> bool {
        self.instance_id.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(protocols: &[&str]) -> Member {
        Member {
            id: MemberId::new("m"),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1,
            session_timeout_ms: 1,
            protocols: protocols
                .iter()
                .map(|n| Protocol::new(*n, Bytes::from_static(b"x")))
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
        }
    }

    #[test]
    fn vote_takes_the_most_preferred_candidate() {
        let m = member(&["cooperative-sticky", "range"]);
        assert_eq!(
            m.vote(&["range", "cooperative-sticky"]),
            Some("cooperative-sticky")
        );
        assert_eq!(m.vote(&["range"]), Some("range"));
        assert_eq!(m.vote(&["roundrobin"]), None);
        assert_eq!(m.metadata("range"), Bytes::from_static(b"x"));
        assert!(m.metadata("nope").is_empty());
    }
}
