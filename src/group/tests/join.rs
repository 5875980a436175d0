//! JoinGroup: spec §1.2, one test per checklist item.

use super::*;

fn gen(n: i32) -> Generation {
    Generation(n)
}

// ----- group missing / creation -----

#[test]
fn join_unknown_member_on_missing_group_is_unknown_member_id() {
    let req = J::new().member(&MemberId::new("ghost")).req;
    let reply = missing::join(&req).expect("rejected");
    assert_eq!(reply.error, Some(GroupError::UnknownMemberId));
    assert_eq!(reply.member_id, MemberId::new("ghost"));
    // Without a member id the group is created.
    assert!(missing::join(&J::new().req).is_none());
}

#[test]
fn join_without_member_id_creates_empty_group_at_generation_zero() {
    let ctx = Ctx::new();
    assert_eq!(ctx.group.state(), GroupState::Empty);
    assert_eq!(ctx.group.generation(), gen(0));
    assert_eq!(ctx.group.protocol_type(), None);
    // The creation is persisted (Kafka writes an empty GroupMetadata record).
    assert!(matches!(&ctx.records[..], [GroupRecord::Metadata(r)] if r.members.is_empty()));
}

// ----- group.max.size -----

fn max_size(n: usize) -> Ctx {
    Ctx::with_config(GroupConfig {
        max_size: n,
        initial_rebalance_delay_ms: DELAY,
        ..GroupConfig::default()
    })
}

#[test]
fn max_size_rejects_a_new_member_of_a_full_stable_group() {
    let mut ctx = max_size(2);
    ctx.stable_group(2);
    let t = ctx.join(J::new());
    let r = ctx.join_reply(t);
    assert_eq!(r.error, Some(GroupError::GroupMaxSizeReached));
    assert_eq!(r.member_id, MemberId::unknown());
    assert_eq!(ctx.group.state(), GroupState::Stable);
    assert_eq!(ctx.group.num_members(), 2);
}

#[test]
fn max_size_accepts_an_existing_member_of_a_full_group() {
    let mut ctx = max_size(2);
    let ids = ctx.stable_group(2);
    let t = ctx.join(J::new().member(&ids[1]).protocols(&[("range", b"new")]));
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn max_size_in_preparing_rebalance_counts_rejoined_members_and_drops_the_extra_one() {
    // A group reloaded with 3 members under a max size of 2 rebalances at once.
    let mut loaded = Ctx::new();
    let ids = loaded.stable_group(3);
    let record = loaded.group.metadata_record();
    let mut ctx = max_size(2);
    ctx.group = ClassicGroup::from_record(
        GroupId::new("g"),
        GroupConfig {
            max_size: 2,
            initial_rebalance_delay_ms: DELAY,
            ..GroupConfig::default()
        },
        &record,
        ctx.now,
    );
    ctx.drain();
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    let t0 = ctx.join(J::new().member(&ids[0]));
    let t1 = ctx.join(J::new().member(&ids[1]));
    let t2 = ctx.join(J::new().member(&ids[2]));
    assert_eq!(
        ctx.join_reply(t2).error,
        Some(GroupError::GroupMaxSizeReached)
    );
    assert!(
        !ctx.group.has_member(&ids[2]),
        "the refused member is dropped"
    );
    // The two accepted members form the next generation, at the rebalance timeout: as in
    // Kafka, dropping the refused member does not itself end the join phase.
    ctx.sleep(REBALANCE);
    assert!(ctx.join_replies.contains_key(&t0) && ctx.join_replies.contains_key(&t1));
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert_eq!(ctx.group.num_members(), 2);
}

#[test]
fn max_size_always_accepts_the_first_member_of_an_empty_group() {
    let mut ctx = max_size(0);
    let t = ctx.join(J::new());
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.num_members(), 1);
}

// ----- protocols -----

#[test]
fn empty_group_rejects_join_without_protocol_type_or_protocols() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new().protocol_type(""));
    assert_eq!(
        ctx.join_reply(t).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let t = ctx.join(J::new().protocols(&[]));
    assert_eq!(
        ctx.join_reply(t).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    assert_eq!(ctx.group.num_members(), 0);
}

#[test]
fn join_with_another_protocol_type_is_inconsistent_group_protocol() {
    let mut ctx = Ctx::new();
    ctx.stable_group(1);
    let t = ctx.join(J::new().protocol_type("connect"));
    let r = ctx.join_reply(t);
    assert_eq!(r.error, Some(GroupError::InconsistentGroupProtocol));
    assert_eq!(r.member_id, MemberId::unknown());
}

#[test]
fn join_without_a_protocol_every_member_supports_is_inconsistent_group_protocol() {
    let mut ctx = Ctx::new();
    ctx.stable_group(2);
    let t = ctx.join(J::new().protocols(&[("roundrobin", b"")]));
    assert_eq!(
        ctx.join_reply(t).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn protocol_vote_picks_the_most_voted_protocol_every_member_supports() {
    let mut ctx = Ctx::new();
    // "sticky" is offered by only one member, so it is no candidate.
    let a = ctx.join(J::new().protocols(&[("sticky", b""), ("roundrobin", b"a"), ("range", b"a")]));
    let b = ctx.join(J::new().protocols(&[("range", b"b"), ("roundrobin", b"b")]));
    let c = ctx.join(J::new().protocols(&[("range", b"c"), ("roundrobin", b"c")]));
    ctx.sleep(3 * DELAY);
    for t in [a, b, c] {
        assert_eq!(ctx.join_reply(t).protocol_name.as_deref(), Some("range"));
    }
    // The leader sees each member's metadata for the selected protocol.
    let leader = ctx.join_reply(a);
    let metas: Vec<_> = leader.members.iter().map(|m| m.metadata.clone()).collect();
    assert_eq!(
        metas,
        vec![
            Bytes::from_static(b"a"),
            Bytes::from_static(b"b"),
            Bytes::from_static(b"c")
        ]
    );
}

// ----- KIP-394 -----

#[test]
fn v4_dynamic_join_without_id_gets_member_id_required_with_client_id_uuid() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new().client("app").v4());
    let r = ctx.join_reply(t).clone();
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    assert!(r.member_id.as_str().starts_with("app-"));
    assert!(ctx.group.is_pending_member(&r.member_id));
    assert_eq!(ctx.group.num_members(), 0);
    assert_eq!(ctx.group.state(), GroupState::Empty);
    // The rejoin with that id is accepted.
    let t = ctx.join(J::new().client("app").v4().member(&r.member_id));
    assert!(ctx.join_parked(t));
    assert!(ctx.group.has_member(&r.member_id));
    assert!(!ctx.group.is_pending_member(&r.member_id));
}

#[test]
fn pending_member_expires_after_its_session_timeout() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new().v4().session(7_000));
    let id = ctx.join_reply(t).member_id.clone();
    ctx.sleep(6_999);
    assert!(ctx.group.is_pending_member(&id));
    ctx.sleep(1);
    assert!(!ctx.group.is_pending_member(&id));
    assert_eq!(ctx.removed(&id), Some(&RemoveReason::PendingMemberExpired));
    let t = ctx.join(J::new().v4().member(&id));
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::UnknownMemberId));
}

#[test]
fn v3_dynamic_join_without_id_is_added_directly() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new().client("old"));
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.num_members(), 1);
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn pending_member_holds_the_join_phase_until_it_expires() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    // A new member is told its id but does not come back.
    let p = ctx.join(J::new().v4().session(20_000));
    let pending = ctx.join_reply(p).member_id.clone();
    // The leader rejoins (rebalance), then the follower: everybody but the pending member.
    let tokens = ctx.rejoin_all(&ids);
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    assert!(tokens.iter().all(|t| ctx.join_parked(*t)));
    ctx.sleep(20_000);
    assert!(!ctx.group.is_pending_member(&pending));
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert!(tokens.iter().all(|t| ctx.join_reply(*t).error.is_none()));
}

// ----- static members -----

#[test]
fn static_join_without_id_never_gets_member_id_required() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new().v4().instance("i-1"));
    assert!(ctx.join_parked(t));
    ctx.sleep(DELAY);
    let r = ctx.join_reply(t);
    assert!(r.error.is_none());
    assert!(r.member_id.as_str().starts_with("i-1-"));
}

/// A Stable group: a dynamic leader and static members `i-1`, `i-2` (in that order).
fn stable_with_statics(ctx: &mut Ctx, leader_static: bool) -> Vec<MemberId> {
    let first = if leader_static {
        J::new().instance("i-0")
    } else {
        J::new()
    };
    let t0 = ctx.join(first);
    let t1 = ctx.join(J::new().instance("i-1"));
    let t2 = ctx.join(J::new().instance("i-2"));
    ctx.sleep(3 * DELAY);
    let ids: Vec<MemberId> = [t0, t1, t2]
        .iter()
        .map(|t| ctx.join_reply(*t).member_id.clone())
        .collect();
    let g = ctx.group.generation();
    ctx.sync(
        &ids[0],
        g,
        &[(&ids[0], b"a0"), (&ids[1], b"a1"), (&ids[2], b"a2")],
    );
    ctx.sync(&ids[1], g, &[]);
    ctx.sync(&ids[2], g, &[]);
    assert_eq!(ctx.group.state(), GroupState::Stable);
    ids
}

#[test]
fn static_rejoin_without_id_fences_the_old_members_parked_join() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, false);
    // A rebalance: the old i-1 process is parked in JoinGroup.
    let old = ctx.join(
        J::new()
            .member(&ids[1])
            .instance("i-1")
            .protocols(&[("range", b"v2")]),
    );
    assert!(ctx.join_parked(old));
    // i-1 restarts and rejoins without its id.
    let new = ctx.join(J::new().instance("i-1").protocols(&[("range", b"v2")]));
    let r = ctx.join_reply(old);
    assert_eq!(r.error, Some(GroupError::FencedInstanceId));
    assert_eq!(r.member_id, ids[1]);
    assert!(!ctx.group.has_member(&ids[1]));
    let new_id = ctx
        .group
        .static_member_id(&InstanceId::new("i-1"))
        .unwrap()
        .clone();
    assert_ne!(new_id, ids[1]);
    assert!(ctx.join_parked(new));
    // The old id is fenced from now on.
    let t = ctx.join(J::new().member(&ids[1]).instance("i-1"));
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::FencedInstanceId));
}

#[test]
fn static_replacement_while_completing_rebalance_fences_old_parked_sync_and_rebalances() {
    let mut ctx = Ctx::new();
    let t0 = ctx.join(J::new());
    let t1 = ctx.join(J::new().instance("i-1"));
    ctx.sleep(3 * DELAY);
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    let leader = ctx.join_reply(t0).member_id.clone();
    let old = ctx.join_reply(t1).member_id.clone();
    let g = ctx.group.generation();
    let s_old = ctx.sync(&old, g, &[]);
    assert!(ctx.sync_parked(s_old));
    ctx.join(J::new().instance("i-1"));
    assert_eq!(
        ctx.sync_reply(s_old).error,
        Some(GroupError::FencedInstanceId)
    );
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    assert!(ctx.group.has_member(&leader));
}

#[test]
fn static_replacement_while_stable_without_protocol_change_does_not_rebalance() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, false);
    let generation = ctx.group.generation();
    ctx.hold_writes = true;
    let records_before = ctx.records.len();
    let t = ctx.join(J::new().instance("i-2"));
    // The record is written first; the reply waits for it.
    assert_eq!(ctx.records.len(), records_before + 1);
    assert!(ctx.join_parked(t));
    ctx.complete_held_writes(Ok(()));
    let r = ctx.join_reply(t).clone();
    assert!(r.error.is_none());
    assert_eq!(r.generation, generation);
    assert_eq!(r.leader, ids[0]);
    assert!(r.members.is_empty());
    assert_eq!(ctx.group.state(), GroupState::Stable);
    assert_eq!(ctx.group.generation(), generation);
    // The new id inherited the assignment.
    let s = ctx.sync(&r.member_id, generation, &[]);
    assert_eq!(ctx.sync_reply(s).assignment, Bytes::from_static(b"a2"));
}

#[test]
fn static_leader_replacement_v9_gets_members_and_skip_assignment() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, true);
    let t = ctx.join(J::new().instance("i-0").v9());
    let r = ctx.join_reply(t).clone();
    assert!(r.error.is_none());
    assert!(
        r.skip_assignment,
        "KIP-814: the replaced leader only needs SyncGroup"
    );
    assert_eq!(r.leader, r.member_id);
    assert_eq!(r.members.len(), 3);
    assert!(!ctx.group.has_member(&ids[0]));
    assert_eq!(ctx.group.leader(), Some(&r.member_id));
    assert_eq!(ctx.group.state(), GroupState::Stable);
}

#[test]
fn static_leader_replacement_before_v9_is_told_the_old_leader_id() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, true);
    let t = ctx.join(J::new().instance("i-0").v4());
    let r = ctx.join_reply(t).clone();
    assert!(r.error.is_none());
    assert!(!r.skip_assignment);
    assert_eq!(
        r.leader, ids[0],
        "the old leader id, so the client acts as a follower"
    );
    assert!(r.members.is_empty());
    assert_eq!(ctx.group.state(), GroupState::Stable);
}

#[test]
fn static_replacement_while_stable_with_protocol_change_rebalances() {
    let mut ctx = Ctx::new();
    ctx.join(
        J::new()
            .instance("i-0")
            .protocols(&[("range", b""), ("roundrobin", b"")]),
    );
    ctx.join(
        J::new()
            .instance("i-1")
            .protocols(&[("range", b""), ("roundrobin", b"")]),
    );
    ctx.sleep(3 * DELAY);
    let ids: Vec<MemberId> = ctx.group.members().map(|m| m.id.clone()).collect();
    let g = ctx.group.generation();
    ctx.sync(&ids[0], g, &[]);
    ctx.sync(&ids[1], g, &[]);
    assert_eq!(ctx.group.protocol_name(), Some("range"));
    // i-1 restarts offering only roundrobin: the vote of the next generation changes.
    let t = ctx.join(J::new().instance("i-1").protocols(&[("roundrobin", b"")]));
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn static_replacement_write_failure_reverts_to_the_old_member_id() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, false);
    ctx.hold_writes = true;
    let t = ctx.join(J::new().instance("i-1").session(25_000));
    ctx.complete_held_writes(Err(GroupError::NotCoordinator));
    let r = ctx.join_reply(t);
    assert_eq!(r.error, Some(GroupError::NotCoordinator));
    assert_eq!(r.member_id, MemberId::unknown());
    assert_eq!(
        ctx.group.static_member_id(&InstanceId::new("i-1")),
        Some(&ids[1])
    );
    assert_eq!(
        ctx.group.member(&ids[1]).unwrap().session_timeout_ms,
        SESSION
    );
    assert_eq!(ctx.heartbeat(&ids[1], ctx.group.generation()), Ok(()));
}

// ----- validateMember -----

#[test]
fn join_with_unknown_member_id_is_unknown_member_id() {
    let mut ctx = Ctx::new();
    ctx.stable_group(1);
    let t = ctx.join(J::new().member(&MemberId::new("nobody")));
    let r = ctx.join_reply(t);
    assert_eq!(r.error, Some(GroupError::UnknownMemberId));
    assert_eq!(r.member_id, MemberId::new("nobody"));
}

#[test]
fn join_with_instance_id_owned_by_another_member_is_fenced_instance_id() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, false);
    let t = ctx.join(J::new().member(&ids[2]).instance("i-1"));
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::FencedInstanceId));
}

#[test]
fn join_with_unknown_instance_id_and_a_member_id_is_unknown_member_id() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, false);
    let t = ctx.join(J::new().member(&ids[0]).instance("i-9"));
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::UnknownMemberId));
}

// ----- known member by state -----

#[test]
fn known_member_rejoining_an_empty_group_is_unknown_member_id() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.leave(&[(ids[0].as_str(), None)]);
    ctx.sleep(REBALANCE);
    assert_eq!(ctx.group.state(), GroupState::Empty);
    let t = ctx.join(J::new().member(&ids[0]));
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::UnknownMemberId));
}

#[test]
fn completing_rebalance_rejoin_with_same_protocols_gets_the_current_generation() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let g = ctx.group.generation();
    let leader = ctx.join(J::new().member(&ids[0]));
    let follower = ctx.join(J::new().member(&ids[1]));
    let (l, f) = (ctx.join_reply(leader), ctx.join_reply(follower));
    assert_eq!((l.generation, f.generation), (g, g));
    assert_eq!(l.members.len(), 2, "the leader gets the members again");
    assert!(f.members.is_empty());
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
}

#[test]
fn completing_rebalance_rejoin_with_changed_protocols_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    let t = ctx.join(J::new().member(&ids[1]).protocols(&[("range", b"changed")]));
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn stable_leader_rejoin_always_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let t = ctx.join(J::new().member(&ids[0]));
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn stable_follower_rejoin_with_changed_metadata_rebalances() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    ctx.join(
        J::new()
            .member(&ids[1])
            .protocols(&[("range", b"more-topics")]),
    );
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn stable_follower_rejoin_with_same_metadata_gets_an_immediate_reply_without_members() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let t = ctx.join(J::new().member(&ids[1]));
    let r = ctx.join_reply(t);
    assert!(r.error.is_none());
    assert_eq!(r.generation, ctx.group.generation());
    assert_eq!(r.leader, ids[0]);
    assert!(r.members.is_empty());
    assert_eq!(ctx.group.state(), GroupState::Stable);
}

// ----- end of the join phase -----

#[test]
fn join_phase_ends_as_soon_as_every_member_rejoined() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(3);
    let tokens = ctx.rejoin_all(&ids);
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert_eq!(ctx.group.generation(), Generation(2));
    assert!(tokens.iter().all(|t| ctx.join_reply(*t).error.is_none()));
}

#[test]
fn join_phase_ends_at_the_rebalance_timeout_removing_dynamic_members_that_did_not_rejoin() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(3);
    let t0 = ctx.join(J::new().member(&ids[0]));
    // ids[1] rejoins; ids[2] keeps heartbeating but never rejoins.
    let t1 = ctx.join(J::new().member(&ids[1]));
    for _ in 0..(REBALANCE / 5_000) {
        ctx.sleep(5_000);
        let _ = ctx.heartbeat(&ids[2], Generation(1));
    }
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert!(!ctx.group.has_member(&ids[2]));
    assert_eq!(ctx.removed(&ids[2]), Some(&RemoveReason::NotRejoined));
    assert!(ctx.join_reply(t0).error.is_none() && ctx.join_reply(t1).error.is_none());
}

#[test]
fn static_members_that_did_not_rejoin_are_kept() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, false);
    ctx.join(J::new().member(&ids[0]));
    ctx.join(J::new().member(&ids[1]).instance("i-1"));
    // i-2 stays silent but its session (10 s) is shorter than the rebalance timeout: keep it
    // alive with heartbeats.
    for _ in 0..(REBALANCE / 5_000) {
        ctx.sleep(5_000);
        let _ = ctx.heartbeat(&ids[2], Generation(1));
    }
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert!(
        ctx.group.has_member(&ids[2]),
        "static members are not removed at join end"
    );
    assert_eq!(ctx.group.num_members(), 3);
}

#[test]
fn leader_that_did_not_rejoin_is_replaced_by_the_first_rejoined_member() {
    let mut ctx = Ctx::new();
    let ids = stable_with_statics(&mut ctx, true);
    // A follower triggers a rebalance; the leader (static, kept) never rejoins.
    let t2 = ctx.join(
        J::new()
            .member(&ids[2])
            .instance("i-2")
            .protocols(&[("range", b"x")]),
    );
    let t1 = ctx.join(J::new().member(&ids[1]).instance("i-1"));
    for _ in 0..(REBALANCE / 5_000) {
        ctx.sleep(5_000);
        let _ = ctx.heartbeat(&ids[0], Generation(1));
    }
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    // i-1 is the first rejoined member in join order.
    assert_eq!(ctx.group.leader(), Some(&ids[1]));
    assert_eq!(ctx.join_reply(t1).members.len(), 3);
    assert!(ctx.join_reply(t2).members.is_empty());
}

#[test]
fn existing_leader_is_kept_when_it_rejoined_even_if_others_rejoined_first() {
    let mut ctx = Ctx::new();
    let tz = ctx.join(J::new().client("zzz"));
    let ta = ctx.join(J::new().client("aaa"));
    ctx.sleep(3 * DELAY);
    let zzz = ctx.join_reply(tz).member_id.clone();
    let aaa = ctx.join_reply(ta).member_id.clone();
    assert_eq!(ctx.group.leader(), Some(&zzz));
    let g = ctx.group.generation();
    ctx.sync(&zzz, g, &[]);
    ctx.sync(&aaa, g, &[]);
    // aaa (smaller id) triggers the rebalance and rejoins first.
    ctx.join(J::new().member(&aaa).protocols(&[("range", b"new")]));
    let t = ctx.join(J::new().member(&zzz));
    assert_eq!(ctx.group.leader(), Some(&zzz));
    assert_eq!(ctx.join_reply(t).leader, zzz);
    assert_eq!(ctx.join_reply(t).members.len(), 2);
}

#[test]
fn join_phase_is_rescheduled_when_nobody_rejoined() {
    let mut ctx = Ctx::new();
    // Two static members with long sessions; a new dynamic member triggers a rebalance and
    // then leaves: nobody is parked when the rebalance timeout fires.
    let a = ctx.join(J::new().instance("i-a").session(600_000));
    let b = ctx.join(J::new().instance("i-b").session(600_000));
    ctx.sleep(3 * DELAY);
    let (a, b) = (
        ctx.join_reply(a).member_id.clone(),
        ctx.join_reply(b).member_id.clone(),
    );
    let g = ctx.group.generation();
    ctx.sync(&a, g, &[]);
    ctx.sync(&b, g, &[]);
    let t = ctx.join(J::new().v4());
    let pending = ctx.join_reply(t).member_id.clone();
    let t = ctx.join(J::new().v4().member(&pending));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    ctx.leave(&[(pending.as_str(), None)]);
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::UnknownMemberId));
    ctx.sleep(REBALANCE);
    // Nobody rejoined: the phase waits another rebalance timeout instead of ending.
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    assert_eq!(ctx.group.generation(), g);
    assert!(ctx.group.timer_deadline(&TimerKey::Join).is_some());
    // Once a member rejoins, the next expiry ends it.
    ctx.join(J::new().member(&a).instance("i-a"));
    ctx.sleep(REBALANCE);
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
}

// ----- completion -----

#[test]
fn completion_bumps_the_generation_and_only_the_leader_gets_the_members() {
    let mut ctx = Ctx::new();
    let t0 = ctx.join(J::new());
    let t1 = ctx.join(J::new());
    ctx.sleep(3 * DELAY);
    let (l, f) = (ctx.join_reply(t0).clone(), ctx.join_reply(t1).clone());
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
    assert_eq!((l.generation, f.generation), (gen(1), gen(1)));
    assert_eq!(l.leader, l.member_id);
    assert_eq!(f.leader, l.member_id);
    assert_eq!(l.members.len(), 2);
    assert!(f.members.is_empty());
    assert_eq!(l.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(f.protocol_name.as_deref(), Some("range"));
    assert!(ctx.events.iter().any(|e| matches!(e,
        GroupEvent::GenerationStarted { generation, members, .. } if *generation == gen(1) && members.len() == 2)));
}

#[test]
fn completion_without_members_goes_empty_with_no_protocol_and_persists() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    // A rebalance nobody rejoins: both dynamic members are removed at the timeout.
    let t = ctx.join(J::new().member(&ids[0]));
    ctx.leave(&[(ids[0].as_str(), None)]);
    assert_eq!(ctx.join_reply(t).error, Some(GroupError::UnknownMemberId));
    let records = ctx.records.len();
    for _ in 0..(REBALANCE / 5_000) {
        ctx.sleep(5_000);
        let _ = ctx.heartbeat(&ids[1], Generation(1));
    }
    assert_eq!(ctx.group.state(), GroupState::Empty);
    assert_eq!(ctx.group.generation(), gen(2));
    assert_eq!(ctx.group.protocol_name(), None);
    assert_eq!(ctx.records.len(), records + 1);
}

#[test]
fn new_member_parked_join_times_out_after_five_minutes_with_unknown_member_id() {
    let mut ctx = Ctx::new();
    let a = ctx.join(J::new().session(1_800_000).rebalance(600_000));
    ctx.sleep(DELAY);
    let a = ctx.join_reply(a).member_id.clone();
    ctx.sync(&a, gen(1), &[]);
    // B joins: rebalance (10 min timeout); A does not rejoin for a long time.
    let b = ctx.join(J::new().rebalance(600_000));
    assert!(ctx.join_parked(b));
    ctx.sleep(NEW_MEMBER_JOIN_TIMEOUT_MS - 1);
    assert!(ctx.join_parked(b));
    ctx.sleep(1);
    let r = ctx.join_reply(b);
    assert_eq!(r.error, Some(GroupError::UnknownMemberId));
    assert_eq!(r.member_id, MemberId::unknown());
    assert_eq!(ctx.group.num_members(), 1);
    assert!(matches!(
        ctx.events
            .iter()
            .rev()
            .find(|e| matches!(e, GroupEvent::MemberRemoved { .. })),
        Some(GroupEvent::MemberRemoved {
            reason: RemoveReason::NewMemberJoinTimeout,
            ..
        })
    ));
}

// ----- initial delay -----

#[test]
fn initial_rebalance_waits_the_delay_and_never_completes_early() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new());
    // The only member has joined, yet the initial rebalance waits.
    ctx.sleep(DELAY - 1);
    assert!(ctx.join_parked(t));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    ctx.sleep(1);
    assert!(ctx.join_reply(t).error.is_none());
}

#[test]
fn initial_delay_extends_while_members_keep_joining() {
    // rebalance 10 s, delay 3 s: remaining 7 s.
    let mut ctx = Ctx::new();
    let a = ctx.join(J::new().rebalance(10_000));
    ctx.sleep(2_000);
    ctx.join(J::new().rebalance(10_000)); // t=2000
    ctx.sleep(1_000); // t=3000: extend by min(3000, 7000); remaining 4000
    assert!(ctx.join_parked(a));
    ctx.sleep(2_000);
    ctx.join(J::new().rebalance(10_000)); // t=5000
    ctx.sleep(1_000); // t=6000: extend by min(3000, 4000); remaining 1000
    assert!(ctx.join_parked(a));
    ctx.sleep(2_999); // t=8999
    assert!(ctx.join_parked(a));
    ctx.sleep(1); // t=9000: nobody new, complete
    assert!(ctx.join_reply(a).error.is_none());
    assert_eq!(ctx.group.num_members(), 3);
}

#[test]
fn initial_delay_extension_is_capped_by_the_remaining_rebalance_time() {
    // rebalance 4 s, delay 3 s: remaining 1 s.
    let mut ctx = Ctx::new();
    let a = ctx.join(J::new().rebalance(4_000));
    ctx.sleep(1_000);
    ctx.join(J::new().rebalance(4_000));
    ctx.sleep(2_000); // t=3000: extend by min(3000, 1000); remaining 0
    assert!(ctx.join_parked(a));
    ctx.sleep(500);
    ctx.join(J::new().rebalance(4_000)); // t=3500
    ctx.sleep(499);
    assert!(ctx.join_parked(a));
    ctx.sleep(1); // t=4000: no time remains, complete despite the new member
    assert!(ctx.join_reply(a).error.is_none());
    assert_eq!(ctx.group.num_members(), 3);
}

// ----- Dead, retries, Kafka-code decisions -----

#[test]
fn join_on_dead_group_is_coordinator_not_available() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    let t = ctx.join(J::new());
    assert_eq!(
        ctx.join_reply(t).error,
        Some(GroupError::CoordinatorNotAvailable)
    );
    let t = ctx.join(J::new().member(&ids[0]));
    let r = ctx.join_reply(t);
    assert_eq!(r.error, Some(GroupError::CoordinatorNotAvailable));
    assert_eq!(r.member_id, ids[0]);
}

#[test]
fn retried_join_answers_the_abandoned_one() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    let first = ctx.join(J::new().member(&ids[0]));
    let second = ctx.join(J::new().member(&ids[0]));
    assert_eq!(
        ctx.join_reply(first).error,
        Some(GroupError::RebalanceInProgress)
    );
    assert!(ctx.join_parked(second));
    ctx.join(J::new().member(&ids[1]));
    assert!(ctx.join_reply(second).error.is_none());
}

#[test]
fn pending_member_expiry_during_the_initial_delay_ends_the_join_phase_as_kafka_does() {
    // Kafka's expiry path completes the join directly once everybody else has joined, even
    // during an initial rebalance (only maybeCompleteJoinPhase checks for it).
    let mut ctx = Ctx::new();
    let p = ctx.join(J::new().v4().session(5_500));
    let pending = ctx.join_reply(p).member_id.clone();
    let a = ctx.join(J::new().rebalance(300_000));
    // Members keep arriving, so the initial delay keeps being extended...
    for _ in 0..2 {
        ctx.sleep(2_500);
        ctx.join(J::new().rebalance(300_000));
    }
    assert!(ctx.join_parked(a));
    // ...but at 5.5 s the pending member expires with everyone else joined.
    ctx.sleep(500);
    assert!(!ctx.group.is_pending_member(&pending));
    assert!(ctx.join_reply(a).error.is_none());
    assert_eq!(ctx.group.state(), GroupState::CompletingRebalance);
}
