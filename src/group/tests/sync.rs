//! SyncGroup: spec §1.3, one test per checklist item, and the server-assignment seam.

use std::sync::{Arc, Mutex};

use super::*;

fn sync_req(member: &MemberId, generation: Generation) -> SyncGroup {
    SyncGroup {
        token: RequestToken(0),
        member_id: member.clone(),
        instance_id: None,
        generation,
        protocol_type: None,
        protocol_name: None,
        assignments: Vec::new(),
    }
}

#[test]
fn sync_on_missing_group_is_unknown_member_id() {
    assert_eq!(missing::sync_or_heartbeat(), GroupError::UnknownMemberId);
}

#[test]
fn sync_on_empty_group_is_unknown_member_id() {
    let mut ctx = Ctx::new();
    let t = ctx.sync(&MemberId::new("m"), Generation(0), &[]);
    assert_eq!(ctx.sync_reply(t).error, Some(GroupError::UnknownMemberId));
}

#[test]
fn sync_on_dead_group_is_coordinator_not_available() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    let t = ctx.sync(&ids[0], Generation(1), &[]);
    assert_eq!(
        ctx.sync_reply(t).error,
        Some(GroupError::CoordinatorNotAvailable)
    );
}

#[test]
fn sync_checks_member_before_generation() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let t = ctx.sync(&MemberId::new("nobody"), Generation(7), &[]);
    assert_eq!(ctx.sync_reply(t).error, Some(GroupError::UnknownMemberId));
    let mut req = sync_req(&ids[1], Generation(7));
    req.instance_id = Some(InstanceId::new("not-mine"));
    let t = ctx.sync_req(req);
    assert_eq!(ctx.sync_reply(t).error, Some(GroupError::UnknownMemberId));
}

#[test]
fn sync_with_instance_id_of_another_member_is_fenced_instance_id() {
    let mut ctx = Ctx::new();
    let a = ctx.join(J::new().instance("i-a"));
    let b = ctx.join(J::new().instance("i-b"));
    ctx.sleep(3 * DELAY);
    let b = ctx.join_reply(b).member_id.clone();
    let _ = a;
    let mut req = sync_req(&b, Generation(1));
    req.instance_id = Some(InstanceId::new("i-a"));
    let t = ctx.sync_req(req);
    assert_eq!(ctx.sync_reply(t).error, Some(GroupError::FencedInstanceId));
}

#[test]
fn sync_with_wrong_generation_is_illegal_generation() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let t = ctx.sync(&ids[1], Generation(0), &[]);
    assert_eq!(ctx.sync_reply(t).error, Some(GroupError::IllegalGeneration));
}

#[test]
fn sync_v5_with_another_protocol_type_or_name_is_inconsistent_group_protocol() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let mut req = sync_req(&ids[1], Generation(1));
    req.protocol_type = Some("connect".into());
    let t = ctx.sync_req(req);
    assert_eq!(
        ctx.sync_reply(t).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let mut req = sync_req(&ids[1], Generation(1));
    req.protocol_name = Some("roundrobin".into());
    let t = ctx.sync_req(req);
    assert_eq!(
        ctx.sync_reply(t).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    // Matching values are fine (the follower is parked).
    let mut req = sync_req(&ids[1], Generation(1));
    req.protocol_type = Some("consumer".into());
    req.protocol_name = Some("range".into());
    let t = ctx.sync_req(req);
    assert!(ctx.sync_parked(t));
}

#[test]
fn sync_in_preparing_rebalance_is_rebalance_in_progress() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    // The leader starts a rebalance; the follower, still at generation 1, syncs.
    ctx.join(J::new().member(&ids[0]));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    let t = ctx.sync(&ids[1], Generation(1), &[]);
    assert_eq!(
        ctx.sync_reply(t).error,
        Some(GroupError::RebalanceInProgress)
    );
    // Nothing stale was installed.
    assert!(ctx.group.member(&ids[1]).unwrap().awaiting_sync.is_none());
}

#[test]
fn syncs_are_parked_until_the_leader_assignment_is_persisted() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(3);
    let f1 = ctx.sync(&ids[1], Generation(1), &[]);
    assert!(ctx.sync_parked(f1));
    ctx.hold_writes = true;
    let l = ctx.sync(
        &ids[0],
        Generation(1),
        &[(&ids[0], b"p0"), (&ids[1], b"p1"), (&ids[2], b"p2")],
    );
    // Written, not yet durable: nobody is answered.
    assert!(ctx.sync_parked(l) && ctx.sync_parked(f1));
    match ctx.records.last() {
        Some(GroupRecord::Metadata(r)) => {
            assert_eq!(r.generation, Generation(1));
            assert_eq!(r.members[1].assignment, Bytes::from_static(b"p1"));
        }
        other => panic!("expected a metadata record, got {other:?}"),
    }
    ctx.complete_held_writes(Ok(()));
    assert_eq!(ctx.group.state(), GroupState::Stable);
    let (l, f1) = (ctx.sync_reply(l).clone(), ctx.sync_reply(f1).clone());
    assert_eq!(l.assignment, Bytes::from_static(b"p0"));
    assert_eq!(f1.assignment, Bytes::from_static(b"p1"));
    assert_eq!(f1.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(f1.protocol_name.as_deref(), Some("range"));
    // A follower syncing after that gets its stored assignment at once.
    ctx.hold_writes = false;
    let f2 = ctx.sync(&ids[2], Generation(1), &[]);
    assert_eq!(ctx.sync_reply(f2).assignment, Bytes::from_static(b"p2"));
}

#[test]
fn members_missing_from_the_leader_assignment_get_an_empty_assignment() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    ctx.sync(&ids[0], Generation(1), &[(&ids[0], b"all")]);
    let r = ctx.sync_reply(f);
    assert!(r.error.is_none());
    assert!(r.assignment.is_empty());
}

#[test]
fn assignment_write_failure_fails_parked_syncs_and_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    ctx.hold_writes = true;
    let l = ctx.sync(&ids[0], Generation(1), &[(&ids[0], b"a"), (&ids[1], b"b")]);
    ctx.complete_held_writes(Err(GroupError::CoordinatorNotAvailable));
    for t in [f, l] {
        let r = ctx.sync_reply(t);
        assert_eq!(r.error, Some(GroupError::CoordinatorNotAvailable));
        assert!(r.assignment.is_empty() && r.protocol_name.is_none());
    }
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

/// Gateway mode: upstream did not take the assignment in time (COORDINATOR_LOAD_IN_PROGRESS,
/// which SyncGroup never answers: the Java client would throw it from poll). The members are
/// told to rejoin, as Kafka's coordinator tells them while it loads.
#[test]
fn assignment_write_upstream_did_not_take_is_answered_rebalance_in_progress() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    ctx.hold_writes = true;
    let l = ctx.sync(&ids[0], Generation(1), &[(&ids[0], b"a"), (&ids[1], b"b")]);
    ctx.complete_held_writes(Err(GroupError::CoordinatorLoadInProgress));
    for t in [f, l] {
        assert_eq!(
            ctx.sync_reply(t).error,
            Some(GroupError::RebalanceInProgress)
        );
    }
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn sync_in_stable_returns_the_stored_assignment() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let t = ctx.sync(&ids[1], Generation(1), &[]);
    let r = ctx.sync_reply(t);
    assert!(r.error.is_none());
    assert_eq!(r.assignment, Bytes::from_static(b"assigned"));
}

#[test]
fn pending_sync_timeout_removes_members_that_never_synced_and_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(3);
    let g = ctx.group.generation();
    // The leader and ids[1] sync; ids[2] never does (but heartbeats).
    ctx.sync(
        &ids[0],
        g,
        &[(&ids[0], b"a"), (&ids[1], b"b"), (&ids[2], b"c")],
    );
    ctx.sync(&ids[1], g, &[]);
    assert_eq!(ctx.group.state(), GroupState::Stable);
    for _ in 0..(REBALANCE / 5_000) {
        ctx.sleep(5_000);
        let _ = ctx.heartbeat(&ids[0], g);
        let _ = ctx.heartbeat(&ids[1], g);
        let _ = ctx.heartbeat(&ids[2], g);
    }
    assert!(!ctx.group.has_member(&ids[2]));
    assert_eq!(ctx.removed(&ids[2]), Some(&RemoveReason::NotSynced));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn pending_sync_timer_is_cancelled_once_everybody_synced() {
    let mut ctx = Ctx::new();
    ctx.stable_group(2);
    assert_eq!(ctx.group.timer_deadline(&TimerKey::PendingSync), None);
}

#[test]
fn leader_leaving_during_completing_rebalance_fails_parked_syncs_with_rebalance_in_progress() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(3);
    let f1 = ctx.sync(&ids[1], Generation(1), &[]);
    let f2 = ctx.sync(&ids[2], Generation(1), &[]);
    let out = ctx.leave(&[(ids[0].as_str(), None)]);
    assert_eq!(out.members[0].error, None);
    for t in [f1, f2] {
        let r = ctx.sync_reply(t);
        assert_eq!(r.error, Some(GroupError::RebalanceInProgress));
        assert!(r.assignment.is_empty());
        assert_eq!(
            (r.protocol_type.as_deref(), r.protocol_name.as_deref()),
            (None, None)
        );
    }
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    assert_eq!(ctx.group.leader(), Some(&ids[1]));
}

#[test]
fn any_rebalance_trigger_during_completing_rebalance_fails_parked_syncs() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    ctx.join(J::new()); // a new member
    assert_eq!(
        ctx.sync_reply(f).error,
        Some(GroupError::RebalanceInProgress)
    );
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn retried_sync_answers_the_abandoned_one() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let first = ctx.sync(&ids[1], Generation(1), &[]);
    let second = ctx.sync(&ids[1], Generation(1), &[]);
    assert_eq!(
        ctx.sync_reply(first).error,
        Some(GroupError::RebalanceInProgress)
    );
    ctx.sync(&ids[0], Generation(1), &[(&ids[1], b"x")]);
    assert_eq!(ctx.sync_reply(second).assignment, Bytes::from_static(b"x"));
}

// ----- server-assignment seam -----

#[derive(Debug, Default)]
struct MockAssignor {
    calls: Mutex<Vec<(Generation, String, Vec<MemberId>)>>,
    /// The current assignments the last call was given.
    current: Mutex<std::collections::HashMap<MemberId, Bytes>>,
}

impl ServerAssignor for MockAssignor {
    fn assignor_for(&self, _protocol_name: &str) -> Option<&str> {
        Some("mock")
    }

    fn serves(&self, protocol_type: &str) -> bool {
        protocol_type == "consumer"
    }

    fn validate(&self, _protocols: &[crate::group::Protocol]) -> Result<(), GroupError> {
        Ok(())
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<AssignOutcome, GroupError> {
        let members: Vec<MemberId> = input.members.iter().map(|m| m.member_id.clone()).collect();
        *self.current.lock().unwrap() = input
            .members
            .iter()
            .map(|m| (m.member_id.clone(), m.current_assignment.clone()))
            .collect();
        self.calls.lock().unwrap().push((
            input.generation,
            input.protocol_name.to_owned(),
            members.clone(),
        ));
        Ok(AssignOutcome {
            assignments: members
                .into_iter()
                .map(|m| {
                    let bytes = Bytes::from(format!("server:{m}"));
                    (m, bytes)
                })
                .collect(),
            ..AssignOutcome::default()
        })
    }
}

#[test]
fn server_assignment_is_computed_at_join_completion_and_installed_once_written() {
    let assignor = Arc::new(MockAssignor::default());
    let mut ctx = Ctx::with_config(GroupConfig {
        initial_rebalance_delay_ms: DELAY,
        assignment: AssignmentMode::Server(assignor.clone()),
        ..GroupConfig::default()
    });
    ctx.hold_writes = true;
    let l = ctx.join(J::new().v9().member(&MemberId::unknown()).instance("i-l"));
    let f = ctx.join(J::new().instance("i-f"));
    ctx.sleep(3 * DELAY);
    // The group record (creation) and the generation's assignment are being written.
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    let calls = assignor.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, Generation(1));
    assert_eq!(calls[0].1, "range");
    let (leader, follower) = (ctx.join_reply(l).clone(), ctx.join_reply(f).clone());
    assert!(
        !leader.skip_assignment,
        "SkipAssignment is Kafka's KIP-814 answer only: a server-assigned group's leader assigns (and is ignored)"
    );
    assert_eq!(
        leader.members.len(),
        2,
        "the leader still gets the member list"
    );
    assert!(!follower.skip_assignment);
    // The follower's SyncGroup waits for the write, not for the leader.
    let fs = ctx.sync(&follower.member_id, Generation(1), &[]);
    assert!(!ctx.sync_replies.contains_key(&fs));
    ctx.complete_held_writes(Ok(()));
    assert_eq!(ctx.group.state(), GroupState::Stable);
    assert_eq!(
        ctx.sync_reply(fs).assignment,
        Bytes::from(format!("server:{}", follower.member_id))
    );
    // Whatever the leader sends is ignored.
    let s = ctx.sync(
        &leader.member_id,
        Generation(1),
        &[(&follower.member_id, b"leader-made")],
    );
    assert_eq!(
        ctx.sync_reply(s).assignment,
        Bytes::from(format!("server:{}", leader.member_id))
    );
    assert!(
        ctx.held_writes.is_empty(),
        "the leader's sync writes nothing"
    );
    ctx.hold_writes = false;

    // The next generation's assignor sees what each member holds, so it can be sticky.
    ctx.join(J::new().v9().member(&leader.member_id).instance("i-l"));
    ctx.join(J::new().member(&follower.member_id).instance("i-f"));
    assert_eq!(ctx.group.state(), GroupState::Stable);
    let current = assignor.current.lock().unwrap().clone();
    assert_eq!(
        current.get(&follower.member_id),
        Some(&Bytes::from(format!("server:{}", follower.member_id)))
    );
}

// ----- the fallback guard and the rebalance-storm report -----

/// A server-assigned group of two dynamic v9 members, Stable in generation 1.
fn server_assigned_pair(config: GroupConfig) -> (Ctx, Arc<MockAssignor>, MemberId, MemberId) {
    let assignor = Arc::new(MockAssignor::default());
    let mut ctx = Ctx::with_config(GroupConfig {
        initial_rebalance_delay_ms: DELAY,
        assignment: AssignmentMode::Server(assignor.clone()),
        ..config
    });
    let l = ctx.join(J::new());
    let f = ctx.join(J::new());
    ctx.sleep(3 * DELAY);
    let (leader, follower) = (
        ctx.join_reply(l).member_id.clone(),
        ctx.join_reply(f).member_id.clone(),
    );
    let generation = ctx.group.generation();
    ctx.sync(&leader, generation, &[]);
    ctx.sync(&follower, generation, &[]);
    assert_eq!(ctx.group.state(), GroupState::Stable);
    (ctx, assignor, leader, follower)
}

/// The leader rejoins with its metadata unchanged right after the assignment (a client that
/// rejected the plan), the follower follows; both sync. Returns the leader's SyncGroup reply.
fn leader_rejects_the_plan(ctx: &mut Ctx, leader: &MemberId, follower: &MemberId) -> SyncReply {
    let l = ctx.join(J::new().member(leader));
    let f = ctx.join(J::new().member(follower));
    assert!(ctx.join_reply(l).error.is_none() && ctx.join_reply(f).error.is_none());
    let generation = ctx.group.generation();
    let s = ctx.sync(
        leader,
        generation,
        &[(leader, b"leader-plan"), (follower, b"leader-plan")],
    );
    ctx.sync(follower, generation, &[]);
    assert_eq!(ctx.group.state(), GroupState::Stable);
    ctx.sync_reply(s).clone()
}

fn fallbacks(ctx: &Ctx) -> usize {
    ctx.events
        .iter()
        .filter(|e| matches!(e, GroupEvent::AssignmentFallback { .. }))
        .count()
}

#[test]
fn a_leader_that_keeps_rejecting_the_server_plan_assigns_after_n_generations() {
    let (mut ctx, assignor, leader, follower) = server_assigned_pair(GroupConfig {
        assignment_fallback_rejoins: 3,
        ..GroupConfig::default()
    });
    for round in 1..=2 {
        let reply = leader_rejects_the_plan(&mut ctx, &leader, &follower);
        assert_eq!(
            reply.assignment,
            Bytes::from(format!("server:{leader}")),
            "round {round}: the server's plan is installed"
        );
        assert_eq!(fallbacks(&ctx), 0, "round {round}");
    }
    // The third unchanged rejoin in a row after a server assignment trips the guard: the
    // generation it starts and every later one is the leader's.
    let calls = assignor.calls.lock().unwrap().len();
    let reply = leader_rejects_the_plan(&mut ctx, &leader, &follower);
    assert_eq!(reply.assignment, Bytes::from_static(b"leader-plan"));
    assert_eq!(fallbacks(&ctx), 1);
    assert_eq!(
        assignor.calls.lock().unwrap().len(),
        calls,
        "the assignor is not asked"
    );
    assert_eq!(ctx.group.server_assignor_name(), None);
    let generation = ctx.group.generation();
    // The leader now gets what it computed: it stays, and so does the generation.
    let reply = leader_rejects_the_plan(&mut ctx, &leader, &follower);
    assert_eq!(reply.assignment, Bytes::from_static(b"leader-plan"));
    assert_eq!(ctx.group.generation(), generation.next());
    assert_eq!(fallbacks(&ctx), 1, "reported once");
}

#[test]
fn another_cause_between_rejected_plans_restarts_the_count() {
    let (mut ctx, _, leader, follower) = server_assigned_pair(GroupConfig {
        assignment_fallback_rejoins: 2,
        ..GroupConfig::default()
    });
    leader_rejects_the_plan(&mut ctx, &leader, &follower);
    // The follower changes its metadata: a rebalance of another cause.
    let l = ctx.join(J::new().member(&follower).protocols(&[("range", b"new")]));
    ctx.join(J::new().member(&leader));
    assert!(ctx.join_reply(l).error.is_none());
    let generation = ctx.group.generation();
    ctx.sync(&leader, generation, &[]);
    ctx.sync(&follower, generation, &[]);
    let reply = leader_rejects_the_plan(&mut ctx, &leader, &follower);
    assert_eq!(reply.assignment, Bytes::from(format!("server:{leader}")));
    assert_eq!(fallbacks(&ctx), 0);
    let reply = leader_rejects_the_plan(&mut ctx, &leader, &follower);
    assert_eq!(reply.assignment, Bytes::from_static(b"leader-plan"));
    assert_eq!(fallbacks(&ctx), 1);
}

#[test]
fn the_guard_is_off_at_zero() {
    let (mut ctx, _, leader, follower) = server_assigned_pair(GroupConfig {
        assignment_fallback_rejoins: 0,
        ..GroupConfig::default()
    });
    for _ in 0..10 {
        let reply = leader_rejects_the_plan(&mut ctx, &leader, &follower);
        assert_eq!(reply.assignment, Bytes::from(format!("server:{leader}")));
    }
    assert_eq!(fallbacks(&ctx), 0);
}

fn storms(ctx: &Ctx) -> Vec<u32> {
    ctx.events
        .iter()
        .filter_map(|e| match e {
            GroupEvent::RebalanceStorm { rebalances, .. } => Some(*rebalances),
            _ => None,
        })
        .collect()
}

#[test]
fn more_rebalances_than_the_limit_within_a_minute_are_reported_once_a_minute() {
    let (mut ctx, _, leader, follower) = server_assigned_pair(GroupConfig {
        assignment_fallback_rejoins: 0,
        rebalance_storm_per_minute: 3,
        ..GroupConfig::default()
    });
    // One rebalance so far (out of Empty). Two more within the minute: at the limit, quiet.
    for _ in 0..2 {
        ctx.sleep(1_000);
        leader_rejects_the_plan(&mut ctx, &leader, &follower);
    }
    assert_eq!(storms(&ctx), Vec::<u32>::new());
    // The fourth within a minute is a storm; the fifth is not reported again.
    ctx.sleep(1_000);
    leader_rejects_the_plan(&mut ctx, &leader, &follower);
    assert_eq!(storms(&ctx), vec![4]);
    ctx.sleep(1_000);
    leader_rejects_the_plan(&mut ctx, &leader, &follower);
    assert_eq!(storms(&ctx), vec![4]);
    // Rebalances 9 s apart (within the 10 s session): more than the limit within every minute,
    // reported again only once the last report is a minute old (the seventh, 64 s after it).
    for _ in 0..7 {
        ctx.sleep(9_000);
        leader_rejects_the_plan(&mut ctx, &leader, &follower);
    }
    assert_eq!(storms(&ctx), vec![4, 7]);
}
