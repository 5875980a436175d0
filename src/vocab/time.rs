//! Time as the pure cores see it: milliseconds handed in by the shell, never read from a clock.

use std::fmt;

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
