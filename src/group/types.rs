//! Domain newtypes shared by the group state machines.
//!
//! Wire types (`StrBytes`, generated messages) stay in `api/`; the core speaks in these, so that a
//! member id can never be confused with a group id or a client id, and so that the core builds and
//! tests without the codec.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// A point in time, in milliseconds, as read by the shell from a monotonic clock.
///
/// The core never reads a clock: every input carries `now`. Milliseconds (not `Instant`) because
/// deadlines and state timestamps end up in durable records and in test assertions, and because
/// Kafka's own timeouts are all whole milliseconds. The epoch is the shell's choice (process start
/// for a monotonic clock, the Unix epoch when a wall-clock timestamp must be persisted); the only
/// rule is that successive inputs never go backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// `self + ms`, saturating: a timeout of `u64::MAX` means "never", not an overflow panic.
    pub fn plus_ms(self, ms: u64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }

    /// Milliseconds since the shell's epoch.
    pub fn as_millis(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

string_id!(
    /// A consumer group id. Non-empty once it reaches the core (`api/` answers INVALID_GROUP_ID).
    GroupId
);

/// A member id as Kafka spells it: `{client_id or instance_id}-{uuid}`. The empty id is
/// Kafka's `UNKNOWN_MEMBER_ID` ("I have no id yet"), see [`MemberId::is_unknown`].
///
/// Shared, not owned: a member's id is held by the member, the group's member map, its session
/// timer, the leader field and many outputs, and every clone shares one allocation (the memory
/// per idle member is a goal of the project). Compares, orders and hashes as its string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberId(pub Arc<str>);

impl MemberId {
    pub fn new(s: impl Into<Arc<str>>) -> Self {
        Self(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for MemberId {
    fn default() -> Self {
        MemberId::new("")
    }
}

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for MemberId {
    fn from(s: &str) -> Self {
        MemberId::new(s)
    }
}

impl From<String> for MemberId {
    fn from(s: String) -> Self {
        MemberId::new(s)
    }
}

string_id!(
    /// A static member's `group.instance.id` (KIP-345).
    InstanceId
);

impl MemberId {
    /// Kafka's `UNKNOWN_MEMBER_ID`: the empty string.
    pub fn unknown() -> MemberId {
        MemberId::new("")
    }

    /// True for the empty id a new member joins with.
    pub fn is_unknown(&self) -> bool {
        self.0.is_empty()
    }
}

/// A classic group generation. `-1` on the wire means "no generation" (admin and simple
/// consumers committing offsets, error replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Generation(pub i32);

impl Generation {
    /// What error replies carry and what commits from outside the group use.
    pub const NONE: Generation = Generation(-1);

    pub fn next(self) -> Generation {
        Generation(self.0.wrapping_add(1))
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifies one parked-or-not JoinGroup/SyncGroup request. The shell allocates it (unique per
/// request, e.g. a counter) and keeps the oneshot sender under it; the core answers with
/// "reply R to request P", possibly much later and possibly while handling another input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestToken(pub u64);

/// Identifies one record handed to the shell for persistence; the shell reports its outcome with
/// [`crate::group::ClassicGroup::handle_write_complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u64);

/// One protocol a member offers in JoinGroup: an assignor name and its opaque metadata (for
/// protocol type `consumer`, a `ConsumerProtocolSubscription`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

impl Protocol {
    pub fn new(name: impl Into<String>, metadata: impl Into<Bytes>) -> Protocol {
        Protocol {
            name: name.into(),
            metadata: metadata.into(),
        }
    }
}

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
