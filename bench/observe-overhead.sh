#!/usr/bin/env bash
# The cost of metrics on the heartbeat path: koord-load's heartbeat scenario (members
# heartbeating back to back, the server's CPU per 1,000 heartbeats from /proc) against koord
# with metrics on (the default http.listen) and off (http.listen=none), ROUNDS interleaved pairs
# so that a noisy machine hits both alike; prints every run and the medians.
#   bench/observe-overhead.sh [ROUNDS, default 5] [SECONDS per run, default 10]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=${1:-5}
secs=${2:-10}
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release --quiet -p koord -p koord-load --manifest-path "$root/Cargo.toml"
koord="$target/release/koord"
load="$target/release/koord-load"
work=$(mktemp -d "${TMPDIR:-/var/tmp}/koord-overhead.XXXXXX")
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

run() { # run on|off: one koord, one koord-load run; prints CPU ms per 1,000 heartbeats
  local mode=$1 port http
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  if [ "$mode" = on ]; then http="127.0.0.1:0"; else http=none; fi
  rm -rf "$work/data"
  "$koord" --listen "127.0.0.1:$port" --data-dir "$work/data" \
    --set group.initial.rebalance.delay.ms=0 --set group.min.session.timeout.ms=1000 \
    --set "http.listen=$http" > "$work/koord.log" 2>&1 &
  pid=$!
  until grep -q "groups loaded" "$work/koord.log" 2>/dev/null; do
    kill -0 "$pid" || { cat "$work/koord.log" >&2; exit 1; }
    sleep 0.05
  done
  until (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
  "$load" --bootstrap "127.0.0.1:$port" --groups 1000 --members 10 --heartbeat-ms 0 \
    --duration "$secs" --connections 64 --server-pid "$pid" --json "$work/r.json" --check \
    > "$work/load.txt"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  python3 - "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
hb, cpu = r["heartbeats"], r["server_cpu_s"]
print(f"{1e6 * cpu / hb:.4f} {hb / r['window_s']:.0f}")
PY
}

on=(); off=()
for i in $(seq 1 "$rounds"); do
  for mode in on off; do
    read -r per_k rate < <(run "$mode")
    echo "round $i metrics $mode: $per_k CPU ms per 1,000 heartbeats ($rate heartbeats/s)"
    if [ "$mode" = on ]; then on+=("$per_k"); else off+=("$per_k"); fi
  done
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
mon, moff = statistics.median(on), statistics.median(off)
spread = lambda xs: (max(xs) - min(xs)) / statistics.median(xs) * 100
print(f"median CPU ms per 1,000 heartbeats: metrics on {mon:.3f}, off {moff:.3f}: "
      f"{(mon / moff - 1) * 100:+.1f}% (run-to-run spread: on {spread(on):.0f}%, off {spread(off):.0f}%)")
PY
