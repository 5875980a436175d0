"""A short chaos soak of gateway and cluster mode: bench/chaos.py (bench/chaos.sh's driver) for
about two minutes with a fixed seed, against the gateway tier's 3-broker Kafka 4.4.

Three koord nodes (one cluster.name) in front of it; one group of two members of each client
kind (Java classic, Java consumer protocol, librdkafka, franz-go) consuming and committing what
an idempotent producer writes at a steady rate, and one Kafka Streams exactly_once_v2 word
count; meanwhile a fault every 4-8 s, drawn from a shuffled deck of every kind: an upstream
broker killed -9 and restarted (a random one, the leader of a group's __consumer_offsets or
__koord_groups partition, the broker hosting the word count's transactions), a broker paused,
a koord node killed -9 and restarted, a koord node paused, every core kept busy. At most one
broker and one koord node are down at a time. The checks (bench/chaos.py has them): no commit
a client was told had succeeded is lost upstream, no group stuck (every partition committed
again within the stall bound outside faults, and to its end once the faults stop), no partition
owned by two members at once, the word count's output exact, no member crashed, every koord
node restarted and stopped cleanly.

Run by scripts/test.sh's gateway tier (KOORD_UPSTREAM, and KAFKA_DIR: the upstream's
scripts/kafka.sh directory, for killing and restarting a broker); skipped without it. It leaves
the cluster whole (every replica in sync, the preferred leaders elected again).
"""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import chaos  # noqa: E402

pytestmark = pytest.mark.skipif(not chaos.UPSTREAM,
                                reason="KOORD_UPSTREAM (a Kafka cluster) not set")

SEED = 20251203


def test_chaos_soak_two_minutes(tmp_path):
    settings = chaos.Settings(
        workdir=tmp_path, duration=75.0, seed=SEED, groups_per_kind=1, streams_instances=1,
        fault_gap=(4.0, 8.0), broker_kill_s=(3.0, 8.0), broker_stop_s=(3.0, 6.0),
        koord_kill_s=(2.0, 6.0), koord_stop_s=(3.0, 8.0), starve_s=(8.0, 12.0),
        drain_timeout=120.0)
    result, text = chaos.run_chaos(settings)
    print(text)
    failed = [(name, detail) for name, ok, detail in chaos.checks(result) if not ok]
    assert not failed, f"chaos checks failed: {failed}\n{text}"
    assert result["faults"], "no fault was injected"
