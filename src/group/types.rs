//! The group core's own small types: its states, and the tokens the shell and the core exchange.
//! The ids, generations and time every layer shares are in [`crate::vocab`].

use std::fmt;

/// Identifies one parked-or-not JoinGroup/SyncGroup request. The shell allocates it (unique per
/// request, e.g. a counter) and keeps the oneshot sender under it; the core answers with
/// "reply R to request P", possibly much later and possibly while handling another input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestToken(pub u64);

/// Identifies one record handed to the shell for persistence; the shell reports its outcome with
/// [`crate::group::ClassicGroup::handle_write_complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u64);

/// The classic group states (Kafka `ClassicGroupState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members. Offsets may still be committed by admin tools and simple consumers.
    Empty,
    /// Members are (re)joining; JoinGroup replies are parked until the join phase completes.
    PreparingRebalance,
    /// The new generation exists; waiting for the leader's SyncGroup (assignments).
    CompletingRebalance,
    /// Every member has (or can fetch) its assignment.
    Stable,
    /// Unloaded or deleted; every request gets COORDINATOR_NOT_AVAILABLE.
    Dead,
}

impl GroupState {
    /// Kafka's spelling, as DescribeGroups and ListGroups report it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// `ClassicGroupState.validPreviousStates`: the transition table of spec §1.1.
    pub fn can_transition_to(self, to: GroupState) -> bool {
        use GroupState::*;
        match to {
            Empty => self == PreparingRebalance,
            PreparingRebalance => matches!(self, Stable | CompletingRebalance | Empty),
            CompletingRebalance => self == PreparingRebalance,
            Stable => self == CompletingRebalance,
            Dead => true,
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
