//! A rate over sampled windows (PURE: every call takes `now_ms`), as Kafka's quota sensors
//! measure one: `quota.window.num` samples of `quota.window.size.seconds` each (11 of one
//! second by default), the rate the sum of the live samples over the time they span, never
//! less than `samples - 1` windows. A client new to the broker is thus measured over ten
//! seconds, so one large request is not throttled as if it came every second.

/// The shape of a quota's window: Kafka's `quota.window.num` and `quota.window.size.seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub samples: u32,
    pub window_ms: u64,
}

impl Default for Window {
    fn default() -> Window {
        Window {
            samples: 11,
            window_ms: 1000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    last_event_ms: u64,
    value: f64,
}

impl Sample {
    fn new(now_ms: u64) -> Sample {
        Sample {
            start_ms: now_ms,
            last_event_ms: now_ms,
            value: 0.0,
        }
    }
}

/// One sensor's samples (Kafka's `Rate` over a `WindowedSum`): a ring of `samples + 1`.
#[derive(Debug, Clone)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Default for Rate {
    fn default() -> Rate {
        Rate::new()
    }
}

impl Rate {
    pub fn new() -> Rate {
        Rate {
            samples: Vec::new(),
            current: 0,
        }
    }

    /// Adds `value` at `now_ms` (a negative value takes back what was recorded).
    pub fn record(&mut self, w: Window, value: f64, now_ms: u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= w.window_ms {
            self.current = (self.current + 1) % (w.samples as usize + 1);
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now_ms));
            } else {
                self.samples[self.current] = Sample::new(now_ms);
            }
        }
        let s = &mut self.samples[self.current];
        s.value += value;
        s.last_event_ms = now_ms;
    }

    /// The rate per second at `now_ms`.
    pub fn measure(&mut self, w: Window, now_ms: u64) -> f64 {
        self.purge(w, now_ms);
        let sum: f64 = self.samples.iter().map(|s| s.value).sum();
        sum / (self.window_size_ms(w, now_ms) as f64 / 1000.0)
    }

    /// The time the samples span, at least `samples - 1` windows (Kafka's `Rate.windowSize`).
    pub fn window_size_ms(&mut self, w: Window, now_ms: u64) -> u64 {
        self.purge(w, now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / w.window_ms;
        let min_full = u64::from(w.samples.saturating_sub(1));
        if full < min_full {
            elapsed += (min_full - full) * w.window_ms;
        }
        elapsed.max(1)
    }

    /// Samples with no event for `samples` windows start again, empty, at `now_ms`.
    fn purge(&mut self, w: Window, now_ms: u64) {
        let expire = u64::from(w.samples) * w.window_ms;
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.last_event_ms) >= expire {
                *s = Sample::new(now_ms);
            }
        }
    }

    /// When the last value was recorded, if ever.
    pub fn last_event_ms(&self) -> Option<u64> {
        self.samples.iter().map(|s| s.last_event_ms).max()
    }

    /// Records `value` and says how long the client is to wait, in milliseconds, if the rate
    /// then exceeds `bound` (Kafka's `QuotaUtils.throttleTime`: the excess over the bound, as a
    /// share of the bound, of the window the samples span), capped at `max_ms`.
    pub fn record_and_throttle(
        &mut self,
        w: Window,
        value: f64,
        bound: f64,
        now_ms: u64,
        max_ms: u64,
    ) -> u64 {
        self.record(w, value, now_ms);
        let rate = self.measure(w, now_ms);
        if rate <= bound {
            return 0;
        }
        let window = self.window_size_ms(w, now_ms) as f64;
        let ms = ((rate - bound) / bound * window).round();
        (ms as u64).min(max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Window = Window {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn a_new_client_is_measured_over_ten_windows() {
        let mut r = Rate::new();
        r.record(W, 10_000.0, 5_000);
        assert_eq!(r.window_size_ms(W, 5_000), 10_000);
        assert_eq!(r.measure(W, 5_000), 1000.0);
        // 500 ms later: ten windows and the half gone by.
        assert_eq!(r.window_size_ms(W, 5_500), 10_500);
    }

    #[test]
    fn throttle_time_is_the_excess_over_the_bound_of_the_window() {
        let mut r = Rate::new();
        // 20,000 bytes against 1,000 bytes/s over ten seconds: twice the bound, so the client
        // waits one more window span (10 s).
        let t = r.record_and_throttle(W, 20_000.0, 1000.0, 0, u64::MAX);
        assert_eq!(t, 10_000);
        let mut r = Rate::new();
        assert_eq!(r.record_and_throttle(W, 5_000.0, 1000.0, 0, u64::MAX), 0);
        // Capped (the request quota caps at one window).
        let mut r = Rate::new();
        assert_eq!(r.record_and_throttle(W, 20_000.0, 1000.0, 0, 1000), 1000);
    }

    #[test]
    fn samples_roll_and_expire() {
        let mut r = Rate::new();
        for s in 0..30u64 {
            r.record(W, 1000.0, s * 1000);
        }
        // Twelve samples kept, but the oldest (18 s) had its last event 11 s ago and starts
        // again empty: 11,000 over the ten seconds from 19 s.
        assert_eq!(r.measure(W, 29_000), 1100.0);
        // Quiet for longer than the samples span: nothing left.
        assert_eq!(r.measure(W, 29_000 + 11_000), 0.0);
    }

    #[test]
    fn a_negative_value_takes_back() {
        let mut r = Rate::new();
        r.record(W, 5000.0, 0);
        r.record(W, -5000.0, 0);
        assert_eq!(r.measure(W, 0), 0.0);
    }
}
