//! Client quotas: what AlterClientQuotas sets (stored, and described by DescribeClientQuotas)
//! and their enforcement where koord serves the data plane, as Kafka's brokers enforce them:
//! produced bytes (`producer_byte_rate`, on the request's size), fetched bytes
//! (`consumer_byte_rate`, on the answer's size) and request handling time
//! (`request_percentage`, the time spent on a thread, as a percentage of one). A client over
//! its quota gets its answer with `throttle_time_ms` set and its connection is not read for
//! that long (KIP-219: the client also waits by itself). In gateway mode the quota APIs and
//! the data plane are upstream's, which enforces its own quotas.
//!
//! [`table`] and [`rate`] are pure; [`Quotas`] is the node's shared state over them.

pub mod rate;
pub mod table;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

pub use rate::{Rate, Window};
pub use table::{
    Alteration, DescribeError, Entity, EntityType, Invalid, QuotaTable, Usage, Values,
};

/// What a quota bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Produced bytes per second.
    Produce,
    /// Fetched bytes per second.
    Fetch,
    /// Request handling time, as a percentage of one thread.
    Request,
}

impl Kind {
    /// The quota key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Produce => table::PRODUCER_BYTE_RATE,
            Kind::Fetch => table::CONSUMER_BYTE_RATE,
            Kind::Request => table::REQUEST_PERCENTAGE,
        }
    }
}

/// One sensor: a quota kind and the usage it measures (Kafka's metric tags: the user, the
/// client id, or both, by the level of the entity whose quota applies).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SensorKey {
    kind: Kind,
    user: Option<String>,
    client: Option<String>,
}

/// Sensors kept before the idle ones are dropped.
const SENSORS_KEPT: usize = 4096;

/// The node's client quotas and the usage measured against them.
#[derive(Debug)]
pub struct Quotas {
    table: RwLock<QuotaTable>,
    /// Whether any quota is set: nothing is measured otherwise.
    active: AtomicBool,
    sensors: Mutex<HashMap<SensorKey, Rate>>,
    window: Window,
    /// Where the milliseconds of the sensors count from.
    epoch: Instant,
    /// Held by each alteration from reading the table to applying its change.
    pub writes: tokio::sync::Mutex<()>,
}

impl Quotas {
    pub fn new(stored: Vec<(Entity, Values)>, window: Window) -> Quotas {
        let table = QuotaTable::new(stored);
        Quotas {
            active: AtomicBool::new(!table.is_empty()),
            table: RwLock::new(table),
            sensors: Mutex::new(HashMap::new()),
            window,
            epoch: Instant::now(),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether any quota is set.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    pub fn table(&self) -> RwLockReadGuard<'_, QuotaTable> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies stored changes.
    pub fn set(&self, changes: Vec<(Entity, Values)>) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        for (entity, values) in changes {
            table.set(entity, values);
        }
        self.active.store(!table.is_empty(), Ordering::Relaxed);
    }

    /// Milliseconds on the sensors' clock at `at`.
    pub fn millis(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }

    /// Records `value` of `kind` for `user` with `client_id` at `now_ms` and says how long the
    /// client is to be throttled (zero without a quota that applies).
    pub fn record(&self, kind: Kind, user: &str, client_id: &str, value: f64, now_ms: u64) -> u64 {
        if !self.active() {
            return 0;
        }
        let Some((bound, usage)) = self.table().resolve(kind.key(), user, client_id) else {
            return 0;
        };
        // The request quota throttles for at most one window, as Kafka's does.
        let max = match kind {
            Kind::Request => self.window.window_ms,
            _ => u64::MAX,
        };
        let key = sensor_key(kind, usage, user, client_id);
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        if sensors.len() >= SENSORS_KEPT && !sensors.contains_key(&key) {
            let idle = u64::from(self.window.samples) * self.window.window_ms;
            sensors.retain(|_, r| {
                r.last_event_ms()
                    .is_some_and(|t| now_ms.saturating_sub(t) < idle)
            });
        }
        let rate = sensors.entry(key).or_default();
        rate.record_and_throttle(self.window, value, bound, now_ms, max)
    }

    /// Takes back `value` of `kind` recorded at `now_ms` (a throttled fetch answers nothing).
    pub fn unrecord(&self, kind: Kind, user: &str, client_id: &str, value: f64, now_ms: u64) {
        let Some((_, usage)) = self.table().resolve(kind.key(), user, client_id) else {
            return;
        };
        let key = sensor_key(kind, usage, user, client_id);
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rate) = sensors.get_mut(&key) {
            rate.record(self.window, -value, now_ms);
        }
    }

    /// The most bytes one fetch may return to `user` with `client_id`: what the consumer quota
    /// allows over the window less one sample (Kafka's `maxValueInQuotaWindow`), if one
    /// applies.
    pub fn max_fetch_bytes(&self, user: &str, client_id: &str) -> Option<i32> {
        if !self.active() {
            return None;
        }
        let (bound, _) = self.table().resolve(Kind::Fetch.key(), user, client_id)?;
        let seconds = f64::from(self.window.samples.saturating_sub(1))
            * self.window.window_ms as f64
            / 1000.0;
        Some((bound * seconds).min(f64::from(i32::MAX)) as i32)
    }
}

fn sensor_key(kind: Kind, usage: Usage, user: &str, client_id: &str) -> SensorKey {
    let (user, client) = match usage {
        Usage::UserAndClient => (Some(user), Some(client_id)),
        Usage::User => (Some(user), None),
        Usage::Client => (None, Some(client_id)),
    };
    SensorKey {
        kind,
        user: user.map(str::to_string),
        client: client.map(str::to_string),
    }
}

/// Request handling time as Kafka's request quota counts it: a percentage of one thread over a
/// second.
pub fn request_percentage(busy: Duration) -> f64 {
    busy.as_nanos() as f64 * 100.0 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str) -> Entity {
        Entity::new([(EntityType::ClientId, Some(name.to_string()))])
    }

    #[test]
    fn throttles_only_what_a_quota_applies_to() {
        let q = Quotas::new(
            vec![(
                client("slow"),
                Values::from([(table::PRODUCER_BYTE_RATE.to_string(), 1000.0)]),
            )],
            Window::default(),
        );
        assert!(q.active());
        assert_eq!(q.record(Kind::Produce, "ANONYMOUS", "fast", 1e9, 0), 0);
        assert_eq!(q.record(Kind::Fetch, "ANONYMOUS", "slow", 1e9, 0), 0);
        assert_eq!(q.record(Kind::Produce, "ANONYMOUS", "slow", 5_000.0, 0), 0);
        // 20,000 bytes over ten seconds against 1,000/s: 10 s.
        assert_eq!(
            q.record(Kind::Produce, "ANONYMOUS", "slow", 15_000.0, 0),
            10_000
        );
        q.unrecord(Kind::Produce, "ANONYMOUS", "slow", 15_000.0, 0);
        assert_eq!(q.record(Kind::Produce, "ANONYMOUS", "slow", 0.0, 0), 0);
        // The quota removed: nothing measured.
        q.set(vec![(client("slow"), Values::default())]);
        assert!(!q.active());
        assert_eq!(q.record(Kind::Produce, "ANONYMOUS", "slow", 1e9, 0), 0);
    }

    #[test]
    fn request_time_throttles_for_a_window_at_most() {
        let q = Quotas::new(
            vec![(
                Entity::new([(EntityType::User, None)]),
                Values::from([(table::REQUEST_PERCENTAGE.to_string(), 1.0)]),
            )],
            Window::default(),
        );
        let busy = request_percentage(Duration::from_secs(5));
        assert_eq!(busy, 500.0);
        assert_eq!(q.record(Kind::Request, "alice", "c", busy, 0), 1000);
        // Each user has a sensor of its own under a default-user quota.
        assert_eq!(q.record(Kind::Request, "bob", "c", 1.0, 0), 0);
    }

    #[test]
    fn a_fetch_is_capped_at_the_window_s_worth() {
        let q = Quotas::new(
            vec![(
                client("c"),
                Values::from([(table::CONSUMER_BYTE_RATE.to_string(), 1000.0)]),
            )],
            Window::default(),
        );
        assert_eq!(q.max_fetch_bytes("u", "c"), Some(10_000));
        assert_eq!(q.max_fetch_bytes("u", "other"), None);
    }
}
