//! The shell's clock: the one place that reads time for the group cores.
//!
//! `now` is wall-clock milliseconds (commit timestamps are reported and, later, persisted) but
//! advances with tokio's monotonic clock from a base read once, so it never goes backwards (the
//! cores require that) and follows tokio's paused time in tests.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::group::Timestamp;

#[derive(Debug, Clone)]
pub struct Clock {
    base_instant: Instant,
    base_ms: u64,
}

impl Clock {
    /// A clock that reads the system time once, now.
    pub fn system() -> Clock {
        let base_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Clock::starting_at(base_ms)
    }

    /// A clock whose `now` is `base_ms` at this instant (tests).
    pub fn starting_at(base_ms: u64) -> Clock {
        Clock {
            base_instant: Instant::now(),
            base_ms,
        }
    }

    pub fn now(&self) -> Timestamp {
        let elapsed = self.base_instant.elapsed().as_millis() as u64;
        Timestamp(self.base_ms.saturating_add(elapsed))
    }

    /// The tokio instant at which `now()` reaches `at`.
    pub fn instant_at(&self, at: Timestamp) -> Instant {
        let ms = at.as_millis().saturating_sub(self.base_ms);
        // Far-future deadlines are clamped: a sleep of a year is as good as forever here.
        self.base_instant + Duration::from_millis(ms.min(365 * 24 * 3600 * 1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_paused_time_and_maps_deadlines_back() {
        let clock = Clock::starting_at(1_000);
        assert_eq!(clock.now(), Timestamp(1_000));
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(clock.now(), Timestamp(1_250));
        let deadline = clock.instant_at(Timestamp(2_000));
        tokio::time::sleep_until(deadline).await;
        assert_eq!(clock.now(), Timestamp(2_000));
    }
}
