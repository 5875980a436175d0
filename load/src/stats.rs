//! Latency samples and response codes per API, and the server's CPU and memory from /proc.

use std::collections::BTreeMap;
use std::time::Duration;

/// The APIs the load tool sends, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    FindCoordinator,
    JoinGroup,
    SyncGroup,
    Heartbeat,
    OffsetCommit,
    ConsumerGroupHeartbeat,
    ConsumerGroupDescribe,
}

impl Api {
    pub const ALL: [Api; 7] = [
        Api::FindCoordinator,
        Api::JoinGroup,
        Api::SyncGroup,
        Api::Heartbeat,
        Api::OffsetCommit,
        Api::ConsumerGroupHeartbeat,
        Api::ConsumerGroupDescribe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Api::FindCoordinator => "FindCoordinator",
            Api::JoinGroup => "JoinGroup",
            Api::SyncGroup => "SyncGroup",
            Api::Heartbeat => "Heartbeat",
            Api::OffsetCommit => "OffsetCommit",
            Api::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
            Api::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        }
    }
}

/// What one member (or the whole run, merged) saw.
#[derive(Debug, Default)]
pub struct Stats {
    /// Latencies in microseconds, per API, of answered requests counted in the window.
    pub latencies: BTreeMap<Api, Vec<u32>>,
    /// Responses per API and error name ("NONE" for success; "io" for a failed request).
    pub codes: BTreeMap<(Api, String), u64>,
    /// Responses that are not part of a normal group life (anything but success and the
    /// protocol's own steering codes).
    pub failures: u64,
    /// Partition offsets committed (acknowledged with no error).
    pub offsets_committed: u64,
}

impl Stats {
    pub fn record(&mut self, api: Api, latency: Duration, in_window: bool) {
        if in_window {
            let us = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
            self.latencies.entry(api).or_default().push(us);
        }
    }

    pub fn code(&mut self, api: Api, code: &str, failure: bool) {
        *self.codes.entry((api, code.to_owned())).or_default() += 1;
        if failure {
            self.failures += 1;
        }
    }

    pub fn merge(&mut self, other: Stats) {
        for (api, mut v) in other.latencies {
            self.latencies.entry(api).or_default().append(&mut v);
        }
        for (k, n) in other.codes {
            *self.codes.entry(k).or_default() += n;
        }
        self.failures += other.failures;
        self.offsets_committed += other.offsets_committed;
    }
}

/// The `q` quantile (0..=1) of sorted samples, in milliseconds.
pub fn quantile_ms(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64) * q).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    f64::from(sorted[i]) / 1000.0
}

/// A process's CPU time and memory, from /proc.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcSample {
    /// User + system CPU seconds so far.
    pub cpu_secs: f64,
    /// Resident set size now, bytes.
    pub rss: u64,
    /// Peak resident set size so far, bytes.
    pub peak_rss: u64,
}

/// Reads /proc/PID/stat and /proc/PID/status.
pub fn sample(pid: u32) -> std::io::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| std::io::Error::other("unreadable /proc stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let cpu_secs = (ticks(11) + ticks(12)) as f64 / clock_ticks_per_sec();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Ok(ProcSample {
        cpu_secs,
        rss: kb("VmRSS:"),
        peak_rss: kb("VmHWM:"),
    })
}

fn clock_ticks_per_sec() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|&t| t > 0.0)
            .unwrap_or(100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let v: Vec<u32> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(quantile_ms(&v, 0.5), 500.0);
        assert_eq!(quantile_ms(&v, 0.99), 990.0);
        assert_eq!(quantile_ms(&v, 0.999), 999.0);
        assert_eq!(quantile_ms(&v, 1.0), 1000.0);
        assert_eq!(quantile_ms(&[], 0.5), 0.0);
    }

    #[test]
    fn reads_its_own_process() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss > 0 && s.peak_rss >= s.rss, "{s:?}");
    }
}
