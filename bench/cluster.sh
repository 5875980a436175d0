#!/usr/bin/env bash
# koord's cluster mode (issue 23): how long a killed node's groups go unserved, beside Apache
# Kafka 4.4 losing a group coordinator broker, and how 1, 2 and 3 nodes split the coordinator
# work. Starts a 3-broker Kafka 4.4 (KAFKA_BROKERS=3 scripts/kafka.sh, its own directory
# .build/bench-cluster/kafka) and three release koord nodes in front of it (one cluster.name,
# fresh per invocation, node.id 1001-1003, each with its http.listen for /metrics), then:
#
#   failover  RUNS times, in turn: koord, then Kafka. FAILOVER_GROUPS groups each get a committed
#             offset (OffsetCommit v2 at the group's coordinator); one probe per group sends an
#             OffsetFetch to the group's coordinator every 50 ms (1 s request timeout; on a
#             refused connection, a timeout or NOT_COORDINATOR it asks FindCoordinator again, on
#             the bootstrap addresses in turn: the three koord nodes, or the three brokers). The
#             kill -9 of one process; the failover time of the run is, over the groups that
#             process coordinated before the kill (FindCoordinator), the longest time from the
#             kill to the first OffsetFetch sent after it that returned the committed offset.
#             koord: the victim is node 1, 2, 3, 1, ... in turn; it is started again (same port,
#             same data dir) and the next run waits until the three nodes applied one
#             generation that covers all 50 shards, each node some (their logs' "cluster
#             assignment applied" lines). Kafka: the victim is the broker that coordinates most
#             of the probed groups (the groups live on Kafka itself, in __consumer_offsets, 3
#             partitions, 3 replicas); scripts/kafka.sh restart N starts it again and the next
#             run waits until every __consumer_offsets partition has its 3 in-sync replicas.
#   split     bench/cluster-failover.py load with 3, then 2, then 1 node (a node stopped with
#             SIGTERM between levels, the next level once the remaining nodes applied one
#             generation of all 50 shards): LOAD_GROUPS classic groups of LOAD_MEMBERS members
#             (JoinGroup, SyncGroup, then a Heartbeat every HEARTBEAT_MS), each member on a
#             connection of its own to the node FindCoordinator named; once every group is
#             Stable, LOAD_SECONDS measured: per node its Stable groups (/metrics,
#             koord_classic_group_count), the Heartbeats it answered with no error (counted by
#             the clients per coordinator; koord_requests_total when /metrics has it) and its
#             CPU seconds (/proc/PID/stat utime+stime). koord-load is not used: it sends every
#             request to its one --bootstrap address and never follows FindCoordinator, so with
#             several nodes the other nodes' groups would get NOT_COORDINATOR.
#
#   bench/cluster.sh                                 10 runs of each failover, then the split
#   RUNS=2 FAILOVER_GROUPS=20 LOAD_GROUPS=60 LOAD_SECONDS=5 bench/cluster.sh   a quick look
#
# The clients are bench/cluster-failover.py (raw Kafka protocol over asyncio) under
# proto-tests/.venv/bin/python. Logs and JSON results stay in .build/bench-cluster/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/bench-cluster"
kdir="$out/kafka"
runs="${RUNS:-10}"
fgroups="${FAILOVER_GROUPS:-50}"
load_groups="${LOAD_GROUPS:-300}"
load_members="${LOAD_MEMBERS:-5}"
heartbeat_ms="${HEARTBEAT_MS:-500}"
load_seconds="${LOAD_SECONDS:-20}"
shards=50  # __koord_groups partitions (koord's default)
target="${CARGO_TARGET_DIR:-$root/target}"
koord_bin="$target/release/koord"
py="$root/proto-tests/.venv/bin/python"
helper="$root/bench/cluster-failover.py"
[ -x "$koord_bin" ] || cargo build --release --quiet --manifest-path "$root/Cargo.toml"
[ -x "$py" ] || { echo "cluster.sh: proto-tests/.venv is missing (scripts/test.sh makes it)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.json "$out"/node*.log

# The broker jars: shared with .build/kafka when it has them (else kafka.sh fetches them).
mkdir -p "$kdir"
if [ ! -e "$kdir/libs" ] && [ -d "$root/.build/kafka/libs" ]; then
  ln -s "$root/.build/kafka/libs" "$kdir/libs"
fi

declare -a pid=("" "" "" "")
cleanup() {
  local i
  for i in 1 2 3; do
    if [ -n "${pid[$i]}" ]; then
      kill "${pid[$i]}" 2>/dev/null || true
      wait "${pid[$i]}" 2>/dev/null || true
    fi
  done
  KAFKA_DIR="$kdir" "$root/scripts/kafka.sh" stop || true
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

echo "cluster.sh: starting a 3-broker Kafka 4.4 and three koord nodes in front of it" >&2
upstream="$(KAFKA_DIR="$kdir" KAFKA_BROKERS=3 "$root/scripts/kafka.sh" start)"
name="bench-$(python3 -c 'import uuid; print(uuid.uuid4().hex[:8])')"
declare -a port=("" "" "" "") http=("" "" "" "") since=(0 0 0 0)
for i in 1 2 3; do
  port[i]="$(free_port)"; http[i]="$(free_port)"
  rm -rf "$out/node$i-data"
done
addr() { echo "127.0.0.1:${port[$1]}"; }
koord_bootstrap="$(addr 1),$(addr 2),$(addr 3)"

start_node() {  # I: node I on its port and data dir; its log appended to
  local i="$1" log="$out/node$1.log"
  touch "$log"
  since[i]="$(wc -l < "$log")"
  "$koord_bin" --listen "$(addr "$i")" --data-dir "$out/node$i-data" \
    --set "upstream.bootstrap.servers=$upstream" --set "cluster.name=$name" \
    --set "node.id=100$i" --set "http.listen=127.0.0.1:${http[$i]}" \
    --set group.initial.rebalance.delay.ms=0 >> "$log" 2>&1 &
  pid[i]=$!
}

# converged N: nodes 1..N each applied the same generation since they started, every node some
# shards, together all of them.
converged() {
  local n="$1" i line gen shards want="" total=0
  for i in $(seq 1 "$n"); do
    line="$(tail -n +"$((since[i] + 1))" "$out/node$i.log" | grep "cluster assignment applied" | tail -n 1)" || return 1
    gen="$(sed -n 's/.*generation=\([0-9]*\).*/\1/p' <<< "$line")"
    shards="$(sed -n 's/.* shards=\([0-9]*\).*/\1/p' <<< "$line")"
    [ -n "$gen" ] && [ "${shards:-0}" -gt 0 ] || return 1
    [ -z "$want" ] || [ "$gen" = "$want" ] || return 1
    want="$gen"; total=$((total + shards))
  done
  [ "$total" -eq "$shards_total" ]
}
shards_total="$shards"

wait_converged() {  # N
  local n="$1" deadline=$((SECONDS + 120)) i
  until converged "$n"; do
    for i in $(seq 1 "$n"); do
      kill -0 "${pid[$i]}" 2>/dev/null || { tail -n 20 "$out/node$i.log" >&2; echo "cluster.sh: node $i exited" >&2; exit 1; }
    done
    if [ "$SECONDS" -gt "$deadline" ]; then
      echo "cluster.sh: nodes 1-$n did not agree on one generation of $shards shards within 120 s" >&2
      for i in $(seq 1 "$n"); do grep "cluster assignment applied" "$out/node$i.log" | tail -n 2 >&2; done
      exit 1
    fi
    sleep 0.2
  done
}

for i in 1 2 3; do start_node "$i"; done
wait_converged 3

# Kafka's brokers: addresses in node order (the bootstrap file lists node 1, 2, 3).
IFS=, read -r -a broker <<< "$upstream"
kafka_pids() {
  local i out_=""
  for i in 1 2 3; do
    out_="${out_:+$out_,}${broker[$((i-1))]}=$(sed -n "${i}p" "$kdir/kafka.pid")"
  done
  echo "$out_"
}

for r in $(seq 1 "$runs"); do
  v=$(( (r - 1) % 3 + 1 ))
  echo "cluster.sh: run $r of $runs, koord: kill -9 node $v" >&2
  wait_converged 3
  "$py" "$helper" failover --bootstrap "$koord_bootstrap" --upstream "$upstream" \
    --pids "$(addr 1)=${pid[1]},$(addr 2)=${pid[2]},$(addr 3)=${pid[3]}" --victim "$(addr "$v")" \
    --prefix "$name-koord" --groups "$fgroups" > "$out/koord-$r.json"
  { wait "${pid[$v]}"; } 2>/dev/null || true
  start_node "$v"
  wait_converged 3

  echo "cluster.sh: run $r of $runs, Kafka: kill -9 the busiest group coordinator" >&2
  "$py" "$helper" failover --bootstrap "$upstream" --upstream "$upstream" --pids "$(kafka_pids)" \
    --victim most --prefix "$name-kafka" --groups "$fgroups" > "$out/kafka-$r.json"
  victim="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["victim"])' "$out/kafka-$r.json")"
  for i in 1 2 3; do
    if [ "${broker[$((i-1))]}" = "$victim" ]; then
      KAFKA_DIR="$kdir" KAFKA_BROKERS=3 "$root/scripts/kafka.sh" restart "$i"
    fi
  done
  "$py" "$helper" wait-isr --bootstrap "$upstream"
done

for n in 3 2 1; do
  if [ "$n" -lt 3 ]; then
    j=$((n + 1))
    echo "cluster.sh: stopping node $j" >&2
    kill "${pid[$j]}"; wait "${pid[$j]}" 2>/dev/null || true; pid[j]=""
  fi
  wait_converged "$n"
  nodes="" boot=""
  for i in $(seq 1 "$n"); do
    nodes="${nodes:+$nodes,}$(addr "$i")=${pid[$i]}=127.0.0.1:${http[$i]}"
    boot="${boot:+$boot,}$(addr "$i")"
  done
  echo "cluster.sh: split with $n node(s): $load_groups groups x $load_members members, heartbeat every $heartbeat_ms ms, $load_seconds s" >&2
  "$py" "$helper" load --bootstrap "$boot" --nodes "$nodes" --upstream "$upstream" \
    --prefix "$name-load$n" --groups "$load_groups" --members "$load_members" \
    --heartbeat-ms "$heartbeat_ms" --duration "$load_seconds" > "$out/split-$n.json"
done

grep -h "WARN\|ERROR" "$out"/node?.log | sed 's/^[^ ]* *//' | sed 's/[0-9][0-9]*/N/g' | sort | uniq -c \
  | sort -rn | head -n 10 > "$out/warnings.txt" || true

"$py" - "$out" "$runs" "$fgroups" <<'PY'
import json, statistics, sys
out, runs, groups = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]

print(f"failover: {runs} runs, {groups} groups probed every 50 ms (OffsetFetch at the coordinator)")
print(f"{'':<8} {'p50 s':>7} {'max s':>7} {'min s':>7}  {'victim groups':>13}  {'others max gap s':>16}  runs (s)")
for who in ("koord", "kafka"):
    rs = [json.load(open(f"{out}/{who}-{i}.json")) for i in range(1, runs + 1)]
    f = [r["failover_s"] for r in rs]
    vg = [r["victim_groups"] for r in rs]
    gap = max(r["others_max_gap_s"] for r in rs)
    print(f"{who:<8} {statistics.median(f):>7.2f} {max(f):>7.2f} {min(f):>7.2f}  "
          f"{min(vg):>5}-{max(vg):<7}  {gap:>16.2f}  " + " ".join(f"{x:.2f}" for x in f))
    for i, r in enumerate(rs, 1):
        if r["missing"]:
            print(f"  ! {who} run {i}: {len(r['missing'])} groups never answered again")
    errs = {}
    for r in rs:
        for k, v in r["errors"].items():
            errs[k] = errs.get(k, 0) + v
    print(f"  probe failures after the kills, all runs: {errs}")

print()
print("split of the coordinator work (Stable groups from /metrics; heartbeats answered, counted by the clients)")
for n in (1, 2, 3):
    r = json.load(open(f"{out}/split-{n}.json"))
    w = r["window_s"]
    nodes = r["nodes"]
    hb = [x["heartbeats_client"] for x in nodes]
    gr = [x["groups_metric"] for x in nodes]
    spread = lambda v: 100 * (max(v) - min(v)) / (sum(v) / len(v)) if sum(v) else 0.0
    print(f"{n} node(s): {r['groups']} groups x {r['members']} members, {w:.1f} s, "
          f"client CPU {r['client_cpu_s']:.1f} s, failures {r['failures'] or 0}; "
          f"spread (max-min)/mean: groups {spread(gr):.0f}%, heartbeats {spread(hb):.0f}%")
    for x in nodes:
        extra = f", /metrics Heartbeat {x['heartbeats_metric']:.0f}" if x["heartbeats_metric"] else ""
        print(f"  {x['addr']:<18} groups {x['groups_metric']:>4.0f} (clients {x['groups_client']:>4})  "
              f"heartbeats {x['heartbeats_client']:>7,} ({x['heartbeats_client'] / w:,.0f}/s{extra})  "
              f"CPU {x['cpu_s']:.2f} s")
print()
print("koord WARN/ERROR lines (digits as N), most frequent:")
print(open(f"{out}/warnings.txt").read() or "  none")
PY
