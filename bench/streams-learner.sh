#!/usr/bin/env bash
# The learner effect, measured (issue 19): a stateful Kafka Streams 4.4 app scaled 2 -> 3
# instances while producing at a steady rate, against
#   koord-learner   koord (release build, its defaults: group.streams.assignor=learner), streams
#                   protocol: a moved task is a warm-up on its new owner first
#   koord-sticky    koord with --set group.streams.assignor=sticky: tasks move at once
#   kafka-streams   Apache Kafka 4.4 (scripts/kafka.sh, its own .build/kafka-streams-learner),
#                   group.protocol=streams (the broker's sticky streams assignor)
#   kafka-classic   the same broker, group.protocol=classic: Streams' client-side
#                   HighAvailabilityTaskAssignor (warm-ups, probing rebalances every
#                   probing.rebalance.interval.ms, Kafka's default 600000 kept)
#   kafka-classic-probe60s  (only when named) classic with probing.rebalance.interval.ms=60000,
#                   the shortest Streams accepts
# each on a fresh server, one after the other, and prints one table.
#
#   bench/streams-learner.sh                        all four at full size (STATE_MB=200)
#   bench/streams-learner.sh koord-learner kafka-streams   some of them
#   QUICK=1 bench/streams-learner.sh                a quick look (20 MB, CAP_S=40; not for
#                                                   BENCHMARKS.md)
#
# The app (proto-tests/java/.../StreamsLearnerBench.java): input topic of PARTITIONS partitions
# -> a progress probe -> groupByKey().reduce(keep the newest) into a RocksDB store with its
# changelog; one stateful task per partition (0_0 ..). Streams settings are Kafka's defaults
# (one stream thread, replication factor 1, auto.offset.reset=earliest).
#
# Per system: create the input topic; start s1 and s2 (JVMs, -Xmx512m) and wait until they share
# every task; preload STATE_MB MB (VALUE_BYTES-byte values, distinct keys, round robin over the
# partitions: the stores and their changelogs hold STATE_MB MB between them, STATE_MB/PARTITIONS
# per task); then produce RATE records/s (overwriting preloaded keys, so the state keeps its
# size) until the end; start s3's JVM (it waits, warm, for a line on stdin before
# KafkaStreams.start(), so that JVM start-up on this 2-core machine is not in the window); wait
# until s1 and s2 have processed the preload and keep up with the steady rate (every task
# processed within 2 s of production), WARM_S s more, then KafkaStreams.start() on s3 (empty
# state directory) at t3; wait until balanced (every task processed in the last second
# by an instance with its share, PARTITIONS/3 each) or CAP_S s; SETTLE_S s more; stop.
#
# Each instance prints, every 50 ms, per task that processed records since the last sample, the
# wall time of the first and the last of them and the largest latency (wall time minus the
# record's create time). The table, per system:
#   per-task max gap   for each task, the longest time in [t3, end] during which no instance
#                      processed a record of it (between one sample's last record and the next
#                      sample's first); p50/p99/max over the tasks (nearest rank)
#   time until balanced  from t3 until the last task that moved started processing on its final
#                      owner, with the final owners balanced; "not within CAP_S s" otherwise
#   per-task max latency  for each task, the largest latency of a record processed in
#                      [t3, end]; p50/max over the tasks (a gap that is only the producer
#                      stalling shows in the gap, not in the latency)
#   baseline           the largest per-task gap and latency in the WARM_S s before t3 (the noise
#                      floor of this machine)
# koord's log lines with "warm-up" (planned/promoted) are kept in the system's result.json and
# counted on stderr. Everything stays in .build/streams-learner/<system>/ (instance logs s1.log,
# JSON lines s1.jsonl, koord.log, result.json); all results in results.json.
#
# Parameters (environment): STATE_MB (200), VALUE_BYTES (1000), PARTITIONS (6), RATE (600),
# WARM_S (10), CAP_S (120), SETTLE_S (10).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${QUICK:-}" ]; then
  export STATE_MB="${STATE_MB:-20}" CAP_S="${CAP_S:-40}" WARM_S="${WARM_S:-5}" SETTLE_S="${SETTLE_S:-5}"
fi
cargo build --release --quiet --bin koord --manifest-path "$root/Cargo.toml"
mvn -q -B -f "$root/proto-tests/java/pom.xml" compile
python="${PYTHON:-$root/proto-tests/.venv/bin/python}"   # with confluent-kafka
[ -x "$python" ] || python=python3
exec "$python" "$root/bench/streams-learner.py" "$@"
