#!/usr/bin/env bash
# koord's gateway mode against the same clients straight to the upstream, in one run (issue 22's
# benchmark: at least 90% of the direct throughput, at most 1 ms added at p99). Starts a 3-broker
# Kafka 4.4 (KAFKA_BROKERS=3 scripts/kafka.sh, its own directory .build/bench-gateway/kafka) and a
# release koord in front of it (upstream.bootstrap.servers), then runs each client once straight
# to the upstream and once through koord, in turn, RUNS times:
#
#   produce   Kafka's ProducerPerformance (kafka-producer-perf-test): RECORDS records of 100
#             bytes, no throttle, acks=all, the producer's defaults otherwise (linger.ms 5,
#             idempotent), to a fresh topic of 6 partitions, 3 replicas, min.insync.replicas 2:
#             records/s and the tool's p99 (a saturated producer's p99 is queueing, not the hop)
#   fetch     Kafka's ConsumerPerformance (kafka-consumer-perf-test) reading those records back
#             in a group of one: fetch records/s (its fetch.nMsg.sec: rebalance time excluded)
#   latency   koord.tests.LatencyProbe (proto-tests/java): LATENCY_RECORDS records of 100 bytes
#             to a 1-partition topic (3 replicas), one at a time: the acks=all produce
#             round trip and the end-to-end time until a consumer's poll returns the record,
#             p50 and p99 in microseconds (Kafka's EndToEndLatency reports whole milliseconds)
#
# then koord-load through the gateway (koord's own group APIs, offsets in koord's store; the
# commit topic is created upstream through koord): 1,000 members heartbeating back to back, and
# 100 members committing 10 partitions back to back, LOAD_SECONDS each.
#
#   bench/gateway.sh                      3 interleaved runs, 1,000,000 records
#   RUNS=1 RECORDS=200000 bench/gateway.sh   a quick look (not for BENCHMARKS.md)
#
# The Java tools run from proto-tests/java's classpath (scripts/test.sh builds it: kafka-tools
# 4.4.0 has ProducerPerformance and ConsumerPerformance). Results stay in .build/bench-gateway/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/bench-gateway"
kdir="$out/kafka"
runs="${RUNS:-3}"
records="${RECORDS:-1000000}"
latency_records="${LATENCY_RECORDS:-5000}"
load_seconds="${LOAD_SECONDS:-10}"
target="${CARGO_TARGET_DIR:-$root/target}"
koord_bin="$target/release/koord"
load="$target/release/koord-load"
java_dir="$root/proto-tests/java"
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.json

if [ ! -x "$koord_bin" ] || [ ! -x "$load" ]; then
  cargo build --release --quiet --workspace --manifest-path "$root/Cargo.toml"
fi
[ -f "$java_dir/target/classpath.txt" ] && [ -f "$java_dir/target/classes/koord/tests/LatencyProbe.class" ] \
  || { echo "gateway.sh: build proto-tests/java first (scripts/test.sh does)" >&2; exit 1; }
cp="$java_dir/target/classes:$(cat "$java_dir/target/classpath.txt")"
jrun() { java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$cp" "$@"; }

# The broker jars: shared with .build/kafka when it has them (else kafka.sh fetches them).
mkdir -p "$kdir"
if [ ! -e "$kdir/libs" ] && [ -d "$root/.build/kafka/libs" ]; then
  ln -s "$root/.build/kafka/libs" "$kdir/libs"
fi

koord_pid=""
cleanup() {
  if [ -n "$koord_pid" ]; then kill "$koord_pid" 2>/dev/null || true; wait "$koord_pid" 2>/dev/null || true; fi
  KAFKA_DIR="$kdir" "$root/scripts/kafka.sh" stop || true
}
trap cleanup EXIT

echo "gateway.sh: starting a 3-broker Kafka 4.4 and koord in front of it" >&2
upstream="$(KAFKA_DIR="$kdir" KAFKA_BROKERS=3 "$root/scripts/kafka.sh" start)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
rm -rf "$out/koord-data"
"$koord_bin" --listen "127.0.0.1:$port" --data-dir "$out/koord-data" \
  --set "upstream.bootstrap.servers=$upstream" --set group.initial.rebalance.delay.ms=0 \
  --set http.listen=none > "$out/koord.log" 2>&1 &
koord_pid=$!
until grep -q "groups loaded" "$out/koord.log" 2>/dev/null; do
  kill -0 "$koord_pid" || { cat "$out/koord.log" >&2; exit 1; }
  sleep 0.05
done
gateway="127.0.0.1:$port"

topic() {  # NAME PARTITIONS: created on the upstream directly
  jrun org.apache.kafka.tools.TopicCommand --bootstrap-server "$upstream" --create --topic "$1" \
    --partitions "$2" --replication-factor 3 --config min.insync.replicas=2 > /dev/null
}

# path PATH ADDR RUN: the three clients against ADDR, their output in $out/PATH-RUN-*.txt.
path() {
  local p="$1" addr="$2" i="$3"
  echo "gateway.sh: run $i of $runs, $p" >&2
  topic "bench-$p-$i" 6
  topic "bench-latency-$p-$i" 1
  jrun org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$addr" \
    --topic "bench-$p-$i" --num-records "$records" --record-size 100 --throughput -1 \
    --command-property acks=all > "$out/$p-$i-produce.txt"
  jrun org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$addr" \
    --topic "bench-$p-$i" --num-records "$records" --group "bench-$p-$i" --hide-header \
    --timeout 30000 > "$out/$p-$i-fetch.txt"
  jrun koord.tests.LatencyProbe "$addr" "bench-latency-$p-$i" "$latency_records" 100 500 \
    > "$out/$p-$i-latency.txt"
}

# Not measured: both paths once, so that the brokers' and koord's first records (JIT, page
# cache, connections) fall in no run.
echo "gateway.sh: warm-up" >&2
topic bench-warmup 6
for addr in "$upstream" "$gateway"; do
  jrun org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$addr" --topic bench-warmup \
    --num-records 200000 --record-size 100 --throughput -1 --command-property acks=all > /dev/null
done

for i in $(seq 1 "$runs"); do
  # Alternate which path goes first, so that neither always meets a warmer cluster.
  if [ $((i % 2)) -eq 1 ]; then
    path direct "$upstream" "$i"; path gateway "$gateway" "$i"
  else
    path gateway "$gateway" "$i"; path direct "$upstream" "$i"
  fi
done

echo "gateway.sh: koord-load through the gateway" >&2
"$load" --bootstrap "$gateway" --server-pid "$koord_pid" --json "$out/load-heartbeat.json" \
  --groups 100 --members 10 --heartbeat-ms 0 --duration "$load_seconds" --connections 64 --check \
  > "$out/load-heartbeat.txt" 2>&1 || { cat "$out/load-heartbeat.txt" >&2; exit 1; }
"$load" --bootstrap "$gateway" --server-pid "$koord_pid" --json "$out/load-commit.json" \
  --groups 10 --members 10 --commit-ms 0 --commit-partitions 10 --partitions 100 \
  --topic bench-gateway-commits --duration "$load_seconds" --connections 100 --check \
  > "$out/load-commit.txt" 2>&1 || { cat "$out/load-commit.txt" >&2; exit 1; }

python3 - "$out" "$runs" "$records" "$latency_records" <<'PY'
import json, re, statistics, sys
out, runs, records, latency_records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def produce(path):
    """ProducerPerformance's summary: records/s, p99 ms."""
    text = open(path).read().strip().splitlines()[-1]
    m = re.search(r"records sent, ([\d.]+) records/sec .* (\d+) ms 99th", text)
    return float(m.group(1)), float(m.group(2))

def fetch(path):
    """ConsumerPerformance's CSV line: fetch.nMsg.sec, and the records it read."""
    line = [l for l in open(path).read().splitlines() if l.count(",") >= 9][-1]
    cols = [c.strip() for c in line.split(",")]
    return float(cols[9]), int(cols[4])

def latency(path):
    return json.loads(open(path).read().strip().splitlines()[-1])

rows = []  # (figure, unit, fn(path, run) -> value, higher is better)
figures = {
    "produce records/s": lambda p, i: produce(f"{out}/{p}-{i}-produce.txt")[0],
    "produce p99 under saturation (ms)": lambda p, i: produce(f"{out}/{p}-{i}-produce.txt")[1],
    "fetch records/s": lambda p, i: fetch(f"{out}/{p}-{i}-fetch.txt")[0],
    "acks=all produce p50 (us)": lambda p, i: latency(f"{out}/{p}-{i}-latency.txt")["produce_p50_us"],
    "acks=all produce p99 (us)": lambda p, i: latency(f"{out}/{p}-{i}-latency.txt")["produce_p99_us"],
    "end-to-end p50 (us)": lambda p, i: latency(f"{out}/{p}-{i}-latency.txt")["e2e_p50_us"],
    "end-to-end p99 (us)": lambda p, i: latency(f"{out}/{p}-{i}-latency.txt")["e2e_p99_us"],
}
for p in ("direct", "gateway"):
    for i in range(1, runs + 1):
        got = fetch(f"{out}/{p}-{i}-fetch.txt")[1]
        if got != records:
            print(f"! {p} run {i}: ConsumerPerformance read {got} of {records} records")

def fmt(v):
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"

def cell(values):
    med = statistics.median(values)
    return f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))})" if len(values) > 1 else fmt(med)

print(f"medians of {runs} interleaved runs (min-max); {records:,} records of 100 bytes; "
      f"latency: {latency_records:,} records one at a time")
print(f"{'figure':<36} {'direct':>30} {'through koord':>30} {'koord vs direct':>16}")
for label, fn in figures.items():
    d = [fn("direct", i) for i in range(1, runs + 1)]
    g = [fn("gateway", i) for i in range(1, runs + 1)]
    md, mg = statistics.median(d), statistics.median(g)
    if "records/s" in label:
        cmp = f"{100 * mg / md:.1f}%"
    elif "(us)" in label:
        cmp = f"{mg - md:+,.0f} us"
    else:
        cmp = f"{mg - md:+.0f} ms"
    print(f"{label:<36} {cell(d):>30} {cell(g):>30} {cmp:>16}")

def load(name):
    return json.load(open(f"{out}/load-{name}.json"))
hb, cm = load("heartbeat"), load("commit")
print()
print("koord-load through the gateway")
print(f"  heartbeat: {hb['members']:,} members back to back: "
      f"{hb['heartbeats'] / hb['window_s']:,.0f} heartbeats/s, p99 {hb.get('Heartbeat_p99_ms', 0):.2f} ms, "
      f"koord CPU {1000 * hb['server_cpu_s'] / (hb['heartbeats'] / 1000):.2f} ms per 1,000")
print(f"  commit: {cm['members']:,} members x 10 partitions back to back: "
      f"{cm['offsets'] / cm['window_s']:,.0f} partition offsets/s, "
      f"OffsetCommit p50 {cm.get('OffsetCommit_p50_ms', 0):.2f} ms, p99 {cm.get('OffsetCommit_p99_ms', 0):.2f} ms")
for r, name in ((hb, "heartbeat"), (cm, "commit")):
    if r.get("failures") or r.get("groups_stable", 0) < r.get("groups", 0):
        print(f"  ! {name}: {r.get('failures')} failed requests, "
              f"{r.get('groups_stable')}/{r.get('groups')} groups Stable")
PY
