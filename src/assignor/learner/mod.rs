//! The learner-aware assignor (learner-spec.md, sections 6 to 13).
//!
//! A task (partition) that must move is first *learned* by its new owner, which restores the
//! task's state while the old owner keeps processing it; it moves only when the learner is
//! ready, so scaling a group does not stop the world. The coordinator keeps the authoritative
//! state S ([`State`]: owner, learner, marks, warm-up start, leavers) with the group's durable
//! record, and [`plan`] runs the spec's deterministic algorithm over it at every rebalance.
//!
//! - [`plan`]: steps 1 to 6 of 6.5 (standbys, step 5, are out of scope) over an interned spec.
//! - [`state`]: S and its stored form.
//! - [`wire`]: `LearnerSubscription` / `LearnerAssignment` (section 11).
//!
//! Modes (`learner.mode`): in `seed` mode koord tells each owner which of its tasks are being
//! learned (marks) and learner-capable owners give them up at every join; in `ready-gated` mode
//! marks stay inside koord, owners keep processing, and a task is revoked only once its learner
//! is ready (revoke in one generation, grant in the next). Unmodified clients cannot read marks,
//! so for them both modes are ready-gated, and their learners are ready `learner.warmup.ms`
//! after they were planned (section 12); koord starts the rebalance itself when that time comes.

pub mod plan;
pub mod state;
pub mod wire;

use std::fmt;

pub use plan::{plan, LearnerInput, Plan};
pub use state::State;

use crate::assignor::Partition;
use crate::vocab::MemberId;

/// The name clients choose (their assignor / protocol name) and `group.assignor` takes.
pub const NAME: &str = "learner";

/// When owners give up marked tasks (learner-spec.md 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Owners revoke marked tasks at every join (the seed's behaviour).
    #[default]
    Seed,
    /// koord revokes a marked task only once its learner is ready.
    ReadyGated,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "seed" => Some(Mode::Seed),
            "ready-gated" => Some(Mode::ReadyGated),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Seed => "seed",
            Mode::ReadyGated => "ready-gated",
        }
    }
}

/// The `learner.*` settings (learner-spec.md 13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    /// Group-wide budget of concurrent learners (I6).
    pub max_learners: usize,
    /// A learner reporting a lag at most this is ready.
    pub acceptable_recovery_lag: i64,
    /// Readiness delay of unmodified clients' learners.
    pub warmup_ms: u64,
    /// Drain deadline of a leaving member; `None` is forever.
    pub scale_down_timeout_ms: Option<u64>,
    /// Re-evaluation while learners remain and readiness may not be pushed.
    pub probe_interval_ms: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            mode: Mode::Seed,
            max_learners: 2,
            acceptable_recovery_lag: 10_000,
            warmup_ms: 0,
            scale_down_timeout_ms: None,
            probe_interval_ms: 600_000,
        }
    }
}

/// Something a rebalance did to one task, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvent {
    pub partition: Partition,
    pub kind: TaskEventKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEventKind {
    /// The task moved to its learner (step 1), from its owner if it had one.
    Moved {
        from: Option<MemberId>,
        to: MemberId,
        why: &'static str,
    },
    /// The learner may take it, but `from` still holds it (`None`: several members do):
    /// revoked now, granted next time.
    Revoking {
        from: Option<MemberId>,
        to: MemberId,
        why: &'static str,
    },
    /// A new learner (step 4: drain, fill or shave).
    LearnerAdded {
        owner: MemberId,
        learner: MemberId,
        step: &'static str,
    },
    LearnerDropped {
        why: &'static str,
    },
    /// A task without owner, restored cold (step 2).
    Orphan {
        to: MemberId,
    },
}

/// Formats a plan's events with topic names, for the generation's log line.
pub struct Summary<'a> {
    pub topics: &'a [crate::assignor::TopicSpec],
    pub plan: &'a Plan,
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let task = |p: &Partition| {
            let name = self.topics.get(p.topic as usize).map_or("?", |t| &*t.name);
            format!("{name}-{}", p.partition)
        };
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| -> fmt::Result {
            if !std::mem::take(&mut first) {
                f.write_str("; ")?;
            }
            Ok(())
        };
        for e in &self.plan.events {
            sep(f)?;
            let t = task(&e.partition);
            match &e.kind {
                TaskEventKind::Moved { from, to, why } => {
                    let from = from.as_ref().map_or("nobody", MemberId::as_str);
                    write!(f, "moved {t} {from} -> {to} ({why})")?
                }
                TaskEventKind::Revoking { from, to, why } => {
                    let from = from.as_ref().map_or("several members", MemberId::as_str);
                    write!(
                        f,
                        "revoking {t} from {from} for {to} ({why}; granted once given up)"
                    )?
                }
                TaskEventKind::LearnerAdded {
                    owner,
                    learner,
                    step,
                } => write!(
                    f,
                    "learner added: {learner} learns {t} from {owner} ({step})"
                )?,
                TaskEventKind::LearnerDropped { why } => {
                    write!(f, "learner of {t} dropped ({why})")?
                }
                TaskEventKind::Orphan { to } => write!(f, "{t} to {to} (no owner; cold restore)")?,
            }
        }
        let marks: Vec<String> = self.plan.marks.iter().flatten().map(task).collect();
        if !marks.is_empty() {
            sep(f)?;
            write!(f, "marks [{}]", marks.join(","))?;
        }
        if let Some(at) = self.plan.follow_up {
            sep(f)?;
            write!(f, "follow-up at {at}")?;
        }
        if first {
            f.write_str("no change")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
