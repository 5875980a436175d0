//! `koord simulate`: a deterministic simulator of rebalances, over the same pure group core
//! ([`crate::group::ClassicGroup`]) and assignors that `koord serve` runs, with a simulated
//! clock, simulated members and no sockets, threads or wall clock. Same flags, same output.
//!
//! A scenario starts from a settled group of `before` members that process every task, then
//! applies a schedule of membership changes (by default `before -> after`, one member every
//! `interval_ms`), and runs until nothing is left to happen. With `before` 0 it is a cold
//! start: the group starts empty, members join one after another from the first change on,
//! and every task is restored from nothing by its first owner. It reports the number of
//! rebalances, per-task downtime (sum, max, p99) and the time until the group is balanced, and
//! can draw each task's timeline as an SVG ([`svg`]).
//!
//! # The model
//! - **Members** ([`client`]): eager (`range`), cooperative (`cooperative-sticky`, assigned by
//!   `uniform`) or learner-capable (`learner`, learner-spec.md 11). A member processes a task
//!   once it holds it and its local state is restored; restoring takes `restore_ms`. A member
//!   keeps the state of a task while it holds or learns it, so an eager member that gets back a
//!   task it gave up at the join processes it at once. A learner-capable member restores its
//!   learning tasks in the background and rejoins as soon as one is ready (reporting it in its
//!   `LearnerSubscription`); a task it is then granted is processed at once. It gives up at a
//!   join the tasks koord marked (seed mode; ready-gated koord sends no marks, and revokes a task
//!   by leaving it out of the owner's assignment once the learner is ready, the owner gives it
//!   up and rejoins, and the next generation grants it). Scale-in: a learner-capable member
//!   rejoins with `leaving`, keeps processing while koord drains it through learners, and sends
//!   LeaveGroup once it holds nothing; eager and cooperative members send LeaveGroup at once.
//!   The learner assignor runs with `learner.*` defaults except `mode`, `max.learners` and
//!   `warmup.ms` (default 0, as koord's; with more, an owner that got a task cold less than
//!   that long ago is cold for it and step 3a moves the task without a learner).
//! - **Rebalance barrier** (`barrier_ms`): the time from a rebalance starting to members
//!   receiving their SyncGroup answers. Members learn of a rebalance the moment it starts (a
//!   heartbeat answered REBALANCE_IN_PROGRESS) and rejoin at once, giving up at the join what
//!   their protocol gives up there; the join phase then ends, and the simulated store
//!   acknowledges the generation's record `barrier_ms` later, which is when koord answers the
//!   SyncGroups. So the barrier stands for the slowest member's rejoin plus the SyncGroup round
//!   trip, and a task given up at a join is down for one barrier. A member that must rejoin
//!   while its request is parked rejoins once it is answered.
//! - **Downtime** of a task: the time no member processes it (nobody holds it, or its holder is
//!   still restoring).
//! - **Balanced**: every scheduled change done, the members that stay hold max - min <= 1
//!   tasks, leaving members hold nothing, no learners, every task processing. The time until
//!   balanced counts from the first change to the last time this became true.
//! - The simulator also checks I1 (no task held by two members at once) and reports any
//!   violation with the run.

pub mod client;
pub mod engine;
pub mod record;
pub mod svg;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::assignor::learner::{LearnerAssignor, Settings as LearnerSettings};
use crate::assignor::policy::AssignmentPolicy;
use crate::assignor::Registry;
use crate::group::{AssignmentMode, GroupConfig, GroupId};

pub use client::ClientKind;
pub use record::{Downtime, Recorder, View};

/// An assignor with the clients that go with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `range` with eager clients.
    Range,
    /// `uniform` with cooperative clients (`cooperative-sticky`).
    Uniform,
    /// The learner assignor in a mode, with learner-capable clients.
    Learner(crate::assignor::learner::Mode),
}

impl Strategy {
    /// Parses an assignor name (`range`, `uniform`, `learner`) and, for `learner`, a mode.
    pub fn parse(assignor: &str, mode: Option<&str>) -> Result<Strategy, String> {
        match assignor {
            "range" => Ok(Strategy::Range),
            "uniform" => Ok(Strategy::Uniform),
            "learner" => {
                let mode = mode.unwrap_or("seed");
                crate::assignor::learner::Mode::parse(mode)
                    .map(Strategy::Learner)
                    .ok_or_else(|| format!("unknown learner mode `{mode}` (seed, ready-gated)"))
            }
            other => Err(format!(
                "unknown assignor `{other}` (range, uniform, learner)"
            )),
        }
    }

    pub fn assignor(self) -> &'static str {
        match self {
            Strategy::Range => "range",
            Strategy::Uniform => "uniform",
            Strategy::Learner(_) => "learner",
        }
    }

    pub fn mode(self) -> &'static str {
        match self {
            Strategy::Range => "eager",
            Strategy::Uniform => "cooperative",
            Strategy::Learner(m) => m.as_str(),
        }
    }

    pub fn client_kind(self) -> ClientKind {
        match self {
            Strategy::Range => ClientKind::Eager,
            Strategy::Uniform => ClientKind::Cooperative,
            Strategy::Learner(_) => ClientKind::Learner,
        }
    }
}

/// One simulated run's parameters.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Tasks: the partitions of the one topic.
    pub tasks: u32,
    /// Members of the settled group the run starts from.
    pub before: usize,
    /// Members after the default schedule (ignored when `schedule` is set).
    pub after: usize,
    /// Time between successive changes of the default schedule.
    pub interval_ms: u64,
    /// Explicit changes: (ms after the first change's instant, +n members start / -n stop).
    pub schedule: Option<Vec<(u64, i32)>>,
    pub restore_ms: u64,
    pub barrier_ms: u64,
    pub strategy: Strategy,
    /// `learner.max.learners`.
    pub max_learners: usize,
    /// `learner.warmup.ms`.
    pub warmup_ms: u64,
    /// Give up this long after the first change.
    pub horizon_ms: u64,
}

impl Default for Scenario {
    fn default() -> Scenario {
        Scenario {
            tasks: 60,
            before: 3,
            after: 5,
            interval_ms: 0,
            schedule: None,
            restore_ms: 10_000,
            barrier_ms: 2_000,
            strategy: Strategy::Range,
            max_learners: 2,
            warmup_ms: 0,
            horizon_ms: 24 * 3600 * 1000,
        }
    }
}

impl Scenario {
    /// The membership changes: explicit, or `before -> after` one member at a time.
    pub fn schedule(&self) -> Vec<(u64, i32)> {
        if let Some(s) = &self.schedule {
            return s.clone();
        }
        let (n, step) = if self.after >= self.before {
            (self.after - self.before, 1)
        } else {
            (self.before - self.after, -1)
        };
        (0..n as u64)
            .map(|k| (k * self.interval_ms, step))
            .collect()
    }

    /// How many distinct members the run may start.
    pub fn member_slots(&self) -> usize {
        let added: i64 = self
            .schedule()
            .iter()
            .filter(|(_, d)| *d > 0)
            .map(|(_, d)| i64::from(*d))
            .sum();
        self.before + added as usize
    }

    /// A one-line description.
    pub fn describe(&self) -> String {
        let change = match &self.schedule {
            Some(s) => format!(
                "schedule {}",
                s.iter()
                    .map(|(at, d)| format!("{at}:{d:+}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            None if self.before == 0 => format!("cold start 0 -> {}", self.after),
            None if self.after >= self.before => {
                format!("scale-out {} -> {}", self.before, self.after)
            }
            None => format!("scale-in {} -> {}", self.before, self.after),
        };
        format!(
            "{change}, {} tasks, barrier {}, interval {}, max.learners {}, warmup {}",
            self.tasks,
            secs(self.barrier_ms),
            secs(self.interval_ms),
            self.max_learners,
            secs(self.warmup_ms)
        )
    }

    fn assignment_mode(&self) -> Result<AssignmentMode, String> {
        let catalog: BTreeMap<String, u32> = [(client::TOPIC.to_owned(), self.tasks)]
            .into_iter()
            .collect();
        // The learner's settings are the scenario's; the assignor is chosen by name.
        let mut registry = Registry::builtin();
        registry.register(Arc::new(LearnerAssignor::new(LearnerSettings {
            mode: match self.strategy {
                Strategy::Learner(mode) => mode,
                _ => LearnerSettings::default().mode,
            },
            max_learners: self.max_learners,
            warmup_ms: self.warmup_ms,
            ..LearnerSettings::default()
        })));
        let policy =
            AssignmentPolicy::new(self.strategy.assignor(), &[], registry, Arc::new(catalog));
        Ok(policy.mode_for(&GroupId::new("sim")))
    }

    fn validate(&self) -> Result<(), String> {
        if self.tasks == 0 {
            return Err("--tasks must be at least 1".into());
        }
        let mut live = self.before as i64;
        let mut schedule = self.schedule();
        schedule.sort_by_key(|(at, _)| *at);
        if self.before == 0 && schedule.first().is_none_or(|&(_, d)| d < 1) {
            return Err("a cold start (--before 0) needs members to join first".into());
        }
        for (_, d) in schedule {
            live += i64::from(d);
            if live < 1 {
                return Err("the schedule stops every member".into());
            }
        }
        Ok(())
    }
}

/// The figures of one run, and what is needed to draw it.
#[derive(Debug, Clone)]
pub struct Report {
    pub strategy: Strategy,
    pub restore_ms: u64,
    /// Generations formed from the first change on.
    pub rebalances: usize,
    pub downtime: Downtime,
    /// From the first change until balanced; None if it never settled within the horizon.
    pub balanced_after_ms: Option<u64>,
    /// The last instant simulated, from the first change.
    pub end_ms: u64,
    /// Protocol errors met, and I1 violations: none is expected.
    pub anomalies: Vec<String>,
    pub recorder: Recorder,
    pub member_names: Vec<String>,
}

/// Runs one scenario.
///
/// # Errors
/// An invalid scenario, or a run that got stuck (a bug worth reporting).
pub fn run(scenario: &Scenario) -> Result<Report, String> {
    scenario.validate()?;
    let config = GroupConfig {
        initial_rebalance_delay_ms: 0,
        assignment: scenario.assignment_mode()?,
        ..GroupConfig::default()
    };
    let mut engine = engine::Engine::new(scenario, config);
    engine.set_up()?;
    let start = engine.now.plus_ms(scenario.barrier_ms.max(1000));
    engine.run(start)?;
    let rec = engine.rec.clone();
    let change = rec.change;
    let mut anomalies = engine.anomalies.clone();
    anomalies.extend(
        rec.double_active
            .iter()
            .map(|d| format!("I1 violated: {d}")),
    );
    Ok(Report {
        strategy: scenario.strategy,
        restore_ms: scenario.restore_ms,
        rebalances: rec.generations.iter().filter(|&&g| g >= change).count(),
        downtime: Downtime::of(&rec.downtimes()),
        balanced_after_ms: rec.balanced_since.map(|b| b.saturating_sub(change)),
        end_ms: rec.end.saturating_sub(change),
        anomalies,
        member_names: engine.members.iter().map(|m| m.name.clone()).collect(),
        recorder: rec,
    })
}

/// `12.5 s`.
pub fn secs(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The table of reports, one line each.
pub fn table(reports: &[Report]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:<12} {:>8} {:>10} {:>10} {:>9} {:>9} {:>10} {:>14}",
        "assignor",
        "mode",
        "restore",
        "rebalances",
        "down sum",
        "down max",
        "down p99",
        "tasks down",
        "balanced after"
    );
    for r in reports {
        let _ = writeln!(
            out,
            "{:<8} {:<12} {:>8} {:>10} {:>10} {:>9} {:>9} {:>10} {:>14}",
            r.strategy.assignor(),
            r.strategy.mode(),
            secs(r.restore_ms),
            r.rebalances,
            secs(r.downtime.sum_ms),
            secs(r.downtime.max_ms),
            secs(r.downtime.p99_ms),
            r.downtime.tasks_down,
            r.balanced_after_ms.map_or("never".to_owned(), secs)
        );
        for a in &r.anomalies {
            let _ = writeln!(out, "  ! {a}");
        }
    }
    out
}

/// The reports as a JSON array (one object per run; times in ms).
pub fn json(scenario: &Scenario, reports: &[Report]) -> String {
    let mut out = String::from("[\n");
    for (i, r) in reports.iter().enumerate() {
        let anomalies: Vec<String> = r.anomalies.iter().map(|a| json_string(a)).collect();
        let _ = write!(
            out,
            "  {{\"assignor\": {}, \"mode\": {}, \"clients\": {}, \"tasks\": {}, \"barrier_ms\": {}, \
             \"warmup_ms\": {}, \"restore_ms\": {}, \"rebalances\": {}, \"downtime_sum_ms\": {}, \"downtime_max_ms\": {}, \
             \"downtime_p99_ms\": {}, \"tasks_down\": {}, \"balanced_after_ms\": {}, \"end_ms\": {}, \
             \"anomalies\": [{}]}}",
            json_string(r.strategy.assignor()),
            json_string(r.strategy.mode()),
            json_string(r.strategy.client_kind().label()),
            scenario.tasks,
            scenario.barrier_ms,
            scenario.warmup_ms,
            r.restore_ms,
            r.rebalances,
            r.downtime.sum_ms,
            r.downtime.max_ms,
            r.downtime.p99_ms,
            r.downtime.tasks_down,
            r.balanced_after_ms
                .map_or("null".to_owned(), |b| b.to_string()),
            r.end_ms,
            anomalies.join(", ")
        );
        out.push_str(if i + 1 < reports.len() { ",\n" } else { "\n" });
    }
    out.push_str("]\n");
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
