//! learner-spec.md section 7, rebalance by rebalance: the seed trace (R1..R4), the scale-down
//! and the crash examples, and the modes' differences.

use std::sync::Arc;

use super::state::NO_MEMBER;
use super::*;
use crate::assignor::testing::member;
use crate::assignor::{GroupSpec, TopicSpec};
use crate::vocab::{MemberId, Timestamp};

/// T1..T5 are partitions 0..4 of topic `T`.
fn t(i: u32) -> Partition {
    Partition::new(0, i - 1)
}

fn ts(list: &[u32]) -> Vec<Partition> {
    list.iter().map(|&i| t(i)).collect()
}

fn spec(ids: &[&str]) -> GroupSpec {
    let sub: Arc<[u32]> = Arc::from(vec![0u32]);
    GroupSpec {
        topics: vec![TopicSpec {
            name: Arc::from("T"),
            partitions: 5,
        }],
        members: ids.iter().map(|&id| member(id, sub.clone())).collect(),
    }
}

/// A learner-capable member's join: declared (owned), revoked, learning-ready.
fn capable(declared: &[u32], revoked: &[u32], ready: &[u32]) -> LearnerInput {
    LearnerInput {
        capable: true,
        declared: ts(declared),
        revoked: ts(revoked),
        ready: ts(ready),
        ..Default::default()
    }
}

/// What a member was told: (assigned, revoked, learning, marks).
type Told = (
    Vec<Partition>,
    Vec<Partition>,
    Vec<Partition>,
    Vec<Partition>,
);

fn told(plan: &Plan, i: usize) -> Told {
    (
        plan.assigned[i].to_vec(),
        plan.revoked[i].to_vec(),
        plan.learning[i].to_vec(),
        plan.marks[i].to_vec(),
    )
}

fn expect(a: &[u32], r: &[u32], l: &[u32], m: &[u32]) -> Told {
    (ts(a), ts(r), ts(l), ts(m))
}

const NOW: Timestamp = Timestamp(1_000_000);

fn run(ids: &[&str], inputs: &[LearnerInput], prev: &State) -> Plan {
    plan(&spec(ids), inputs, prev, &Settings::default(), NOW)
}

/// R0..R4 of section 7, returning every plan.
fn seed_trace() -> Vec<Plan> {
    let mut plans = Vec::new();
    // R0: S1, S2, S3 start together: the orphans fill the first members up to Q = 2.
    let r0 = run(
        &["S1", "S2", "S3"],
        &[
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &State::default(),
    );
    // R1: S4 joins.
    let r1 = run(
        &["S1", "S2", "S3", "S4"],
        &[
            capable(&[1, 2], &[], &[]),
            capable(&[3, 4], &[], &[]),
            capable(&[5], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &r0.state,
    );
    // R2: S5 joins; S1 gave T1 up at its join (marked); S4 is not ready.
    let r2 = run(
        &["S1", "S2", "S3", "S4", "S5"],
        &[
            capable(&[2], &[1], &[]),
            capable(&[3, 4], &[], &[]),
            capable(&[5], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &r1.state,
    );
    // R3: S4 ready, S5 not; S1 and S2 gave their marked tasks up.
    let r3 = run(
        &["S1", "S2", "S3", "S4", "S5"],
        &[
            capable(&[2], &[1], &[]),
            capable(&[4], &[3], &[]),
            capable(&[5], &[], &[]),
            capable(&[], &[], &[1]),
            capable(&[], &[], &[]),
        ],
        &r2.state,
    );
    // R4: S5 ready.
    let r4 = run(
        &["S1", "S2", "S3", "S4", "S5"],
        &[
            capable(&[2], &[], &[]),
            capable(&[4], &[3], &[]),
            capable(&[5], &[], &[]),
            capable(&[1], &[], &[]),
            capable(&[], &[], &[3]),
        ],
        &r3.state,
    );
    plans.extend([r0, r1, r2, r3, r4]);
    plans
}

#[test]
fn seed_trace_r0_starts_as_the_seed() {
    let p = &seed_trace()[0];
    assert_eq!(told(p, 0), expect(&[1, 2], &[], &[], &[]));
    assert_eq!(told(p, 1), expect(&[3, 4], &[], &[], &[]));
    assert_eq!(told(p, 2), expect(&[5], &[], &[], &[]));
    assert_eq!(p.follow_up, None);
}

#[test]
fn seed_trace_r1_s4_joins_and_learns_t1_from_s1() {
    let p = &seed_trace()[1];
    assert_eq!(told(p, 0), expect(&[1, 2], &[], &[], &[1]));
    assert_eq!(told(p, 1), expect(&[3, 4], &[], &[], &[]));
    assert_eq!(told(p, 2), expect(&[5], &[], &[], &[]));
    assert_eq!(told(p, 3), expect(&[], &[], &[1], &[]));
    assert_eq!(p.state.learners(), 1);
    assert_eq!(
        p.probe, None,
        "learner-capable members push readiness: no probe"
    );
    assert_eq!(p.follow_up, None);
}

#[test]
fn seed_trace_r2_s5_joins_and_learns_t3_from_s2() {
    let p = &seed_trace()[2];
    assert_eq!(told(p, 0), expect(&[1, 2], &[], &[], &[1]));
    assert_eq!(told(p, 1), expect(&[3, 4], &[], &[], &[3]));
    assert_eq!(told(p, 2), expect(&[5], &[], &[], &[]));
    assert_eq!(told(p, 3), expect(&[], &[], &[1], &[]));
    assert_eq!(told(p, 4), expect(&[], &[], &[3], &[]));
    assert_eq!(p.state.learners(), 2, "two learners: the budget");
}

#[test]
fn seed_trace_r3_t1_moves_to_s4() {
    let p = &seed_trace()[3];
    assert_eq!(told(p, 0), expect(&[2], &[1], &[], &[]));
    assert_eq!(told(p, 1), expect(&[3, 4], &[], &[], &[3]));
    assert_eq!(told(p, 2), expect(&[5], &[], &[], &[]));
    assert_eq!(told(p, 3), expect(&[1], &[], &[], &[]));
    assert_eq!(told(p, 4), expect(&[], &[], &[3], &[]));
}

#[test]
fn seed_trace_r4_t3_moves_to_s5_and_the_group_is_balanced() {
    let p = &seed_trace()[4];
    assert_eq!(told(p, 0), expect(&[2], &[], &[], &[]));
    assert_eq!(told(p, 1), expect(&[4], &[3], &[], &[]));
    assert_eq!(told(p, 2), expect(&[5], &[], &[], &[]));
    assert_eq!(told(p, 3), expect(&[1], &[], &[], &[]));
    assert_eq!(told(p, 4), expect(&[3], &[], &[], &[]));
    assert_eq!(p.state.learners(), 0);
    assert_eq!(p.follow_up, None, "balanced, no learners: no follow-up");
}

#[test]
fn the_seed_trace_logs_why() {
    let plans = seed_trace();
    let topics = spec(&["S1"]).topics;
    let line = |p: &Plan| {
        Summary {
            topics: &topics,
            plan: p,
        }
        .to_string()
    };
    assert_eq!(
        line(&plans[1]).split("; ").next(),
        Some("learner added: S4 learns T-0 from S1 (fill)")
    );
    assert!(line(&plans[3]).starts_with("moved T-0 S1 -> S4 (learner ready)"));
    assert_eq!(line(&plans[4]), "moved T-2 S2 -> S5 (learner ready)");
    // Without an owner, or held by several members.
    let event = |kind| TaskEvent {
        partition: t(1),
        kind,
    };
    let unowned = Plan {
        events: vec![
            event(TaskEventKind::Moved {
                from: None,
                to: MemberId::new("S4"),
                why: "owner gone",
            }),
            event(TaskEventKind::Revoking {
                from: None,
                to: MemberId::new("S4"),
                why: "learner ready",
            }),
        ],
        ..Plan::default()
    };
    assert_eq!(
        line(&unowned),
        "moved T-0 nobody -> S4 (owner gone); revoking T-0 from several members for S4 \
         (learner ready; granted once given up)"
    );
}

/// The wiki's scale-down: S2 leaves; the drain sends T3 to S1 and T4 to S3; three rounds.
#[test]
fn scale_down_drains_through_learners() {
    let ids = ["S1", "S2", "S3"];
    let r0 = run(
        &ids,
        &[
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &State::default(),
    );
    let mut leaving = capable(&[3, 4], &[], &[]);
    leaving.leaving = true;
    let r1 = run(
        &ids,
        &[capable(&[1, 2], &[], &[]), leaving, capable(&[5], &[], &[])],
        &r0.state,
    );
    assert_eq!(told(&r1, 0), expect(&[1, 2], &[], &[3], &[]));
    assert_eq!(told(&r1, 1), expect(&[3, 4], &[], &[], &[3, 4]));
    assert_eq!(told(&r1, 2), expect(&[5], &[], &[4], &[]));
    // R2: S3 is ready; S2 gave T3 and T4 up at its join. T3 goes back, T4 moves.
    let mut leaving = capable(&[], &[3, 4], &[]);
    leaving.leaving = true;
    let r2 = run(
        &ids,
        &[
            capable(&[1, 2], &[], &[]),
            leaving,
            capable(&[5], &[], &[4]),
        ],
        &r1.state,
    );
    assert_eq!(told(&r2, 0), expect(&[1, 2], &[], &[3], &[]));
    assert_eq!(told(&r2, 1), expect(&[3], &[4], &[], &[3]));
    assert_eq!(told(&r2, 2), expect(&[4, 5], &[], &[], &[]));
    // R3: S1 is ready and takes T3; S2 is empty and may shut down.
    let mut leaving = capable(&[], &[3], &[]);
    leaving.leaving = true;
    let r3 = run(
        &ids,
        &[
            capable(&[1, 2], &[], &[3]),
            leaving,
            capable(&[4, 5], &[], &[]),
        ],
        &r2.state,
    );
    assert_eq!(told(&r3, 0), expect(&[1, 2, 3], &[], &[], &[]));
    assert_eq!(told(&r3, 1), expect(&[], &[3], &[], &[]));
    assert_eq!(told(&r3, 2), expect(&[4, 5], &[], &[], &[]));
    assert_eq!(r3.state.learners(), 0);
}

/// The wiki's crash: S1 dies before S4 is ready; T1 goes straight to S4, the orphan T2 to S3.
#[test]
fn crash_promotes_the_learner_and_places_the_orphan() {
    let plans = seed_trace();
    let p = run(
        &["S2", "S3", "S4"],
        &[
            capable(&[3, 4], &[], &[]),
            capable(&[5], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &plans[1].state,
    );
    assert_eq!(told(&p, 0), expect(&[3, 4], &[], &[], &[]));
    assert_eq!(told(&p, 1), expect(&[2, 5], &[], &[], &[]));
    assert_eq!(told(&p, 2), expect(&[1], &[], &[], &[]));
}

/// A leaver past `learner.scale.down.timeout.ms` counts as departed: its learners are promoted
/// whether ready or not (the task it still holds is revoked first).
#[test]
fn scale_down_deadline_promotes_unready_learners() {
    let ids = ["S1", "S2", "S3"];
    let settings = Settings {
        scale_down_timeout_ms: Some(30_000),
        ..Settings::default()
    };
    let r0 = plan(
        &spec(&ids),
        &[
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &State::default(),
        &settings,
        NOW,
    );
    let mut leaving = capable(&[3, 4], &[], &[]);
    leaving.leaving = true;
    let inputs = [
        capable(&[1, 2], &[], &[]),
        leaving.clone(),
        capable(&[5], &[], &[]),
    ];
    let r1 = plan(&spec(&ids), &inputs, &r0.state, &settings, NOW);
    assert_eq!(
        r1.follow_up,
        Some(NOW.plus_ms(30_000)),
        "the deadline is the follow-up"
    );
    // Before the deadline, nothing moves.
    let r2 = plan(
        &spec(&ids),
        &inputs,
        &r1.state,
        &settings,
        NOW.plus_ms(29_999),
    );
    assert_eq!(told(&r2, 1).0, ts(&[3, 4]));
    // At the deadline: S2 still holds T3 and T4, so they are revoked first...
    let r3 = plan(
        &spec(&ids),
        &inputs,
        &r2.state,
        &settings,
        NOW.plus_ms(30_000),
    );
    assert_eq!(told(&r3, 0).0, ts(&[1, 2]));
    assert_eq!(told(&r3, 1).0, ts(&[]));
    assert_eq!(told(&r3, 2).0, ts(&[5]));
    // ... and granted once S2 gave them up, ready or not.
    leaving.declared.clear();
    let inputs = [capable(&[1, 2], &[], &[]), leaving, capable(&[5], &[], &[])];
    let r4 = plan(
        &spec(&ids),
        &inputs,
        &r3.state,
        &settings,
        NOW.plus_ms(31_000),
    );
    assert_eq!(told(&r4, 0).0, ts(&[1, 2, 3]));
    assert_eq!(told(&r4, 1).0, ts(&[]));
    assert_eq!(told(&r4, 2).0, ts(&[4, 5]));
    assert_eq!(r4.state.learners(), 0);
}

/// Ready-gated: the owner keeps the marked task at its join; once the learner is ready the
/// owner's assignment drops it (revoke), and the next generation grants it.
#[test]
fn ready_gated_revokes_then_grants() {
    let plans = seed_trace();
    // R2 as in ready-gated mode: S1 kept T1 (no marks on the wire).
    let r2 = run(
        &["S1", "S2", "S3", "S4"],
        &[
            capable(&[1, 2], &[], &[]),
            capable(&[3, 4], &[], &[]),
            capable(&[5], &[], &[]),
            capable(&[], &[], &[1]),
        ],
        &plans[1].state,
    );
    assert_eq!(
        told(&r2, 0),
        expect(&[2], &[], &[], &[]),
        "T1 revoked from S1"
    );
    assert_eq!(
        told(&r2, 3),
        expect(&[], &[], &[1], &[]),
        "S4 keeps learning T1"
    );
    let r3 = run(
        &["S1", "S2", "S3", "S4"],
        &[
            capable(&[2], &[], &[]),
            capable(&[3, 4], &[], &[]),
            capable(&[5], &[], &[]),
            capable(&[], &[], &[1]),
        ],
        &r2.state,
    );
    assert_eq!(told(&r3, 0), expect(&[2], &[], &[], &[]));
    assert_eq!(told(&r3, 3), expect(&[1], &[], &[], &[]));
}

/// Unmodified clients: their learners are ready `warmup_ms` after planning, and that moment is
/// the follow-up that makes koord start a rebalance.
#[test]
fn unmodified_learners_are_ready_after_the_warm_up() {
    let settings = Settings {
        warmup_ms: 2_000,
        ..Settings::default()
    };
    let plain = |declared: &[u32]| LearnerInput {
        declared: ts(declared),
        ..Default::default()
    };
    let ids = ["S1", "S2", "S3", "S4"];
    // Formed a warm-up ago: the owners are warm (step 3a does not apply).
    let r0 = plan(
        &spec(&ids[..3]),
        &[plain(&[]), plain(&[]), plain(&[])],
        &State::default(),
        &settings,
        Timestamp(NOW.0 - 2_000),
    );
    let r1 = plan(
        &spec(&ids),
        &[plain(&[1, 2]), plain(&[3, 4]), plain(&[5]), plain(&[])],
        &r0.state,
        &settings,
        NOW,
    );
    assert_eq!(r1.learning[3], ts(&[1]));
    assert_eq!(r1.assigned[3], ts(&[]));
    assert_eq!(r1.follow_up, Some(NOW.plus_ms(2_000)));
    // Too early: nothing moves.
    let r2 = plan(
        &spec(&ids),
        &[plain(&[1, 2]), plain(&[3, 4]), plain(&[5]), plain(&[])],
        &r1.state,
        &settings,
        NOW.plus_ms(1_999),
    );
    assert_eq!(r2.assigned, r1.assigned);
    // Ready: S1 (cooperative, still holding T1) gives it up first, then S4 gets it.
    let r3 = plan(
        &spec(&ids),
        &[plain(&[1, 2]), plain(&[3, 4]), plain(&[5]), plain(&[])],
        &r2.state,
        &settings,
        NOW.plus_ms(2_000),
    );
    assert_eq!(r3.assigned[0], ts(&[2]));
    assert_eq!(r3.assigned[3], ts(&[]));
    let r4 = plan(
        &spec(&ids),
        &[plain(&[2]), plain(&[3, 4]), plain(&[5]), plain(&[])],
        &r3.state,
        &settings,
        NOW.plus_ms(2_100),
    );
    assert_eq!(r4.assigned[3], ts(&[1]));
    assert_eq!(r4.follow_up, None);
    // An eager owner gave everything up at its join: the move is immediate.
    let r3_eager = plan(
        &spec(&ids),
        &[plain(&[]), plain(&[]), plain(&[]), plain(&[])],
        &r2.state,
        &settings,
        NOW.plus_ms(2_000),
    );
    assert_eq!(
        r3_eager.assigned,
        vec![ts(&[2]), ts(&[3, 4]), ts(&[5]), ts(&[1])]
    );
}

#[test]
fn the_budget_limits_learners() {
    let ids = ["S1", "S2", "S3", "S4", "S5"];
    let r0 = run(&ids[..1], &[capable(&[], &[], &[])], &State::default());
    assert_eq!(r0.assigned[0], ts(&[1, 2, 3, 4, 5]));
    let r1 = run(
        &ids,
        &[
            capable(&[1, 2, 3, 4, 5], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
            capable(&[], &[], &[]),
        ],
        &r0.state,
    );
    assert_eq!(r1.state.learners(), 2);
    assert_eq!(r1.learning[1], ts(&[1]));
    assert_eq!(r1.learning[2], ts(&[2]));
}

/// Heterogeneous subscriptions: a member below q learns from the first member above Q that
/// holds a task of its topics; a member with none of its topics (`d0`) is passed over.
#[test]
fn a_member_below_q_learns_from_a_donor_with_one_of_its_topics() {
    let (a, b): (Arc<[u32]>, Arc<[u32]>) = (Arc::from(vec![0u32]), Arc::from(vec![1u32]));
    let both: Arc<[u32]> = Arc::from(vec![0u32, 1]);
    let spec = GroupSpec {
        topics: ["a", "b"]
            .map(|name| TopicSpec {
                name: Arc::from(name),
                partitions: 6,
            })
            .to_vec(),
        members: [("d0", a), ("d1", both), ("r", b)]
            .map(|(id, subscription)| member(id, subscription))
            .to_vec(),
    };
    let settings = Settings::default();
    let all = |topic| -> Vec<Partition> { (0..6).map(|p| Partition::new(topic, p)).collect() };
    let inputs = |d0: Vec<Partition>, d1: Vec<Partition>| {
        [d0, d1, Vec::new()].map(|declared| LearnerInput {
            capable: true,
            declared,
            ..LearnerInput::default()
        })
    };
    // d0 and d1 alone: d0 takes topic a, d1 topic b.
    let r0 = plan(
        &spec_of(&spec, 2),
        &inputs(Vec::new(), Vec::new())[..2],
        &State::default(),
        &settings,
        NOW,
    );
    assert_eq!(r0.assigned[0], all(0)[..]);
    assert_eq!(r0.assigned[1], all(1)[..]);
    // r joins: q = Q = 4, both hold 6; r takes its two learners from d1.
    let r1 = plan(&spec, &inputs(all(0), all(1)), &r0.state, &settings, NOW);
    assert_eq!(r1.learning[0], []);
    assert_eq!(r1.learning[1], []);
    assert_eq!(r1.learning[2], all(1)[..2]);
    assert_eq!(r1.marks[1], all(1)[..2]);
}

/// `spec` with its first `count` members.
fn spec_of(spec: &GroupSpec, count: usize) -> GroupSpec {
    GroupSpec {
        topics: spec.topics.clone(),
        members: spec.members[..count].to_vec(),
    }
}

/// Step 3a's settings: a 3 s warm-up.
fn warm_up_3s() -> Settings {
    Settings {
        warmup_ms: 3_000,
        ..Settings::default()
    }
}

fn unmodified(declared: &[u32]) -> LearnerInput {
    LearnerInput {
        declared: ts(declared),
        ..Default::default()
    }
}

fn cold_tasks(state: &State) -> Vec<(u32, u64)> {
    state
        .cold
        .iter()
        .map(|c| (c.task + 1, c.since.0 - NOW.0))
        .collect()
}

/// 6.5 step 3a: S1 got every task cold (a first assignment) 200 ms ago; S2 and S3 join. Its
/// tasks go straight to them, without learners and beyond the budget of one: eager owners
/// (who gave everything up at the join) are balanced in this generation.
#[test]
fn a_cold_owners_tasks_move_directly_outside_the_budget() {
    let settings = Settings {
        max_learners: 1,
        ..warm_up_3s()
    };
    let r0 = plan(
        &spec(&["S1"]),
        &[unmodified(&[])],
        &State::default(),
        &settings,
        NOW,
    );
    assert_eq!(r0.assigned[0], ts(&[1, 2, 3, 4, 5]));
    assert_eq!(
        cold_tasks(&r0.state),
        vec![(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)],
        "a first assignment is cold"
    );
    let ids = ["S1", "S2", "S3"];
    let eager = [unmodified(&[]), unmodified(&[]), unmodified(&[])];
    let r1 = plan(&spec(&ids), &eager, &r0.state, &settings, NOW.plus_ms(200));
    // q = 1, Q = 2. Fill: S2 takes S1's lowest (T1), S3 the next (T2); shave: S1 still has 3,
    // S2 (below Q) takes T3.
    assert_eq!(r1.assigned, vec![ts(&[4, 5]), ts(&[1, 3]), ts(&[2])]);
    assert_eq!(r1.state.learners(), 0);
    assert!(r1.learning.iter().all(<[Partition]>::is_empty));
    assert_eq!(r1.follow_up, None);
    assert_eq!(
        r1.events[0],
        TaskEvent {
            partition: t(1),
            kind: TaskEventKind::Moved {
                from: Some(MemberId::new("S1")),
                to: MemberId::new("S2"),
                why: "owner cold, fill",
            },
        }
    );
    // S1 is still cold for T4 and T5 (since NOW); the movers are cold since they got theirs.
    assert_eq!(
        cold_tasks(&r1.state),
        vec![(1, 200), (2, 200), (3, 200), (4, 0), (5, 0)]
    );
    // Once the warm-up has passed, nobody is cold any more (and S is format 2 again).
    let r2 = plan(
        &spec(&ids),
        &eager,
        &r1.state,
        &settings,
        NOW.plus_ms(3_200),
    );
    assert_eq!(r2.assigned, r1.assigned);
    assert!(r2.state.cold.is_empty());
    assert_eq!(r2.state.encode()[0], 2);
}

/// The same with cooperative owners: S1 still holds its tasks, so they are revoked in this
/// generation (granted to nobody: never two owners) and granted in the next, to the members
/// they were moved to (S names them meanwhile).
#[test]
fn a_cold_cooperative_owner_gives_up_first_then_the_tasks_are_granted() {
    let settings = warm_up_3s();
    let r0 = plan(
        &spec(&["S1"]),
        &[unmodified(&[])],
        &State::default(),
        &settings,
        NOW,
    );
    let ids = ["S1", "S2", "S3"];
    let r1 = plan(
        &spec(&ids),
        &[
            unmodified(&[1, 2, 3, 4, 5]),
            unmodified(&[]),
            unmodified(&[]),
        ],
        &r0.state,
        &settings,
        NOW.plus_ms(200),
    );
    assert_eq!(r1.assigned, vec![ts(&[4, 5]), ts(&[]), ts(&[])]);
    assert_eq!(r1.state.learners(), 0);
    assert_eq!(r1.follow_up, None, "the owner's rejoin is the trigger");
    assert!(matches!(
        &r1.events[0].kind,
        TaskEventKind::Revoking { from: Some(m), why: "owner cold, fill", .. } if m.as_str() == "S1"
    ));
    let owners: Vec<u32> = r1.state.owners.clone();
    assert_eq!(
        owners[..3],
        [NO_MEMBER; 3],
        "S names no owner while S1 holds them"
    );
    let pending: Vec<(u32, u32)> = r1.state.cold.iter().map(|c| (c.task, c.member)).collect();
    assert_eq!(
        pending[..3],
        [(0, 1), (1, 2), (2, 1)],
        "but their receivers"
    );
    let r2 = plan(
        &spec(&ids),
        &[unmodified(&[4, 5]), unmodified(&[]), unmodified(&[])],
        &r1.state,
        &settings,
        NOW.plus_ms(300),
    );
    assert_eq!(r2.assigned, vec![ts(&[4, 5]), ts(&[1, 3]), ts(&[2])]);
    assert_eq!(
        r2.events[0].kind,
        TaskEventKind::Moved {
            from: None,
            to: MemberId::new("S2"),
            why: "given up by its cold owner",
        }
    );
    assert_eq!(r2.state.learners(), 0);
    assert_eq!(r2.follow_up, None);
}

/// A warm owner is still protected: joining after the warm-up, S2 and S3 learn first and S1
/// keeps everything (ready-gated by time for unmodified members).
#[test]
fn a_warm_owner_keeps_its_tasks_until_a_learner_is_ready() {
    let settings = warm_up_3s();
    let r0 = plan(
        &spec(&["S1"]),
        &[unmodified(&[])],
        &State::default(),
        &settings,
        NOW,
    );
    let ids = ["S1", "S2", "S3"];
    let r1 = plan(
        &spec(&ids),
        &[unmodified(&[]), unmodified(&[]), unmodified(&[])],
        &r0.state,
        &settings,
        NOW.plus_ms(3_000),
    );
    assert_eq!(r1.assigned, vec![ts(&[1, 2, 3, 4, 5]), ts(&[]), ts(&[])]);
    assert_eq!(r1.learning, vec![ts(&[]), ts(&[1]), ts(&[2])]);
    assert!(r1.state.cold.is_empty());
}

/// A learner promoted before it was ready (its owner crashed) is cold for the task until its
/// warm-up would have ended; a learner that was ready is warm at once.
#[test]
fn a_learner_promoted_unready_is_cold_until_its_warm_up_ends() {
    let settings = warm_up_3s();
    let earlier = Timestamp(NOW.0 - 10_000);
    let r0 = plan(
        &spec(&["S1", "S2"]),
        &[unmodified(&[]), unmodified(&[])],
        &State::default(),
        &settings,
        earlier,
    );
    assert_eq!(r0.assigned, vec![ts(&[1, 2, 3]), ts(&[4, 5])]);
    let ids = ["S1", "S2", "S3"];
    let r1 = plan(
        &spec(&ids),
        &[unmodified(&[]), unmodified(&[]), unmodified(&[])],
        &r0.state,
        &settings,
        Timestamp(NOW.0 - 1_000),
    );
    assert_eq!(r1.learning[2], ts(&[1]));
    // S1 crashes.
    let r2 = plan(
        &spec(&ids[1..]),
        &[unmodified(&[]), unmodified(&[])],
        &r1.state,
        &settings,
        NOW,
    );
    assert_eq!(r2.assigned[1].first(), Some(&t(1)));
    let t1 = r2.state.cold.iter().find(|c| c.task == 0).unwrap();
    assert_eq!(
        t1.since,
        Timestamp(NOW.0 - 1_000),
        "since its learner was planned"
    );
    // T2 and T3 were S1's orphans: cold since now.
    assert!(r2.state.cold.iter().any(|c| c.task == 1 && c.since == NOW));
}

/// With `learner.warmup.ms=0` (the default) nobody is ever cold: S keeps no cold owner and is
/// written in format 2, as before step 3a.
#[test]
fn without_a_warm_up_nobody_is_cold() {
    let plans = seed_trace();
    assert!(plans.iter().all(|p| p.state.cold.is_empty()));
    assert!(plans.iter().all(|p| p.state.encode()[0] == 2));
}

/// The status page's view of S: each learner with its task, its owner and its warm-up start;
/// bytes that do not decode show none.
#[test]
fn learners_are_read_back_from_the_state() {
    use super::state::{Learner, NO_MEMBER};
    let state = State {
        members: ["a", "b"].into_iter().collect(),
        leaving: Vec::new(),
        topics: ["t"].into_iter().collect(),
        partitions: vec![3],
        owners: vec![0, 0, NO_MEMBER],
        learners: vec![
            Learner {
                task: 1,
                member: 1,
                planned: Timestamp(500),
            },
            Learner {
                task: 2,
                member: 1,
                planned: Timestamp(700),
            },
        ],
        cold: Vec::new(),
    };
    let assignor = LearnerAssignor::new(Settings::default());
    let views = assignor.learners(&state.encode());
    assert_eq!(views.len(), 2);
    assert_eq!(
        (
            views[0].topic.as_str(),
            views[0].partition,
            views[0].member.as_str()
        ),
        ("t", 1, "b")
    );
    assert_eq!(views[0].owner.as_deref(), Some("a"));
    assert_eq!(views[0].planned, Timestamp(500));
    assert_eq!(views[1].owner, None);
    assert!(assignor.learners(&[0xff, 1, 2]).is_empty());
}
