#!/usr/bin/env bash
# What security costs: koord and Apache Kafka 4.4, each with a PLAINTEXT and a SASL_SSL listener
# (TLS, SASL/SCRAM-SHA-512) on the same process, the same load over each, in one run.
#
#   bench/tls.sh                    both scenarios at full size
#   bench/tls.sh heartbeat          one of them (join, heartbeat)
#   SCALE=0.2 bench/tls.sh          every count scaled (a quick look)
#   RUNS=1 bench/tls.sh             one run per server and listener instead of three
#   DURATION=10 bench/tls.sh        the heartbeat window in seconds (default 30)
#
# Set-up, the same on both servers: scripts/kafka.sh's KAFKA_SECURITY=sasl broker (its
# certificate for 127.0.0.1, RSA 2048, made with openssl; StandardAuthorizer with super.users
# User:ANONYMOUS and User:alice) and koord with the same certificate, listeners, user and
# authorizer settings. PLAINTEXT clients are User:ANONYMOUS, SASL_SSL clients log in as alice
# with SCRAM-SHA-512 (koord-load --security-protocol SASL_SSL, load/src/security.rs); both are
# super users, so both listeners take the same path through the authorizer and the difference
# is TLS and SASL alone. Every connection is TLS-handshaken and authenticated before its first
# request; koord-load computes the SCRAM salted password once and reuses it (the server's cost
# per login is the same either way).
#
# Scenarios (koord-load parameters as bench/vs-kafka.sh's):
#   join       1,000 groups x 10 members, cold, to Stable: each member opens its own connection
#              (TLS handshake and SCRAM login included over SASL_SSL)
#   heartbeat  10,000 members heartbeating back to back over 64 connections for DURATION s:
#              server CPU per 1,000 heartbeats
# Members use a 300 s session timeout so that those of an earlier run on the same server are
# not expired during a later one. In run i: fresh servers, then koord over PLAINTEXT, koord over
# SASL_SSL, Kafka over PLAINTEXT, Kafka over SASL_SSL. The table shows medians with the spread
# (min-max), the SASL_SSL/PLAINTEXT cost on each server and Kafka/koord over SASL_SSL.
# Results (one JSON per scenario, server, listener and run) stay in .build/tls-bench/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/tls-bench"
mkdir -p "$out"
scale="${SCALE:-1}"
runs="${RUNS:-3}"
duration="${DURATION:-30}"
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(join heartbeat)

n() { python3 -c "import sys; print(max(1, round($1 * $scale)))"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cargo build --release --quiet --workspace --manifest-path "$root/Cargo.toml"
target="${CARGO_TARGET_DIR:-$root/target}"
load="$target/release/koord-load"
kafka_home="${KAFKA_DIR:-$root/.build/kafka}"

koord_pid=""
stop_servers() {
  [ -n "$koord_pid" ] && { kill "$koord_pid" 2>/dev/null; wait "$koord_pid" 2>/dev/null; } || true
  koord_pid=""
  KAFKA_SECURITY=sasl "$root/scripts/kafka.sh" stop || true
}
trap stop_servers EXIT

start_servers() {
  echo "tls-bench: starting Apache Kafka 4.4 (default heap, KAFKA_SECURITY=sasl) and koord" >&2
  kafka="$(KAFKA_HEAP_OPTS="" KAFKA_SECURITY=sasl "$root/scripts/kafka.sh" start)"
  kafka_tls="$(cat "$kafka_home/bootstrap.sasl_ssl")"
  kafka_pid="$(cat "$kafka_home/kafka.pid")"
  ca="$kafka_home/tls/ca.pem"
  local port tport
  port="$(free_port)"
  tport="$(free_port)"
  rm -rf "$out/koord-data"
  "$target/release/koord" --listen "127.0.0.1:$port" --data-dir "$out/koord-data" \
    --set "listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$tport" \
    --set "ssl.keystore.location=$kafka_home/tls/keystore.pem" \
    --set sasl.admin.user=alice --set sasl.admin.password=alice-secret \
    --set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
    --set "super.users=User:ANONYMOUS;User:alice" --set allow.everyone.if.no.acl.found=true \
    --set group.initial.rebalance.delay.ms=0 --set group.min.session.timeout.ms=1000 \
    --set max.connections=100000 > "$out/koord.log" 2>&1 &
  koord_pid=$!
  until grep -q "groups loaded" "$out/koord.log" 2>/dev/null; do
    kill -0 "$koord_pid" || { cat "$out/koord.log" >&2; exit 1; }
    sleep 0.05
  done
  koord="127.0.0.1:$port"
  koord_tls="127.0.0.1:$tport"
}

# run NAME SERVER PROTOCOL RUN ADDR PID ARGS...: one koord-load run, its JSON in
# $out/NAME-SERVER-PROTOCOL-RUN.json.
run() {
  local name="$1" server="$2" proto="$3" i="$4" addr="$5" pid="$6"
  shift 6
  local security=()
  if [ "$proto" = SASL_SSL ]; then
    security=(--security-protocol SASL_SSL --ssl-ca "$ca" --sasl-mechanism SCRAM-SHA-512
              --sasl-user alice --sasl-password alice-secret)
  fi
  local base="$out/$name-$server-$proto-$i"
  echo "tls-bench: $name against $server over $proto (run $i of $runs)" >&2
  "$load" --bootstrap "$addr" --server-pid "$pid" --json "$base.json" "${security[@]}" "$@" \
    > "$base.txt" 2>&1 || { cat "$base.txt" >&2; return 1; }
}

for s in "${scenarios[@]}"; do
  case "$s" in
    join)
      args=(--groups "$(n 1000)" --members 10 --heartbeat-ms 3000 --duration 1
            --session-timeout-ms 300000 --join-timeout 600) ;;
    heartbeat)
      args=(--groups "$(n 1000)" --members 10 --heartbeat-ms 0 --duration "$duration"
            --connections 64 --session-timeout-ms 300000 --join-timeout 600) ;;
    *) echo "unknown scenario $s (join, heartbeat)" >&2; exit 2 ;;
  esac
  rm -f "$out/$s"-*.json
  for i in $(seq 1 "$runs"); do
    start_servers
    run "$s" koord PLAINTEXT "$i" "$koord" "$koord_pid" "${args[@]}"
    run "$s" koord SASL_SSL "$i" "$koord_tls" "$koord_pid" "${args[@]}"
    run "$s" kafka PLAINTEXT "$i" "$kafka" "$kafka_pid" "${args[@]}"
    run "$s" kafka SASL_SSL "$i" "$kafka_tls" "$kafka_pid" "${args[@]}"
    stop_servers
  done
done

python3 - "$out" "$runs" "${scenarios[@]}" <<'PY'
import json, os, statistics, sys
out, runs, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name, server, proto):
    reports = []
    for i in range(1, runs + 1):
        path = f"{out}/{name}-{server}-{proto}-{i}.json"
        if os.path.exists(path):
            with open(path) as f:
                reports.append(json.load(f))
    return reports
def cpu_per_k(r):
    return 1000 * r["server_cpu_s"] / (r["heartbeats"] / 1000) if r.get("heartbeats") else None
rows = {
    "join": [("time to all Stable (s)", lambda r: r["stable_after_s"]),
             ("JoinGroup p99 (ms)", lambda r: r.get("JoinGroup_p99_ms"))],
    "heartbeat": [("server CPU ms per 1000 heartbeats", cpu_per_k),
                  ("heartbeats/s", lambda r: r["heartbeats"] / r["window_s"]),
                  ("Heartbeat p99 (ms)", lambda r: r.get("Heartbeat_p99_ms"))],
}
def figure(reports, f):
    values = []
    for r in reports:
        try:
            v = f(r)
        except (ZeroDivisionError, KeyError, TypeError):
            v = None
        if v is not None:
            values.append(v)
    return (statistics.median(values), min(values), max(values)) if values else None
def fmt(v):
    return "n/a" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}")
def cell(fig):
    if fig is None:
        return "n/a"
    med, lo, hi = fig
    return f"{fmt(med)} ({fmt(lo)}-{fmt(hi)})" if runs > 1 else fmt(med)
def change(plain, tls):
    if not plain or not tls or not plain[0]:
        return "n/a"
    return f"{100 * (tls[0] / plain[0] - 1):+.0f}%"
def ratio(koord, kafka):
    if not koord or not kafka or not koord[0]:
        return "n/a"
    return f"{kafka[0] / koord[0]:.1f}x"
print(f"medians of {runs} interleaved runs (min-max); TLS = SASL_SSL (SCRAM-SHA-512) vs PLAINTEXT")
print(f"{'scenario':<10} {'figure':<34} {'koord plain':>24} {'koord SASL_SSL':>24} {'TLS':>6}"
      f" {'kafka plain':>24} {'kafka SASL_SSL':>24} {'TLS':>6} {'koord lead TLS':>15}")
for s in scenarios:
    got = {(srv, p): load(s, srv, p) for srv in ("koord", "kafka") for p in ("PLAINTEXT", "SASL_SSL")}
    for label, f in rows[s]:
        kp, kt = figure(got["koord", "PLAINTEXT"], f), figure(got["koord", "SASL_SSL"], f)
        ap, at = figure(got["kafka", "PLAINTEXT"], f), figure(got["kafka", "SASL_SSL"], f)
        better = ratio(kt, at) if label != "heartbeats/s" else ratio(at, kt)
        print(f"{s:<10} {label:<34} {cell(kp):>24} {cell(kt):>24} {change(kp, kt):>6}"
              f" {cell(ap):>24} {cell(at):>24} {change(ap, at):>6} {better:>15}")
    for (srv, p), reports in got.items():
        for r in reports:
            if r["failures"] or r["groups_stable"] < r["groups"]:
                print(f"{'':<10} ! {srv} {p}: {r['failures']} failed requests, "
                      f"{r['groups_stable']}/{r['groups']} groups Stable")
PY
