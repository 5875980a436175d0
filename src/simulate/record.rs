//! What a run observed: each task's timeline (owner, processing or not, learner), the instants
//! rebalances started and generations formed, and when the group last became balanced; and the
//! figures computed from them.

use super::client::SimMember;
use crate::group::Timestamp;

/// A task at one instant, as the members see it (not as koord believes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// The member holding it as active (index into the run's members).
    pub owner: Option<u16>,
    /// Its owner processes it (its state is restored). Downtime is the time this is false.
    pub processing: bool,
    /// The member learning it.
    pub learner: Option<u16>,
    /// The learner's state is restored.
    pub learner_ready: bool,
}

/// The observations of one run.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    recording: bool,
    /// Where the timeline starts (the settled initial group).
    pub origin: u64,
    /// The first membership change: reported times count from here.
    pub change: u64,
    /// The last instant observed.
    pub end: u64,
    /// Per task: (instant, view from then on), one entry per change.
    pub tasks: Vec<Vec<(u64, View)>>,
    /// Instants rebalances started.
    pub rebalances: Vec<u64>,
    /// Instants generations formed (a rebalance's join phase ended).
    pub generations: Vec<u64>,
    /// Balanced since this instant (None: not balanced now).
    pub balanced_since: Option<u64>,
    /// I1 violations seen: a task held by two members at once.
    pub double_active: Vec<String>,
}

impl Recorder {
    pub fn new(tasks: usize) -> Recorder {
        Recorder {
            tasks: vec![Vec::new(); tasks],
            ..Recorder::default()
        }
    }

    pub fn start(&mut self, origin: Timestamp, change: Timestamp) {
        self.recording = true;
        self.origin = origin.0;
        self.change = change.0;
    }

    pub fn rebalance_started(&mut self, now: Timestamp) {
        if self.recording {
            self.rebalances.push(now.0);
        }
    }

    pub fn generation(&mut self, now: Timestamp) {
        if self.recording {
            self.generations.push(now.0);
        }
    }

    /// Records every task's view at `now`, and whether the group is balanced: every
    /// membership change done, the members that stay hold max - min <= 1 tasks, leavers hold
    /// nothing, no learners, every task processing.
    pub fn observe(&mut self, now: Timestamp, members: &[SimMember], changes_pending: bool) {
        if !self.recording {
            return;
        }
        self.end = now.0;
        let mut all_processing = true;
        let mut any_learner = false;
        for (t, timeline) in self.tasks.iter_mut().enumerate() {
            let t = t as u32;
            let mut owners = members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.live() && m.owned.contains(&t));
            let owner = owners.next();
            if let Some((other, _)) = owners.next() {
                if self.double_active.len() < 20 {
                    self.double_active.push(format!(
                        "at {} ms task {t} held by {} and {}",
                        now.0.saturating_sub(self.change),
                        owner.map_or("?", |(_, m)| m.name.as_str()),
                        members[other].name
                    ));
                }
            }
            let learner = members
                .iter()
                .enumerate()
                .find(|(_, m)| m.live() && m.learning.contains(&t));
            let view = View {
                owner: owner.map(|(i, _)| i as u16),
                processing: owner.is_some_and(|(_, m)| m.processing(t, now)),
                learner: learner.map(|(i, _)| i as u16),
                learner_ready: learner.is_some_and(|(_, m)| m.learner_ready(t, now)),
            };
            all_processing &= view.processing;
            any_learner |= view.learner.is_some();
            match timeline.last_mut() {
                Some((_, last)) if *last == view => {}
                Some((at, last)) if *at == now.0 => *last = view,
                _ => timeline.push((now.0, view)),
            }
        }
        let staying: Vec<usize> = members
            .iter()
            .filter(|m| m.live() && !m.leaving)
            .map(|m| m.owned.len())
            .collect();
        let leavers_empty = members
            .iter()
            .filter(|m| m.live() && m.leaving)
            .all(|m| m.owned.is_empty());
        let spread = staying.iter().max().unwrap_or(&0) - staying.iter().min().unwrap_or(&0);
        let balanced =
            !changes_pending && spread <= 1 && leavers_empty && !any_learner && all_processing;
        match (balanced, self.balanced_since) {
            (true, None) => self.balanced_since = Some(now.0),
            (false, Some(_)) => self.balanced_since = None,
            _ => {}
        }
    }

    /// Each task's downtime (ms not processing) from the origin to `end`.
    pub fn downtimes(&self) -> Vec<u64> {
        self.tasks
            .iter()
            .map(|timeline| {
                let mut down = 0;
                for (i, (at, view)) in timeline.iter().enumerate() {
                    let until = timeline.get(i + 1).map_or(self.end, |(next, _)| *next);
                    if !view.processing {
                        down += until.saturating_sub(*at);
                    }
                }
                down
            })
            .collect()
    }
}

/// Summary statistics of per-task downtimes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Downtime {
    pub sum_ms: u64,
    pub max_ms: u64,
    /// Nearest-rank 99th percentile over tasks.
    pub p99_ms: u64,
    /// Tasks that were down at some point.
    pub tasks_down: usize,
}

impl Downtime {
    pub fn of(downtimes: &[u64]) -> Downtime {
        let mut sorted = downtimes.to_vec();
        sorted.sort_unstable();
        let p99 = if sorted.is_empty() {
            0
        } else {
            let rank = (sorted.len() * 99).div_ceil(100);
            sorted[rank.max(1) - 1]
        };
        Downtime {
            sum_ms: sorted.iter().sum(),
            max_ms: sorted.last().copied().unwrap_or(0),
            p99_ms: p99,
            tasks_down: sorted.iter().filter(|&&d| d > 0).count(),
        }
    }
}
