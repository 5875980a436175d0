use super::*;

fn scenario(strategy: Strategy, restore_ms: u64) -> Scenario {
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

#[test]
fn smoke() {
    for s in [Strategy::Range, Strategy::Uniform] {
        let r = run(&scenario(s, 5_000)).unwrap();
        eprintln!("{}", table(&[r]));
    }
}
