//! The simulator's own tests: determinism, and the costs each protocol is known to pay.

use super::*;
use crate::assignor::learner::Mode;

fn small(strategy: Strategy, restore_ms: u64) -> Scenario {
    Scenario {
        tasks: 12,
        before: 2,
        after: 3,
        restore_ms,
        barrier_ms: 1_000,
        strategy,
        ..Scenario::default()
    }
}

fn clean(r: &Report) {
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert!(r.balanced_after_ms.is_some(), "never balanced");
}

#[test]
fn same_flags_same_output() {
    for strategy in [
        Strategy::Range,
        Strategy::Uniform,
        Strategy::Learner(Mode::Seed),
        Strategy::Learner(Mode::ReadyGated),
    ] {
        let s = small(strategy, 5_000);
        let (a, b) = (run(&s).unwrap(), run(&s).unwrap());
        assert_eq!(
            table(std::slice::from_ref(&a)),
            table(std::slice::from_ref(&b))
        );
        assert_eq!(
            json(&s, std::slice::from_ref(&a)),
            json(&s, std::slice::from_ref(&b))
        );
        assert_eq!(svg::render(&s, &a), svg::render(&s, &b));
    }
    // The figures of one small scenario, pinned.
    let r = run(&small(Strategy::Range, 5_000)).unwrap();
    let line = table(&[r]);
    let row = line.lines().nth(1).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        ["range", "eager", "5", "s", "1", "42", "s", "6", "s", "6", "s", "12", "6", "s"],
        "{line}"
    );
}

/// Range re-deals the ranges: every task is down for the barrier (eager members give up
/// everything at the join), and a task that changed owner also for its restore.
#[test]
fn eager_pays_the_barrier_everywhere_and_the_restore_on_moved_tasks() {
    let restore = 7_000;
    let r = run(&small(Strategy::Range, restore)).unwrap();
    clean(&r);
    assert_eq!(r.rebalances, 1);
    let down = r.recorder.downtimes();
    let moved = moved_tasks(&r);
    assert_eq!(
        moved.len(),
        6,
        "2 -> 3 members: [0-5][6-11] -> [0-3][4-7][8-11]"
    );
    for (t, d) in down.iter().enumerate() {
        let expected = if moved.contains(&(t as u32)) {
            1_000 + restore
        } else {
            1_000
        };
        assert_eq!(*d, expected, "task {t}");
    }
}

/// Cooperative members keep what stays through the join; a moved task is revoked in one
/// generation and granted in the next, then restored: two rebalances, and the moved task is
/// down for one barrier plus its restore.
#[test]
fn cooperative_moves_cost_two_rebalances() {
    let restore = 7_000;
    let r = run(&small(Strategy::Uniform, restore)).unwrap();
    clean(&r);
    assert_eq!(r.rebalances, 2);
    let down = r.recorder.downtimes();
    let moved = moved_tasks(&r);
    assert_eq!(moved.len(), 4, "uniform moves only what balance needs");
    for (t, d) in down.iter().enumerate() {
        let expected = if moved.contains(&(t as u32)) {
            1_000 + restore
        } else {
            0
        };
        assert_eq!(*d, expected, "task {t}");
    }
    assert_eq!(r.balanced_after_ms, Some(2 * 1_000 + restore));
}

#[test]
fn scale_in_with_classic_clients_restores_the_leavers_tasks() {
    for strategy in [Strategy::Range, Strategy::Uniform] {
        let s = Scenario {
            before: 3,
            after: 2,
            ..small(strategy, 4_000)
        };
        let r = run(&s).unwrap();
        clean(&r);
        assert_eq!(r.rebalances, 1, "{strategy:?}");
        // The leaver's tasks have no owner from the leave to the next assignment, then restore.
        assert_eq!(r.downtime.max_ms, 1_000 + 4_000, "{strategy:?}");
    }
}

#[test]
fn an_explicit_schedule_spaces_the_changes() {
    let s = Scenario {
        schedule: Some(vec![(0, 1), (30_000, 1)]),
        ..small(Strategy::Uniform, 2_000)
    };
    let r = run(&s).unwrap();
    clean(&r);
    assert_eq!(r.rebalances, 4, "two joins, two rebalances each");
    assert!(r.balanced_after_ms.unwrap() >= 30_000);
    assert_eq!(r.member_names.len(), 4);
}

#[test]
fn bad_scenarios_are_refused() {
    let s = Scenario {
        schedule: Some(vec![(0, -3)]),
        ..small(Strategy::Range, 0)
    };
    assert!(run(&s).is_err());
    assert!(Strategy::parse("sticky", None).is_err());
    assert!(Strategy::parse("learner", Some("lazy")).is_err());
}

fn learner(mode: Mode, before: usize, after: usize, restore_ms: u64) -> Scenario {
    Scenario {
        tasks: 20,
        before,
        after,
        restore_ms,
        barrier_ms: 1_000,
        strategy: Strategy::Learner(mode),
        ..Scenario::default()
    }
}

/// The goal of the learner assignor: with learner-capable clients in ready-gated mode a moved
/// task is down only for the revoke -> grant handoff, one barrier, whatever its restore time;
/// on scale-in too (the leavers drain through learners, then leave holding nothing).
#[test]
fn learner_ready_gated_keeps_every_task_within_one_barrier_whatever_the_restore() {
    for restore in [1_000, 10_000, 60_000] {
        for (before, after) in [(3, 5), (5, 3)] {
            let r = run(&learner(Mode::ReadyGated, before, after, restore)).unwrap();
            clean(&r);
            assert_eq!(
                r.downtime.max_ms, 1_000,
                "{before} -> {after}, restore {restore}"
            );
            let moved = moved_tasks(&r);
            assert!(!moved.is_empty());
            assert_eq!(
                r.downtime.tasks_down,
                moved.len(),
                "only moved tasks go down"
            );
            // Everything ends processed by the members that stay (the first `after`).
            for timeline in &r.recorder.tasks {
                let last = timeline.last().unwrap().1;
                assert!(last.processing && last.owner.is_some_and(|o| o < after as u16));
                assert_eq!(last.learner, None);
            }
        }
    }
}

/// Seed mode pays a barrier for a marked task at every rebalance while it is marked, but
/// never the restore.
#[test]
fn learner_seed_mode_never_pays_the_restore() {
    for (before, after) in [(3, 5), (5, 3)] {
        let fast = run(&learner(Mode::Seed, before, after, 1_000)).unwrap();
        let slow = run(&learner(Mode::Seed, before, after, 60_000)).unwrap();
        clean(&fast);
        clean(&slow);
        assert_eq!(fast.downtime, slow.downtime, "{before} -> {after}");
        assert!(slow.downtime.max_ms < 60_000);
        assert!(slow.downtime.max_ms >= 1_000);
    }
}

/// With a budget covering every move, ready-gated moves cost three rebalances (the change
/// plans learners; a learner's readiness revokes; the owner's rejoin grants) and seed two (the
/// owners give marked tasks up at the readiness rebalance, which grants them at once).
#[test]
fn learner_rebalances_with_an_ample_budget() {
    for (mode, expected) in [(Mode::ReadyGated, 3), (Mode::Seed, 2)] {
        let s = Scenario {
            max_learners: 20,
            ..learner(mode, 3, 5, 10_000)
        };
        let r = run(&s).unwrap();
        clean(&r);
        assert_eq!(r.rebalances, expected, "{mode:?}");
        assert_eq!(r.downtime.max_ms, 1_000, "{mode:?}");
        let barriers = (expected as u64 - 1) * 1_000;
        assert_eq!(
            r.balanced_after_ms,
            Some(1_000 + 10_000 + barriers),
            "{mode:?}"
        );
    }
}

/// Tasks whose first owner after the change differs from their owner before it.
fn moved_tasks(r: &Report) -> Vec<u32> {
    let change = r.recorder.change;
    r.recorder
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, timeline)| {
            let before = timeline
                .iter()
                .take_while(|(at, _)| *at < change)
                .last()
                .and_then(|(_, v)| v.owner);
            let last = timeline.last().and_then(|(_, v)| v.owner);
            before != last
        })
        .map(|(t, _)| t as u32)
        .collect()
}

/// A cold start (issue 26): 3 members join an empty group 200 ms apart, 12 tasks. With a
/// warm-up, the learner assignor's first owner is cold for every task, so the tasks move
/// without learners and the group settles within one barrier of uniform's; without one (the
/// default), every move waits for a learner, two at a time.
#[test]
fn a_cold_start_settles_about_as_fast_as_uniform_once_owners_are_cold() {
    let cold = |strategy, warmup_ms| Scenario {
        tasks: 12,
        before: 0,
        after: 3,
        interval_ms: 200,
        restore_ms: 3_000,
        barrier_ms: 100,
        warmup_ms,
        strategy,
        ..Scenario::default()
    };
    let balanced = |s: &Scenario| {
        let r = run(s).unwrap();
        clean(&r);
        r.balanced_after_ms.unwrap()
    };
    let uniform = balanced(&cold(Strategy::Uniform, 0));
    for mode in [Mode::Seed, Mode::ReadyGated] {
        let learner = balanced(&cold(Strategy::Learner(mode), 3_000));
        assert!(
            learner <= uniform + 100,
            "{mode:?}: learner {learner} ms, uniform {uniform} ms"
        );
        let before = balanced(&cold(Strategy::Learner(mode), 0));
        assert!(
            before > learner + 3_000,
            "{mode:?}: {before} ms without cold owners"
        );
    }
    assert!(cold(Strategy::Range, 0)
        .describe()
        .starts_with("cold start 0 -> 3"));
    let empty = Scenario {
        before: 0,
        after: 0,
        ..Scenario::default()
    };
    assert!(run(&empty).is_err(), "a cold start needs joiners");
}
