//! The sticky task assignor of streams groups, PURE: Kafka's `StickyTaskAssignor` without rack
//! awareness. Tasks are balanced over processes (a process runs as many members, stream
//! threads, as it has), then over the members of each process; a task stays where it ran, and
//! standby replicas go to other processes than the task's active one.
//!
//! - Stateful tasks are placed first, then stateless ones fill the remaining capacity; each
//!   member takes at most `ceil(tasks / members)` active tasks.
//! - A task goes back to its previous active member when that member has room; otherwise to
//!   the member that holds its state best (a previous standby or warm-up first, then the most
//!   caught-up by reported offsets) if it has room; otherwise to the least loaded process's
//!   least loaded member.
//! - Standbys (`num_standby_replicas` per stateful task) go to processes without the task,
//!   previous holders of its state first, then the least loaded.
//!
//! Among equally loaded processes the one whose least loaded member has fewest tasks is picked
//! (Kafka looks at stateless load there), then by process id and member id, so one input gives
//! one assignment.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::vocab::streams::TaskId;

/// What the assignor knows of a member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberTasks {
    pub member_id: String,
    pub process_id: String,
    /// Its current (target) assignment.
    pub active: BTreeSet<TaskId>,
    pub standby: BTreeSet<TaskId>,
    pub warmup: BTreeSet<TaskId>,
    /// The changelog offset sums it reported for tasks with state on its disk.
    pub task_offsets: BTreeMap<TaskId, i64>,
}

/// A subtopology to assign: its task count and whether it has state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubtopologyTasks {
    pub tasks: i32,
    pub stateful: bool,
}

/// One member's new assignment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assigned {
    pub active: BTreeSet<TaskId>,
    pub standby: BTreeSet<TaskId>,
}

/// Assigns every task of `subtopologies` to `members` (see the module docs). Members are keyed
/// by member id in the result; every member has an entry.
pub fn assign(
    members: &[MemberTasks],
    subtopologies: &BTreeMap<String, SubtopologyTasks>,
    num_standby_replicas: usize,
) -> BTreeMap<String, Assigned> {
    let mut out: BTreeMap<String, Assigned> = members
        .iter()
        .map(|m| (m.member_id.clone(), Assigned::default()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let mut stateful = Vec::new();
    let mut stateless = Vec::new();
    for (id, s) in subtopologies {
        let list = if s.stateful {
            &mut stateful
        } else {
            &mut stateless
        };
        list.extend((0..s.tasks).map(|p| TaskId::new(id.clone(), p)));
    }
    let mut state = State::new(members);
    let previous: BTreeMap<&TaskId, &str> = members
        .iter()
        .flat_map(|m| m.active.iter().map(move |t| (t, m.member_id.as_str())))
        .collect();
    let mut stateful_quota = Quota::new(stateful.len(), members.len());
    let mut active_quota = Quota::new(stateful.len() + stateless.len(), members.len());
    for (mut tasks, is_stateful) in [(stateful.clone(), true), (stateless, false)] {
        // Sticky passes by partition first (a range-like previous assignment pairs partitions).
        tasks.sort_by(|a, b| (a.partition, &a.subtopology).cmp(&(b.partition, &b.subtopology)));
        let mut left = Vec::new();
        let has_room = |state: &State, quotas: (&Quota, &Quota), m: &str| {
            let (stateful_quota, active_quota) = quotas;
            let quota = if is_stateful {
                stateful_quota.per_member
            } else {
                active_quota.per_member
            };
            state.active_count(m) < quota
        };
        // 1. The previous owner keeps what it can.
        for task in tasks {
            match previous.get(&task) {
                Some(&m) if has_room(&state, (&stateful_quota, &active_quota), m) => {
                    let n = state.give_active(m, &task);
                    stateful_quota.assigned(n, is_stateful);
                    active_quota.assigned(n, true);
                }
                _ => left.push(task),
            }
        }
        // 2. Then the best holder of its state, if it has room.
        let mut rest = Vec::new();
        for task in left {
            let holder = state
                .holders(members, &task)
                .into_iter()
                .find(|m| has_room(&state, (&stateful_quota, &active_quota), m));
            match holder {
                Some(m) => {
                    let n = state.give_active(&m, &task);
                    stateful_quota.assigned(n, is_stateful);
                    active_quota.assigned(n, true);
                }
                None => rest.push(task),
            }
        }
        // 3. The rest, by subtopology, to the least loaded.
        rest.sort();
        for task in rest {
            let m = state.least_loaded(None);
            let n = state.give_active(&m, &task);
            active_quota.assigned(n, true);
        }
    }
    if num_standby_replicas > 0 {
        for task in &stateful {
            for _ in 0..num_standby_replicas {
                let taken: BTreeSet<&str> = state.processes_with(task);
                let holder = state
                    .holders(members, task)
                    .into_iter()
                    .find(|m| !taken.contains(state.process_of(m)));
                let member = match holder {
                    Some(m) => m,
                    None => {
                        if state.processes.len() <= taken.len() {
                            break;
                        }
                        state.least_loaded(Some(&taken))
                    }
                };
                state.give_standby(&member, task);
            }
        }
    }
    for (member, a) in state.assigned {
        if let Some(slot) = out.get_mut(&member) {
            *slot = a;
        }
    }
    out
}

/// Kafka's moving quota: `ceil(tasks / members)` per member, recomputed over the tasks and
/// members left each time a member reaches it, so that sticky owners cannot take so much that
/// the rest end up more than one task apart.
struct Quota {
    tasks: usize,
    members: usize,
    per_member: usize,
}

impl Quota {
    fn new(tasks: usize, members: usize) -> Quota {
        Quota {
            tasks,
            members,
            per_member: tasks.div_ceil(members.max(1)),
        }
    }

    /// A member now has `count` tasks of this quota's kind (`counts`: whether it applies).
    fn assigned(&mut self, count: usize, counts: bool) {
        if counts && count == self.per_member && self.members > 0 {
            self.members -= 1;
            self.tasks = self.tasks.saturating_sub(count);
            self.per_member = self.tasks.div_ceil(self.members.max(1));
        }
    }
}

/// The assignment being built.
struct State {
    /// Members by process, both ordered.
    processes: BTreeMap<String, Vec<String>>,
    process_of: BTreeMap<String, String>,
    assigned: BTreeMap<String, Assigned>,
}

impl State {
    fn new(members: &[MemberTasks]) -> State {
        let mut processes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for m in members {
            processes
                .entry(m.process_id.clone())
                .or_default()
                .push(m.member_id.clone());
        }
        for list in processes.values_mut() {
            list.sort();
        }
        State {
            processes,
            process_of: members
                .iter()
                .map(|m| (m.member_id.clone(), m.process_id.clone()))
                .collect(),
            assigned: BTreeMap::new(),
        }
    }

    fn process_of(&self, member: &str) -> &str {
        self.process_of.get(member).map_or("", String::as_str)
    }

    fn active_count(&self, member: &str) -> usize {
        self.assigned.get(member).map_or(0, |a| a.active.len())
    }

    fn load(&self, member: &str) -> usize {
        self.assigned
            .get(member)
            .map_or(0, |a| a.active.len() + a.standby.len())
    }

    /// Returns the member's active task count now.
    fn give_active(&mut self, member: &str, task: &TaskId) -> usize {
        let a = self.assigned.entry(member.to_owned()).or_default();
        a.active.insert(task.clone());
        a.active.len()
    }

    fn give_standby(&mut self, member: &str, task: &TaskId) {
        self.assigned
            .entry(member.to_owned())
            .or_default()
            .standby
            .insert(task.clone());
    }

    /// The processes that run `task`, actively or as a standby.
    fn processes_with(&self, task: &TaskId) -> BTreeSet<&str> {
        self.assigned
            .iter()
            .filter(|(_, a)| a.active.contains(task) || a.standby.contains(task))
            .map(|(m, _)| self.process_of(m))
            .collect()
    }

    /// The members that hold `task`'s state, best first: previous standbys and warm-ups, then
    /// members that reported offsets for it; each group the most caught-up first.
    fn holders(&self, members: &[MemberTasks], task: &TaskId) -> Vec<String> {
        let mut ranked: Vec<(u8, std::cmp::Reverse<i64>, &str)> = members
            .iter()
            .filter_map(|m| {
                let offset = m.task_offsets.get(task).copied();
                if m.standby.contains(task) || m.warmup.contains(task) {
                    Some((
                        0,
                        std::cmp::Reverse(offset.unwrap_or(0)),
                        m.member_id.as_str(),
                    ))
                } else {
                    offset.map(|o| (1, std::cmp::Reverse(o), m.member_id.as_str()))
                }
            })
            .collect();
        ranked.sort();
        ranked.into_iter().map(|(_, _, m)| m.to_owned()).collect()
    }

    /// The least loaded member of the least loaded process (tasks per member), outside the
    /// `excluded` processes; among equally loaded processes, the one whose least loaded member
    /// has fewest tasks.
    fn least_loaded(&self, excluded: Option<&BTreeSet<&str>>) -> String {
        self.processes
            .iter()
            .filter(|(p, _)| excluded.is_none_or(|x| !x.contains(p.as_str())))
            .filter_map(|(p, list)| {
                let total: usize = list.iter().map(|m| self.load(m)).sum();
                let member = list.iter().min_by_key(|m| (self.load(m), (*m).clone()))?;
                Some((total, list.len(), self.load(member), p, member))
            })
            // total/len compared exactly, as a cross product.
            .min_by(|a, b| {
                (a.0 * b.1)
                    .cmp(&(b.0 * a.1))
                    .then_with(|| a.2.cmp(&b.2))
                    .then_with(|| a.3.cmp(b.3))
            })
            .map(|(_, _, _, _, m)| m.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, process: &str) -> MemberTasks {
        MemberTasks {
            member_id: id.into(),
            process_id: process.into(),
            ..MemberTasks::default()
        }
    }

    fn word_count(tasks: i32) -> BTreeMap<String, SubtopologyTasks> {
        BTreeMap::from([
            (
                "0".to_string(),
                SubtopologyTasks {
                    tasks,
                    stateful: false,
                },
            ),
            (
                "1".to_string(),
                SubtopologyTasks {
                    tasks,
                    stateful: true,
                },
            ),
        ])
    }

    /// Every task active exactly once; no process holds a task twice.
    fn check(assignment: &BTreeMap<String, Assigned>, members: &[MemberTasks], tasks: i32) {
        let mut active: Vec<&TaskId> = assignment.values().flat_map(|a| &a.active).collect();
        active.sort();
        let expected: Vec<TaskId> = ["0", "1"]
            .iter()
            .flat_map(|s| (0..tasks).map(move |p| TaskId::new(*s, p)))
            .collect();
        assert_eq!(
            active,
            expected.iter().collect::<Vec<_>>(),
            "{assignment:?}"
        );
        let process = |m: &str| {
            members
                .iter()
                .find(|x| x.member_id == m)
                .unwrap()
                .process_id
                .clone()
        };
        let mut seen = BTreeSet::new();
        for (m, a) in assignment {
            for t in a.active.iter().chain(&a.standby) {
                assert!(
                    seen.insert((process(m), t.clone())),
                    "{t:?} twice on {}",
                    process(m)
                );
            }
        }
    }

    fn with_assignment(mut m: MemberTasks, a: &Assigned) -> MemberTasks {
        m.active = a.active.clone();
        m.standby = a.standby.clone();
        m
    }

    #[test]
    fn one_member_gets_every_task() {
        let members = [member("a", "p1")];
        let out = assign(&members, &word_count(3), 0);
        check(&out, &members, 3);
        assert_eq!(out["a"].active.len(), 6);
    }

    #[test]
    fn tasks_are_balanced_over_members_within_one() {
        let members = [member("a", "p1"), member("b", "p2"), member("c", "p3")];
        let out = assign(&members, &word_count(4), 0);
        check(&out, &members, 4);
        let counts: Vec<usize> = out.values().map(|a| a.active.len()).collect();
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
        // Stateful tasks are balanced on their own.
        let stateful: Vec<usize> = out
            .values()
            .map(|a| a.active.iter().filter(|t| t.subtopology == "1").count())
            .collect();
        assert!(stateful.iter().max().unwrap() - stateful.iter().min().unwrap() <= 1);
    }

    #[test]
    fn an_unchanged_group_keeps_its_assignment() {
        let members = [member("a", "p1"), member("b", "p2")];
        let first = assign(&members, &word_count(3), 1);
        let again: Vec<MemberTasks> = members
            .iter()
            .map(|m| with_assignment(m.clone(), &first[&m.member_id]))
            .collect();
        assert_eq!(assign(&again, &word_count(3), 1), first);
    }

    #[test]
    fn a_new_member_takes_only_its_share_and_the_rest_stay() {
        let members = [member("a", "p1"), member("b", "p2")];
        let before = assign(&members, &word_count(6), 0);
        let mut now: Vec<MemberTasks> = members
            .iter()
            .map(|m| with_assignment(m.clone(), &before[&m.member_id]))
            .collect();
        now.push(member("c", "p3"));
        let after = assign(&now, &word_count(6), 0);
        check(&after, &now, 6);
        assert_eq!(after["c"].active.len(), 4, "{after:?}");
        for m in ["a", "b"] {
            assert!(
                after[m].active.is_subset(&before[m].active),
                "{m} only gave tasks up"
            );
        }
    }

    #[test]
    fn a_task_moves_to_the_member_holding_its_state() {
        // The owner of both stateful tasks is gone. b had 1_0 as a standby (a previous standby
        // ranks above offsets on disk, however far c's disk got); c's disk has 1_1.
        let mut b = member("b", "p2");
        b.standby.insert(TaskId::new("1", 0));
        b.task_offsets.insert(TaskId::new("1", 0), 5);
        let mut c = member("c", "p3");
        c.task_offsets.insert(TaskId::new("1", 0), 999);
        c.task_offsets.insert(TaskId::new("1", 1), 10);
        let members = [b, c];
        let out = assign(&members, &word_count(2), 0);
        check(&out, &members, 2);
        assert!(out["b"].active.contains(&TaskId::new("1", 0)), "{out:?}");
        assert!(out["c"].active.contains(&TaskId::new("1", 1)), "{out:?}");
    }

    #[test]
    fn standbys_go_to_other_processes_and_only_for_stateful_tasks() {
        let members = [member("a1", "p1"), member("a2", "p1"), member("b1", "p2")];
        let out = assign(&members, &word_count(3), 1);
        check(&out, &members, 3);
        let standbys: usize = out.values().map(|a| a.standby.len()).sum();
        assert_eq!(standbys, 3, "one per stateful task: {out:?}");
        assert!(out
            .values()
            .flat_map(|a| &a.standby)
            .all(|t| t.subtopology == "1"));
    }

    #[test]
    fn standbys_beyond_the_other_processes_are_not_assigned() {
        let members = [member("a", "p1"), member("b", "p2")];
        let out = assign(&members, &word_count(2), 3);
        check(&out, &members, 2);
        let standbys: usize = out.values().map(|a| a.standby.len()).sum();
        assert_eq!(standbys, 2, "one other process per task: {out:?}");
    }

    #[test]
    fn members_of_one_process_share_its_load() {
        let members = [
            member("a1", "p1"),
            member("a2", "p1"),
            member("b1", "p2"),
            member("b2", "p2"),
        ];
        let out = assign(&members, &word_count(4), 0);
        check(&out, &members, 4);
        assert!(out.values().all(|a| a.active.len() == 2), "{out:?}");
    }

    #[test]
    fn no_members_no_assignment() {
        assert!(assign(&[], &word_count(3), 1).is_empty());
    }

    #[test]
    fn stale_tasks_of_a_previous_topology_are_dropped() {
        let mut a = member("a", "p1");
        a.active.insert(TaskId::new("9", 0));
        a.active.insert(TaskId::new("1", 7));
        let members = [a];
        let out = assign(&members, &word_count(2), 0);
        check(&out, &members, 2);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Any members (on 1-4 processes), any previous assignment (random tasks, some of
            /// them stale): every task active exactly once, no process holding a task twice,
            /// and the same input twice gives the same output. With one member per process (one
            /// stream thread each) active tasks are balanced within one; processes of several
            /// members are balanced by load per member, as Kafka's assignor does.
            #[test]
            fn complete_balanced_and_deterministic(
                processes in prop::collection::vec(0usize..4, 1..7),
                tasks in 0i32..7,
                standbys in 0usize..3,
                previous in prop::collection::vec((0usize..7, 0i32..8, 0u8..3), 0..20),
            ) {
                let mut members: Vec<MemberTasks> = processes
                    .iter()
                    .enumerate()
                    .map(|(i, p)| member(&format!("m{i}"), &format!("p{p}")))
                    .collect();
                for (who, partition, kind) in previous {
                    let m = &mut members[who % processes.len()];
                    let task = TaskId::new(if partition % 2 == 0 { "0" } else { "1" }, partition);
                    match kind {
                        0 => m.active.insert(task),
                        1 => m.standby.insert(task),
                        _ => m.task_offsets.insert(task, i64::from(partition)).is_none(),
                    };
                }
                let out = assign(&members, &word_count(tasks), standbys);
                check(&out, &members, tasks);
                let single = {
                    let mut p = processes.clone();
                    p.sort_unstable();
                    p.windows(2).all(|w| w[0] != w[1])
                };
                let counts: Vec<usize> = out.values().map(|a| a.active.len()).collect();
                let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
                prop_assert!(!single || max - min <= 1, "{counts:?}");
                prop_assert_eq!(assign(&members, &word_count(tasks), standbys), out);
            }
        }
    }
}
