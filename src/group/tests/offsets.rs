//! The group checks of OffsetCommit: spec §3.1 (classic groups).

use super::*;
use crate::assignor::protocol::{encode_subscription, Subscription};

fn auth(member: &str, generation: i32) -> OffsetCommitAuth {
    OffsetCommitAuth {
        member_id: MemberId::new(member),
        instance_id: None,
        generation: Generation(generation),
        transactional: false,
    }
}

#[test]
fn commit_to_missing_group_with_negative_generation_creates_a_simple_group() {
    assert_eq!(missing::offset_commit(&auth("", -1), true), Ok(()));
    let mut group =
        ClassicGroup::new_simple(GroupId::new("s"), GroupConfig::default(), Timestamp(0));
    assert_eq!(group.state(), GroupState::Empty);
    assert_eq!(group.protocol_type(), None);
    assert_eq!(
        group.validate_offset_commit(&auth("", -1), Timestamp(0)),
        Ok(())
    );
}

#[test]
fn commit_to_missing_group_with_a_generation_is_group_id_not_found_from_v9_else_illegal_generation()
{
    assert_eq!(
        missing::offset_commit(&auth("m", 3), true),
        Err(GroupError::GroupIdNotFound)
    );
    assert_eq!(
        missing::offset_commit(&auth("m", 3), false),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        missing::offset_commit(&auth("", 0), false),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn commit_to_dead_group_is_coordinator_not_available() {
    let mut ctx = Ctx::new();
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    assert_eq!(
        ctx.commit(auth("", -1)),
        Err(GroupError::CoordinatorNotAvailable)
    );
}

#[test]
fn commit_with_negative_generation_to_empty_group_is_accepted() {
    let mut ctx = Ctx::new();
    assert_eq!(ctx.commit(auth("", -1)), Ok(()));
    // Even naming a member: an Empty group takes admin commits as they come.
    assert_eq!(ctx.commit(auth("whoever", -1)), Ok(()));
}

#[test]
fn commit_with_a_generation_validates_the_member_then_the_generation() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    assert_eq!(
        ctx.commit(auth("nobody", 1)),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(ctx.commit(auth("", 1)), Err(GroupError::UnknownMemberId));
    assert_eq!(
        ctx.commit(auth(ids[1].as_str(), 0)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(ctx.commit(auth(ids[1].as_str(), 1)), Ok(()));
    let mut fenced = auth(ids[1].as_str(), 1);
    fenced.instance_id = Some(InstanceId::new("i-unknown"));
    assert_eq!(ctx.commit(fenced), Err(GroupError::UnknownMemberId));
}

#[test]
fn commit_with_a_member_id_but_negative_generation_is_illegal_generation() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    assert_eq!(
        ctx.commit(auth(ids[0].as_str(), -1)),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn anonymous_commit_to_a_non_empty_group_is_unknown_member_id_unless_transactional() {
    let mut ctx = Ctx::new();
    ctx.stable_group(1);
    assert_eq!(ctx.commit(auth("", -1)), Err(GroupError::UnknownMemberId));
    let mut txn = auth("", -1);
    txn.transactional = true;
    assert_eq!(ctx.commit(txn), Ok(()));
}

#[test]
fn commit_in_completing_rebalance_is_rebalance_in_progress_except_transactional() {
    let mut ctx = Ctx::new();
    let ids = ctx.completing_group(2);
    assert_eq!(
        ctx.commit(auth(ids[1].as_str(), 1)),
        Err(GroupError::RebalanceInProgress)
    );
    let mut txn = auth(ids[1].as_str(), 1);
    txn.transactional = true;
    assert_eq!(ctx.commit(txn), Ok(()));
}

#[test]
fn commit_in_preparing_rebalance_with_the_current_generation_is_accepted() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    ctx.join(J::new().member(&ids[0]));
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
    assert_eq!(ctx.commit(auth(ids[1].as_str(), 1)), Ok(()));
}

#[test]
fn offset_commit_resets_the_session_in_stable_and_preparing_rebalance() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(2);
    ctx.sleep(6_000);
    ctx.commit(auth(ids[1].as_str(), 1)).unwrap();
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
    ctx.join(J::new().member(&ids[0]));
    ctx.sleep(6_000);
    ctx.commit(auth(ids[1].as_str(), 1)).unwrap();
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION))
    );
    // A transactional commit does not.
    ctx.sleep(1_000);
    let mut txn = auth(ids[1].as_str(), 1);
    txn.transactional = true;
    ctx.commit(txn).unwrap();
    assert_eq!(
        ctx.session_deadline(&ids[1]),
        Some(ctx.now.plus_ms(SESSION - 1_000))
    );
}

// ----- retention and OffsetDelete inputs (spec §3.3, §3.4) -----

fn subscribing(topics: &[&str]) -> J {
    let mut j = J::new();
    let subscription = Subscription {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        ..Subscription::default()
    };
    j.req.protocols = vec![Protocol::new(
        "range",
        encode_subscription(&subscription, 0),
    )];
    j
}

#[test]
fn offsets_of_a_simple_group_age_from_each_commit() {
    let group = ClassicGroup::new_simple(GroupId::new("s"), GroupConfig::default(), Timestamp(0));
    assert_eq!(
        group.offset_expiration_base(),
        Some(crate::vocab::ExpirationBase::CommitTimestamp)
    );
    assert!(!group.is_subscribed_to_topic("t"));
    assert_eq!(group.validate_offset_delete(), Ok(()));
}

#[test]
fn offsets_of_an_empty_group_age_from_when_it_became_empty() {
    let mut ctx = Ctx::new();
    let ids = ctx.stable_group(1);
    ctx.sleep(1_000);
    ctx.leave(&[(ids[0].as_str(), None)]);
    assert_eq!(ctx.group.state(), GroupState::Empty);
    assert_eq!(
        ctx.group.offset_expiration_base(),
        Some(crate::vocab::ExpirationBase::StateTimestamp(ctx.now))
    );
}

#[test]
fn offsets_of_a_stable_consumer_group_expire_only_for_topics_it_does_not_consume() {
    let mut ctx = Ctx::new();
    let a = ctx.join(subscribing(&["orders"]));
    let b = ctx.join(subscribing(&["events"]));
    ctx.sleep(3 * DELAY);
    let (a, b) = (
        ctx.join_reply(a).member_id.clone(),
        ctx.join_reply(b).member_id.clone(),
    );
    // While rebalancing, nothing expires.
    assert_eq!(ctx.group.offset_expiration_base(), None);
    ctx.sync(&a, Generation(1), &[]);
    ctx.sync(&b, Generation(1), &[]);
    assert_eq!(
        ctx.group.offset_expiration_base(),
        Some(crate::vocab::ExpirationBase::CommitTimestamp)
    );
    assert!(
        ctx.group.is_subscribed_to_topic("orders") && ctx.group.is_subscribed_to_topic("events")
    );
    assert!(!ctx.group.is_subscribed_to_topic("old"));
    // OffsetDelete: allowed for a non-empty consumer group (per partition, subscribed topics
    // then get GROUP_SUBSCRIBED_TO_TOPIC).
    assert_eq!(ctx.group.validate_offset_delete(), Ok(()));
}

#[test]
fn unparseable_consumer_subscriptions_count_as_subscribed_to_everything() {
    let mut ctx = Ctx::new();
    ctx.stable_group(1); // metadata b"sub" is no ConsumerProtocolSubscription
    assert_eq!(ctx.group.subscribed_topics(), None);
    assert!(ctx.group.is_subscribed_to_topic("anything"));
    assert_eq!(ctx.group.offset_expiration_base(), None);
}

#[test]
fn offset_delete_on_a_non_empty_non_consumer_group_is_non_empty_group() {
    let mut ctx = Ctx::new();
    let t = ctx.join(J::new().protocol_type("connect"));
    ctx.sleep(DELAY);
    let _ = t;
    assert_eq!(
        ctx.group.validate_offset_delete(),
        Err(GroupError::NonEmptyGroup)
    );
    ctx.group.handle_unload(ctx.now);
    ctx.drain();
    assert_eq!(
        ctx.group.validate_offset_delete(),
        Err(GroupError::GroupIdNotFound)
    );
    assert!(!ctx.group.serves_offset_fetch());
}
