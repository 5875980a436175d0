//! What the status page and `/api/groups` show of a group, whatever its kind, and the history
//! a group actor keeps for it (its last rebalances: who owned which partition before and after,
//! and why the rebalance started).
//!
//! A snapshot is kind-generic: `kind` names the group kind (`classic`; a consumer or streams
//! group fills the same fields, with its group epoch as `epoch`), members carry the partitions
//! they were assigned, and learners the tasks being restored. [`History`] is fed by the group
//! actor from its core's outputs (events) and the members' installed assignments, never from
//! inside the core.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::Serialize;

use crate::assignor::LearnerView;
use crate::group::{GroupEvent, GroupState, RebalanceReason};
use crate::vocab::Timestamp;

/// Rebalances a group keeps for its timeline.
pub const KEPT_REBALANCES: usize = 8;

/// One group, as the status page shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupSnapshot {
    pub group_id: String,
    /// `classic` (later `consumer`, `streams`).
    pub kind: &'static str,
    pub state: String,
    /// The generation (classic) or group epoch (consumer).
    pub epoch: i32,
    pub protocol_type: String,
    /// The protocol the members chose (classic), empty outside a generation.
    pub protocol: String,
    /// The server assignor that assigns this group; `None`: the leader does.
    pub assignor: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberSnapshot>,
    pub learners: Vec<LearnerSnapshot>,
    /// Committed offsets the group holds.
    pub offsets: usize,
    /// The last rebalances, oldest first.
    pub rebalances: Vec<RebalanceSnapshot>,
    /// A share group's partitions (KIP-932): where each stands and what is in flight.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub share_partitions: Vec<SharePartitionSnapshot>,
}

/// One share partition of a share group, as the status page shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SharePartitionSnapshot {
    pub topic: String,
    pub partition: i32,
    /// The share-partition start offset: every record below it is done.
    pub start_offset: i64,
    /// Records from the start offset to the last one acquired, whatever their state.
    pub in_flight: u64,
    /// Of those: acquired (locked by a member), available (to be delivered again),
    /// acknowledged or archived.
    pub acquired: u64,
    pub available: u64,
    pub delivered: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemberSnapshot {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// What the member was last assigned (empty when its assignment is not the consumer
    /// protocol's).
    pub partitions: Vec<PartitionRef>,
    /// What the member's client last reported of itself (KIP-714 telemetry): each metric's
    /// name (without `org.apache.kafka.`, its data point's attributes in brackets) and value.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client_metrics: Vec<(String, f64)>,
}

/// Puts each client's pushed metrics beside the member it said it is (its `group_id` and
/// `group_member_id`).
pub fn attach_client_metrics(
    groups: &mut [GroupSnapshot],
    clients: &[crate::telemetry::ClientView],
) {
    for c in clients {
        let (Some(group), Some(member)) = (&c.group_id, &c.member_id) else {
            continue;
        };
        let Some(m) = groups
            .iter_mut()
            .filter(|g| &g.group_id == group)
            .flat_map(|g| g.members.iter_mut())
            .find(|m| &m.member_id == member)
        else {
            continue;
        };
        m.client_metrics = c
            .points
            .iter()
            .map(|p| {
                let name = p.name.strip_prefix("org.apache.kafka.").unwrap_or(&p.name);
                let attrs: Vec<&str> = p
                    .attributes
                    .iter()
                    .filter(|(k, _)| k != "client_id" && k != "client-id")
                    .map(|(_, v)| v.as_str())
                    .collect();
                if attrs.is_empty() {
                    (name.to_string(), p.value)
                } else {
                    (format!("{name}[{}]", attrs.join(",")), p.value)
                }
            })
            .collect();
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionRef {
    pub topic: String,
    pub partition: i32,
}

impl std::fmt::Display for PartitionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LearnerSnapshot {
    pub topic: String,
    pub partition: i32,
    /// Who restores the task.
    pub member: String,
    /// Who still processes it.
    pub owner: Option<String>,
    /// When its warm-up started (ms since the Unix epoch).
    pub planned_ms: u64,
    /// How long it has been warming up.
    pub warming_ms: u64,
}

impl LearnerSnapshot {
    pub fn new(l: &LearnerView, now: Timestamp) -> LearnerSnapshot {
        LearnerSnapshot {
            topic: l.topic.clone(),
            partition: i32::try_from(l.partition).unwrap_or(i32::MAX),
            member: l.member.clone(),
            owner: l.owner.clone(),
            planned_ms: l.planned.as_millis(),
            warming_ms: now.as_millis().saturating_sub(l.planned.as_millis()),
        }
    }
}

/// One rebalance: when, why, and which partitions changed owner.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RebalanceSnapshot {
    /// The generation (or epoch) it installed.
    pub epoch: i32,
    /// Why it started (the first reason of the round).
    pub reason: String,
    pub started_ms: u64,
    pub completed_ms: u64,
    /// The server assignor and what it said it did, when the server assigned.
    pub assignor: Option<String>,
    pub summary: Option<String>,
    /// Members of the new generation.
    pub members: Vec<String>,
    /// Every partition whose owner changed, in partition order.
    pub moves: Vec<Move>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    /// `None`: nobody owned it (a new partition, or revoked in the previous generation).
    pub from: Option<String>,
    /// `None`: nobody owns it now (revoked first, as the cooperative protocol does).
    pub to: Option<String>,
}

/// A group's rebalance history, kept by its actor.
#[derive(Debug, Default)]
pub struct History {
    /// The round in progress: when it started and why.
    started: Option<(Timestamp, String)>,
    /// The plan of the round in progress: assignor and summary.
    planned: Option<(String, String)>,
    /// Who owned each partition after the last installed generation.
    owners: BTreeMap<PartitionRef, String>,
    rebalances: VecDeque<RebalanceSnapshot>,
    /// The learners after the last installed generation, for warm-up durations.
    learners: Vec<LearnerView>,
    /// The generation (epoch) last installed, until the group empties.
    installed: Option<i32>,
}

/// What an installed generation completed, for metrics.
#[derive(Debug)]
pub struct Completed {
    /// From the start of the round to now.
    pub took: Duration,
}

impl History {
    /// Follows one of the core's events.
    pub fn on_event(&mut self, event: &GroupEvent, now: Timestamp) {
        match event {
            // The round's first reason names it; the state change that may come first only
            // starts its clock.
            GroupEvent::RebalanceStarted { reason, .. } => match &mut self.started {
                Some((_, why)) if why.is_empty() => *why = describe_reason(reason),
                Some(_) => {}
                None => self.started = Some((now, describe_reason(reason))),
            },
            GroupEvent::StateChanged {
                to: GroupState::PreparingRebalance,
                ..
            } if self.started.is_none() => {
                self.started = Some((now, String::new()));
            }
            GroupEvent::AssignmentPlanned {
                assignor, summary, ..
            } => self.planned = Some((assignor.clone(), summary.clone())),
            _ => {}
        }
    }

    /// A consumer group's round starts (its group epoch was bumped, for `why`), unless one is
    /// in progress.
    pub fn on_round_started(&mut self, why: &str, now: Timestamp) {
        if self.started.is_none() {
            self.started = Some((now, why.to_owned()));
        }
    }

    /// A consumer group's assignor computed the round's target.
    pub fn on_planned(&mut self, assignor: &str, summary: Option<&str>) {
        self.planned = Some((assignor.to_owned(), summary.unwrap_or_default().to_owned()));
    }

    /// The generation (epoch) last installed, `None` once the group emptied.
    pub fn installed(&self) -> Option<i32> {
        self.installed
    }

    /// A generation is installed (the group is Stable) with these members and assignments.
    /// Returns how long the round took (`None` when no round was seen start, e.g. a load).
    pub fn on_installed(
        &mut self,
        epoch: i32,
        members: Vec<(String, Vec<PartitionRef>)>,
        now: Timestamp,
    ) -> Option<Completed> {
        let mut owners = BTreeMap::new();
        for (member, partitions) in &members {
            for p in partitions {
                owners.insert(p.clone(), member.clone());
            }
        }
        let started = self.started.take();
        let planned = self.planned.take();
        let (start, mut reason) = started
            .clone()
            .unwrap_or_else(|| (now, "generation installed".to_owned()));
        if reason.is_empty() {
            reason = "rebalance".to_owned();
        }
        let moves = diff(&self.owners, &owners);
        self.installed = Some(epoch);
        self.push(RebalanceSnapshot {
            epoch,
            reason,
            started_ms: start.as_millis(),
            completed_ms: now.as_millis(),
            assignor: planned.as_ref().map(|(a, _)| a.clone()),
            summary: planned.map(|(_, s)| s),
            members: members.into_iter().map(|(m, _)| m).collect(),
            moves,
        });
        self.owners = owners;
        started.map(|(at, _)| Completed {
            took: Duration::from_millis(now.as_millis().saturating_sub(at.as_millis())),
        })
    }

    /// The group became Empty: every partition lost its owner.
    pub fn on_emptied(&mut self, epoch: i32, now: Timestamp) {
        let started = self.started.take();
        self.planned = None;
        self.installed = None;
        if self.owners.is_empty() {
            return;
        }
        let (start, mut reason) = started.unwrap_or_else(|| (now, String::new()));
        if reason.is_empty() {
            reason = "members left".to_owned();
        }
        let moves = diff(&self.owners, &BTreeMap::new());
        self.owners.clear();
        self.push(RebalanceSnapshot {
            epoch,
            reason,
            started_ms: start.as_millis(),
            completed_ms: now.as_millis(),
            assignor: None,
            summary: None,
            members: Vec::new(),
            moves,
        });
    }

    /// Replaces the learners; returns the warm-ups that ended (learner gone) and the count
    /// before, for metrics.
    pub fn set_learners(
        &mut self,
        learners: Vec<LearnerView>,
        now: Timestamp,
    ) -> (usize, Vec<Duration>) {
        let before = self.learners.len();
        let ended = self
            .learners
            .iter()
            .filter(|old| {
                !learners.iter().any(|l| {
                    l.topic == old.topic && l.partition == old.partition && l.member == old.member
                })
            })
            .map(|old| {
                Duration::from_millis(now.as_millis().saturating_sub(old.planned.as_millis()))
            })
            .collect();
        self.learners = learners;
        (before, ended)
    }

    pub fn learners(&self) -> &[LearnerView] {
        &self.learners
    }

    pub fn rebalances(&self) -> Vec<RebalanceSnapshot> {
        self.rebalances.iter().cloned().collect()
    }

    fn push(&mut self, r: RebalanceSnapshot) {
        if self.rebalances.len() == KEPT_REBALANCES {
            self.rebalances.pop_front();
        }
        self.rebalances.push_back(r);
    }
}

/// Every partition whose owner differs between `before` and `after`.
fn diff(
    before: &BTreeMap<PartitionRef, String>,
    after: &BTreeMap<PartitionRef, String>,
) -> Vec<Move> {
    let mut keys: Vec<&PartitionRef> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|p| {
            let (from, to) = (before.get(p), after.get(p));
            (from != to).then(|| Move {
                topic: p.topic.clone(),
                partition: p.partition,
                from: from.cloned(),
                to: to.cloned(),
            })
        })
        .collect()
}

/// A rebalance reason in words.
pub fn describe_reason(reason: &RebalanceReason) -> String {
    match reason {
        RebalanceReason::MemberJoined(m) => format!("member {m} joined"),
        RebalanceReason::MemberUpdated(m) => format!("member {m} rejoined with new metadata"),
        RebalanceReason::StaticMemberReplaced(m) => format!("static member replaced by {m}"),
        RebalanceReason::MembersLeft(ms) => format!(
            "member{} {} left",
            if ms.len() == 1 { "" } else { "s" },
            ms.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
        ),
        RebalanceReason::MemberRemoved(m, why) => format!("member {m} removed: {why}"),
        RebalanceReason::PendingSyncExpired(ms) => format!(
            "members never synced: {}",
            ms.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
        ),
        RebalanceReason::AssignmentWriteFailed(e) => {
            format!("storing the assignment failed: {e:?}")
        }
        RebalanceReason::LoadedOverCapacity => "loaded above group.max.size".to_owned(),
        RebalanceReason::Downgraded => "downgraded from a consumer group".to_owned(),
        RebalanceReason::AssignorFollowUp => {
            "the assignor asked for it (a learner's warm-up ended, a deadline passed)".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupState;

    fn p(n: i32) -> PartitionRef {
        PartitionRef {
            topic: "t".into(),
            partition: n,
        }
    }

    #[test]
    fn a_round_records_who_lost_and_who_gained_what() {
        let mut h = History::default();
        assert!(h
            .on_installed(1, vec![("a".into(), vec![p(0), p(1)])], Timestamp(10))
            .is_none());
        h.on_event(
            &GroupEvent::StateChanged {
                from: GroupState::Stable,
                to: GroupState::PreparingRebalance,
            },
            Timestamp(100),
        );
        let done = h
            .on_installed(
                2,
                vec![("a".into(), vec![p(0)]), ("b".into(), vec![p(1)])],
                Timestamp(350),
            )
            .expect("a round was seen start");
        assert_eq!(done.took, Duration::from_millis(250));
        let last = h.rebalances().pop().unwrap();
        assert_eq!(
            last.moves,
            vec![Move {
                topic: "t".into(),
                partition: 1,
                from: Some("a".into()),
                to: Some("b".into())
            }]
        );
        h.on_emptied(3, Timestamp(400));
        assert_eq!(h.rebalances().last().unwrap().moves.len(), 2);
        for e in 0..20 {
            h.on_installed(e, vec![], Timestamp(500));
        }
        assert_eq!(h.rebalances().len(), KEPT_REBALANCES);
    }

    #[test]
    fn a_learner_that_is_gone_ended_its_warm_up() {
        let learner = |partition, planned| LearnerView {
            topic: "t".into(),
            partition,
            member: "b".into(),
            owner: Some("a".into()),
            planned: Timestamp(planned),
        };
        let mut h = History::default();
        let (before, ended) =
            h.set_learners(vec![learner(0, 100), learner(1, 200)], Timestamp(300));
        assert_eq!((before, ended.len()), (0, 0));
        let (before, ended) = h.set_learners(vec![learner(1, 200)], Timestamp(1_100));
        assert_eq!((before, ended), (2, vec![Duration::from_millis(1_000)]));
        assert_eq!(h.learners().len(), 1);
    }
}
