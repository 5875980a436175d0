#!/usr/bin/env bash
# Share groups (KIP-932, issue 39): koord against Apache Kafka 4.4, same machine, same load, same
# run. Java's KafkaShareConsumer 4.4 (proto-tests/java/.../ShareBench.java) against a single-node
# KRaft Kafka (scripts/kafka.sh in its own directory, .build/kafka-share: default heap, its test
# settings for group.share.*) and koord (release build, standalone: in-memory partition logs, the
# embedded store in a temporary data dir, syncing every acknowledgement batch before the answer,
# its default). Prints one table with both figures and their ratio.
#
#   bench/share.sh                  every scenario at full size
#   bench/share.sh c16 kill         some of them (c1, c4, c16, kill, kill-alone)
#   SCALE=0.1 bench/share.sh        record counts and the latency window scaled (a quick look;
#                                   not for BENCHMARKS.md)
#   RUNS=1 bench/share.sh           one run per server instead of three
#   REPORT_ONLY=1 bench/share.sh    the table again from the results in .build/share-bench
#   RATE=2000 bench/share.sh        the latency producer's offered rate (records/s, default 1000)
#   KILLS=5 bench/share.sh kill     kills per run and server in the kill scenario (default 3)
#   SHARE_ARGS="--consumer.fetch.max.wait.ms 100" bench/share.sh
#                                   more ShareBench options (here a consumer property; an
#                                   experiment, not the benchmark)
#
# Each run starts fresh servers, then runs every scenario against both, interleaved (koord first
# in odd runs, Kafka first in even ones), each scenario with its own topic and group. The table
# shows each figure's median with the spread (min-max) over the RUNS runs (3 by default; for kill,
# over its RUNS x KILLS kills) and how many times better koord's median is than Kafka's
# (Kafka/koord for times, koord/Kafka for rates).
#
# Both servers run the groups with the same settings: each group's configs are set with
# incrementalAlterConfigs on the GROUP resource before its consumers start:
# share.auto.offset.reset=earliest, share.record.lock.duration.ms=30000 (Kafka's default),
# share.session.timeout.ms=6000, share.heartbeat.interval.ms=1000 (scripts/kafka.sh's test
# settings; koord gets the same broker-level group.share.* bounds and defaults with --set). The
# consumers use implicit acknowledgement (share.acknowledgement.mode=implicit, the default: each
# poll acknowledges the records the previous one returned, sent with the next ShareFetch) and
# the client's defaults otherwise (max.poll.records 500, fetch.max.wait.ms 500).
#
# Scenarios (topic of 4 partitions, 100-byte values):
#   c1, c4, c16  1, 4 or 16 KafkaShareConsumers (threads of one JVM) in one share group. Once the
#                group is formed (describeShareGroups: every member Stable, assigned, at the
#                group's epoch) they stop polling while 300,000 records are produced, then all
#                poll again. records/s acknowledged: 300,000 / the time from that restart until
#                the AcknowledgementCommitCallback has reported the last of them acknowledged
#                (the implicit acknowledgement of the last poll goes with the next ShareFetch,
#                which the server answers when it has records or after fetch.max.wait.ms: up to
#                0.5 s of the figure); records/s delivered: the same until poll() has returned the
#                last of them. Then latency: a producer (acks=all, linger.ms=0) offers RATE
#                records/s round robin over the partitions for 2 + 12 s, each value carrying its
#                send time; end-to-end latency is from that time until poll() returns the record
#                (both on this machine; the first 2 s are not counted): p50 and p99. Server CPU:
#                the server's user+system CPU seconds over the whole scenario.
#   kill         8 consumers on the 4 partitions (the assignor gives every partition to 2 of
#                them). The victim, a JVM of its own, joins first, alone, takes one poll's
#                records (500) and stops polling, holding them acquired and unacknowledged (its
#                client keeps heartbeating); 7 survivors join and consume the rest; then the
#                victim is killed -9 (SIGKILL). Figure: from the kill until the last of the
#                records the survivors had not had is delivered to one of them (delivery count
#                2); also how many records that was and how many of them the victim's client had
#                acquired. On loopback the kernel closes the dead JVM's connections at once, and
#                both servers give back a closed connection's acquired records at once (the
#                share session goes with its connection), so neither the 30 s lock nor the 6 s
#                session timeout is what it waits for: it is how soon the survivor that shares
#                the victim's partition fetches again (it is in a ShareFetch long poll, which
#                neither server ends on a release: up to fetch.max.wait.ms). KILLS kills (3) per
#                run and server, interleaved, each with its own topic and group.
#   kill-alone   the same with 4 consumers: every partition has one member, so the victim's
#                partition has no survivor to fetch its released records until the victim is
#                removed from the group (share.session.timeout.ms, 6 s) and the partition
#                reassigned (the next heartbeat, 1 s).
# Under the table, runs with failed acknowledgements, records delivered twice without their
# delivery count going up (duplicates), lost latency records or errors are listed.
# Results (one JSON per scenario, server and run, the JVMs' stderr beside) stay in
# .build/share-bench/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/share-bench"
mkdir -p "$out"
scale="${SCALE:-1}"
runs="${RUNS:-3}"
kills="${KILLS:-3}"
rate="${RATE:-1000}"
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(c1 c4 c16 kill kill-alone)
for s in "${scenarios[@]}"; do
  case "$s" in c1|c4|c16|kill|kill-alone) ;;
    *) echo "unknown scenario $s (c1, c4, c16, kill, kill-alone)" >&2; exit 2 ;;
  esac
done

n() { python3 -c "import sys; print(max(1, round($1 * $scale)))"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# User+system CPU seconds of process $1 so far.
cpu_s() {
  python3 -c "import os,sys; f=open('/proc/$1/stat').read().rsplit(')',1)[1].split();
print((int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK'))"
}

# The table, from the JSON files in $out.
report() {
python3 - "$out" "$runs" "$kills" "${scenarios[@]}" <<'PY'
import glob, json, os, statistics, sys
out, runs, kills, scenarios = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def load(name, server):
    """Every report of `server` in scenario `name`: one per run (kill: RUNS x KILLS)."""
    reports = []
    for path in sorted(glob.glob(f"{out}/{name}-{server}-[0-9]*.json")):
        with open(path) as f:
            reports.append((os.path.basename(path)[len(f"{name}-{server}-"):-5], json.load(f)))
    return reports
def delivered(r):
    return r["records"] / r["last_record_s"]
# (figure, how to read it, better when lower?)
run_rows = [
    ("records/s acknowledged", lambda r: r["throughput_rps"], False),
    ("records/s delivered", delivered, False),
    ("latency p50 (ms)", lambda r: r["latency_p50_ms"], True),
    ("latency p99 (ms)", lambda r: r["latency_p99_ms"], True),
    ("server CPU (s)", lambda r: r["server_cpu_s"], True),
]
kill_rows = [
    ("kill to last redelivered (s)", lambda r: r["redelivered_last_s"], True),
    ("records no survivor had at the kill", lambda r: r["unacked"], None),
    ("of them the victim's (count 2)", lambda r: r["redelivered_count2"], None),
]
rows = {"c1": run_rows, "c4": run_rows, "c16": run_rows, "kill": kill_rows,
        "kill-alone": kill_rows}
def safely(f, r):
    try:
        return f(r)
    except (ZeroDivisionError, KeyError, TypeError):
        return None
def figure(reports, f):
    values = [v for v in (safely(f, r) for r in reports) if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)
def fmt(v):
    return "n/a" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}")
def cell(fig):
    if fig is None:
        return "n/a"
    med, lo, hi, count = fig
    return f"{fmt(med)} ({fmt(lo)}-{fmt(hi)})" if count > 1 else fmt(med)
def ratio(a, b, lower):
    if lower is None or a is None or b is None or not a[0] or not b[0]:
        return ""
    return f"{(b[0] / a[0] if lower else a[0] / b[0]):.1f}x"
print(f"medians of {runs} interleaved runs (kill: of {runs * kills} kills) (min-max); "
      "koord advantage = Kafka/koord for times, koord/Kafka for rates")
print(f"{'scenario':<11} {'figure':<34} {'koord':>30} {'kafka':>30} {'koord adv.':>10}")
for s in scenarios:
    k, a = load(s, "koord"), load(s, "kafka")
    for label, f, lower in rows[s]:
        kv, av = figure([r for _, r in k], f), figure([r for _, r in a], f)
        print(f"{s:<11} {label:<34} {cell(kv):>30} {cell(av):>30} {ratio(kv, av, lower):>10}")
    for reports, server in ((k, "koord"), (a, "kafka")):
        for i, r in reports:
            bad = []
            if "error" in r:
                bad.append(f"{r['error']}: {r.get('message')}")
            for key in ("ack_errors", "send_errors", "latency_lost", "duplicates"):
                if r.get(key):
                    bad.append(f"{key} {r[key]}")
            if r.get("redeliveries"):
                bad.append(f"{r['redeliveries']} redeliveries")
            if r.get("failures"):
                bad.append(r["failures"])
            if s.startswith("kill") and "error" not in r and r.get("redelivered_last_s") is None:
                bad.append(f"only {r.get('redelivered')} of {r.get('unacked')} redelivered")
            if bad:
                print(f"{'':<11} ! {server} run {i}: {'; '.join(map(str, bad))}")
with open(f"{out}/load.txt") as f:
    print("load average at the start of each run: " + "; ".join(l.strip() for l in f))
PY
}

if [ -n "${REPORT_ONLY:-}" ]; then
  report
  exit 0
fi
echo "share: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
uptime > "$out/uptime-before.txt"
cargo build --release --quiet --bin koord --manifest-path "$root/Cargo.toml"
target="${CARGO_TARGET_DIR:-$root/target}"
koord_bin="$target/release/koord"
java_dir="$root/proto-tests/java"
mvn -q -o -B -f "$java_dir/pom.xml" compile >"$out/mvn.log" 2>&1 \
  || mvn -q -B -f "$java_dir/pom.xml" compile
classpath="$java_dir/target/classes:$(cat "$java_dir/target/classpath.txt")"

# Kafka in a directory of its own (the test tiers use .build/kafka), its jars shared.
kdir="${KAFKA_DIR:-$root/.build/kafka-share}"
mkdir -p "$kdir"
if [ ! -e "$kdir/libs" ] && [ -d "$root/.build/kafka/libs" ]; then
  ln -s "$root/.build/kafka/libs" "$kdir/libs"
fi

koord_pid=""
koord_data=""
stop_servers() {
  if [ -n "$koord_pid" ]; then
    kill "$koord_pid" 2>/dev/null || true
    wait "$koord_pid" 2>/dev/null || true
  fi
  [ -n "$koord_data" ] && rm -rf "$koord_data"
  koord_pid=""
  koord_data=""
  KAFKA_DIR="$kdir" "$root/scripts/kafka.sh" stop || true
}
trap stop_servers EXIT

start_servers() {
  echo "share: starting Apache Kafka 4.4 (default heap) and koord" >&2
  kafka="$(KAFKA_DIR="$kdir" KAFKA_HEAP_OPTS="" "$root/scripts/kafka.sh" start)"
  kafka_pid="$(cat "$kdir/kafka.pid")"
  local port http
  port="$(free_port)"
  http="$(free_port)"
  koord_data="$(mktemp -d "${TMPDIR:-/tmp}/koord-share-bench.XXXXXX")"
  # scripts/kafka.sh's group.share.* lines, and vs-kafka.sh's settings.
  "$koord_bin" --listen "127.0.0.1:$port" --data-dir "$koord_data" \
    --set http.listen="127.0.0.1:$http" \
    --set group.initial.rebalance.delay.ms=0 --set group.min.session.timeout.ms=1000 \
    --set max.connections=100000 \
    --set group.share.min.record.lock.duration.ms=1000 \
    --set group.share.min.session.timeout.ms=1000 --set group.share.session.timeout.ms=6000 \
    --set group.share.min.heartbeat.interval.ms=500 --set group.share.heartbeat.interval.ms=1000 \
    > "$out/koord.log" 2>&1 &
  koord_pid=$!
  until grep -q "groups loaded" "$out/koord.log" 2>/dev/null; do
    kill -0 "$koord_pid" || { cat "$out/koord.log" >&2; exit 1; }
    sleep 0.05
  done
  koord="127.0.0.1:$port"
}

# run NAME SERVER RUN ADDR PID: one ShareBench run, its JSON in $out/NAME-SERVER-RUN.json (with
# the server's CPU seconds over it), its stderr in $out/NAME-SERVER-RUN.log. RUN may carry a
# suffix (kill's repeats: 1.2).
run() {
  local name="$1" server="$2" i="$3" addr="$4" pid="$5" before after
  local -a args
  case "$name" in
    c1|c4|c16)
      args=(run --consumers "${name#c}" --records "$(n 300000)" --rate "$rate"
            --seconds "$(n 12)" --warmup-s 2) ;;
    kill) args=(kill --consumers 8 --records 2000) ;;
    kill-alone) args=(kill --consumers 4 --records 2000) ;;
  esac
  echo "share: $name against $server (run $i of $runs)" >&2
  before="$(cpu_s "$pid")"
  # shellcheck disable=SC2086  # SHARE_ARGS: words
  java -Xms512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$classpath" \
    koord.tests.ShareBench "${args[@]}" --bootstrap "$addr" --partitions 4 \
    --topic "share-bench-$name-$i" --group "share-bench-$name-$i-group" \
    --lock-ms 30000 --session-ms 6000 --heartbeat-ms 1000 ${SHARE_ARGS:-} \
    > "$out/$name-$server-$i.out" 2> "$out/$name-$server-$i.log" \
    || { tail -n 30 "$out/$name-$server-$i.log" >&2; }
  after="$(cpu_s "$pid")"
  python3 - "$out/$name-$server-$i.out" "$out/$name-$server-$i.json" "$before" "$after" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
r = json.loads(lines[-1]) if lines else {"error": "no output"}
r["server_cpu_s"] = float(sys.argv[4]) - float(sys.argv[3])
json.dump(r, open(sys.argv[2], "w"))
if "error" in r:
    print(f"share: failed: {r}", file=sys.stderr)
PY
}

rm -f "$out"/*.json "$out"/*.out "$out"/*.log "$out/load.txt"
for i in $(seq 1 "$runs"); do
  start_servers
  echo "run $i: load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"
  for s in "${scenarios[@]}"; do
    repeats=1
    [ "$s" = kill ] && repeats="$kills"
    for k in $(seq 1 "$repeats"); do
      tag="$i"
      [ "$repeats" -gt 1 ] && tag="$i.$k"
      if [ $(((i + k) % 2)) -eq 0 ]; then
        run "$s" koord "$tag" "$koord" "$koord_pid"
        run "$s" kafka "$tag" "$kafka" "$kafka_pid"
      else
        run "$s" kafka "$tag" "$kafka" "$kafka_pid"
        run "$s" koord "$tag" "$koord" "$koord_pid"
      fi
    done
  done
  stop_servers
done
uptime > "$out/uptime-after.txt"
echo "share: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

report
