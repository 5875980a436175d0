//! Server assignment of `consumer` groups through the real consumer-protocol bridge
//! ([`crate::assignor::consumer::ConsumerAssignor`]): members modelled as clients that revoke
//! and rejoin as Kafka's eager and cooperative clients do.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::*;
use crate::assignor::consumer::ConsumerAssignor;
use crate::assignor::protocol::{decode_assignment, encode_subscription, Subscription};
use crate::assignor::Registry;

/// A modelled consumer: what it owns, and whether it follows the cooperative protocol.
#[derive(Debug, Clone)]
struct Client {
    id: MemberId,
    cooperative: bool,
    owned: BTreeSet<(String, i32)>,
    /// New, or a cooperative client that just revoked something: it starts the next rebalance.
    rejoins: bool,
}

fn ctx_with(assignor: &str, topics: &[(&str, u32)]) -> Ctx {
    let catalog: BTreeMap<String, u32> = topics.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    let assignor = ConsumerAssignor::new(
        Registry::builtin().get(assignor).unwrap(),
        Arc::new(catalog),
    );
    Ctx::with_config(GroupConfig {
        initial_rebalance_delay_ms: DELAY,
        assignment: AssignmentMode::Server(Arc::new(assignor)),
        ..GroupConfig::default()
    })
}

fn subscription(topics: &[&str], owned: &BTreeSet<(String, i32)>) -> Bytes {
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (t, p) in owned {
        by_topic.entry(t.clone()).or_default().push(*p);
    }
    let s = Subscription {
        version: 3,
        topics: topics.iter().map(|t| t.to_string()).collect(),
        owned_partitions: by_topic.into_iter().collect(),
        generation: -1,
        ..Subscription::default()
    };
    encode_subscription(&s, 3)
}

fn join_req(client: Option<&Client>, protocol: &str, topics: &[&str]) -> J {
    let owned = client
        .filter(|c| c.cooperative)
        .map(|c| c.owned.clone())
        .unwrap_or_default();
    let mut j = J::new();
    if let Some(c) = client {
        j = j.member(&c.id);
    }
    j.req.protocols = vec![Protocol::new(protocol, subscription(topics, &owned))];
    j
}

/// One rebalance round: every client rejoins (eager ones having revoked everything), then
/// syncs. Returns each client's assignment. Checks that no partition is assigned to two members
/// and that none is assigned to a member while another member still holds it.
fn round(
    ctx: &mut Ctx,
    clients: &mut [Client],
    protocol: &str,
    topics: &[&str],
) -> Vec<BTreeSet<(String, i32)>> {
    // The clients with a reason to rejoin first (their join starts the rebalance), then the
    // others, which learn of it from a heartbeat.
    let mut order: Vec<usize> = (0..clients.len()).collect();
    order.sort_by_key(|&i| !clients[i].rejoins);
    let mut tokens = Vec::new();
    for i in order {
        let c = &mut clients[i];
        if !c.cooperative {
            c.owned.clear();
        }
        tokens.push(ctx.join(join_req(Some(c), protocol, topics)));
    }
    let generation = ctx.join_reply(tokens[0]).generation;
    assert!(tokens
        .iter()
        .all(|&t| ctx.join_reply(t).generation == generation));
    assert_eq!(ctx.group.state(), GroupState::Stable);
    let assigned = sync_all(ctx, clients, generation);
    check_exclusive(clients, &assigned);
    for (c, a) in clients.iter_mut().zip(&assigned) {
        c.rejoins = c.cooperative && !c.owned.is_subset(a);
        c.owned = a.clone();
    }
    assigned
}

fn sync_all(
    ctx: &mut Ctx,
    clients: &[Client],
    generation: Generation,
) -> Vec<BTreeSet<(String, i32)>> {
    clients
        .iter()
        .map(|c| {
            let t = ctx.sync(&c.id, generation, &[]);
            let reply = ctx.sync_reply(t);
            assert!(reply.error.is_none(), "{:?}", reply.error);
            let (parts, _) = decode_assignment(&reply.assignment).unwrap();
            parts
                .into_iter()
                .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                .collect()
        })
        .collect()
}

/// No partition given to two members, nor to one while another still holds it.
fn check_exclusive(clients: &[Client], assigned: &[BTreeSet<(String, i32)>]) {
    for (i, a) in assigned.iter().enumerate() {
        for (j, other) in clients.iter().enumerate() {
            if i == j {
                continue;
            }
            assert!(
                a.is_disjoint(&assigned[j]),
                "{} and {} share a partition",
                clients[i].id,
                other.id
            );
            assert!(
                a.is_disjoint(&other.owned),
                "{} got {:?} while {} still holds it",
                clients[i].id,
                a.intersection(&other.owned).collect::<Vec<_>>(),
                other.id
            );
        }
    }
}

/// Starts a group of `n` clients and settles it (one generation).
fn start(
    ctx: &mut Ctx,
    n: usize,
    cooperative: bool,
    protocol: &str,
    topics: &[&str],
) -> Vec<Client> {
    let tokens: Vec<RequestToken> = (0..n)
        .map(|_| ctx.join(join_req(None, protocol, topics)))
        .collect();
    ctx.sleep(3 * DELAY);
    let mut clients: Vec<Client> = tokens
        .iter()
        .map(|&t| Client {
            id: ctx.join_reply(t).member_id.clone(),
            cooperative,
            owned: BTreeSet::new(),
            rejoins: false,
        })
        .collect();
    let generation = ctx.join_reply(tokens[0]).generation;
    let assigned = sync_all(ctx, &clients, generation);
    for (c, a) in clients.iter_mut().zip(assigned) {
        c.owned = a;
    }
    clients
}

/// A member id for a new client (JoinGroup v4+: MEMBER_ID_REQUIRED first).
fn newcomer(ctx: &mut Ctx, cooperative: bool, protocol: &str, topics: &[&str]) -> Client {
    let t = ctx.join(join_req(None, protocol, topics).v4());
    let reply = ctx.join_reply(t);
    assert_eq!(reply.error, Some(GroupError::MemberIdRequired));
    Client {
        id: reply.member_id.clone(),
        cooperative,
        owned: BTreeSet::new(),
        rejoins: true,
    }
}

/// `ms` pass, the clients heartbeating every 5 s of it (the group stays Stable).
fn stay_for(ctx: &mut Ctx, clients: &[Client], ms: u64) {
    let generation = ctx.group.generation();
    for _ in 0..ms.div_ceil(5_000) {
        ctx.sleep(5_000);
        for c in clients {
            assert_eq!(ctx.heartbeat(&c.id, generation), Ok(()));
        }
    }
}

fn total(assigned: &[BTreeSet<(String, i32)>]) -> usize {
    assigned.iter().map(BTreeSet::len).sum()
}

#[test]
fn cooperative_members_hand_a_partition_over_in_two_generations() {
    let mut ctx = ctx_with("uniform", &[("t", 6)]);
    let mut clients = start(&mut ctx, 2, true, "cooperative-sticky", &["t"]);
    assert_eq!(
        clients.iter().map(|c| c.owned.len()).collect::<Vec<_>>(),
        vec![3, 3]
    );
    let before: Vec<_> = clients.iter().map(|c| c.owned.clone()).collect();

    // A third member joins; the others rejoin still holding their partitions.
    clients.push(newcomer(&mut ctx, true, "cooperative-sticky", &["t"]));
    let first = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    // The newcomer gets nothing yet: both old members still held what it will get. Each old
    // member gave up exactly one partition and kept the rest.
    assert!(first[2].is_empty(), "granted while still held: {first:?}");
    for (b, a) in before.iter().zip(&first) {
        assert_eq!(a.len(), 2);
        assert!(a.is_subset(b));
    }
    assert_eq!(total(&first), 4);

    // The revoking members rejoin (as cooperative clients do after a revocation): now the
    // released partitions are nobody's and go to the newcomer.
    let second = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    assert_eq!(
        second.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
    assert_eq!(second[0], first[0]);
    assert_eq!(second[1], first[1]);
    // Settled: nobody revoked anything, so nobody rejoins; heartbeats find no rebalance.
    assert!(clients.iter().all(|c| !c.rejoins));
    let generation = ctx.group.generation();
    for c in &clients {
        assert_eq!(ctx.heartbeat(&c.id, generation), Ok(()));
    }
}

#[test]
fn eager_members_get_the_target_in_one_generation() {
    let mut ctx = ctx_with("range", &[("t", 6)]);
    let mut clients = start(&mut ctx, 2, false, "range", &["t"]);
    clients.push(newcomer(&mut ctx, false, "range", &["t"]));
    // The old members revoke everything and rejoin; everyone gets the target at once.
    let assigned = round(&mut ctx, &mut clients, "range", &["t"]);
    assert_eq!(
        assigned.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
    assert_eq!(total(&assigned), 6);
}

#[test]
fn a_subscription_that_does_not_decode_is_refused_and_the_group_is_untouched() {
    let mut ctx = ctx_with("uniform", &[("t", 4)]);
    let clients = start(&mut ctx, 2, false, "range", &["t"]);
    let generation = ctx.group.generation();
    let events = ctx.events.len();
    for garbage in [&b""[..], b"\x00", b"\xff\xff", b"\x00\x00\x7f\xff\xff\xff"] {
        let mut j = J::new();
        j.req.protocols = vec![Protocol::new("range", Bytes::from_static(garbage))];
        let t = ctx.join(j);
        assert_eq!(
            ctx.join_reply(t).error,
            Some(GroupError::InconsistentGroupProtocol)
        );
        // A known member sending garbage is refused the same way and stays a member.
        let mut j = J::new().member(&clients[0].id);
        j.req.protocols = vec![Protocol::new("range", Bytes::from_static(garbage))];
        let t = ctx.join(j);
        assert_eq!(
            ctx.join_reply(t).error,
            Some(GroupError::InconsistentGroupProtocol)
        );
    }
    assert_eq!(ctx.group.state(), GroupState::Stable);
    assert_eq!(ctx.group.generation(), generation);
    assert!(ctx.group.has_member(&clients[0].id));
    assert_eq!(ctx.events.len(), events, "no rebalance, no member change");
}

#[test]
fn other_protocol_types_stay_client_assigned() {
    let mut ctx = ctx_with("uniform", &[("t", 4)]);
    let t = ctx.join(
        J::new()
            .v9()
            .protocol_type("connect")
            .member(&MemberId::unknown()),
    );
    let id = ctx.join_reply(t).member_id.clone();
    let t = ctx.join(J::new().v9().protocol_type("connect").member(&id));
    ctx.sleep(3 * DELAY);
    let reply = ctx.join_reply(t).clone();
    assert!(reply.error.is_none());
    assert!(!reply.skip_assignment, "the leader assigns a connect group");
    let s = ctx.sync(&id, reply.generation, &[(&id, b"leader-made")]);
    assert_eq!(&ctx.sync_reply(s).assignment[..], b"leader-made");
    assert_eq!(ctx.group.server_assignor_name(), None);
}

#[test]
fn an_assignment_the_member_never_received_is_not_held_back() {
    // m1 is alone in generation 1 and koord installs "m1 has everything", but m2 joins before
    // m1's SyncGroup, which gets REBALANCE_IN_PROGRESS: m1 never held anything and says so.
    // Withholding m1's recorded partitions from the others would leave them unowned for good
    // (nobody revokes them, so nobody rejoins).
    let mut ctx = ctx_with("uniform", &[("t", 6)]);
    let t = ctx.join(join_req(None, "cooperative-sticky", &["t"]));
    ctx.sleep(3 * DELAY);
    let m1 = Client {
        id: ctx.join_reply(t).member_id.clone(),
        cooperative: true,
        owned: BTreeSet::new(),
        rejoins: false,
    };
    assert_eq!(
        ctx.group.state(),
        GroupState::Stable,
        "generation 1 installed"
    );
    let mut clients = vec![m1, newcomer(&mut ctx, true, "cooperative-sticky", &["t"])];
    let assigned = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    assert_eq!(
        assigned.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![3, 3],
        "every partition granted at once: {assigned:?}"
    );
}

fn learner_ctx(topics: &[(&str, u32)], settings: crate::assignor::learner::Settings) -> Ctx {
    let catalog: BTreeMap<String, u32> = topics.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    let learner: Arc<dyn crate::assignor::Assignor> =
        Arc::new(crate::assignor::learner::LearnerAssignor::new(settings));
    let mut registry = Registry::builtin();
    registry.register(learner.clone());
    let protocols = crate::assignor::consumer::server_protocols(&registry).into();
    let assignor = ConsumerAssignor::with_registry(
        Some(learner),
        Arc::new(registry),
        protocols,
        Arc::new(catalog),
    );
    Ctx::with_config(GroupConfig {
        initial_rebalance_delay_ms: DELAY,
        assignment: AssignmentMode::Server(Arc::new(assignor)),
        ..GroupConfig::default()
    })
}

fn warmup(ms: u64) -> crate::assignor::learner::Settings {
    crate::assignor::learner::Settings {
        warmup_ms: ms,
        ..Default::default()
    }
}

/// Unmodified cooperative clients under `group.assignor=learner`: a newcomer gets nothing
/// until its learner's warm-up has elapsed; then koord itself starts the rebalance, the owner
/// gives the partition up, and the next generation grants it. Nobody else loses anything.
#[test]
fn learner_unmodified_members_wait_for_the_warm_up_then_koord_rebalances() {
    let mut ctx = learner_ctx(&[("t", 6)], warmup(2_000));
    let mut clients = start(&mut ctx, 3, true, "cooperative-sticky", &["t"]);
    assert_eq!(ctx.group.server_assignor_name(), Some("learner"));
    let before: Vec<_> = clients.iter().map(|c| c.owned.clone()).collect();
    assert!(before.iter().all(|o| o.len() == 2));

    clients.push(newcomer(&mut ctx, true, "cooperative-sticky", &["t"]));
    let planned = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    assert!(planned[3].is_empty(), "learning first: {planned:?}");
    assert_eq!(&planned[..3], &before[..], "nobody gives anything up yet");
    let record = ctx.group.metadata_record();
    assert!(!record.assignor_state.is_empty(), "S is persisted");
    let due = record.follow_up.expect("the warm-up is the follow-up");
    assert_eq!(ctx.group.timer_deadline(&TimerKey::FollowUp), Some(due));

    // Until the warm-up ends, the group stays put.
    let generation = ctx.group.generation();
    ctx.sleep(due.as_millis() - ctx.now.as_millis() - 1);
    assert_eq!(ctx.group.state(), GroupState::Stable);
    for c in &clients {
        assert_eq!(ctx.heartbeat(&c.id, generation), Ok(()));
    }
    ctx.sleep(1);
    assert_eq!(
        ctx.group.state(),
        GroupState::PreparingRebalance,
        "koord started it"
    );
    assert_eq!(
        ctx.heartbeat(&clients[0].id, generation),
        Err(GroupError::RebalanceInProgress)
    );

    // The owner still holds the partition: it is revoked in this generation...
    let revoke = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    assert!(revoke[3].is_empty());
    assert_eq!(revoke[0].len(), 1);
    assert!(revoke[0].is_subset(&before[0]));
    assert_eq!(&revoke[1..3], &before[1..3]);
    // ... and granted in the next, which the owner's rejoin starts.
    assert!(clients[0].rejoins);
    let granted = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    assert_eq!(
        granted.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![1, 2, 2, 1]
    );
    assert!(granted[3].is_subset(&before[0]));
    assert_eq!(
        &granted[1..3],
        &before[1..3],
        "the others never lost a partition"
    );
    // Balanced, no learners: no follow-up, no further rebalance.
    assert_eq!(ctx.group.metadata_record().follow_up, None);
    assert_eq!(ctx.group.timer_deadline(&TimerKey::FollowUp), None);
    let generation = ctx.group.generation();
    for _ in 0..5 {
        ctx.sleep(5_000);
        for c in &clients {
            assert_eq!(ctx.heartbeat(&c.id, generation), Ok(()));
        }
    }
}

/// Issue 26, through the group core: cooperative clients under `group.assignor=learner` with a
/// warm-up join one after another right after the first. The first member's partitions are
/// cold (it is restoring them, not processing them), so they move without learners: each join
/// is one revoke generation and one grant generation, and the group is balanced two
/// generations after the last join, with no learner and no follow-up. Once warm, a newcomer
/// learns first and nothing moves until the warm-up has passed.
#[test]
fn learner_cold_owners_hand_partitions_over_without_learners() {
    // The group forms after the initial delay, and `start` returns 2 delays later: a warm-up
    // of 30 s keeps the first member cold through the joins.
    let mut ctx = learner_ctx(&[("t", 12)], warmup(30_000));
    let mut clients = start(&mut ctx, 1, true, "cooperative-sticky", &["t"]);
    assert_eq!(clients[0].owned.len(), 12);
    for joined in 2..=3 {
        clients.push(newcomer(&mut ctx, true, "cooperative-sticky", &["t"]));
        let first = ctx.group.generation();
        let mut rounds = 0;
        let assigned = loop {
            let assigned = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
            rounds += 1;
            assert_eq!(ctx.group.metadata_record().follow_up, None, "no learner");
            if !clients.iter().any(|c| c.rejoins) {
                break assigned;
            }
            assert!(rounds < 2, "more than two generations: {assigned:?}");
        };
        assert_eq!(ctx.group.generation().0 - first.0, 2);
        let loads: Vec<usize> = assigned.iter().map(BTreeSet::len).collect();
        assert_eq!(loads, vec![12 / joined; joined], "balanced");
    }
    // Warm now: a fourth member learns first; the others keep everything until the warm-up.
    stay_for(&mut ctx, &clients, 30_000);
    let before: Vec<_> = clients.iter().map(|c| c.owned.clone()).collect();
    clients.push(newcomer(&mut ctx, true, "cooperative-sticky", &["t"]));
    let planned = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    assert!(planned[3].is_empty(), "learning first: {planned:?}");
    assert_eq!(&planned[..3], &before[..], "nobody gives anything up yet");
    let due = ctx.group.metadata_record().follow_up;
    assert_eq!(
        due,
        Some(ctx.now.plus_ms(30_000)),
        "the warm-up is the follow-up"
    );
}

/// A follow-up that comes due before every member has synced waits for the last SyncGroup, so
/// that no member's sync is failed by it.
#[test]
fn learner_follow_up_waits_for_every_sync() {
    let mut ctx = learner_ctx(&[("t", 4)], warmup(0));
    let clients = start(&mut ctx, 1, false, "range", &["t"]);
    let mut newcomer = newcomer(&mut ctx, false, "range", &["t"]);
    let t1 = ctx.join(join_req(Some(&newcomer), "range", &["t"]));
    let t0 = ctx.join(join_req(Some(&clients[0]), "range", &["t"]));
    let generation = ctx.join_reply(t0).generation;
    assert_eq!(ctx.join_reply(t1).generation, generation);
    newcomer.rejoins = false;
    // Ready at once (warm-up 0): the follow-up is due now, but the newcomer has not synced.
    let s0 = ctx.sync(&clients[0].id, generation, &[]);
    assert!(ctx.sync_reply(s0).error.is_none());
    ctx.sleep(1);
    assert_eq!(ctx.group.state(), GroupState::Stable);
    let s1 = ctx.sync(&newcomer.id, generation, &[]);
    assert!(ctx.sync_reply(s1).error.is_none(), "its sync is answered");
    // The rebalance starts right after, on its own timer step.
    ctx.sleep(0);
    assert_eq!(ctx.group.state(), GroupState::PreparingRebalance);
}

/// After a restart the group comes back with S and its follow-up armed.
#[test]
fn learner_state_and_follow_up_come_back_from_the_record() {
    let mut ctx = learner_ctx(&[("t", 6)], warmup(60_000));
    let mut clients = start(&mut ctx, 2, true, "cooperative-sticky", &["t"]);
    // The owners warm up (until then step 3a would move their partitions without learners).
    stay_for(&mut ctx, &clients, 60_000);
    clients.push(newcomer(&mut ctx, true, "cooperative-sticky", &["t"]));
    round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    let record = ctx.group.metadata_record();
    let due = record.follow_up.unwrap();
    let config = ctx.group.config().clone();
    let loaded = ClassicGroup::from_record(ctx.group.id().clone(), config, &record, ctx.now);
    assert_eq!(loaded.state(), GroupState::Stable);
    assert_eq!(loaded.timer_deadline(&TimerKey::FollowUp), Some(due));
    assert_eq!(
        loaded.metadata_record().assignor_state,
        record.assignor_state
    );
}

/// A learner state record that does not decode (a damaged disk): the group plans from an
/// empty S, says so at warn for that generation, and goes on assigning every partition,
/// never one to two members, and keeps a readable S from then on.
#[test]
fn a_damaged_learner_state_is_planned_afresh_and_said() {
    let mut ctx = learner_ctx(&[("t", 6)], warmup(60_000));
    let mut clients = start(&mut ctx, 2, true, "cooperative-sticky", &["t"]);
    let mut record = ctx.group.metadata_record();
    assert!(!record.assignor_state.is_empty());
    record.assignor_state = Bytes::from_static(b"\x09damaged");
    let config = ctx.group.config().clone();
    ctx.group = ClassicGroup::from_record(ctx.group.id().clone(), config, &record, ctx.now);
    clients.push(newcomer(&mut ctx, true, "cooperative-sticky", &["t"]));
    let events = ctx.events.len();
    let mut assigned = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    let warnings: Vec<&String> = ctx.events[events..]
        .iter()
        .filter_map(|e| match e {
            GroupEvent::AssignorWarning { warning, .. } => Some(warning),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", &ctx.events[events..]);
    assert!(
        warnings[0].contains("unknown learner state format 9"),
        "{}",
        warnings[0]
    );
    for _ in 0..3 {
        if !clients.iter().any(|c| c.rejoins) {
            break;
        }
        assigned = round(&mut ctx, &mut clients, "cooperative-sticky", &["t"]);
    }
    assert_eq!(total(&assigned), 6);
    let state = ctx.group.metadata_record().assignor_state;
    assert!(crate::assignor::learner::State::decode(&state).is_ok());
    let warned = ctx.events[events..]
        .iter()
        .filter(|e| matches!(e, GroupEvent::AssignorWarning { .. }))
        .count();
    assert_eq!(warned, 1, "later generations read the new S");
}

/// A member that chose `learner` but whose subscription's user data is not a
/// `LearnerSubscription` (truncated, an unknown version, trailing bytes) is refused with
/// INCONSISTENT_GROUP_PROTOCOL, and the group is untouched.
#[test]
fn learner_user_data_that_does_not_decode_is_refused() {
    let mut ctx = learner_ctx(&[("t", 4)], warmup(0));
    let clients = start(&mut ctx, 2, true, "learner", &["t"]);
    let generation = ctx.group.generation();
    let events = ctx.events.len();
    let valid = crate::assignor::learner::wire::LearnerSubscription::default().encode();
    let mut trailing = valid.to_vec();
    trailing.push(0);
    let mut version = valid.to_vec();
    version[1] = 1;
    for garbage in [&valid[..5], &trailing[..], &version[..], b"\xff"] {
        let s = Subscription {
            version: 1,
            topics: vec!["t".into()],
            user_data: Some(Bytes::copy_from_slice(garbage)),
            ..Subscription::default()
        };
        let mut j = J::new().member(&clients[0].id);
        j.req.protocols = vec![Protocol::new("learner", encode_subscription(&s, 1))];
        let t = ctx.join(j);
        assert_eq!(
            ctx.join_reply(t).error,
            Some(GroupError::InconsistentGroupProtocol),
            "{garbage:?}"
        );
    }
    assert_eq!(ctx.group.state(), GroupState::Stable);
    assert_eq!(ctx.group.generation(), generation);
    assert_eq!(ctx.events.len(), events, "no rebalance, no member change");
}
