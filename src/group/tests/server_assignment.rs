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
