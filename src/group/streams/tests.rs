//! The streams group, transition by transition, with a manual clock; and a model test of random
//! interleavings checking that no task is ever active on two members and that every task is
//! active somewhere once the group is stable.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::group::{status, validate, LEAVE_EPOCH};
use super::learner::{LearnerSettings, LATEST_OFFSET};
use super::sticky::TaskId;
use super::topology::{Subtopology, TopicInfo, Topology};
use super::*;
use crate::group::consumer::tests::Image;
use crate::vocab::{GroupError, GroupId, MemberId, Timestamp};

const T0: Timestamp = Timestamp(1_000);
const MISSING_INTERNAL_TOPICS: i8 = 3;

/// A word count: subtopology 0 reads `input` (stateless), 1 counts into a changelogged store.
fn word_count() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["input".into()],
                repartition_sink_topics: vec!["app-words-repartition".into()],
                ..Subtopology::default()
            },
            Subtopology {
                id: "1".into(),
                repartition_source_topics: vec![TopicInfo::named("app-words-repartition")],
                changelog_topics: vec![TopicInfo::named("app-counts-changelog")],
                ..Subtopology::default()
            },
        ],
    }
}

/// The input and the internal topics, all with `n` partitions.
fn topics(n: u32) -> Image {
    Image::with(&[
        ("input", n),
        ("app-words-repartition", n),
        ("app-counts-changelog", n),
    ])
}

fn config(assignor: StreamsAssignor) -> StreamsGroupConfig {
    StreamsGroupConfig {
        initial_rebalance_delay_ms: 0,
        assignor,
        ..StreamsGroupConfig::default()
    }
}

fn learner(max_learners: usize) -> StreamsAssignor {
    StreamsAssignor::Learner(LearnerSettings {
        max_learners,
        acceptable_recovery_lag: 100,
    })
}

fn group(assignor: StreamsAssignor) -> StreamsGroup {
    StreamsGroup::new(GroupId::new("app"), Arc::new(config(assignor)))
}

fn join(member: &str, process: &str) -> StreamsHeartbeat {
    StreamsHeartbeat {
        member_id: MemberId::new(member),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topology: Some(word_count()),
        owned: Some(TaskSet::default()),
        process_id: Some(process.into()),
        client_tags: Some(vec![]),
        task_offsets: Some(vec![]),
        task_end_offsets: Some(vec![]),
        client_id: "app-client".into(),
        client_host: "/127.0.0.1".into(),
        ..StreamsHeartbeat::default()
    }
}

fn steady(member: &str, epoch: i32) -> StreamsHeartbeat {
    StreamsHeartbeat {
        member_id: MemberId::new(member),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        client_id: "app-client".into(),
        client_host: "/127.0.0.1".into(),
        ..StreamsHeartbeat::default()
    }
}

fn task(s: &str, p: i32) -> TaskId {
    TaskId::new(s, p)
}

fn tasks(list: &[(&str, i32)]) -> BTreeSet<TaskId> {
    list.iter().map(|(s, p)| task(s, *p)).collect()
}

/// A client: heartbeats reporting what it holds (it revokes what it was told to give up at
/// once), until nothing changes.
struct Client {
    id: String,
    epoch: i32,
    owned: TaskSet,
}

impl Client {
    fn beat(
        &mut self,
        g: &mut StreamsGroup,
        image: &Image,
        now: Timestamp,
    ) -> StreamsHeartbeatReply {
        let mut req = steady(&self.id, self.epoch);
        req.owned = Some(self.owned.clone());
        let r = g.handle_heartbeat(req, image, now).expect("heartbeat");
        self.epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            self.owned = a.clone();
        }
        r
    }
}

fn joined(g: &mut StreamsGroup, image: &Image, member: &str, process: &str) -> Client {
    let r = g
        .handle_heartbeat(join(member, process), image, T0)
        .unwrap();
    Client {
        id: member.into(),
        epoch: r.member_epoch,
        owned: r.assignment.unwrap_or_default(),
    }
}

/// Heartbeats every client in turn until a round changes nothing.
fn settle(g: &mut StreamsGroup, image: &Image, clients: &mut [Client], now: Timestamp) {
    for _ in 0..20 {
        let before: Vec<(i32, TaskSet)> =
            clients.iter().map(|c| (c.epoch, c.owned.clone())).collect();
        for c in clients.iter_mut() {
            c.beat(g, image, now);
        }
        let after: Vec<(i32, TaskSet)> =
            clients.iter().map(|c| (c.epoch, c.owned.clone())).collect();
        if before == after && g.state() == StreamsGroupState::Stable {
            return;
        }
    }
    panic!(
        "the group never settled: {:?} at {}/{}: {:#?}",
        g.state(),
        g.group_epoch(),
        g.assignment_epoch(),
        g.members().collect::<Vec<_>>()
    );
}

fn all_tasks() -> BTreeSet<TaskId> {
    tasks(&[("0", 0), ("0", 1), ("0", 2), ("1", 0), ("1", 1), ("1", 2)])
}

fn active_owners(g: &StreamsGroup) -> BTreeMap<TaskId, Vec<MemberId>> {
    let mut out: BTreeMap<TaskId, Vec<MemberId>> = BTreeMap::new();
    for m in g.members() {
        for t in m.assigned.active.iter().chain(&m.pending_revocation.active) {
            out.entry(t.clone()).or_default().push(m.member_id.clone());
        }
    }
    out
}

#[test]
fn a_new_group_delays_its_first_assignment_and_asks_for_its_internal_topics() {
    let mut g = StreamsGroup::new(GroupId::new("app"), Arc::new(StreamsGroupConfig::default()));
    let image = Image::with(&[("input", 3)]);
    let r = g.handle_heartbeat(join("m1", "p1"), &image, T0).unwrap();
    assert_eq!(r.member_epoch, 1);
    assert_eq!(
        (
            r.heartbeat_interval_ms,
            r.acceptable_recovery_lag,
            r.task_offset_interval_ms
        ),
        (5000, 10_000, 60_000)
    );
    let codes: Vec<i8> = r.status.iter().map(|s| s.0).collect();
    assert_eq!(
        codes,
        vec![MISSING_INTERNAL_TOPICS, status::ASSIGNMENT_DELAYED]
    );
    assert_eq!(
        r.status[0].1,
        "Internal topics are missing: app-words-repartition, app-counts-changelog"
    );
    assert_eq!(r.assignment, Some(TaskSet::default()));
    assert_eq!(
        r.to_create.keys().cloned().collect::<Vec<_>>(),
        vec!["app-counts-changelog", "app-words-repartition"]
    );
    assert_eq!(
        g.next_deadline(),
        Some(T0.plus_ms(3000)).min(g.next_deadline())
    );
    assert_eq!(g.state(), StreamsGroupState::NotReady);
}

#[test]
fn after_the_initial_delay_and_the_topics_the_first_member_gets_every_task() {
    let mut g = StreamsGroup::new(GroupId::new("app"), Arc::new(StreamsGroupConfig::default()));
    let mut image = Image::with(&[("input", 3)]);
    let mut c = joined(&mut g, &image, "m1", "p1");
    image.set("app-words-repartition", 3);
    image.set("app-counts-changelog", 3);
    let r = c.beat(&mut g, &image, T0.plus_ms(100));
    assert!(r.status.iter().any(|s| s.0 == status::ASSIGNMENT_DELAYED));
    assert!(c.owned.active.is_empty());
    g.handle_timeout(&image, T0.plus_ms(3000));
    let r = c.beat(&mut g, &image, T0.plus_ms(3001));
    assert_eq!(r.status, vec![]);
    assert_eq!(r.member_epoch, 2, "the topics moved the group epoch");
    assert_eq!(c.owned.active, all_tasks());
    assert!(r.to_create.is_empty());
    assert_eq!(g.state(), StreamsGroupState::Stable);
    let again = c.beat(&mut g, &image, T0.plus_ms(3002));
    assert_eq!(again.assignment, None, "nothing changed");
}

#[test]
fn a_missing_source_topic_is_a_status_and_nothing_is_assigned() {
    let mut g = group(learner(2));
    let image = Image::default();
    let r = g.handle_heartbeat(join("m1", "p1"), &image, T0).unwrap();
    assert_eq!(
        r.status,
        vec![(1, "Source topics input are missing.".to_string())]
    );
    assert!(r.to_create.is_empty());
    assert_eq!(r.assignment, Some(TaskSet::default()));
    assert_eq!(g.state(), StreamsGroupState::NotReady);
}

#[test]
fn requests_are_validated_with_kafkas_messages() {
    let check = |req: StreamsHeartbeat, group: &str| {
        validate(group, &req, false, true)
            .err()
            .map(|r| (r.error, r.message.unwrap()))
    };
    let invalid = |m: &str| Some((GroupError::InvalidRequest, m.to_string()));
    assert_eq!(check(join("m1", "p"), "app"), None);
    assert_eq!(
        check(join("", "p"), "app"),
        invalid("MemberId can't be empty.")
    );
    assert_eq!(
        check(join("m1", "p"), ""),
        invalid("GroupId can't be empty.")
    );
    let mut no_topology = join("m1", "p");
    no_topology.topology = None;
    assert_eq!(
        check(no_topology, "app"),
        invalid("Topology must be non-null when (re-)joining.")
    );
    let mut no_timeout = join("m1", "p");
    no_timeout.rebalance_timeout_ms = -1;
    assert_eq!(
        check(no_timeout, "app"),
        invalid("RebalanceTimeoutMs must be provided in first request.")
    );
    let mut owning = join("m1", "p");
    owning.owned.as_mut().unwrap().active.insert(task("0", 0));
    assert_eq!(
        check(owning, "app"),
        invalid("ActiveTasks must be empty when (re-)joining.")
    );
    assert_eq!(
        check(steady("m1", -3), "app"),
        invalid("MemberEpoch is -3, but must be greater than or equal to -2.")
    );
    assert_eq!(
        check(steady("m1", -2), "app"),
        invalid("InstanceId can't be null.")
    );
    let mut topology_later = steady("m1", 3);
    topology_later.topology = Some(word_count());
    assert_eq!(
        check(topology_later, "app"),
        invalid("Topology can only be provided when (re-)joining.")
    );
    assert_eq!(
        validate("app", &steady("m1", 3), false, false)
            .unwrap_err()
            .message
            .unwrap(),
        "If one task-type is non-null, all must be non-null."
    );
    assert_eq!(
        validate("app", &join("m1", "p"), true, true)
            .unwrap_err()
            .message
            .unwrap(),
        "Regular expressions for source topics are not supported yet."
    );
    let mut bad_changelog = join("m1", "p");
    bad_changelog.topology.as_mut().unwrap().subtopologies[1].changelog_topics[0].partitions = 4;
    assert_eq!(
        check(bad_changelog, "app").map(|e| e.0),
        Some(GroupError::StreamsInvalidTopology)
    );
}

#[test]
fn unknown_members_fenced_epochs_and_topology_updates_are_refused() {
    let mut g = group(learner(2));
    let image = topics(3);
    let c = joined(&mut g, &image, "m1", "p1");
    let refused = |g: &mut StreamsGroup, req| {
        let r = g.handle_heartbeat(req, &image, T0).unwrap_err();
        (r.error, r.message.unwrap())
    };
    assert_eq!(
        refused(&mut g, steady("m2", c.epoch)),
        (
            GroupError::UnknownMemberId,
            "Member m2 is not a member of group app.".to_string()
        )
    );
    assert_eq!(
        refused(&mut g, steady("m1", c.epoch + 5)).0,
        GroupError::FencedMemberEpoch
    );
    let mut newer = join("m1", "p1");
    newer.topology.as_mut().unwrap().epoch = 1;
    assert_eq!(
        refused(&mut g, newer),
        (
            GroupError::InvalidRequest,
            "Topology updates are not supported yet.".to_string()
        )
    );
}

#[test]
fn a_leave_removes_the_member_and_a_second_leave_is_unknown() {
    let mut g = group(learner(2));
    let image = topics(3);
    let c = joined(&mut g, &image, "m1", "p1");
    let epoch = g.group_epoch();
    let r = g
        .handle_heartbeat(steady("m1", LEAVE_EPOCH), &image, T0)
        .unwrap();
    assert_eq!(r.member_epoch, LEAVE_EPOCH);
    assert_eq!(g.group_epoch(), epoch + 1);
    assert_eq!(g.state(), StreamsGroupState::Empty);
    let again = g
        .handle_heartbeat(steady("m1", LEAVE_EPOCH), &image, T0)
        .unwrap_err();
    assert_eq!(again.error, GroupError::UnknownMemberId);
    let _ = c;
    // An empty group takes a new topology.
    let mut newer = join("m2", "p2");
    newer.topology.as_mut().unwrap().epoch = 1;
    assert!(g.handle_heartbeat(newer, &image, T0).is_ok());
}

#[test]
fn with_the_learner_a_newcomer_warms_up_stateful_tasks_while_the_owner_keeps_them() {
    let mut g = group(learner(2));
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    assert_eq!(clients[0].owned.active.len(), 8);
    clients.push(joined(&mut g, &image, "m2", "p2"));
    settle(&mut g, &image, &mut clients, T0);
    let (m1, m2) = (&clients[0].owned, &clients[1].owned);
    // Stateless tasks (subtopology 0) moved at once; stateful ones stay with m1 while m2
    // learns two of them (learner.max.learners).
    assert_eq!(m2.active.iter().filter(|t| t.subtopology == "0").count(), 2);
    assert!(m2.active.iter().all(|t| t.subtopology == "0"));
    assert_eq!(m1.active.iter().filter(|t| t.subtopology == "1").count(), 4);
    assert_eq!(m2.warmup.len(), 2);
    assert!(m2.warmup.is_subset(&m1.active));
    let events = g.take_events();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamsEvent::WarmingUp { .. }))
            .count(),
        2
    );

    // m2 reports one warm-up far behind, the other caught up: only that one moves.
    let learning: Vec<TaskId> = m2.warmup.iter().cloned().collect();
    let mut report = steady("m2", clients[1].epoch);
    report.owned = Some(clients[1].owned.clone());
    report.task_offsets = Some(vec![(learning[0].clone(), 50), (learning[1].clone(), 990)]);
    report.task_end_offsets = Some(vec![
        (learning[0].clone(), 1000),
        (learning[1].clone(), 1000),
    ]);
    let before = g.group_epoch();
    let r = g.handle_heartbeat(report, &image, T0).unwrap();
    clients[1].epoch = r.member_epoch;
    if let Some(a) = r.assignment {
        clients[1].owned = a;
    }
    assert_eq!(g.group_epoch(), before + 1, "a warm-up caught up");
    settle(&mut g, &image, &mut clients, T0);
    assert!(clients[1].owned.active.contains(&learning[1]), "promoted");
    assert!(
        !clients[0].owned.active.contains(&learning[1]),
        "revoked first"
    );
    assert!(
        clients[0].owned.active.contains(&learning[0]),
        "still learning"
    );
    assert!(clients[1].owned.warmup.contains(&learning[0]));
    assert!(g
        .take_events()
        .iter()
        .any(|e| matches!(e, StreamsEvent::Promoted { task, .. } if *task == learning[1])));
}

#[test]
fn a_promoted_warm_up_stays_promoted_while_its_owner_still_revokes() {
    let mut g = group(learner(2));
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    clients.push(joined(&mut g, &image, "m2", "p2"));
    settle(&mut g, &image, &mut clients, T0);
    let learning: Vec<TaskId> = clients[1].owned.warmup.iter().cloned().collect();
    assert_eq!(learning.len(), 2);
    g.take_events();
    // m2 reports the first warm-up caught up: promoted. m1 has not revoked it yet when m2
    // reports the second one caught up (its warm-up of the first is gone, so it reports no lag
    // for it): the first stays promoted, it is not planned as a warm-up again.
    let report = |g: &mut StreamsGroup, c: &mut Client, caught_up: &[TaskId]| {
        let mut req = steady("m2", c.epoch);
        req.owned = Some(c.owned.clone());
        req.task_offsets = Some(caught_up.iter().map(|t| (t.clone(), 1000)).collect());
        req.task_end_offsets = Some(caught_up.iter().map(|t| (t.clone(), 1000)).collect());
        let r = g.handle_heartbeat(req, &image, T0).unwrap();
        c.epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            c.owned = a;
        }
    };
    report(&mut g, &mut clients[1], &learning[..1]);
    report(&mut g, &mut clients[1], &learning[1..]);
    let events = g.take_events();
    let planned = events
        .iter()
        .filter(|e| matches!(e, StreamsEvent::WarmingUp { .. }))
        .count();
    let promoted: Vec<&TaskId> = events
        .iter()
        .filter_map(|e| match e {
            StreamsEvent::Promoted { task, .. } => Some(task),
            _ => None,
        })
        .collect();
    assert_eq!(planned, 0, "{events:?}");
    assert_eq!(
        promoted,
        vec![&learning[0], &learning[1]],
        "each promoted once"
    );
    settle(&mut g, &image, &mut clients, T0);
    assert!(learning.iter().all(|t| clients[1].owned.active.contains(t)));
}

#[test]
fn an_owner_that_crashes_hands_its_tasks_to_their_learners_at_once() {
    let mut g = group(learner(2));
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    clients.push(joined(&mut g, &image, "m2", "p2"));
    settle(&mut g, &image, &mut clients, T0);
    let learning = clients[1].owned.warmup.clone();
    assert_eq!(learning.len(), 2);
    // m1 stops heartbeating: its session ends.
    let mut m2 = clients.remove(1);
    m2.beat(&mut g, &image, T0.plus_ms(40_000));
    g.handle_timeout(&image, T0.plus_ms(45_001));
    assert!(g.member(&MemberId::new("m1")).is_none());
    let mut clients = vec![m2];
    settle(&mut g, &image, &mut clients, T0.plus_ms(45_002));
    assert_eq!(clients[0].owned.active, all_tasks_of(4));
    assert!(clients[0].owned.warmup.is_empty());
    assert!(learning.is_subset(&clients[0].owned.active));
}

fn all_tasks_of(n: i32) -> BTreeSet<TaskId> {
    (0..n).flat_map(|p| [task("0", p), task("1", p)]).collect()
}

#[test]
fn a_move_within_one_process_needs_no_warm_up() {
    let mut g = group(learner(2));
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    clients.push(joined(&mut g, &image, "m2", "p1"));
    settle(&mut g, &image, &mut clients, T0);
    assert_eq!(clients[0].owned.active.len(), 4);
    assert_eq!(clients[1].owned.active.len(), 4);
    assert!(clients[1].owned.warmup.is_empty());
}

#[test]
fn with_the_sticky_assignor_tasks_move_at_once_without_warm_ups() {
    let mut g = group(StreamsAssignor::Sticky);
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    clients.push(joined(&mut g, &image, "m2", "p2"));
    settle(&mut g, &image, &mut clients, T0);
    assert_eq!(clients[0].owned.active.len(), 4);
    assert_eq!(clients[1].owned.active.len(), 4);
    assert!(clients.iter().all(|c| c.owned.warmup.is_empty()));
}

#[test]
fn standbys_go_to_another_process() {
    let mut g = StreamsGroup::new(
        GroupId::new("app"),
        Arc::new(StreamsGroupConfig {
            num_standby_replicas: 1,
            ..config(StreamsAssignor::Sticky)
        }),
    );
    let image = topics(2);
    let mut clients = vec![
        joined(&mut g, &image, "m1", "p1"),
        joined(&mut g, &image, "m2", "p2"),
    ];
    settle(&mut g, &image, &mut clients, T0);
    let stateful = tasks(&[("1", 0), ("1", 1)]);
    for c in &clients {
        for t in &c.owned.standby {
            assert!(stateful.contains(t));
            assert!(!c.owned.active.contains(t));
        }
    }
    let standbys: usize = clients.iter().map(|c| c.owned.standby.len()).sum();
    assert_eq!(standbys, 2);
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let mut g = group(StreamsAssignor::Sticky);
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    let _m2 = joined(&mut g, &image, "m2", "p2");
    // m1 hears it must revoke, and then keeps reporting what it had.
    let owned = clients[0].owned.clone();
    let mut req = steady("m1", clients[0].epoch);
    req.owned = Some(owned.clone());
    g.handle_heartbeat(req, &image, T0).unwrap();
    assert_eq!(
        g.member(&MemberId::new("m1")).unwrap().state,
        StreamsMemberState::UnrevokedTasks
    );
    g.handle_timeout(&image, T0.plus_ms(30_000));
    assert!(g.member(&MemberId::new("m1")).is_none());
}

#[test]
fn a_member_waiting_for_released_tasks_heartbeats_sooner() {
    let mut g = group(StreamsAssignor::Sticky);
    let image = topics(4);
    let mut clients = vec![joined(&mut g, &image, "m1", "p1")];
    settle(&mut g, &image, &mut clients, T0);
    let mut m2 = joined(&mut g, &image, "m2", "p2");
    let r = m2.beat(&mut g, &image, T0);
    assert_eq!(
        g.member(&MemberId::new("m2")).unwrap().state,
        StreamsMemberState::UnreleasedTasks
    );
    assert_eq!(r.heartbeat_interval_ms, 500);
}

#[test]
fn offset_commits_are_checked_against_the_member_epoch() {
    let mut g = group(learner(2));
    let image = topics(3);
    let c = joined(&mut g, &image, "m1", "p1");
    let m1 = MemberId::new("m1");
    assert_eq!(g.validate_offset_commit(&m1, c.epoch, false, 9), Ok(()));
    assert_eq!(
        g.validate_offset_commit(&m1, c.epoch - 1, false, 9),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        g.validate_offset_commit(&MemberId::new("x"), 1, false, 9),
        Err(GroupError::UnknownMemberId)
    );
    // As Kafka 4.4: a streams member commits with OffsetCommit v9+; TxnOffsetCommit has no
    // such floor.
    assert_eq!(
        g.validate_offset_commit(&m1, c.epoch, false, 8),
        Err(GroupError::UnsupportedVersion)
    );
    assert_eq!(g.validate_offset_commit(&m1, c.epoch, true, 3), Ok(()));
    // An admin commit only while the group has no members.
    assert_eq!(
        g.validate_offset_commit(&MemberId::new(""), -1, false, 9),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(g.validate_offset_fetch(None, -1), Ok(()));
    assert_eq!(g.delete(), Err(GroupError::NonEmptyGroup));
}

#[test]
fn a_stored_group_comes_back_as_it_was() {
    let mut g = group(learner(2));
    let image = topics(4);
    let mut clients = vec![
        joined(&mut g, &image, "m1", "p1"),
        joined(&mut g, &image, "m2", "p2"),
    ];
    settle(&mut g, &image, &mut clients, T0);
    let mut record = None;
    let mut members = BTreeMap::new();
    for r in g.snapshot() {
        match r {
            StreamsRecord::Group(g) => record = Some(*g),
            StreamsRecord::Member(m) => {
                members.insert(m.member_id.clone(), *m);
            }
            StreamsRecord::RemoveMember(id) => {
                members.remove(&id);
            }
        }
    }
    let mut back = StreamsGroup::from_records(
        GroupId::new("app"),
        Arc::new(config(learner(2))),
        record.unwrap(),
        members.into_values().collect(),
        T0,
    );
    for c in clients.iter_mut() {
        let r = c.beat(&mut back, &image, T0);
        assert_eq!(r.assignment, None, "nothing moved");
    }
    assert_eq!(back.state(), StreamsGroupState::Stable);
    assert_eq!(back.group_epoch(), g.group_epoch());
}

#[derive(Debug, Clone)]
enum Step {
    Join(u8),
    Beat(u8),
    Leave(u8),
    Report(u8, i64),
    Tick(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..4).prop_map(Step::Join),
        (0u8..4).prop_map(Step::Beat),
        (0u8..4).prop_map(Step::Beat),
        (0u8..4).prop_map(Step::Beat),
        (0u8..4).prop_map(Step::Leave),
        (0u8..4, 0i64..300).prop_map(|(m, lag)| Step::Report(m, lag)),
        (1u16..20_000).prop_map(Step::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever members do, no task is active on two members; once everyone heartbeats
    /// until nothing changes, every task is active on exactly one member, and every warm-up
    /// promoted was reported within the acceptable lag.
    #[test]
    fn no_task_is_ever_active_twice_and_all_run_once_stable(
        steps in proptest::collection::vec(step(), 1..60),
        processes in proptest::collection::vec(0u8..3, 4),
    ) {
        let mut g = group(learner(2));
        let image = topics(4);
        let mut now = T0;
        let mut clients: BTreeMap<u8, Client> = BTreeMap::new();
        let name = |i: u8| format!("m{i}");
        for s in steps {
            match s {
                Step::Join(i) => {
                    if let std::collections::btree_map::Entry::Vacant(e) = clients.entry(i) {
                        let p = format!("p{}", processes[i as usize]);
                        let r = g.handle_heartbeat(join(&name(i), &p), &image, now).unwrap();
                        e.insert(Client { id: name(i), epoch: r.member_epoch, owned: r.assignment.unwrap_or_default() });
                    }
                }
                Step::Beat(i) => {
                    if let Some(c) = clients.get_mut(&i) {
                        let mut req = steady(&c.id, c.epoch);
                        req.owned = Some(c.owned.clone());
                        match g.handle_heartbeat(req, &image, now) {
                            Ok(r) => {
                                c.epoch = r.member_epoch;
                                if let Some(a) = r.assignment { c.owned = a; }
                            }
                            Err(_) => { clients.remove(&i); }
                        }
                    }
                }
                Step::Leave(i) => {
                    if clients.remove(&i).is_some() {
                        let _ = g.handle_heartbeat(steady(&name(i), LEAVE_EPOCH), &image, now);
                    }
                }
                Step::Report(i, lag) => {
                    if let Some(c) = clients.get_mut(&i) {
                        let mut req = steady(&c.id, c.epoch);
                        req.owned = Some(c.owned.clone());
                        let warm: Vec<TaskId> = c.owned.warmup.iter().cloned().collect();
                        let active: Vec<TaskId> = c.owned.active.iter().cloned().collect();
                        req.task_offsets = Some(
                            warm.iter().map(|t| (t.clone(), 1000 - lag))
                                .chain(active.iter().map(|t| (t.clone(), LATEST_OFFSET)))
                                .collect(),
                        );
                        req.task_end_offsets = Some(warm.iter().map(|t| (t.clone(), 1000)).collect());
                        match g.handle_heartbeat(req, &image, now) {
                            Ok(r) => {
                                c.epoch = r.member_epoch;
                                if let Some(a) = r.assignment { c.owned = a; }
                            }
                            Err(_) => { clients.remove(&i); }
                        }
                    }
                }
                Step::Tick(ms) => {
                    now = now.plus_ms(u64::from(ms));
                    g.handle_timeout(&image, now);
                    clients.retain(|i, _| g.member(&MemberId::new(name(*i))).is_some());
                }
            }
            for (t, owners) in active_owners(&g) {
                prop_assert!(owners.len() == 1, "{t:?} active on {owners:?}");
            }
            for e in g.take_events() {
                if let StreamsEvent::Promoted { task, learner } = e {
                    let m = g.member(&learner).unwrap();
                    let reported = m.task_offsets.get(&task).copied();
                    let end = m.task_end_offsets.get(&task).copied();
                    prop_assert!(
                        matches!((reported, end), (Some(o), Some(e)) if e - o <= 100),
                        "{task:?} promoted on {learner} at {reported:?}/{end:?}"
                    );
                }
            }
        }
        if !clients.is_empty() {
            let mut list: Vec<Client> = clients.into_values().collect();
            // Everyone reports its warm-ups caught up, so learners finish.
            for _ in 0..4 {
                for c in list.iter_mut() {
                    let mut req = steady(&c.id, c.epoch);
                    req.owned = Some(c.owned.clone());
                    req.task_offsets = Some(c.owned.warmup.iter().map(|t| (t.clone(), 1000)).collect());
                    req.task_end_offsets = Some(c.owned.warmup.iter().map(|t| (t.clone(), 1000)).collect());
                    let r = g.handle_heartbeat(req, &image, now).unwrap();
                    c.epoch = r.member_epoch;
                    if let Some(a) = r.assignment { c.owned = a; }
                }
            }
            settle(&mut g, &image, &mut list, now);
            let owners = active_owners(&g);
            prop_assert_eq!(owners.keys().cloned().collect::<BTreeSet<_>>(), all_tasks_of(4));
        }
    }
}
