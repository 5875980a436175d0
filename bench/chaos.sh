#!/usr/bin/env bash
# Chaos soak of koord's gateway and cluster mode (bench/chaos.py says what runs and what is
# checked): a 3-broker Kafka 4.4 of its own (KAFKA_BROKERS=3 scripts/kafka.sh, directory
# .build/kafka-chaos), three koord nodes in front of it (one cluster.name, node.id 1001-1003, as
# proto-tests/test_cluster.py starts them), Java classic, Java KIP-848, librdkafka and franz-go
# consumer groups and a Kafka Streams exactly_once_v2 word count, for DURATION seconds of faults
# injected at random: upstream brokers killed -9 (among them the leaders of the groups'
# __consumer_offsets and __koord_groups partitions and of the word count's transactions) and
# restarted, brokers paused (SIGSTOP/SIGCONT), koord nodes killed -9 and restarted, koord nodes
# paused, every core kept busy. Prints a table (faults injected and survived, the longest stall
# per client kind, commits lost, groups stuck, Streams output exact) and exits non-zero if a
# check failed.
#
#   bench/chaos.sh                                 10 minutes, seed 1
#   DURATION=120 SEED=7 bench/chaos.sh             shorter, another schedule
#
# Environment (bench/chaos.py): DURATION (600), SEED (1), GROUPS_PER_KIND (2), PARTITIONS (4),
# RATE (records a second per client kind's topic, 8), SENTENCE_RATE (4), STREAMS_INSTANCES (2),
# STALL_BOUND (seconds a partition may stall outside any fault, 60), FAULT_GAP ("3,10": seconds
# between faults), BROKER_KILL_S, BROKER_STOP_S, KOORD_KILL_S, KOORD_STOP_S, STARVE_S (how long
# each fault lasts, "LOW,HIGH"), KOORD_BIN (default target/release/koord, built if missing; the
# run uses a copy), OUT (.build/chaos: one run-* directory per run with every process's log,
# report.txt and result.json). Needs proto-tests/.venv, proto-tests/java and
# proto-tests/franz/bin built (scripts/test.sh builds them).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kdir="${KAFKA_DIR:-$root/.build/kafka-chaos}"
py="$root/proto-tests/.venv/bin/python"
export KOORD_BIN="${KOORD_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/koord}"
export OUT="${OUT:-$root/.build/chaos}"
[ -x "$KOORD_BIN" ] || cargo build --release --quiet --manifest-path "$root/Cargo.toml"
missing() { echo "chaos.sh: $1 (scripts/test.sh builds it)" >&2; exit 1; }
[ -x "$py" ] || missing "proto-tests/.venv is missing"
[ -x "$root/proto-tests/franz/bin/franz-member" ] || missing "proto-tests/franz/bin is not built"
[ -f "$root/proto-tests/java/target/classpath.txt" ] || missing "proto-tests/java is not built"
mkdir -p "$OUT" "$kdir"

# The broker jars: shared with .build/kafka when it has them (else kafka.sh fetches them).
if [ ! -e "$kdir/libs" ] && [ -d "$root/.build/kafka/libs" ]; then
  ln -s "$root/.build/kafka/libs" "$kdir/libs"
fi

started="$(date +%s)"
cleanup() {
  # Should the driver have died: whatever it started and left running (each pid checked against
  # the start time it recorded, so that no other process is touched), then the brokers.
  local f pid start now
  for f in "$OUT"/run-*/pids; do
    [ -f "$f" ] && [ "$(stat -c %Y "$f")" -ge "$started" ] || continue
    while read -r pid start; do
      now="$(awk '{print $22}' "/proc/$pid/stat" 2>/dev/null)" || continue
      if [ "$now" = "$start" ]; then
        kill -CONT "$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done < "$f"
  done
  KAFKA_DIR="$kdir" "$root/scripts/kafka.sh" stop || true
}
trap cleanup EXIT

echo "chaos.sh: starting a 3-broker Kafka 4.4 in $kdir" >&2
KOORD_UPSTREAM="$(KAFKA_DIR="$kdir" KAFKA_BROKERS=3 "$root/scripts/kafka.sh" start)"
export KOORD_UPSTREAM KAFKA_DIR="$kdir"
"$py" "$root/bench/chaos.py"
