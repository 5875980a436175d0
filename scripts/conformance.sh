#!/usr/bin/env bash
# Runs koord's conformance suite against any Kafka-compatible server and prints a pass/fail
# table, one row per test:
#
#   scripts/conformance.sh --bootstrap HOST:PORT
#
# The suite: the raw wire tests (tests/wire.rs: ApiVersions, Metadata, FindCoordinator,
# CreateTopics, DescribeCluster, the data-plane APIs, malformed input; tests/groups.rs: every
# classic group API and its error codes) with kafka-protocol as the client, and the real-client
# group scenarios (proto-tests/test_groups.py: Java, confluent-kafka, kafka-python,
# kafka-consumer-groups; proto-tests/test_franz.py: franz-go groups of each balancer;
# proto-tests/test_streams.py: Kafka Streams, a custom client assignor, kafka-topics and
# kafka-configs). Tests that
# need koord's own configuration or process (connection limits, SIGTERM, group.max.size) report
# "skipped". Every test expects exactly what Apache Kafka 4.4 answers; CI runs the raw tiers and
# test_franz.py and test_streams.py against both koord and Kafka 4.4 (scripts/test.sh).
#
# The server must allow auto-created topics or CreateTopics, a group.min.session.timeout.ms of at
# most 1000 and group.initial.rebalance.delay.ms=0 for the scenarios to run fast (see
# scripts/kafka.sh for a broker configured so). Run scripts/test.sh once first: it installs the
# clients and builds the test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

bootstrap=""
raw_only=no
while [ $# -gt 0 ]; do
  case "$1" in
    --bootstrap) bootstrap="${2:-}"; shift 2 ;;
    --bootstrap=*) bootstrap="${1#*=}"; shift ;;
    --raw-only) raw_only=yes; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "conformance.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$bootstrap" ] || { echo "usage: scripts/conformance.sh --bootstrap HOST:PORT [--raw-only]" >&2; exit 2; }

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
rc=0
echo "conformance suite against $bootstrap" >&2
# --nocapture: tests that need koord's own process print "SKIPPED <test>: ..." and return.
KOORD_BOOTSTRAP="$bootstrap" cargo test --release --test wire --test groups -- --test-threads=4 \
  --nocapture > "$out/rust.txt" 2>&1 || rc=1
if [ "$raw_only" = no ]; then
  if [ -x proto-tests/.venv/bin/python ]; then
    KOORD_BOOTSTRAP="$bootstrap" proto-tests/.venv/bin/python -m pytest proto-tests/test_groups.py \
      proto-tests/test_franz.py proto-tests/test_streams.py -rA -q -p no:cacheprovider > "$out/python.txt" 2>&1 || rc=1
  else
    echo "proto-tests/.venv missing: run scripts/test.sh once; real-client scenarios not run" >&2
    rc=1
  fi
fi

python3 - "$out" <<'PY'
import re, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = []
rust = (out / "rust.txt").read_text(errors="replace") if (out / "rust.txt").exists() else ""
skipped = set(re.findall(r"SKIPPED (\w+):", rust))
suite = None
for line in rust.splitlines():
    m = re.match(r"\s*Running tests/(\w+)\.rs", line)
    if m:
        suite = m.group(1)
    m = re.match(r"test (\S+) \.\.\. (ok|FAILED|ignored)", line)
    if m and suite:
        result = {"ok": "pass", "FAILED": "FAIL", "ignored": "skipped"}[m.group(2)]
        if result == "pass" and m.group(1) in skipped:
            result = "skipped"
        rows.append((f"{suite}::{m.group(1)}", result))
py = out / "python.txt"
if py.exists():
    for line in py.read_text(errors="replace").splitlines():
        m = re.match(r"(PASSED|FAILED|SKIPPED|ERROR) (?:\[\d+\] )?(\S+)", line)
        if m:
            result = {"PASSED": "pass", "FAILED": "FAIL", "SKIPPED": "skipped", "ERROR": "FAIL"}[m.group(1)]
            name = m.group(2).replace("proto-tests/", "").replace(".py::", "::")
            rows.append((name, result))
rows.sort()
width = max((len(n) for n, _ in rows), default=10)
print(f"{'test'.ljust(width)}  result")
print(f"{'-' * width}  ------")
for name, result in rows:
    print(f"{name.ljust(width)}  {result}")
counts = {r: sum(1 for _, x in rows if x == r) for r in ("pass", "FAIL", "skipped")}
print(f"\n{counts['pass']} passed, {counts['FAIL']} failed, {counts['skipped']} skipped")
PY
if [ "$rc" -ne 0 ]; then
  for f in "$out"/*.txt; do
    grep -E "panicked at|assert|Error|FAILED" "$f" | head -40 >&2 || true
  done
fi
exit "$rc"
