#!/usr/bin/env bash
# Data-plane smoke figure: kcat produces N records of ~100 bytes into a 6-partition topic on a
# fresh koord (release build), then consumes them all back. Prints wall times and koord's RSS.
#   bench/dataplane.sh [N]   (default 1000000)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-1000000}"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$root/target/release/koord" --listen "127.0.0.1:$port" --data-dir "$work/data" \
  --set topics=bench:6 --set log.retention.bytes=-1 > "$work/koord.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
python3 -c "
import sys
for i in range($n): sys.stdout.write('%09d:%s\n' % (i, 'x' * 90))
" > "$work/records.txt"
start=$(date +%s.%N)
kcat -b "127.0.0.1:$port" -P -t bench -K: -X linger.ms=5 -l "$work/records.txt"
mid=$(date +%s.%N)
got=$(kcat -b "127.0.0.1:$port" -C -t bench -o beginning -e -q -f '%o\n' | wc -l)
end=$(date +%s.%N)
rss=$(ps -o rss= -p "$pid")
python3 - "$n" "$got" "$start" "$mid" "$end" "$rss" <<'PY'
import sys
n, got, start, mid, end, rss = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:6]), int(sys.argv[6])
print(f"records produced: {n}, consumed back: {got}")
print(f"produce: {mid - start:.2f} s ({n / (mid - start):,.0f} records/s)")
print(f"consume: {end - mid:.2f} s ({got / (end - mid):,.0f} records/s)")
print(f"koord RSS after: {rss / 1024:.0f} MiB")
PY
