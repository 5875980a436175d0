//! The ids every layer names groups and members by, and the classic generation.
//!
//! Wire types (`StrBytes`, generated messages) stay in `api/`; the cores speak in these, so that a
//! member id can never be confused with a group id or a client id.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

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

/// The partition of `group`'s records (or its shard) among `partitions`: Java's `String.hashCode` of the id,
/// as Kafka's `Utils.abs(groupId.hashCode()) % partitions` places a group, so that it never
/// changes between releases.
pub fn partition_of(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    // Kafka's Utils.abs: i32::MIN maps to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_where_kafka_would_put_them() {
        // Java: "my-group".hashCode() == -1906497762; abs % 50 == 12.
        assert_eq!(partition_of("my-group", 50), 12);
        assert_eq!(partition_of("", 50), 0);
        // A hash of i32::MIN: Kafka's Utils.abs gives 0.
        assert_eq!(partition_of("polygenelubricants", 50), 0);
        for p in [1, 7, 50] {
            assert!((0..p).contains(&partition_of("x\u{1F600}y", p)));
        }
    }
}
