#!/usr/bin/env bash
# Rebalance downtime figures for BENCHMARKS.md (issue 6): `koord simulate` over scale-out 3 -> 5
# and scale-in 5 -> 3 with 60 tasks, restore times 1 s, 10 s and 60 s, for range (eager
# clients), uniform (cooperative clients) and learner in both modes (learner-capable clients),
# the cold starts of issue 26 (members joining an empty group one after another; the learner
# without and with learner.warmup.ms), plus the SVG timelines under docs/. Deterministic: same
# build, same output.
# Usage: bench/simulate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin koord
koord=${CARGO_TARGET_DIR:-target}/release/koord
common=(--tasks 60 --barrier-ms 2000 --restore-ms 1000,10000,60000)
$koord simulate --before 3 --after 5 "${common[@]}"
echo
$koord simulate --before 5 --after 3 "${common[@]}"
echo
# The learner budget: every move learned at once.
$koord simulate --before 3 --after 5 --tasks 60 --barrier-ms 2000 --restore-ms 60000 \
    --assignor learner --max-learners 24
echo
# Cold start (issue 26): members join an empty group one after another. Time until balanced
# and rebalances for every assignor (learner at the default learner.warmup.ms=0), then the
# learner with a warm-up equal to the restore time (its first owners are cold: step 3a).
small=(--before 0 --after 3 --interval-ms 200 --tasks 12 --barrier-ms 100 --restore-ms 3000)
$koord simulate "${small[@]}"
$koord simulate "${small[@]}" --assignor learner --warmup-ms 3000
echo
large=(--before 0 --after 5 --interval-ms 1000 --tasks 60 --barrier-ms 500 --restore-ms 10000)
$koord simulate "${large[@]}"
$koord simulate "${large[@]}" --assignor learner --warmup-ms 10000
mkdir -p docs
svg=(simulate --before 3 --after 5 --tasks 60 --barrier-ms 2000 --restore-ms 10000)
$koord "${svg[@]}" --assignor uniform --svg docs/simulate-uniform.svg >/dev/null
$koord "${svg[@]}" --assignor learner --mode ready-gated --svg docs/simulate-learner-ready-gated.svg >/dev/null
$koord "${svg[@]}" --assignor learner --mode seed --svg docs/simulate-learner-seed.svg >/dev/null
