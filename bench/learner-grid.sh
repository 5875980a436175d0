#!/usr/bin/env bash
# The learner assignor beside uniform on the assignor grid (benches/assignors.rs), for
# BENCHMARKS.md: each cell's uniform and learner benchmarks run back to back (one criterion
# filter per cell), the whole grid REPS times (default 3); the table gives each cell's median
# of the runs' criterion estimates and the range of the per-run ratio. Back to back because a
# whole-grid run measures a cell's uniform and learner minutes apart, and a shared VM drifts
# by more than the differences being measured.
#
#   bench/learner-grid.sh            every cell, 3 runs (~15 min on 2 cores)
#   REPS=1 bench/learner-grid.sh     one run (a quick look; not for BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-3}
cargo bench --bench assignors --no-run 2>&1 | tail -1
bin=$(cargo bench --bench assignors --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "assignors" and m.get("executable"):
        print(m["executable"])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cells=()
for s in homogeneous heterogeneous; do
    for kind in full incremental; do
        for t in 10t 1000t; do
            counts="100 1000 10000"
            [ "$s/$kind/$t" = homogeneous/full/1000t ] && counts="100 1000 5000 10000"
            for c in $counts; do cells+=("$s/$kind/$t/$c"); done
        done
    done
done
for r in $(seq "$reps"); do
    for c in "${cells[@]}"; do
        # "name  time: [low estimate high]": the estimate, in microseconds.
        "$bin" --bench "^(uniform|learner)/$c\$" 2>/dev/null |
            grep -E '^(uniform|learner)/|time:' | paste - - |
            awk '{v = $5; if ($6 == "ms") v *= 1000; if ($6 == "ns") v /= 1000; print $1, v}' \
                >>"$out/run$r"
    done
    echo "run $r of $reps done" >&2
done
python3 - "$out"/run* <<'EOF'
import statistics, sys
runs = [dict(line.split() for line in open(f)) for f in sys.argv[1:]]
print("| subscriptions | type | topics | members | uniform (ms) | learner (ms) | learner / uniform (range) |")
print("|---|---|---|---|---|---|---|")
for key in [k for k in runs[0] if k.startswith("uniform/")]:
    cell = key.split("/", 1)[1]
    u = [float(r["uniform/" + cell]) for r in runs]
    l = [float(r["learner/" + cell]) for r in runs]
    ratios = [b / a for a, b in zip(u, l)]
    s, kind, topics, members = cell.split("/")
    um, lm = statistics.median(u), statistics.median(l)
    print(f"| {s} | {kind.upper()} | {topics[:-1]} | {members} | {um / 1000:.3f} | {lm / 1000:.3f} "
          f"| {lm / um:.1f}x ({min(ratios):.1f}-{max(ratios):.1f}) |")
EOF
