//! Classic members in a consumer group and the online migration, transition by transition with
//! a manual clock, and a model test of a group mixing both protocols.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;

use super::super::tests::{
    beat, group, group_with, join, one_holder_each, parts, tid, Image, Rng, T0,
};
use super::*;
use crate::assignor::protocol::{encode_subscription, Subscription};
use crate::group::{
    ClassicGroup, GroupConfig, GroupState, Heartbeat, JoinGroup, RequestToken, SyncGroup,
};
use crate::vocab::{GroupId, GroupMetadataRecord, MemberRecord, Timestamp};

use super::super::{
    ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, ConsumerHeartbeat, ConsumerRecord,
    LEAVE_EPOCH,
};

/// A v1 subscription (cooperative members send what they own).
fn sub(topics: &[&str], owned: &[(&str, &[i32])]) -> Bytes {
    encode_subscription(
        &Subscription {
            version: 1,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned_partitions: owned
                .iter()
                .map(|(t, p)| (t.to_string(), p.to_vec()))
                .collect(),
            generation: -1,
            ..Subscription::default()
        },
        1,
    )
}

fn asg(list: &[(&str, &[i32])]) -> Bytes {
    let named: Vec<(String, Vec<i32>)> = list
        .iter()
        .map(|(t, p)| (t.to_string(), p.to_vec()))
        .collect();
    encode_assignment(&named, None, 1)
}

/// A Stable classic group at `generation` whose members subscribe to `t` and hold `assigned`.
fn classic_group(generation: i32, members: &[(&str, &[i32])]) -> ClassicGroup {
    let record = GroupMetadataRecord {
        protocol_type: Some("consumer".into()),
        generation: Generation(generation),
        protocol_name: Some("cooperative-sticky".into()),
        leader: members.first().map(|(id, _)| MemberId::new(*id)),
        state_timestamp: T0,
        members: members
            .iter()
            .map(|(id, assigned)| MemberRecord {
                member_id: MemberId::new(*id),
                instance_id: None,
                client_id: "classic".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 30_000,
                session_timeout_ms: 10_000,
                subscription: sub(&["t"], &[]),
                assignment: asg(&[("t", assigned)]),
            })
            .collect(),
        assignor_state: Bytes::new(),
        follow_up: None,
    };
    ClassicGroup::from_record(GroupId::new("g"), GroupConfig::default(), &record, T0)
}

fn upgraded(generation: i32, members: &[(&str, &[i32])], image: &Image) -> ConsumerGroup {
    let classic = classic_group(generation, members);
    assert!(ConsumerGroup::can_upgrade(
        &classic,
        &ConsumerGroupConfig::default()
    ));
    ConsumerGroup::from_classic(
        &classic,
        Arc::new(ConsumerGroupConfig::default()),
        image,
        T0,
    )
    .unwrap()
}

fn cjoin(member: &str, owned: &[(&str, &[i32])]) -> JoinGroup {
    JoinGroup {
        token: RequestToken(1),
        member_id: MemberId::new(member),
        instance_id: None,
        client_id: "classic".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![
            Protocol::new("cooperative-sticky", sub(&["t"], owned)),
            Protocol::new("range", sub(&["t"], owned)),
        ],
        require_known_member_id: false,
        supports_skip_assignment: true,
        reason: None,
        member_id_nonce: "nonce".into(),
    }
}

fn csync(member: &str, generation: i32) -> SyncGroup {
    SyncGroup {
        token: RequestToken(2),
        member_id: MemberId::new(member),
        instance_id: None,
        generation: Generation(generation),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("cooperative-sticky".into()),
        assignments: Vec::new(),
    }
}

fn chb(member: &str, generation: i32) -> Heartbeat {
    Heartbeat {
        member_id: MemberId::new(member),
        instance_id: None,
        generation: Generation(generation),
    }
}

/// The partitions of `t` a SyncGroup reply assigns.
fn synced(reply: &SyncReply) -> Vec<i32> {
    let (named, _) = decode_assignment(&reply.assignment).unwrap();
    named
        .into_iter()
        .filter(|(t, _)| t == "t")
        .flat_map(|(_, p)| p)
        .collect()
}

#[test]
fn an_upgrade_keeps_the_generation_and_every_members_assignment() {
    let image = Image::with(&[("t", 4)]);
    let g = upgraded(7, &[("a", &[0, 1]), ("b", &[2, 3])], &image);
    assert_eq!((g.group_epoch(), g.assignment_epoch()), (7, 7));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    let a = g.member(&MemberId::new("a")).unwrap();
    assert_eq!(a.member_epoch, 7);
    assert_eq!(a.assigned, parts(&[("t", &[0, 1])]));
    assert_eq!(a.target, a.assigned);
    assert_eq!(a.subscribed_topic_names, vec!["t".to_string()]);
    let classic = a.classic.as_ref().unwrap();
    assert_eq!(classic.session_timeout_ms, 10_000);
    assert_eq!(classic.protocols[0].name, "cooperative-sticky");
    // Every member's session is its own (10 s), not the consumer group's (45 s).
    let mut g = g;
    g.handle_timeout(&image, T0.plus_ms(10_000));
    assert_eq!(g.members().len(), 0);
}

#[test]
fn an_upgrade_queues_every_record_of_the_new_group() {
    let image = Image::with(&[("t", 2)]);
    let mut g = upgraded(3, &[("a", &[0, 1])], &image);
    let records = g.take_records();
    assert!(matches!(&records[0], ConsumerRecord::Group(r) if r.group_epoch == 3));
    assert!(records
        .iter()
        .any(|r| matches!(r, ConsumerRecord::Member(m) if m.classic.is_some())));
}

#[test]
fn an_upgrade_is_refused_for_user_data_a_malformed_protocol_or_another_protocol_type() {
    let image = Image::with(&[("t", 2)]);
    let config = Arc::new(ConsumerGroupConfig::default());
    let mut record = classic_group(1, &[("a", &[0])]).metadata_record();
    record.members[0].assignment = encode_assignment(
        &vec![("t".to_string(), vec![0])],
        Some(Bytes::from_static(b"sticky")),
        1,
    );
    let classic = ClassicGroup::from_record(GroupId::new("g"), GroupConfig::default(), &record, T0);
    let err = ConsumerGroup::from_classic(&classic, config.clone(), &image, T0).unwrap_err();
    assert_eq!(err.error, GroupError::UnsupportedVersion);

    record.members[0].assignment = Bytes::new();
    record.members[0].subscription = Bytes::from_static(b"\xff");
    let classic = ClassicGroup::from_record(GroupId::new("g"), GroupConfig::default(), &record, T0);
    let err = ConsumerGroup::from_classic(&classic, config.clone(), &image, T0).unwrap_err();
    assert_eq!(err.error, GroupError::GroupIdNotFound);
    assert_eq!(
        err.message.as_deref(),
        Some(
            "Cannot upgrade the classic group g to consumer group because the embedded \
             consumer protocol is malformed."
        )
    );

    record.protocol_type = Some("connect".into());
    let classic = ClassicGroup::from_record(GroupId::new("g"), GroupConfig::default(), &record, T0);
    assert!(!ConsumerGroup::can_upgrade(&classic, &config));
    let classic = classic_group(1, &[("a", &[0])]);
    for (policy, allowed) in [
        (MigrationPolicy::Bidirectional, true),
        (MigrationPolicy::Upgrade, true),
        (MigrationPolicy::Downgrade, false),
        (MigrationPolicy::Disabled, false),
    ] {
        let config = ConsumerGroupConfig {
            migration: policy,
            ..ConsumerGroupConfig::default()
        };
        assert_eq!(
            ConsumerGroup::can_upgrade(&classic, &config),
            allowed,
            "{policy:?}"
        );
    }
    let small = ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    };
    assert!(!ConsumerGroup::can_upgrade(
        &classic_group(1, &[("a", &[0]), ("b", &[1])]),
        &small
    ));
}

#[test]
fn a_consumer_member_joining_waits_for_the_classic_owner_to_revoke_through_a_rejoin() {
    let image = Image::with(&[("t", 4)]);
    let mut g = upgraded(5, &[("a", &[0, 1, 2, 3])], &image);
    // A consumer-protocol member joins: the epoch moves on, its share is still a's.
    let b = g.handle_heartbeat(join("b", &["t"]), &image, T0).unwrap();
    assert_eq!(b.member_epoch, 6);
    assert_eq!(b.assignment, Some(Partitions::new()));
    // a's heartbeat says: join again.
    assert_eq!(
        g.handle_classic_heartbeat(&chb("a", 5), T0),
        Err(GroupError::RebalanceInProgress)
    );
    // a joins with all it owns: it must revoke b's share first and stays at its epoch.
    let r = g.handle_classic_join(&cjoin("a", &[("t", &[0, 1, 2, 3])]), &image, T0);
    assert_eq!(r.error, None);
    assert_eq!(r.generation, Generation(5));
    assert_eq!(r.protocol_name.as_deref(), Some("cooperative-sticky"));
    assert!(r.leader.as_str().is_empty() && r.members.is_empty());
    // Its sync hands out what it keeps; revoking, it is not told to rejoin.
    let kept = synced(&g.handle_classic_sync(&csync("a", 5), &image, T0).unwrap());
    assert_eq!(kept.len(), 2);
    // b still waits.
    let b = g
        .handle_heartbeat(beat("b", 6, Partitions::new()), &image, T0)
        .unwrap();
    assert_eq!(b.assignment, None);
    // a revoked (its cooperative client rejoins with what it kept): it moves to epoch 6.
    let owned: &[i32] = &kept;
    let r = g.handle_classic_join(&cjoin("a", &[("t", owned)]), &image, T0);
    assert_eq!(r.generation, Generation(6));
    assert_eq!(
        synced(&g.handle_classic_sync(&csync("a", 6), &image, T0).unwrap()),
        kept
    );
    assert_eq!(g.handle_classic_heartbeat(&chb("a", 6), T0), Ok(()));
    // b now gets the rest.
    let b = g
        .handle_heartbeat(beat("b", 6, Partitions::new()), &image, T0)
        .unwrap();
    let theirs: Vec<i32> = (0..4).filter(|p| !kept.contains(p)).collect();
    assert_eq!(b.assignment, Some(parts(&[("t", &theirs)])));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
}

#[test]
fn a_classic_join_without_member_id_is_told_one_and_bad_protocols_are_refused() {
    let image = Image::with(&[("t", 2)]);
    let mut g = upgraded(1, &[("a", &[0, 1])], &image);
    let mut req = cjoin("", &[]);
    req.require_known_member_id = true;
    let r = g.handle_classic_join(&req, &image, T0);
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    assert_eq!(r.member_id.as_str(), "nonce");
    assert_eq!(g.members().len(), 1);

    let mut other = cjoin("x", &[]);
    other.protocol_type = "connect".into();
    let r = g.handle_classic_join(&other, &image, T0);
    assert_eq!(r.error, Some(GroupError::InconsistentGroupProtocol));
    assert!(r.member_id.as_str().is_empty());
    // No protocol every classic member offers.
    let mut other = cjoin("x", &[]);
    other.protocols.retain(|p| p.name != "cooperative-sticky");
    let a = g.member(&MemberId::new("a")).unwrap();
    assert!(a
        .classic
        .as_ref()
        .unwrap()
        .protocols
        .iter()
        .all(|p| p.name != "range"));
    assert_eq!(
        g.handle_classic_join(&other, &image, T0).error,
        Some(GroupError::InconsistentGroupProtocol)
    );

    let mut full = group_with(ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    });
    full.handle_heartbeat(join("c", &["t"]), &image, T0)
        .unwrap();
    assert_eq!(
        full.handle_classic_join(&cjoin("x", &[]), &image, T0).error,
        Some(GroupError::GroupMaxSizeReached)
    );
}

#[test]
fn a_classic_member_joins_a_consumer_group_and_syncs_its_share() {
    let image = Image::with(&[("t", 4)]);
    let mut g = group();
    let c = g.handle_heartbeat(join("c", &["t"]), &image, T0).unwrap();
    let r = g.handle_classic_join(&cjoin("x", &[]), &image, T0);
    assert_eq!(r.error, None);
    assert_eq!(r.member_id.as_str(), "x");
    // c must give half up before x gets anything.
    assert_eq!(
        synced(
            &g.handle_classic_sync(&csync("x", r.generation.0), &image, T0)
                .unwrap()
        ),
        Vec::<i32>::new()
    );
    let c = g
        .handle_heartbeat(
            beat("c", c.member_epoch, parts(&[("t", &[0, 1, 2, 3])])),
            &image,
            T0,
        )
        .unwrap();
    let keeps = c.assignment.clone().unwrap();
    g.handle_heartbeat(beat("c", c.member_epoch, keeps.clone()), &image, T0)
        .unwrap();
    // x's heartbeat: what it waits for is free, so it joins again and gets it.
    assert_eq!(
        g.handle_classic_heartbeat(&chb("x", r.generation.0), T0),
        Err(GroupError::RebalanceInProgress)
    );
    let r = g.handle_classic_join(&cjoin("x", &[]), &image, T0);
    let got = synced(
        &g.handle_classic_sync(&csync("x", r.generation.0), &image, T0)
            .unwrap(),
    );
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|p| !keeps[&tid("t")].contains(p)));
}

#[test]
fn syncs_and_heartbeats_check_the_member_its_generation_and_its_protocol() {
    let image = Image::with(&[("t", 2)]);
    let mut g = upgraded(4, &[("a", &[0, 1])], &image);
    g.handle_heartbeat(join("b", &["t"]), &image, T0).unwrap();
    assert_eq!(
        g.handle_classic_heartbeat(&chb("a", 3), T0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        g.handle_classic_heartbeat(&chb("zz", 4), T0),
        Err(GroupError::UnknownMemberId)
    );
    // A consumer-protocol member is unknown to the classic APIs.
    assert_eq!(
        g.handle_classic_heartbeat(&chb("b", 5), T0),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        g.handle_classic_sync(&csync("a", 3), &image, T0)
            .unwrap_err(),
        GroupError::IllegalGeneration
    );
    let mut wrong = csync("a", 4);
    wrong.protocol_name = Some("range".into());
    assert_eq!(
        g.handle_classic_sync(&wrong, &image, T0).unwrap_err(),
        GroupError::InconsistentGroupProtocol
    );
    // The group moved on (b joined) and a is not revoking yet: it must join again first.
    assert_eq!(
        g.handle_classic_sync(&csync("a", 4), &image, T0)
            .unwrap_err(),
        GroupError::RebalanceInProgress
    );
    let mut fenced = chb("a", 4);
    fenced.instance_id = Some(InstanceId::new("i"));
    assert_eq!(
        g.handle_classic_heartbeat(&fenced, T0),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_classic_member_that_does_not_join_again_or_sync_in_time_is_fenced() {
    let image = Image::with(&[("t", 2)]);
    let mut g = upgraded(1, &[("a", &[0]), ("b", &[1])], &image);
    g.handle_heartbeat(join("c", &["t"]), &image, T0).unwrap();
    // Told to rejoin, a does not (its session is kept alive by heartbeats meanwhile).
    assert_eq!(
        g.handle_classic_heartbeat(&chb("a", 1), T0),
        Err(GroupError::RebalanceInProgress)
    );
    let r = g.handle_classic_join(&cjoin("b", &[("t", &[1])]), &image, T0);
    assert_eq!(r.error, None);
    let later = T0.plus_ms(29_000);
    let _ = g.handle_classic_heartbeat(&chb("a", 1), later);
    let _ = g.handle_classic_heartbeat(&chb("b", r.generation.0), later);
    // b joined but never synced: both are fenced when their rebalance timeout (30 s) ends.
    g.handle_timeout(&image, T0.plus_ms(30_000));
    assert!(g.member(&MemberId::new("a")).is_none());
    assert!(g.member(&MemberId::new("b")).is_none());
    assert!(g.member(&MemberId::new("c")).is_some());
}

#[test]
fn a_classic_member_commits_with_its_generation() {
    let image = Image::with(&[("t", 2)]);
    let g = upgraded(4, &[("a", &[0, 1])], &image);
    let a = MemberId::new("a");
    assert_eq!(g.validate_offset_commit(&a, 4, false, 2), Ok(()));
    assert_eq!(
        g.validate_offset_commit(&a, 3, false, 8),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn the_last_consumer_member_leaving_a_group_of_classic_members_downgrades_it() {
    let image = Image::with(&[("t", 4)]);
    let mut g = upgraded(2, &[("a", &[0, 1, 2, 3]), ("b", &[])], &image);
    let c = g.handle_heartbeat(join("c", &["t"]), &image, T0).unwrap();
    let leave = ConsumerHeartbeat {
        member_epoch: LEAVE_EPOCH,
        ..beat("c", c.member_epoch, Partitions::new())
    };
    g.handle_heartbeat(leave, &image, T0).unwrap();
    let down = g.take_downgrade().expect("downgraded");
    assert_eq!(down.generation, Generation(g.group_epoch()));
    let ids: BTreeSet<&str> = down.members.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["a", "b"]));
    let a = down.members.iter().find(|m| m.id.as_str() == "a").unwrap();
    assert_eq!(a.session_timeout_ms, 10_000);
    // The protocol it was stored with (a reloaded classic member keeps the selected one).
    assert_eq!(a.protocols[0].name, "cooperative-sticky");
    // Their target assignments (of the last target, computed with c), at the version they read.
    for m in &down.members {
        let target: Vec<i32> = g
            .member(&m.id)
            .unwrap()
            .target
            .get(&tid("t"))
            .cloned()
            .unwrap_or_default();
        let (named, _) = decode_assignment(&m.assignment).unwrap();
        let got: Vec<i32> = named.into_iter().flat_map(|(_, p)| p).collect();
        assert_eq!(got, target, "{}", m.id);
    }
    assert!(g.take_downgrade().is_none());

    // The classic group it becomes rebalances at once, at the next generation.
    let classic = ClassicGroup::from_consumer_group(
        GroupId::new("g"),
        GroupConfig::default(),
        down.generation,
        down.members,
        T0,
    );
    assert_eq!(classic.state(), GroupState::PreparingRebalance);
    assert_eq!(classic.protocol_name(), Some("cooperative-sticky"));
    assert_eq!(classic.num_members(), 2);
    let record = classic.metadata_record();
    assert_eq!(record.generation, down.generation);
    assert_eq!(record.protocol_type.as_deref(), Some("consumer"));
}

#[test]
fn no_downgrade_when_the_policy_forbids_it_or_consumer_members_remain() {
    let image = Image::with(&[("t", 2)]);
    for policy in [MigrationPolicy::Upgrade, MigrationPolicy::Disabled] {
        let classic = classic_group(1, &[("a", &[0, 1])]);
        let config = Arc::new(ConsumerGroupConfig {
            migration: policy,
            ..ConsumerGroupConfig::default()
        });
        let mut g = ConsumerGroup::from_classic(&classic, config, &image, T0).unwrap();
        let c = g.handle_heartbeat(join("c", &["t"]), &image, T0).unwrap();
        let leave = ConsumerHeartbeat {
            member_epoch: LEAVE_EPOCH,
            ..beat("c", c.member_epoch, Partitions::new())
        };
        g.handle_heartbeat(leave, &image, T0).unwrap();
        assert!(g.take_downgrade().is_none(), "{policy:?}");
        assert_eq!(g.members().len(), 1);
    }
    let mut g = upgraded(1, &[("a", &[0, 1])], &image);
    let c = g.handle_heartbeat(join("c", &["t"]), &image, T0).unwrap();
    g.handle_heartbeat(join("d", &["t"]), &image, T0).unwrap();
    let leave = ConsumerHeartbeat {
        member_epoch: LEAVE_EPOCH,
        ..beat("c", c.member_epoch, Partitions::new())
    };
    g.handle_heartbeat(leave, &image, T0).unwrap();
    assert!(g.take_downgrade().is_none());
    // A classic member leaving never downgrades.
    g.handle_classic_leave(
        &[crate::group::LeavingMember {
            member_id: MemberId::new("a"),
            instance_id: None,
            reason: None,
        }],
        &image,
    );
    assert!(g.take_downgrade().is_none());
    assert_eq!(g.members().len(), 1);
}

/// A client of either protocol in the model test: what it holds and its epoch (generation).
struct Client {
    classic: bool,
    epoch: i32,
    holds: Partitions,
}

#[test]
fn random_mixed_groups_never_give_a_partition_two_owners() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let image = Image::with(&[("t", 8)]);
        let assigned: Vec<i32> = (0..8).collect();
        let mut g = upgraded(3, &[("a", &assigned[..4]), ("b", &assigned[4..])], &image);
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        for (id, held) in [("a", &assigned[..4]), ("b", &assigned[4..])] {
            clients.insert(
                id.into(),
                Client {
                    classic: true,
                    epoch: 3,
                    holds: parts(&[("t", held)]),
                },
            );
        }
        let mut now = T0;
        let mut next = 0;
        for _ in 0..300 {
            now = now.plus_ms(rng.below(300));
            match rng.below(12) {
                0 => {
                    next += 1;
                    let id = format!("m{next}");
                    if rng.below(2) == 0 {
                        if let Ok(r) = g.handle_heartbeat(join(&id, &["t"]), &image, now) {
                            let holds = r.assignment.unwrap_or_default();
                            clients.insert(
                                id,
                                Client {
                                    classic: false,
                                    epoch: r.member_epoch,
                                    holds,
                                },
                            );
                        }
                    } else {
                        clients.insert(
                            id.clone(),
                            Client {
                                classic: true,
                                epoch: -1,
                                holds: Partitions::new(),
                            },
                        );
                        classic_round(&mut g, &mut clients, &id, &image, now);
                    }
                }
                1 => {
                    if let Some(id) = pick(&mut rng, &clients) {
                        let c = clients.remove(&id).unwrap();
                        if !c.classic && rng.below(2) == 0 {
                            let leave = ConsumerHeartbeat {
                                member_epoch: LEAVE_EPOCH,
                                ..beat(&id, c.epoch, Partitions::new())
                            };
                            let _ = g.handle_heartbeat(leave, &image, now);
                        }
                    }
                }
                2 => {
                    now = now.plus_ms(rng.below(40_000));
                }
                _ => {
                    if let Some(id) = pick(&mut rng, &clients) {
                        if clients[&id].classic {
                            let gen = clients[&id].epoch;
                            if g.handle_classic_heartbeat(&chb(&id, gen), now).is_err() {
                                classic_round(&mut g, &mut clients, &id, &image, now);
                            }
                        } else {
                            let c = &clients[&id];
                            match g.handle_heartbeat(
                                beat(&id, c.epoch, c.holds.clone()),
                                &image,
                                now,
                            ) {
                                Ok(r) => {
                                    let c = clients.get_mut(&id).unwrap();
                                    c.epoch = r.member_epoch;
                                    if let Some(a) = r.assignment {
                                        c.holds = a;
                                    }
                                }
                                Err(_) => {
                                    clients.remove(&id);
                                }
                            }
                        }
                    }
                }
            }
            g.handle_timeout(&image, now);
            if g.take_downgrade().is_some() {
                break;
            }
            clients.retain(|id, _| g.member(&MemberId::new(id.as_str())).is_some());
            one_holder_each(seed, clients.iter().map(|(id, c)| (id, &c.holds)));
        }
    }
}

/// A cooperative classic client's rebalance: JoinGroup with what it owns, SyncGroup, and it
/// then holds exactly what it was given (it gives up the rest at once); a refused JoinGroup
/// drops everything (as the Java client does when fenced).
fn classic_round(
    g: &mut ConsumerGroup,
    clients: &mut BTreeMap<String, Client>,
    id: &str,
    image: &Image,
    now: Timestamp,
) {
    let owned: Vec<i32> = clients[id]
        .holds
        .get(&tid("t"))
        .cloned()
        .unwrap_or_default();
    let r = g.handle_classic_join(&cjoin(id, &[("t", &owned)]), image, now);
    let c = clients.get_mut(id).unwrap();
    if r.error.is_some() {
        c.holds = Partitions::new();
        c.epoch = -1;
        return;
    }
    c.epoch = r.generation.0;
    // REBALANCE_IN_PROGRESS: it keeps what it owns and joins again later.
    if let Ok(reply) = g.handle_classic_sync(&csync(id, r.generation.0), image, now) {
        c.holds = parts(&[("t", &synced(&reply))]);
    }
}

fn pick(rng: &mut Rng, clients: &BTreeMap<String, Client>) -> Option<String> {
    if clients.is_empty() {
        return None;
    }
    let i = rng.below(clients.len() as u64) as usize;
    clients.keys().nth(i).cloned()
}
