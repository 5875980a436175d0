//! The consumer group core, transition by transition, with a manual clock; and a model test of
//! random interleavings checking that no partition ever has two owners.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::vocab::TopicId;

/// Topics by name, with a version bumped on every change.
#[derive(Debug, Default)]
pub(crate) struct Image {
    topics: BTreeMap<String, u32>,
    version: Cell<u64>,
}

impl Image {
    pub(crate) fn with(topics: &[(&str, u32)]) -> Image {
        let mut image = Image::default();
        for (n, p) in topics {
            image.set(n, *p);
        }
        image
    }

    pub(crate) fn set(&mut self, name: &str, partitions: u32) {
        self.topics.insert(name.to_string(), partitions);
        self.version.set(self.version.get() + 1);
    }
}

pub(super) fn tid(name: &str) -> TopicId {
    TopicId::new_v5(&TopicId::NAMESPACE_OID, name.as_bytes())
}

impl TopicImage for Image {
    fn version(&self) -> u64 {
        self.version.get()
    }
    fn topic(&self, name: &str) -> Option<(TopicId, u32)> {
        self.topics.get(name).map(|&p| (tid(name), p))
    }
    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }
    fn name_of(&self, id: TopicId) -> Option<String> {
        self.topics.keys().find(|n| tid(n) == id).cloned()
    }
}

pub(super) const T0: Timestamp = Timestamp(1_000);

pub(super) fn group() -> ConsumerGroup {
    ConsumerGroup::new(GroupId::new("g"), Arc::new(ConsumerGroupConfig::default()))
}

pub(super) fn group_with(config: ConsumerGroupConfig) -> ConsumerGroup {
    ConsumerGroup::new(GroupId::new("g"), Arc::new(config))
}

pub(super) fn parts(list: &[(&str, &[i32])]) -> Partitions {
    list.iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(t, p)| (tid(t), p.to_vec()))
        .collect()
}

pub(super) fn join(member: &str, topics: &[&str]) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: MemberId::new(member),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        owned: Some(Partitions::new()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeat::default()
    }
}

/// An incremental heartbeat: only the epoch and what the member owns.
pub(super) fn beat(member: &str, epoch: i32, owned: Partitions) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: MemberId::new(member),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeat::default()
    }
}

pub(super) fn count(p: &Partitions) -> usize {
    p.values().map(Vec::len).sum()
}

#[test]
fn a_lone_member_gets_every_partition_at_epoch_2_as_in_kafka() {
    let image = Image::with(&[("t", 4)]);
    let mut g = group();
    let r = g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.heartbeat_interval_ms, 5000);
    assert_eq!(r.assignment, Some(parts(&[("t", &[0, 1, 2, 3])])));
    assert_eq!(g.group_epoch(), 2);
    assert_eq!(g.assignment_epoch(), 2);
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    let records = g.take_records();
    assert!(records
        .iter()
        .any(|r| matches!(r, ConsumerRecord::Group(g) if g.group_epoch == 2)));
    assert!(records.iter().any(|r| matches!(r,
        ConsumerRecord::Member(m) if m.member_epoch == 2 && count(&m.assigned) == 4)));
}

#[test]
fn an_incremental_heartbeat_gets_no_assignment_and_writes_nothing() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    g.take_records();
    let r = g
        .handle_heartbeat(beat("a", 2, parts(&[("t", &[0, 1])])), &image, T0)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment, None);
    assert!(g.take_records().is_empty());
}

#[test]
fn a_newcomer_gets_partitions_only_after_the_owner_revoked_them() {
    let image = Image::with(&[("t", 4)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    let b = g.handle_heartbeat(join("b", &["t"]), &image, T0).unwrap();
    assert_eq!(g.group_epoch(), 3);
    // b's target is half, but a still holds them: b is at epoch 2 with nothing.
    assert_eq!(b.member_epoch, 3);
    assert_eq!(b.assignment, Some(Partitions::new()));
    assert_eq!(g.state(), ConsumerGroupState::Reconciling);
    // a is asked to revoke: it stays at epoch 1 with the half it keeps.
    let a = g
        .handle_heartbeat(beat("a", 2, parts(&[("t", &[0, 1, 2, 3])])), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    let kept = a.assignment.clone().unwrap();
    assert_eq!(count(&kept), 2);
    // b still gets nothing while a reports the partitions.
    let b = g
        .handle_heartbeat(beat("b", 3, Partitions::new()), &image, T0)
        .unwrap();
    assert_eq!(b.assignment, None);
    // a acknowledges: epoch 2.
    let a = g
        .handle_heartbeat(beat("a", 2, kept.clone()), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 3);
    // Now b gets the other half.
    let b = g
        .handle_heartbeat(beat("b", 3, Partitions::new()), &image, T0)
        .unwrap();
    let got = b.assignment.unwrap();
    assert_eq!(count(&got), 2);
    assert!(got[&tid("t")].iter().all(|p| !kept[&tid("t")].contains(p)));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
}

#[test]
fn malformed_first_heartbeats_are_invalid_requests() {
    let config = ConsumerGroupConfig::default();
    let ok = join("a", &["t"]);
    assert_eq!(validate("g", &ok, &config), Ok(()));
    let cases: Vec<(&str, ConsumerHeartbeat, &str)> = vec![
        (
            "no rebalance timeout",
            ConsumerHeartbeat {
                rebalance_timeout_ms: -1,
                ..ok.clone()
            },
            "g",
        ),
        (
            "owned partitions on join",
            ConsumerHeartbeat {
                owned: Some(parts(&[("t", &[0])])),
                ..ok.clone()
            },
            "g",
        ),
        (
            "owned left out on join",
            ConsumerHeartbeat {
                owned: None,
                ..ok.clone()
            },
            "g",
        ),
        (
            "no subscription",
            ConsumerHeartbeat {
                subscribed_topic_names: None,
                ..ok.clone()
            },
            "g",
        ),
        (
            "epoch below -2",
            ConsumerHeartbeat {
                member_epoch: -3,
                ..ok.clone()
            },
            "g",
        ),
        (
            "static leave without instance id",
            ConsumerHeartbeat {
                member_epoch: -2,
                ..ok.clone()
            },
            "g",
        ),
        (
            "empty instance id",
            ConsumerHeartbeat {
                instance_id: Some(InstanceId::new("")),
                ..ok.clone()
            },
            "g",
        ),
        (
            "empty rack",
            ConsumerHeartbeat {
                rack_id: Some(String::new()),
                ..ok.clone()
            },
            "g",
        ),
        (
            "empty member id",
            ConsumerHeartbeat {
                member_id: MemberId::new(""),
                ..ok.clone()
            },
            "g",
        ),
        ("empty group id", ok.clone(), ""),
    ];
    for (what, req, group) in cases {
        assert_eq!(
            validate(group, &req, &config).map_err(|r| r.error),
            Err(GroupError::InvalidRequest),
            "{what}"
        );
    }
    let regex_only = ConsumerHeartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("orders-.*".into()),
        ..ok.clone()
    };
    assert_eq!(validate("g", &regex_only, &config), Ok(()));
    let bad_regex = ConsumerHeartbeat {
        subscribed_topic_regex: Some("orders-(".into()),
        ..ok.clone()
    };
    assert_eq!(
        validate("g", &bad_regex, &config).map_err(|r| r.error),
        Err(GroupError::InvalidRegularExpression)
    );
    let bad_assignor = ConsumerHeartbeat {
        server_assignor: Some("nope".into()),
        ..ok.clone()
    };
    assert_eq!(
        validate("g", &bad_assignor, &config).map_err(|r| r.error),
        Err(GroupError::UnsupportedAssignor)
    );
    let range = ConsumerHeartbeat {
        server_assignor: Some("range".into()),
        ..ok
    };
    assert_eq!(validate("g", &range, &config), Ok(()));
}

#[test]
fn epochs_ahead_or_stale_are_fenced_but_a_lost_response_is_accepted() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    let all = parts(&[("t", &[0, 1])]);
    let fenced = Err(GroupError::FencedMemberEpoch);
    assert_eq!(
        g.handle_heartbeat(beat("a", 3, all.clone()), &image, T0)
            .map_err(|r| r.error),
        fenced
    );
    // b joins (epoch 3); a moves from 2 to 3 once it has revoked.
    g.handle_heartbeat(join("b", &["t"]), &image, T0).unwrap();
    let a = g
        .handle_heartbeat(beat("a", 2, all.clone()), &image, T0)
        .unwrap();
    let kept = a.assignment.unwrap();
    let a = g
        .handle_heartbeat(beat("a", 2, kept.clone()), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 3);
    // Epoch 2 is a's previous epoch and it owns a subset of its assignment: the answer that
    // moved it to 3 was lost. With more than it has, or two epochs back, it is fenced.
    let r = g
        .handle_heartbeat(beat("a", 2, kept.clone()), &image, T0)
        .unwrap();
    assert_eq!(r.member_epoch, 3);
    assert_eq!(
        g.handle_heartbeat(beat("a", 2, all), &image, T0)
            .map_err(|r| r.error),
        fenced
    );
    assert_eq!(
        g.handle_heartbeat(beat("a", 1, kept.clone()), &image, T0)
            .map_err(|r| r.error),
        fenced
    );
    // Joining again with its own id (epoch 0) is not fenced: it gets its assignment again,
    // and the group epoch stays (Kafka 4.4).
    let r = g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    assert_eq!(r.member_epoch, 3);
    assert_eq!(r.assignment, Some(kept));
    assert_eq!(g.group_epoch(), 3);
}

#[test]
fn an_unknown_member_with_an_epoch_is_unknown() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    assert_eq!(
        g.handle_heartbeat(beat("x", 4, Partitions::new()), &image, T0)
            .map_err(|r| r.error),
        Err(GroupError::UnknownMemberId)
    );
    let leave = ConsumerHeartbeat {
        member_epoch: LEAVE_EPOCH,
        ..beat("x", -1, Partitions::new())
    };
    assert_eq!(
        g.handle_heartbeat(leave, &image, T0).map_err(|r| r.error),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_full_group_refuses_newcomers_but_serves_its_members() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group_with(ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    });
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    assert_eq!(
        g.handle_heartbeat(join("b", &["t"]), &image, T0)
            .map_err(|r| r.error),
        Err(GroupError::GroupMaxSizeReached)
    );
    assert!(g
        .handle_heartbeat(beat("a", 2, parts(&[("t", &[0, 1])])), &image, T0)
        .is_ok());
}

#[test]
fn leaving_removes_the_member_and_bumps_the_epoch() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    g.take_records();
    let leave = ConsumerHeartbeat {
        member_epoch: LEAVE_EPOCH,
        ..beat("a", -1, Partitions::new())
    };
    let r = g.handle_heartbeat(leave, &image, T0).unwrap();
    assert_eq!(r.member_epoch, -1);
    assert_eq!(g.group_epoch(), 3);
    assert_eq!(g.state(), ConsumerGroupState::Empty);
    let records = g.take_records();
    assert!(records.contains(&ConsumerRecord::RemoveMember(MemberId::new("a"))));
    assert_eq!(g.next_deadline(), None, "its timers are gone");
}

fn static_join(member: &str, instance: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        instance_id: Some(InstanceId::new(instance)),
        ..join(member, &["t"])
    }
}

#[test]
fn a_static_member_that_left_for_now_is_replaced_without_moving_partitions() {
    let image = Image::with(&[("t", 4)]);
    let mut g = group();
    g.handle_heartbeat(static_join("a1", "A"), &image, T0)
        .unwrap();
    g.handle_heartbeat(static_join("b1", "B"), &image, T0)
        .unwrap();
    let a = g
        .handle_heartbeat(
            beat("a1", 2, parts(&[("t", &[0, 1, 2, 3])])).with_instance("A"),
            &image,
            T0,
        )
        .unwrap();
    let kept = a.assignment.unwrap();
    g.handle_heartbeat(beat("a1", 2, kept.clone()).with_instance("A"), &image, T0)
        .unwrap();
    g.handle_heartbeat(
        beat("b1", 3, Partitions::new()).with_instance("B"),
        &image,
        T0,
    )
    .unwrap();
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    let epoch = g.group_epoch();
    // A joins again under another id while a1 has not left: refused.
    assert_eq!(
        g.handle_heartbeat(static_join("a2", "A"), &image, T0)
            .map_err(|r| r.error),
        Err(GroupError::UnreleasedInstanceId)
    );
    // Another id heartbeating for A: fenced.
    assert_eq!(
        g.handle_heartbeat(beat("a2", 3, kept.clone()).with_instance("A"), &image, T0)
            .map_err(|r| r.error),
        Err(GroupError::FencedInstanceId)
    );
    // a1 leaves for now (-2), a2 takes over with the same partitions and no new epoch.
    let leave = ConsumerHeartbeat {
        member_epoch: LEAVE_STATIC_EPOCH,
        ..beat("a1", -2, kept.clone()).with_instance("A")
    };
    assert_eq!(
        g.handle_heartbeat(leave, &image, T0).unwrap().member_epoch,
        -2
    );
    let a2 = g
        .handle_heartbeat(static_join("a2", "A"), &image, T0)
        .unwrap();
    assert_eq!(a2.assignment, Some(kept));
    assert_eq!(a2.member_epoch, epoch);
    assert_eq!(g.group_epoch(), epoch, "no rebalance");
    assert!(g.member(&MemberId::new("a1")).is_none());
    assert_eq!(g.state(), ConsumerGroupState::Stable);
}

impl ConsumerHeartbeat {
    fn with_instance(mut self, instance: &str) -> ConsumerHeartbeat {
        self.instance_id = Some(InstanceId::new(instance));
        self
    }
}

#[test]
fn a_silent_member_is_fenced_when_its_session_ends() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    let later = T0.plus_ms(30_000);
    g.handle_heartbeat(join("b", &["t"]), &image, later)
        .unwrap();
    g.handle_timeout(&image, T0.plus_ms(44_999));
    assert!(g.member(&MemberId::new("a")).is_some());
    g.handle_timeout(&image, T0.plus_ms(45_000));
    assert!(g.member(&MemberId::new("a")).is_none());
    assert_eq!(g.group_epoch(), 4);
    // b's next heartbeat computes the new target: everything.
    let b = g
        .handle_heartbeat(beat("b", 3, Partitions::new()), &image, later)
        .unwrap();
    assert_eq!(b.assignment, Some(parts(&[("t", &[0, 1])])));
    assert_eq!(b.member_epoch, 4);
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    let mut a = join("a", &["t"]);
    a.rebalance_timeout_ms = 10_000;
    g.handle_heartbeat(a, &image, T0).unwrap();
    g.handle_heartbeat(join("b", &["t"]), &image, T0).unwrap();
    g.handle_heartbeat(beat("a", 2, parts(&[("t", &[0, 1])])), &image, T0)
        .unwrap();
    assert_eq!(
        g.member(&MemberId::new("a")).unwrap().state,
        ConsumerMemberState::UnrevokedPartitions
    );
    // b keeps heartbeating; a keeps its sessions alive but never revokes.
    for s in 1..=10u64 {
        let now = T0.plus_ms(s * 1000);
        let _ = g.handle_heartbeat(beat("a", 2, parts(&[("t", &[0, 1])])), &image, now);
        let _ = g.handle_heartbeat(beat("b", 3, Partitions::new()), &image, now);
        g.handle_timeout(&image, now);
    }
    assert!(g.member(&MemberId::new("a")).is_none());
}

#[test]
fn a_regular_expression_resolves_to_the_topics_the_member_may_describe() {
    let mut image = Image::with(&[("orders-mine", 1), ("orders-theirs", 1)]);
    let mut g = group();
    let describable = TopicFilter(Arc::new(|t: &str| !t.contains("theirs")));
    let regex = ConsumerHeartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("orders-.*".into()),
        describable: Some(describable.clone()),
        ..join("a", &[])
    };
    let r = g.handle_heartbeat(regex, &image, T0).unwrap();
    assert_eq!(r.assignment, Some(parts(&[("orders-mine", &[0])])));
    // A new matching topic is resolved with the ACLs of the heartbeat that sees it.
    image.set("orders-theirs-2", 1);
    image.set("orders-new", 1);
    let r = g
        .handle_heartbeat(
            ConsumerHeartbeat {
                describable: Some(describable),
                ..beat("a", r.member_epoch, parts(&[("orders-mine", &[0])]))
            },
            &image,
            T0,
        )
        .unwrap();
    assert_eq!(
        r.assignment,
        Some(parts(&[("orders-mine", &[0]), ("orders-new", &[0])]))
    );
}

#[test]
fn more_partitions_or_a_matching_new_topic_start_a_new_target() {
    let mut image = Image::with(&[("orders-1", 1), ("other", 1)]);
    let mut g = group();
    let regex = ConsumerHeartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("orders-.*".into()),
        ..join("a", &[])
    };
    let r = g.handle_heartbeat(regex, &image, T0).unwrap();
    assert_eq!(r.assignment, Some(parts(&[("orders-1", &[0])])));
    image.set("orders-2", 2);
    let r = g
        .handle_heartbeat(beat("a", 2, parts(&[("orders-1", &[0])])), &image, T0)
        .unwrap();
    assert_eq!(r.member_epoch, 3);
    assert_eq!(
        r.assignment,
        Some(parts(&[("orders-1", &[0]), ("orders-2", &[0, 1])]))
    );
    image.set("orders-1", 3);
    let owned = r.assignment.unwrap();
    let r = g.handle_heartbeat(beat("a", 3, owned), &image, T0).unwrap();
    assert_eq!(r.member_epoch, 4);
    assert_eq!(
        r.assignment,
        Some(parts(&[("orders-1", &[0, 1, 2]), ("orders-2", &[0, 1])]))
    );
    // A topic that does not match changes nothing.
    let owned = r.assignment.unwrap();
    image.set("unrelated", 4);
    let r = g.handle_heartbeat(beat("a", 4, owned), &image, T0).unwrap();
    assert_eq!(r.member_epoch, 4);
    assert_eq!(r.assignment, None);
}

#[test]
fn offset_commits_and_fetches_check_the_member_epoch() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    // An empty group takes commits from anyone (admin tools).
    assert_eq!(
        g.validate_offset_commit(&MemberId::new(""), -1, false, 9),
        Ok(())
    );
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    let a = MemberId::new("a");
    assert_eq!(g.validate_offset_commit(&a, 2, false, 9), Ok(()));
    assert_eq!(
        g.validate_offset_commit(&a, 1, false, 9),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        g.validate_offset_commit(&a, 2, false, 8),
        Err(GroupError::UnsupportedVersion)
    );
    assert_eq!(g.validate_offset_commit(&a, 2, true, 3), Ok(()));
    assert_eq!(
        g.validate_offset_commit(&MemberId::new("x"), 1, false, 9),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        g.validate_offset_commit(&MemberId::new(""), -1, false, 9),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(g.validate_offset_fetch(None, -1), Ok(()));
    assert_eq!(g.validate_offset_fetch(Some(&a), 2), Ok(()));
    assert_eq!(
        g.validate_offset_fetch(Some(&a), 3),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        g.validate_offset_fetch(Some(&MemberId::new("x")), 1),
        Err(GroupError::UnknownMemberId)
    );
    assert!(g.is_subscribed_to("t", &image));
    assert!(!g.is_subscribed_to("u", &image));
    assert_eq!(g.delete(), Err(GroupError::NonEmptyGroup));
}

#[test]
fn the_assignor_most_members_name_is_used() {
    let image = Image::with(&[("t", 4)]);
    let mut g = group();
    assert_eq!(g.assignor_name(), "uniform");
    let mut a = join("a", &["t"]);
    a.server_assignor = Some("range".into());
    g.handle_heartbeat(a, &image, T0).unwrap();
    assert_eq!(g.assignor_name(), "range");
}

#[test]
fn a_stored_group_comes_back_as_it_was() {
    let image = Image::with(&[("t", 4)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    g.handle_heartbeat(join("b", &["t"]), &image, T0).unwrap();
    let mut group_record = None;
    let mut members: BTreeMap<MemberId, ConsumerMember> = BTreeMap::new();
    for r in g.take_records() {
        match r {
            ConsumerRecord::Group(rec) => group_record = Some(rec),
            ConsumerRecord::Member(m) => {
                members.insert(m.member_id.clone(), *m);
            }
            ConsumerRecord::RemoveMember(id) => {
                members.remove(&id);
            }
        }
    }
    let back = ConsumerGroup::from_records(
        GroupId::new("g"),
        Arc::new(ConsumerGroupConfig::default()),
        group_record.unwrap(),
        members.into_values().collect(),
        T0,
    );
    assert_eq!(back.group_epoch(), g.group_epoch());
    assert_eq!(back.assignment_epoch(), g.assignment_epoch());
    assert_eq!(back.state(), g.state());
    let mut back = back;
    let a = back
        .handle_heartbeat(beat("a", 2, parts(&[("t", &[0, 1, 2, 3])])), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 2, "a still has to revoke");
    assert_eq!(count(&a.assignment.unwrap()), 2);
}

/// A tiny deterministic generator (xorshift), so the model test needs no crate.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A client as the model sees it: what it holds, and its epoch.
struct Client {
    epoch: i32,
    holds: Partitions,
    topics: Vec<&'static str>,
}

#[test]
fn random_interleavings_never_give_a_partition_two_owners() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut image = Image::with(&[("t", 6), ("u", 3)]);
        let assignor = if seed % 2 == 0 { "uniform" } else { "range" };
        let mut g = group();
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        let mut now = T0;
        let mut next_id = 0;
        for _step in 0..400 {
            now = now.plus_ms(rng.below(400));
            match rng.below(20) {
                // A new member joins.
                0 | 1 => {
                    next_id += 1;
                    let id = format!("m{next_id}");
                    let topics: Vec<&'static str> = match rng.below(3) {
                        0 => vec!["t"],
                        1 => vec!["u"],
                        _ => vec!["t", "u"],
                    };
                    let mut req = join(&id, &topics);
                    req.server_assignor = Some(assignor.into());
                    if let Ok(r) = g.handle_heartbeat(req, &image, now) {
                        clients.insert(
                            id,
                            Client {
                                epoch: r.member_epoch,
                                holds: r.assignment.unwrap_or_default(),
                                topics,
                            },
                        );
                    }
                }
                // A member leaves cleanly, or crashes (its session will end).
                2 => {
                    if let Some(id) = pick(&mut rng, &clients) {
                        let c = clients.remove(&id).unwrap();
                        if rng.below(2) == 0 {
                            let leave = ConsumerHeartbeat {
                                member_epoch: LEAVE_EPOCH,
                                ..beat(&id, c.epoch, Partitions::new())
                            };
                            let _ = g.handle_heartbeat(leave, &image, now);
                        }
                    }
                }
                // A member changes its subscription.
                3 => {
                    if let Some(id) = pick(&mut rng, &clients) {
                        let c = clients.get_mut(&id).unwrap();
                        c.topics = if c.topics.len() == 2 {
                            vec!["t"]
                        } else {
                            vec!["t", "u"]
                        };
                        let mut req = beat(&id, c.epoch, c.holds.clone());
                        req.subscribed_topic_names =
                            Some(c.topics.iter().map(|t| t.to_string()).collect());
                        apply(&mut g, &mut clients, &id, req, &image, now);
                    }
                }
                // A topic grows.
                4 => {
                    let t = if rng.below(2) == 0 { "t" } else { "u" };
                    let n = image.topics[t];
                    image.set(t, n + 1);
                }
                // Time passes for everyone: timers fire.
                5 => {
                    now = now.plus_ms(rng.below(50_000));
                    g.handle_timeout(&image, now);
                }
                // A member heartbeats with what it holds.
                _ => {
                    if let Some(id) = pick(&mut rng, &clients) {
                        let c = &clients[&id];
                        let req = beat(&id, c.epoch, c.holds.clone());
                        apply(&mut g, &mut clients, &id, req, &image, now);
                    }
                }
            }
            g.handle_timeout(&image, now);
            // A member whose session ended knows it (its heartbeats fail) and holds nothing.
            clients.retain(|id, _| g.member(&MemberId::new(id.as_str())).is_some());
            // The invariant, on what the clients hold and what the group records as held.
            one_holder_each(seed, clients.iter().map(|(id, c)| (id, &c.holds)));
            let mut held: BTreeSet<(TopicId, i32)> = BTreeSet::new();
            for m in g.members() {
                for (t, ps) in m.assigned.iter().chain(&m.pending_revocation) {
                    for p in ps {
                        assert!(held.insert((*t, *p)), "seed {seed}: {t}-{p} held twice");
                    }
                }
            }
        }
    }
}

/// Fails unless no partition is held by two of the clients.
pub(super) fn one_holder_each<'a>(
    seed: u64,
    clients: impl Iterator<Item = (&'a String, &'a Partitions)>,
) {
    let mut seen: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    for (id, holds) in clients {
        for (t, ps) in holds {
            for p in ps {
                assert!(
                    seen.insert((*t, *p)),
                    "seed {seed}: {id} holds {t}-{p} that another client holds"
                );
            }
        }
    }
}

fn pick(rng: &mut Rng, clients: &BTreeMap<String, Client>) -> Option<String> {
    if clients.is_empty() {
        return None;
    }
    let i = rng.below(clients.len() as u64) as usize;
    clients.keys().nth(i).cloned()
}

/// Sends a heartbeat as the client and applies the answer as a client does: it gives up what
/// is no longer assigned at once and takes what is new; a fenced or unknown member loses
/// everything and joins again.
fn apply(
    g: &mut ConsumerGroup,
    clients: &mut BTreeMap<String, Client>,
    id: &str,
    req: ConsumerHeartbeat,
    image: &Image,
    now: Timestamp,
) {
    match g.handle_heartbeat(req, image, now) {
        Ok(r) => {
            let c = clients.get_mut(id).unwrap();
            c.epoch = r.member_epoch;
            if let Some(a) = r.assignment {
                c.holds = a;
            }
        }
        Err(_) => {
            let topics = clients[id].topics.clone();
            clients.remove(id);
            if let Ok(r) = g.handle_heartbeat(join(id, &topics), image, now) {
                clients.insert(
                    id.to_string(),
                    Client {
                        epoch: r.member_epoch,
                        holds: r.assignment.unwrap_or_default(),
                        topics,
                    },
                );
            }
        }
    }
}

#[test]
fn with_the_learner_assignor_a_newcomer_gets_partitions_only_after_the_warm_up() {
    use crate::assignor::learner::{LearnerAssignor, Settings};
    let learner = LearnerAssignor::new(Settings {
        warmup_ms: 3000,
        ..Settings::default()
    });
    let mut g = group_with(ConsumerGroupConfig {
        assignors: vec![Arc::new(learner)],
        ..ConsumerGroupConfig::default()
    });
    let image = Image::with(&[("t", 4)]);
    let all = parts(&[("t", &[0, 1, 2, 3])]);
    g.handle_heartbeat(join("a", &["t"]), &image, T0).unwrap();
    // a has held its partitions long enough to have state worth protecting.
    let warm = T0.plus_ms(10_000);
    g.handle_heartbeat(beat("a", 2, all.clone()), &image, warm)
        .unwrap();
    let b = g.handle_heartbeat(join("b", &["t"]), &image, warm).unwrap();
    assert_eq!(b.assignment, Some(Partitions::new()));
    // While b warms up, a keeps every partition and b's target is still empty.
    let a = g
        .handle_heartbeat(beat("a", 2, all.clone()), &image, warm.plus_ms(1000))
        .unwrap();
    assert_eq!(a.assignment.unwrap_or(all.clone()), all);
    assert!(count(&g.member(&MemberId::new("b")).unwrap().target) == 0);
    // The warm-up ends: the assignor's follow-up starts a new target that moves half to b.
    let follow_up = g.next_deadline().expect("a follow-up is armed");
    assert!(follow_up <= warm.plus_ms(3000), "{follow_up:?}");
    g.handle_timeout(&image, follow_up);
    assert_eq!(count(&g.member(&MemberId::new("b")).unwrap().target), 2);
    let a = g
        .handle_heartbeat(
            beat(
                "a",
                g.member(&MemberId::new("a")).unwrap().member_epoch,
                all,
            ),
            &image,
            follow_up,
        )
        .unwrap();
    assert_eq!(
        count(&a.assignment.unwrap()),
        2,
        "a is asked to give two up"
    );
}

#[test]
fn regular_expressions_match_whole_topic_names_with_escaped_punctuation() {
    let names = vec![
        "orders-topic-1".to_string(),
        "orders-topic-1-later".to_string(),
        "x".into(),
    ];
    assert_eq!(
        regex_matches(r"orders\-topic\-1.*", &names),
        vec![
            "orders-topic-1".to_string(),
            "orders-topic-1-later".to_string()
        ]
    );
    assert_eq!(regex_matches("orders", &names), Vec::<String>::new());
}
