#!/usr/bin/env bash
# Durable-store figures for BENCHMARKS.md: OffsetCommit throughput and latency with
# offsets.commit.sync=always, store size after 1M commits over 10k keys, start-up with 1M
# stored offsets. Usage: bench/durability.sh [SECONDS per throughput run, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
cargo build --release -q --bin koord --example commitbench
koord=target/release/koord
bench=target/release/examples/commitbench
work=$(mktemp -d "${TMPDIR:-/var/tmp}/koord-bench.XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=$((20000 + RANDOM % 10000))

start() { # start DATA_DIR: launch koord and wait until it has loaded its groups
    : >"$work/log"
    local t0=$(date +%s%N)
    $koord --listen 127.0.0.1:$port --data-dir "$1" --set topics=bench:100 \
        --set offsets.commit.sync=always 2>"$work/log" &
    pid=$!
    until grep -q "groups loaded" "$work/log"; do
        kill -0 "$pid" || { cat "$work/log"; exit 1; }
        sleep 0.01
    done
    started_ms=$((($(date +%s%N) - t0) / 1000000))
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }

echo "== throughput (sync always, ${secs}s each)"
start "$work/tp"
for partitions in 1 100; do
    for committers in 1 10 100; do
        $bench 127.0.0.1:$port throughput $committers $partitions "$secs"
    done
done
stop

echo "== store size after 1M commits over 10k keys (100 groups x 100 partitions x 100 rounds)"
start "$work/size"
$bench 127.0.0.1:$port fill 100 100 100
stop
echo "store: $(du -k "$work/size/koord.redb" | cut -f1) KiB"

echo "== start-up with 1M stored offsets (10,000 groups x 100 partitions)"
start "$work/startup"
$bench 127.0.0.1:$port fill 10000 100 1
stop
echo "store: $(du -k "$work/startup/koord.redb" | cut -f1) KiB"
start "$work/startup"
echo "start-up: ${started_ms} ms from launch to 'groups loaded'; $(grep -o 'groups loaded.*' "$work/log")"
stop
