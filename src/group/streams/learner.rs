//! The learner-aware task assignor of streams groups, PURE: learner-spec.md applied to Kafka
//! Streams tasks, on top of the sticky assignor.
//!
//! The sticky assignor says where every task should be. A stateful task whose intended owner
//! is on another process than the one running it, and whose state there is not caught up, does
//! not move yet: it stays active where it runs, and its intended owner gets it as a warm-up
//! task (a learner) that restores the state from the changelog. When the learner reports a lag
//! (changelog end offset minus its offset, from the TaskOffsets and TaskEndOffsets of its
//! heartbeats) of at most the acceptable recovery lag, the next assignment moves the task: the
//! old owner revokes it first, then the learner gets it active with its state already there.
//!
//! - A task nobody runs (a new group, an owner that crashed or left) goes straight to its
//!   intended owner: there is nothing to keep processing, so waiting would only add a gap.
//! - A stateless task, or a move between two members of one process (one state directory),
//!   needs no warm-up.
//! - A standby or earlier warm-up that is already caught up is a learner that is ready.
//! - At most `max_learners` warm-ups are in flight in the group; those already in flight keep
//!   their slot, the rest wait for the next assignment.

use std::collections::{BTreeMap, BTreeSet};

use super::member::{StreamsMember, TaskSet};
use super::sticky::{Assigned, TaskId};
use crate::vocab::MemberId;

/// Kafka Streams' `Task.LATEST_OFFSET`: the offset sum of an active task that is running,
/// caught up by definition.
pub const LATEST_OFFSET: i64 = -2;

/// How far `learner`'s state of `task` is behind: its changelog end offset (its own report, or
/// else what the running owner reported) minus its offset. `None` when it has not said.
pub fn lag(learner: &StreamsMember, owner: Option<&StreamsMember>, task: &TaskId) -> Option<i64> {
    let offset = *learner.task_offsets.get(task)?;
    if offset == LATEST_OFFSET {
        // "Running it": caught up only while the member still runs the task. A report from
        // before it gave the task up is stale; the task's new owner has moved on since.
        let running = learner.assigned.active.contains(task)
            || learner.pending_revocation.active.contains(task);
        return running.then_some(0);
    }
    if offset < 0 {
        return None;
    }
    let end = learner
        .task_end_offsets
        .get(task)
        .copied()
        .filter(|&e| e >= 0)
        .or_else(|| {
            owner
                .and_then(|o| o.task_offsets.get(task).copied())
                .filter(|&e| e >= 0)
        })?;
    Some((end - offset).max(0))
}

/// The learner settings that apply to tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerSettings {
    /// `learner.max.learners`: warm-ups in flight in the group at once.
    pub max_learners: usize,
    /// `learner.acceptable.recovery.lag`: a warm-up at most this far behind is ready.
    pub acceptable_recovery_lag: i64,
}

/// A new target assignment and what it did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub target: BTreeMap<MemberId, TaskSet>,
    /// Tasks that stay with their owner while a learner warms up: (task, learner, owner).
    pub learning: Vec<(TaskId, MemberId, MemberId)>,
    /// Tasks that move now to a learner that is ready: (task, learner).
    pub promoted: Vec<(TaskId, MemberId)>,
}

/// Who runs each active task now (its current assignment, or still revoking it).
pub fn running_owners(
    members: &BTreeMap<MemberId, StreamsMember>,
) -> BTreeMap<&TaskId, &StreamsMember> {
    let mut owners = BTreeMap::new();
    for m in members.values() {
        for t in m.assigned.active.iter().chain(&m.pending_revocation.active) {
            owners.insert(t, m);
        }
    }
    owners
}

/// The target from `sticky`'s intended assignment (see the module docs).
pub fn plan(
    sticky: &BTreeMap<String, Assigned>,
    members: &BTreeMap<MemberId, StreamsMember>,
    stateful: &dyn Fn(&TaskId) -> bool,
    settings: LearnerSettings,
) -> Plan {
    let owners = running_owners(members);
    let mut out = Plan::default();
    for (id, a) in sticky {
        out.target.insert(
            MemberId::new(id.as_str()),
            TaskSet {
                standby: a.standby.clone(),
                ..TaskSet::default()
            },
        );
    }
    let mut moves: Vec<(TaskId, MemberId, MemberId)> = Vec::new();
    for (id, a) in sticky {
        let to = MemberId::new(id.as_str());
        let Some(learner) = members.get(&to) else {
            continue;
        };
        for task in &a.active {
            // A task promoted by an earlier target stays promoted while its old owner is
            // still giving it up (the learner's warm-up, and so its lag report, is gone).
            let handing_over = learner.target.active.contains(task);
            let direct = match owners.get(task) {
                None => true,
                Some(o) if o.member_id == to => true,
                Some(o) => {
                    handing_over
                        || o.process_id == learner.process_id
                        || !stateful(task)
                        || ready(learner, Some(o), task, settings)
                }
            };
            if direct {
                if let Some(o) = owners.get(task).filter(|o| o.member_id != to) {
                    if stateful(task) && o.process_id != learner.process_id && !handing_over {
                        out.promoted.push((task.clone(), to.clone()));
                    }
                }
                out.target
                    .entry(to.clone())
                    .or_default()
                    .active
                    .insert(task.clone());
            } else {
                moves.push((task.clone(), to.clone(), owners[task].member_id.clone()));
            }
        }
    }
    // Learners already in flight keep their slots.
    moves.sort_by_key(|(task, to, _)| !members[to].target.warmup.contains(task));
    let mut slots = settings.max_learners;
    for (task, to, owner) in moves {
        let kept = out.target.entry(owner.clone()).or_default();
        kept.active.insert(task.clone());
        kept.standby.remove(&task);
        if slots > 0 {
            slots -= 1;
            let learner = out.target.entry(to.clone()).or_default();
            learner.standby.remove(&task);
            learner.warmup.insert(task.clone());
            out.learning.push((task, to, owner));
        }
    }
    out
}

/// Whether `learner`'s state of `task` is within the acceptable recovery lag.
pub fn ready(
    learner: &StreamsMember,
    owner: Option<&StreamsMember>,
    task: &TaskId,
    settings: LearnerSettings,
) -> bool {
    lag(learner, owner, task).is_some_and(|l| l <= settings.acceptable_recovery_lag)
}

/// What the sticky assignor should take as each member's previous active tasks: its target's
/// active and warm-up tasks, except the tasks it only keeps while another member learns them
/// (the warm-ups say where tasks are meant to be).
pub fn intended_active(
    members: &BTreeMap<MemberId, StreamsMember>,
) -> BTreeMap<&MemberId, BTreeSet<TaskId>> {
    let learning: BTreeSet<&TaskId> = members.values().flat_map(|m| &m.target.warmup).collect();
    members
        .iter()
        .map(|(id, m)| {
            let mut active: BTreeSet<TaskId> = m
                .target
                .active
                .iter()
                .filter(|t| !learning.contains(t))
                .cloned()
                .collect();
            active.extend(m.target.warmup.iter().cloned());
            (id, active)
        })
        .collect()
}
