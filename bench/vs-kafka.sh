#!/usr/bin/env bash
# koord against Apache Kafka 4.4, same machine, same load, same run: starts a single-node KRaft
# Kafka (scripts/kafka.sh: fetched from Maven Central, group.initial.rebalance.delay.ms=0,
# offsets topic replication factor 1, default heap) and koord (release build, embedded store
# syncing every commit batch), runs each scenario of koord-load against each server in turn and
# prints one table with both figures and their ratio.
#
#   bench/vs-kafka.sh                 every scenario at full size
#   bench/vs-kafka.sh join heartbeat  some of them (join, heartbeat, commit, footprint,
#                                     cg-join, cg-heartbeat, cg-footprint, txn, txn-1ms)
#   bench/vs-kafka.sh cg              the three consumer-protocol (KIP-848) scenarios
#   SCALE=0.1 bench/vs-kafka.sh       every count scaled (a quick look; not for BENCHMARKS.md)
#   RUNS=1 bench/vs-kafka.sh          one run per server instead of three
#
# Each scenario runs RUNS times (3 by default), interleaved: in run i, fresh servers, then koord,
# Kafka and, for heartbeat, the floor (koord-floor, load/src/floor.rs: a server that only frames
# requests and answers each Heartbeat with a fixed response) under the same load. The table shows
# each figure's median with the spread (min-max) over the runs, Kafka/koord, and for heartbeat
# koord/floor: how far koord is from what a heartbeat must cost.
#
# Scenarios (koord-load parameters identical for both servers):
#   join       1,000 groups x 10 members, cold, to Stable
#   heartbeat  10,000 members heartbeating back to back for 30 s: server CPU per 1,000 heartbeats
#   commit     1,000 members committing 10 partitions each, back to back, for 30 s
#   footprint  100,000 idle members heartbeating every 3 s: server RSS per member
#   txn        10 transactional producers (koord-load --txn-producers, load/src/txn.rs), one
#              partition each, committing transactions of 100 records (one batch of 100-byte
#              values) back to back for 30 s: transactions/s, records/s, EndTxn p50/p99.
#              koord's store syncs every transaction state change (its default); Kafka's
#              __transaction_state and partitions are on its defaults (acks=-1, one replica).
#              A retried request (CONCURRENT_TRANSACTIONS: Kafka refuses the next
#              AddPartitionsToTxn until the previous transaction's markers are written) waits
#              20 ms, as Kafka's Java producer does
#   txn-1ms    the same with a 1 ms retry backoff: Kafka's throughput when clients retry sooner
# Consumer protocol (KIP-848, koord-load --protocol consumer: ConsumerGroupHeartbeat, server-side
# uniform assignment of a 100-partition topic; both servers with a 1 s heartbeat interval, a 45 s
# session timeout and group.consumer.max.size=100; Kafka computes target assignments on its
# defaults, i.e. asynchronously, group.consumer.assignment.interval.ms and
# group.consumer.assignor.offload.enable left unset):
#   cg-join       1,000 groups x 10 members, one connection each, cold, until every group is
#                 reconciled (members agree and ConsumerGroupDescribe says Stable)
#   cg-heartbeat  10,000 members heartbeating back to back for 30 s: server CPU per 1,000
#                 heartbeats, heartbeats per server CPU-second
#   cg-footprint  20,000 members heartbeating every 3 s: server RSS per member
# Results (one JSON per scenario and server) stay in .build/vs-kafka/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/vs-kafka"
mkdir -p "$out"
scale="${SCALE:-1}"
runs="${RUNS:-3}"
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(join heartbeat commit footprint cg-join cg-heartbeat cg-footprint txn txn-1ms)
if [ "${scenarios[*]}" = cg ]; then scenarios=(cg-join cg-heartbeat cg-footprint); fi

n() { python3 -c "import sys; print(max(1, round($1 * $scale)))"; }

cargo build --release --quiet --workspace --manifest-path "$root/Cargo.toml"
target="${CARGO_TARGET_DIR:-$root/target}"
load="$target/release/koord-load"

koord_pid=""
floor_pid=""
stop_servers() {
  [ -n "$koord_pid" ] && { kill "$koord_pid" 2>/dev/null; wait "$koord_pid" 2>/dev/null; } || true
  [ -n "$floor_pid" ] && { kill "$floor_pid" 2>/dev/null; wait "$floor_pid" 2>/dev/null; } || true
  koord_pid=""
  floor_pid=""
  "$root/scripts/kafka.sh" stop || true
}
trap stop_servers EXIT

# Each scenario gets fresh servers, so that memory and CPU figures are the scenario's own (a JVM
# heap grown by an earlier scenario would hide the next one's growth).
# start_servers [cg]: with cg, the consumer-protocol settings (see the top) on both.
start_servers() {
  local kafka_config="" koord_config=()
  if [ "${1:-}" = cg ]; then
    kafka_config="group.consumer.max.size=100 group.consumer.session.timeout.ms=45000
      group.consumer.heartbeat.interval.ms=1000 group.consumer.assignment.interval.ms=
      group.consumer.assignor.offload.enable="
    koord_config=(--set group.consumer.max.size=100 --set group.consumer.session.timeout.ms=45000
      --set group.consumer.heartbeat.interval.ms=1000
      --set group.consumer.min.heartbeat.interval.ms=500)
  fi
  echo "vs-kafka: starting Apache Kafka 4.4 (default heap) and koord" >&2
  kafka="$(KAFKA_HEAP_OPTS="" KAFKA_CONFIG="$kafka_config" "$root/scripts/kafka.sh" start)"
  kafka_pid="$(cat "$root/.build/kafka/kafka.pid")"
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  rm -rf "$out/koord-data"
  "$target/release/koord" --listen "127.0.0.1:$port" --data-dir "$out/koord-data" \
    --set group.initial.rebalance.delay.ms=0 --set group.min.session.timeout.ms=1000 \
    --set max.connections=100000 "${koord_config[@]}" > "$out/koord.log" 2>&1 &
  koord_pid=$!
  until grep -q "groups loaded" "$out/koord.log" 2>/dev/null; do
    kill -0 "$koord_pid" || { cat "$out/koord.log" >&2; exit 1; }
    sleep 0.05
  done
  koord="127.0.0.1:$port"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$target/release/koord-floor" --listen "127.0.0.1:$port" --members 10 \
    > "$out/floor.log" 2>&1 &
  floor_pid=$!
  until grep -q "listening" "$out/floor.log" 2>/dev/null; do
    kill -0 "$floor_pid" || { cat "$out/floor.log" >&2; exit 1; }
    sleep 0.05
  done
  floor="127.0.0.1:$port"
}

# run NAME SERVER RUN ADDR PID ARGS...: one koord-load run, its JSON in
# $out/NAME-SERVER-RUN.json.
run() {
  local name="$1" server="$2" i="$3" addr="$4" pid="$5"
  shift 5
  echo "vs-kafka: $name against $server (run $i of $runs)" >&2
  "$load" --bootstrap "$addr" --server-pid "$pid" --json "$out/$name-$server-$i.json" "$@" \
    > "$out/$name-$server-$i.txt" 2>&1 || { cat "$out/$name-$server-$i.txt" >&2; return 1; }
}

for s in "${scenarios[@]}"; do
  case "$s" in
    join)
      args=(--groups "$(n 1000)" --members 10 --heartbeat-ms 3000 --duration 1) ;;
    heartbeat)
      args=(--groups "$(n 1000)" --members 10 --heartbeat-ms 0 --duration 30 --connections 64) ;;
    commit)
      # One connection per member, as real consumers have: a commit waits for its write, and
      # members sharing a connection would wait for each other's.
      args=(--groups "$(n 100)" --members 10 --commit-ms 0 --commit-partitions 10
            --partitions 100 --topic vs-kafka-commits --duration 30 --connections "$(n 1000)") ;;
    footprint)
      args=(--groups "$(n 10000)" --members 10 --heartbeat-ms 3000 --duration 30
            --connections 256 --join-connections 8000 --join-timeout 600) ;;
    cg-join)
      args=(--protocol consumer --groups "$(n 1000)" --members 10 --partitions 100
            --topic vs-kafka-cg --duration 1 --connections "$(n 10000)" --join-timeout 300) ;;
    cg-heartbeat)
      args=(--protocol consumer --groups "$(n 1000)" --members 10 --partitions 100
            --topic vs-kafka-cg --heartbeat-ms 0 --duration 30 --connections 64
            --join-timeout 300) ;;
    cg-footprint)
      args=(--protocol consumer --groups "$(n 2000)" --members 10 --partitions 100
            --topic vs-kafka-cg --heartbeat-ms 3000 --duration 30 --connections 256
            --join-timeout 600) ;;
    txn)
      args=(--txn-producers 10 --txn-records 100 --txn-record-bytes 100 --topic vs-kafka-txn
            --duration 30) ;;
    txn-1ms)
      args=(--txn-producers 10 --txn-records 100 --txn-record-bytes 100 --topic vs-kafka-txn
            --duration 30 --txn-retry-backoff-ms 1) ;;
    *) echo "unknown scenario $s (join, heartbeat, commit, footprint, cg-join, cg-heartbeat," \
         "cg-footprint, txn, txn-1ms)" >&2; exit 2 ;;
  esac
  for i in $(seq 1 "$runs"); do
    case "$s" in cg-*) start_servers cg ;; *) start_servers ;; esac
    run "$s" koord "$i" "$koord" "$koord_pid" "${args[@]}"
    run "$s" kafka "$i" "$kafka" "$kafka_pid" "${args[@]}"
    [ "$s" = heartbeat ] && run "$s" floor "$i" "$floor" "$floor_pid" "${args[@]}"
    stop_servers
  done
done

python3 - "$out" "$runs" "${scenarios[@]}" <<'PY'
import json, os, statistics, sys
out, runs, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name, server):
    """Every run's report of `server` in scenario `name` (none for a server not run)."""
    reports = []
    for i in range(1, runs + 1):
        path = f"{out}/{name}-{server}-{i}.json"
        if os.path.exists(path):
            with open(path) as f:
                reports.append(json.load(f))
    return reports
def cpu_per_k(r):
    return 1000 * r["server_cpu_s"] / (r["heartbeats"] / 1000) if r.get("heartbeats") else None
def per_member(r):
    return (r["server_rss"] - r["server_rss_before"]) / r["members"]
# (figure, how to read it, better when lower?)
rows = {
    "join": [("time to all Stable (s)", lambda r: r["stable_after_s"], True),
             ("JoinGroup p99 (ms)", lambda r: r.get("JoinGroup_p99_ms"), True)],
    "heartbeat": [("heartbeats/s", lambda r: r["heartbeats"] / r["window_s"], False),
                  ("server CPU ms per 1000 heartbeats", cpu_per_k, True),
                  ("Heartbeat p99 (ms)", lambda r: r.get("Heartbeat_p99_ms"), True)],
    "commit": [("partition offsets committed/s", lambda r: r["offsets"] / r["window_s"], False),
               ("OffsetCommit p50 (ms)", lambda r: r.get("OffsetCommit_p50_ms"), True),
               ("OffsetCommit p99 (ms)", lambda r: r.get("OffsetCommit_p99_ms"), True)],
    "cg-join": [("time to all reconciled (s)", lambda r: r["stable_after_s"], True),
                ("ConsumerGroupHeartbeat p99 (ms)",
                 lambda r: r.get("ConsumerGroupHeartbeat_p99_ms"), True)],
    "cg-heartbeat": [("heartbeats/s", lambda r: r["heartbeats"] / r["window_s"], False),
                     ("server CPU ms per 1000 heartbeats", cpu_per_k, True),
                     ("heartbeats per server CPU-second",
                      lambda r: r["heartbeats"] / r["server_cpu_s"] if r.get("server_cpu_s") else None,
                      False),
                     ("ConsumerGroupHeartbeat p99 (ms)",
                      lambda r: r.get("ConsumerGroupHeartbeat_p99_ms"), True)],
    "cg-footprint": [("server RSS per member (B)", per_member, True),
                     ("server peak RSS (MiB)", lambda r: r["server_peak_rss"] / 2**20, True),
                     ("time to all reconciled (s)", lambda r: r["stable_after_s"], True)],
    "txn": [("transactions/s", lambda r: r["transactions"] / r["window_s"], False),
            ("records/s", lambda r: r["transactions"] * r["records_per_txn"] / r["window_s"],
             False),
            ("EndTxn p50 (ms)", lambda r: r["EndTxn_p50_ms"], True),
            ("EndTxn p99 (ms)", lambda r: r["EndTxn_p99_ms"], True),
            ("transaction p99 (ms)", lambda r: r["txn_p99_ms"], True),
            ("retries per transaction", lambda r: r["retries"] / r["transactions"], True),
            ("server CPU ms per transaction",
             lambda r: 1000 * r["server_cpu_s"] / r["transactions"], True)],
    "footprint": [("server RSS per member (B)", per_member, True),
                  ("server peak RSS (MiB)", lambda r: r["server_peak_rss"] / 2**20, True),
                  ("time to all Stable (s)", lambda r: r["stable_after_s"], True)],
}
rows["txn-1ms"] = rows["txn"]
def safely(f, r):
    """A figure of one run; None for a run that never reached its window (a failed join)."""
    try:
        return f(r)
    except (ZeroDivisionError, KeyError, TypeError):
        return None
def figure(reports, f):
    """(median, min, max) of a figure over the runs that have it, or None."""
    values = [v for v in (safely(f, r) for r in reports) if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)
def fmt(v):
    return "n/a" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}")
def cell(fig):
    if fig is None:
        return "n/a"
    med, lo, hi = fig
    return f"{fmt(med)} ({fmt(lo)}-{fmt(hi)})" if runs > 1 else fmt(med)
def ratio(a, b, lower):
    """How many times better a is than b (by their medians)."""
    if a is None or b is None or not a[0] or not b[0]:
        return "n/a"
    return f"{(b[0] / a[0] if lower else a[0] / b[0]):.1f}x"
print(f"medians of {runs} interleaved runs (min-max)")
print(f"{'scenario':<12} {'figure':<36} {'koord':>28} {'kafka':>28} {'kafka/koord':>11}"
      f" {'floor':>28} {'koord/floor':>11}")
for s in scenarios:
    k, a, fl = load(s, "koord"), load(s, "kafka"), load(s, "floor")
    for label, f, lower in rows[s]:
        kv, av, fv = figure(k, f), figure(a, f), figure(fl, f)
        # koord/floor: how many times the floor's cost koord's is (lower is better).
        over_floor = ratio(fv, kv, lower) if fv else ""
        print(f"{s:<12} {label:<36} {cell(kv):>28} {cell(av):>28} {ratio(kv, av, lower):>11}"
              f" {cell(fv) if fv else '':>28} {over_floor:>11}")
    for reports, server in ((k, "koord"), (a, "kafka"), (fl, "floor")):
        for r in reports:
            if "groups" not in r:
                if r["failures"]:
                    print(f"{'':<12} ! {server}: {r['failures']} producers failed")
            elif r["failures"] or r["groups_stable"] < r["groups"]:
                print(f"{'':<12} ! {server}: {r['failures']} failed requests, "
                      f"{r['groups_stable']}/{r['groups']} groups Stable/reconciled")
PY
