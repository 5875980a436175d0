//! Heartbeat, session expiry and LeaveGroup: spec §1.1 table and §1.4, plus the style.md §7
//! traps (session restarted by Join/Sync replies, static members expire).

use super::*;

// ----- Heartbeat -----

#[test]
fn heartbeat_on_missing_group_is_unknown_member_id() {
    assert_eq!(missing::sync_or_heartbeat(), GroupError::UnknownMemberId);
}

#[test]
fn heartbeat_on_dead_group_is_coordinator_not_available() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    assert_eq!(
        ctx.heartbeat(&ids[0], Generation(1)),
        Err(GroupError::CoordinatorNotAvailable)
    );
}

#[test]
fn heartbeat_from_unknown_member_is_unknown_member_id() {
    let mut ctx = Ctx::new();
    ctx.stable_group(1);
    assert_eq!(
        ctx.heartbeat(&MemberId::new("nobody"), Generation(1)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn heartbeat_with_instance_id_of_another_member_is_fenced_instance_id() {
    let mut ctx = Ctx::new();
    ctx.join(J::new().instance("i-a"));
    let b = ctx.join(J::new().instance("i-b"));
    ctx.sleep(3 * DELAY);
    let b = ctx.join_reply(b).member_id.clone();
    let req = Heartbeat {
        member_id: b,
        instance_id: Some(InstanceId::new("i-a")),
        generation: Generation(1),
    };
    assert_eq!(
        ctx.group.handle_heartbeat(&req, ctx.now),
        Err(GroupError::FencedInstanceId)
    );
}

#[test]
fn heartbeat_with_wrong_generation_is_illegal_generation() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    assert_eq!(
        ctx.heartbeat(&ids[0], Generation(0)),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn heartbeat_in_empty_group_is_unknown_member_id() {
    let mut ctx = Ctx::new();
    assert_eq!(
        ctx.heartbeat(&MemberId::new("m"), Generation(0)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn heartbeat_in_preparing_rebalance_is_rebalance_in_progress_and_resets_the_session() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    ctx.join(J::new().member(&ids[0]));
    ctx.sleep(4_000);
    assert_eq!(
        ctx.heartbeat(&ids[1], Generation(1)),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
}

#[test]
fn heartbeat_in_completing_rebalance_is_none_and_resets_the_session() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    ctx.sleep(4_000);
    assert_eq!(ctx.heartbeat(&ids[1], Generation(1)), Ok(()));
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
}

#[test]
fn heartbeat_in_stable_is_none_and_resets_the_session() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.sleep(SESSION - 1);
    assert_eq!(ctx.heartbeat(&ids[0], Generation(1)), Ok(()));
    ctx.sleep(SESSION - 1);
    assert!(ctx.group.has_member(&ids[0]));
    assert_eq!(ctx.group.state(), GroupState::Stable);
}

// ----- session -----

#[test]
fn session_is_reset_by_join_and_sync_replies() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    // The JoinGroup reply restarted both sessions.
    assert_eq!(
        ctx.session_deadline(&ids[0]),
        Some(ctx.now.plus_ms(SESSION))
    );
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
    // The follower syncs at once and waits; the leader takes 9 s to assign.
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    ctx.sleep(9_000);
    ctx.sync(&ids[0], Generation(1), &[(&ids[1], b"p")]);
    assert!(ctx.sync_reply(f).error.is_none());
    // The SyncGroup reply restarted the follower's session: it does not expire 1 s later.
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
    ctx.sleep(SESSION - 1);
    assert!(ctx.group.has_member(&ids[1]) && ctx.group.has_member(&ids[0]));
    assert_eq!(ctx.group.state(), GroupState::Stable);
}

#[test]
fn member_parked_in_sync_does_not_expire_while_waiting_for_the_leader() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    // The leader heartbeats but takes longer than the follower's session to sync.
    for _ in 0..5 {
        ctx.sleep(5_000);
        ctx.heartbeat(&ids[0], Generation(1)).unwrap();
    }
    assert!(ctx.group.has_member(&ids[1]));
    ctx.sync(&ids[0], Generation(1), &[]);
    assert!(ctx.sync_reply(f).error.is_none());
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
}

#[test]
fn session_expiry_in_stable_removes_the_member_and_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    for _ in 0..3 {
        ctx.sleep(4_000);
        ctx.heartbeat(&ids[0], Generation(1)).unwrap_or(());
    }
    assert!(!ctx.group.has_member(&ids[1]));
    assert_eq!(ctx.removed(&ids[1]), Some(&RemoveReason::SessionExpired));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn static_member_session_expiry_removes_it() {
    let mut ctx = Ctx::new();
    let a = ctx.join(J::new().instance("i-a"));
    let b = ctx.join(J::new().instance("i-b"));
    ctx.sleep(3 * DELAY);
    let (a, b) = (
        ctx.join_reply(a).member_id.clone(),
        ctx.join_reply(b).member_id.clone(),
    );
    ctx.sync(&a, Generation(1), &[]);
    ctx.sync(&b, Generation(1), &[]);
    // i-b is killed; i-a keeps heartbeating.
    for _ in 0..3 {
        ctx.sleep(4_000);
        let _ = ctx.heartbeat(&a, ctx.group.generation());
    }
    assert!(!ctx.group.has_member(&b));
    assert_eq!(ctx.group.static_member_id(&InstanceId::new("i-b")), None);
    assert_eq!(ctx.removed(&b), Some(&RemoveReason::SessionExpired));
    assert_ne!(ctx.group.state(), GroupState::Stable);
}

#[test]
fn session_expiry_in_preparing_rebalance_completes_the_join() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let t = ctx.join(J::new().member(&ids[0]));
    // ids[1] is dead: when its session runs out the join phase ends without waiting for the
    // rebalance timeout.
    ctx.sleep(SESSION);
    assert!(!ctx.group.has_member(&ids[1]));
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert!(ctx.join_reply(t).error.is_none());
}

#[test]
fn stale_session_expiry_is_ignored() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    let key = TimerKey::Heartbeat(ids[0].clone());
    let first = ctx.group.timer_deadline(&key).unwrap();
    ctx.sleep(5_000);
    ctx.heartbeat(&ids[0], Generation(1)).unwrap();
    // The shell's old sleep for the first deadline fires: re-checked, nothing happens.
    ctx.now = first;
    ctx.group.handle_timer(key.clone(), first);
    ctx.drain();
    assert!(ctx.group.has_member(&ids[0]));
    // Firing twice at the real deadline removes once.
    let real = ctx.group.timer_deadline(&key).unwrap();
    ctx.now = real;
    ctx.mirror.remove(&key); // the shell's own timer fired
    ctx.group.handle_timer(key.clone(), real);
    ctx.group.handle_timer(key, real);
    ctx.drain();
    assert!(!ctx.group.has_member(&ids[0]));
}

// ----- LeaveGroup -----

#[test]
fn leave_on_missing_group_fails_every_entry_with_unknown_member_id() {
    let req = LeaveGroup {
        members: vec![
            LeavingMember {
                member_id: MemberId::new("a"),
                instance_id: None,
                reason: None,
            },
            LeavingMember {
                member_id: MemberId::unknown(),
                instance_id: Some(InstanceId::new("i")),
                reason: None,
            },
        ],
    };
    let out = missing::leave(&req);
    assert_eq!(out.error, None);
    assert!(out
        .members
        .iter()
        .all(|m| m.error == Some(GroupError::UnknownMemberId)));
}

#[test]
fn leave_on_dead_group_is_top_level_coordinator_not_available() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    let out = ctx.leave(&[(ids[0].as_str(), None)]);
    assert_eq!(out.error, Some(GroupError::CoordinatorNotAvailable));
}

#[test]
fn leave_of_a_member_removes_it_and_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let out = ctx.leave(&[(ids[1].as_str(), None)]);
    assert_eq!(out.error, None);
    assert_eq!(out.members.len(), 1);
    assert_eq!(out.members[0].error, None);
    assert_eq!(out.single_member_error(), None);
    assert!(!ctx.group.has_member(&ids[1]));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    // v0-2: an unknown member's error becomes the top-level error.
    let out = ctx.leave(&[("nobody", None)]);
    assert_eq!(out.single_member_error(), Some(GroupError::UnknownMemberId));
    assert_eq!(
        ctx.group
            .timer_deadline(&TimerKey::Heartbeat(ids[1].clone())),
        None
    );
}

#[test]
fn leave_batch_reports_per_member_errors_and_removes_the_valid_ones() {
    let mut ctx = Ctx::new();
    let a = ctx.join(J::new());
    let s = ctx.join(J::new().instance("i-s"));
    let c = ctx.join(J::new());
    ctx.sleep(3 * DELAY);
    let ids: Vec<MemberId> = [a, s, c]
        .iter()
        .map(|t| ctx.join_reply(*t).member_id.clone())
        .collect();
    let out = ctx.leave(&[
        ("nobody", None),
        (ids[0].as_str(), None),
        (ids[2].as_str(), Some("i-s")), // instance owned by another member
        (ids[2].as_str(), None),
    ]);
    let errors: Vec<_> = out.members.iter().map(|m| m.error).collect();
    assert_eq!(
        errors,
        vec![
            Some(GroupError::UnknownMemberId),
            None,
            Some(GroupError::FencedInstanceId),
            None
        ]
    );
    assert!(!ctx.group.has_member(&ids[0]) && !ctx.group.has_member(&ids[2]));
    assert!(ctx.group.has_member(&ids[1]));
    assert_eq!(out.members[2].instance_id, Some(InstanceId::new("i-s")));
}

#[test]
fn admin_leave_by_instance_id_removes_the_static_member() {
    let mut ctx = Ctx::new();
    ctx.join(J::new());
    let s = ctx.join(J::new().instance("i-s"));
    ctx.sleep(3 * DELAY);
    let s = ctx.join_reply(s).member_id.clone();
    let out = ctx.leave(&[("", Some("i-s")), ("", Some("i-unknown")), ("", None)]);
    let errors: Vec<_> = out.members.iter().map(|m| m.error).collect();
    assert_eq!(
        errors,
        vec![
            None,
            Some(GroupError::UnknownMemberId),
            Some(GroupError::UnknownMemberId)
        ]
    );
    assert!(!ctx.group.has_member(&s));
    assert!(matches!(
        ctx.removed(&s),
        Some(RemoveReason::AdminRemoved { .. })
    ));
}

#[test]
fn leave_of_a_pending_member_forgets_it() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    let t = ctx.join(J::new().v4());
    let pending = ctx.join_reply(t).member_id.clone();
    let out = ctx.leave(&[(pending.as_str(), None)]);
    assert_eq!(out.members[0].error, None);
    assert!(!ctx.group.is_pending_member(&pending));
    assert!(ctx.group.has_member(&ids[0]));
}

#[test]
fn leave_of_a_parked_joiner_answers_its_join_with_unknown_member_id() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let t = ctx.join(J::new().member(&ids[1]).protocols(&[("range", b"v2")]));
    assert!(ctx.join_parked(t));
    // Another connection of the same member (or an admin) makes it leave.
    ctx.leave(&[(ids[1].as_str(), None)]);
    let r = ctx.join_reply(t);
    assert_eq!(r.error, Some(GroupError::UnknownMemberId));
    assert_eq!(r.member_id, MemberId::unknown());
}

#[test]
fn leave_in_preparing_rebalance_completes_the_join_when_the_rest_rejoined() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(3);
    let t0 = ctx.join(J::new().member(&ids[0]));
    let t1 = ctx.join(J::new().member(&ids[1]));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    ctx.leave(&[(ids[2].as_str(), None)]);
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert!(ctx.join_reply(t0).error.is_none() && ctx.join_reply(t1).error.is_none());
}

#[test]
fn last_member_leaving_empties_the_group_after_the_join_phase() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.leave(&[(ids[0].as_str(), None)]);
    assert_eq!(ctx.group.state(), GroupState::Empty);
    assert_eq!(ctx.group.generation(), Generation(2));
}

// ----- unload, delete, reload -----

#[test]
fn unload_answers_every_parked_request_with_not_coordinator() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let f = ctx.sync(&ids[1], Generation(1), &[]);
    let j = ctx.join(J::new());
    let _ = f;
    let j2 = ctx.join(J::new().member(&ids[0]));
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    assert_eq!(ctx.group.state(), GroupState::Dead);
    assert_eq!(ctx.join_reply(j2).error, Some(GroupError::NotCoordinator));
    assert!(!ctx.join_parked(j));
    assert!(ctx.group.armed_timers().is_empty());
}

#[test]
fn delete_is_only_allowed_for_an_empty_group() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    assert_eq!(
        ctx.group.handle_delete(ctx.now),
        Err(GroupError::NonEmptyGroup)
    );
    ctx.leave(&[(ids[0].as_str(), None)]);
    assert_eq!(ctx.group.handle_delete(ctx.now), Ok(()));
    ctx.drain();
    assert_eq!(ctx.records.last(), Some(&GroupRecord::Tombstone));
    assert_eq!(
        ctx.group.handle_delete(ctx.now),
        Err(GroupError::GroupIdNotFound)
    );
}

/// A group whose last member left, deleted; its tombstone is the one held write.
fn deleted_with_tombstone_held() -> Ctx {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.leave(&[(ids[0].as_str(), None)]);
    ctx.hold_writes = true;
    assert_eq!(ctx.group.handle_delete(ctx.now), Ok(()));
    ctx.drain();
    assert_eq!(ctx.held_writes.len(), 1);
    ctx
}

/// A tombstone that cannot be stored undoes the delete: the group is Empty again, and a later
/// delete whose write succeeds deletes it.
#[test]
fn a_failed_tombstone_write_leaves_the_group_empty() {
    let mut ctx = deleted_with_tombstone_held();
    assert_eq!(ctx.group.state(), GroupState::Dead);
    ctx.complete_write(0, Err(GroupError::NotCoordinator));
    assert_eq!(ctx.group.state(), GroupState::Empty);
    assert!(ctx.events.contains(&GroupEvent::StateChanged {
        from: GroupState::Dead,
        to: GroupState::Empty
    }));
    assert_eq!(ctx.group.handle_delete(ctx.now), Ok(()));
    ctx.drain();
    ctx.complete_write(0, Ok(()));
    assert_eq!(ctx.group.state(), GroupState::Dead);
    assert_eq!(
        ctx.group.handle_delete(ctx.now),
        Err(GroupError::GroupIdNotFound)
    );
}

/// A group unloaded while its tombstone is being written stays Dead when that write fails (at
/// shutdown the store closes under pending writes).
#[test]
fn an_unloaded_group_stays_dead_when_its_tombstone_fails() {
    let mut ctx = deleted_with_tombstone_held();
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    ctx.complete_write(0, Err(GroupError::NotCoordinator));
    assert_eq!(ctx.group.state(), GroupState::Dead);
}

#[test]
fn reloaded_stable_group_keeps_its_generation_and_members_keep_heartbeating() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let record = ctx.group.metadata_record();
    ctx.group =
        ClassicGroup::from_record(GroupId::new("g"), GroupConfig::default(), &record, ctx.now);
    ctx.drain();
    assert_eq!(ctx.group.state(), GroupState::Stable);
    assert_eq!(ctx.group.leader(), Some(&ids[0]));
    assert_eq!(ctx.heartbeat(&ids[1], Generation(1)), Ok(()));
    let s = ctx.sync(&ids[1], Generation(1), &[]);
    assert_eq!(
        ctx.sync_reply(s).assignment,
        Bytes::from_static(b"assigned")
    );
    // A member that does not come back after the restart expires.
    ctx.sleep(5_000);
    ctx.heartbeat(&ids[1], Generation(1)).unwrap();
    ctx.sleep(5_000);
    assert!(!ctx.group.has_member(&ids[0]));
}
