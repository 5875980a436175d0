//! The learner-aware assignor (learner-spec.md, sections 6 to 13).
//!
//! A task (partition) that must move is first *learned* by its new owner, which restores the
//! task's state while the old owner keeps processing it; it moves only when the learner is
//! ready, so scaling a group does not stop the world. The coordinator keeps the authoritative
//! state S ([`State`]: owner, learner, marks, warm-up start, cold owners, leavers) with the
//! group's durable record, and [`plan()`] runs the spec's deterministic algorithm over it at
//! every rebalance.
//!
//! - [`LearnerAssignor`]: the assignor as the group cores call it ([`crate::assignor::Assignor`]):
//!   members' reports in, S in and out, each member's `LearnerAssignment` user data.
//! - [`plan()`]: steps 1 to 6 of 6.5 (standbys, step 5, are out of scope) over an interned spec.
//! - [`state`]: S and its stored form.
//! - [`wire`]: `LearnerSubscription` / `LearnerAssignment` (section 11).
//!
//! Modes (`learner.mode`): in `seed` mode koord tells each owner which of its tasks are being
//! learned (marks) and learner-capable owners give them up at every join; in `ready-gated` mode
//! marks stay inside koord, owners keep processing, and a task is revoked only once its learner
//! is ready (revoke in one generation, grant in the next). Unmodified clients cannot read marks,
//! so for them both modes are ready-gated, and their learners are ready `learner.warmup.ms`
//! after they were planned (section 12); koord starts the rebalance itself when that time comes.
//!
//! Cold owners (6.5 step 3a): protecting an owner's processing only makes sense once it has
//! state worth protecting. A member that got a task cold (an orphan, a first assignment, a
//! learner promoted before it was ready, or a move of this very rule) less than
//! `learner.warmup.ms` ago is still restoring it, so step 4 (drain, fill, shave) moves such a
//! task directly to its receiver: no learner, not counted against `learner.max.learners`, and
//! a donor's cold tasks go before its warm ones (those not held by anyone else first). The
//! cooperative revoke-then-grant still applies: while the old owner holds the task it is
//! granted to nobody, and S remembers the receiver, which the next generation grants it to. A
//! task granted through a ready learner is warm at once; a warm owner's task moves only
//! through a ready learner, as before. S keeps, per cold task, its member and since when
//! ([`state::Cold`]), dropped once the warm-up has passed. With `learner.warmup.ms=0` (the
//! default) no owner is ever cold, and section 7's trace is unchanged. So a group that starts
//! from nothing, members joining a few hundred milliseconds apart, settles as fast as with
//! `uniform`: each join costs one revoke and one grant generation, not a warm-up per move.

pub mod plan;
pub mod state;
pub mod wire;

use std::fmt;

use bytes::Bytes;

pub use plan::{plan, LearnerInput, Plan};
pub use state::State;

use self::wire::{LearnerAssignment, LearnerSubscription};
use crate::assignor::{Assignment, Assignor, GroupSpec, Partition, PlanInput, PlanOutput};
use crate::vocab::{GroupError, MemberId, Timestamp};

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
    /// The task moved to its learner (step 1), from its owner if it had one; or, its owner
    /// being cold, straight to its receiver (step 3a).
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

/// The learner assignor with its `learner.*` settings, as registered by name.
#[derive(Debug, Clone, Default)]
pub struct LearnerAssignor {
    settings: Settings,
}

impl LearnerAssignor {
    pub fn new(settings: Settings) -> LearnerAssignor {
        LearnerAssignor { settings }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// The user data of a learner-capable member's subscription; none is nothing to report.
fn learner_subscription(user_data: Option<&Bytes>) -> Result<LearnerSubscription, GroupError> {
    match user_data {
        Some(b) if !b.is_empty() => {
            LearnerSubscription::decode(b).map_err(|_| GroupError::InconsistentGroupProtocol)
        }
        _ => Ok(LearnerSubscription::default()),
    }
}

impl Assignor for LearnerAssignor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn learners(&self, state: &[u8]) -> Vec<super::LearnerView> {
        let Ok(s) = State::decode(state) else {
            return Vec::new();
        };
        let name = |m: u32| s.members.get(m as usize).map(str::to_owned);
        s.learners
            .iter()
            .filter_map(|l| {
                let (topic, partition) = s.task(l.task)?;
                Some(super::LearnerView {
                    topic: topic.to_owned(),
                    partition,
                    member: name(l.member)?,
                    owner: s.owners.get(l.task as usize).and_then(|&o| name(o)),
                    planned: l.planned,
                })
            })
            .collect()
    }

    /// The plan for a group with no state: members keep what they own, the rest is dealt.
    fn assign(&self, spec: &GroupSpec) -> Assignment {
        let declared: Vec<Vec<Partition>> = spec.members.iter().map(|m| m.owned.clone()).collect();
        let input = PlanInput {
            spec,
            declared: &declared,
            capable: false,
            state: &[],
            now: Timestamp(0),
        };
        match self.plan(&input) {
            Ok(out) => out.assignment,
            // Not capable: no user data is read, so planning cannot fail.
            Err(_) => Assignment::from_lists(vec![Vec::new(); spec.members.len()]),
        }
    }

    /// S in, plan, S and the follow-up out.
    fn plan(&self, input: &PlanInput<'_>) -> Result<PlanOutput, GroupError> {
        let spec = input.spec;
        let mut inputs = Vec::with_capacity(spec.members.len());
        for (m, declared) in spec.members.iter().zip(input.declared) {
            let sub = if input.capable {
                learner_subscription(m.user_data.as_ref())?
            } else {
                LearnerSubscription::default()
            };
            inputs.push(LearnerInput {
                capable: input.capable,
                declared: declared.clone(),
                revoked: spec.resolve(&sub.revoked),
                ready: spec.resolve(&sub.ready),
                lags: sub
                    .lags
                    .iter()
                    .filter_map(|l| {
                        let p = u32::try_from(l.partition).ok()?;
                        Some((spec.partition_of(&l.topic, p)?, l.lag))
                    })
                    .collect(),
                leaving: sub.leaving,
            });
        }
        // S is koord's own bytes; unreadable (a damaged record) starts afresh, and says so.
        let (prev, warning) = match State::decode(input.state) {
            Ok(prev) => (prev, None),
            Err(why) => (
                State::default(),
                Some(format!(
                    "learner state unreadable ({why}): planned from an empty state, learners and marks are lost"
                )),
            ),
        };
        let plan = plan(spec, &inputs, &prev, &self.settings, input.now);
        let probe_ms = plan.probe.map_or(-1, |t| t.as_millis() as i64);
        let seed = self.settings.mode == Mode::Seed;
        let user_data = if input.capable {
            (0..spec.members.len())
                .map(|i| {
                    Some(
                        LearnerAssignment {
                            learning: spec.by_topic(&plan.learning[i]),
                            // Ready-gated: marks stay inside koord; owners keep processing.
                            marks: if seed {
                                spec.by_topic(&plan.marks[i])
                            } else {
                                Vec::new()
                            },
                            probe_ms,
                        }
                        .encode(),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let summary = Summary {
            topics: &spec.topics,
            plan: &plan,
        }
        .to_string();
        Ok(PlanOutput {
            user_data,
            // I1: nothing is granted while another member holds it.
            withholds_held: true,
            state: plan.state.encode(),
            follow_up: plan.follow_up,
            summary: Some(summary),
            warning,
            assignment: plan.assigned,
        })
    }

    fn speaks_protocol(&self) -> bool {
        true
    }

    fn check_user_data(&self, user_data: Option<&Bytes>) -> Result<(), GroupError> {
        learner_subscription(user_data).map(|_| ())
    }
}
