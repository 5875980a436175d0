"""Gateway mode keeps nothing a group needs on koord's disk: committed offsets are the upstream
cluster's (in its __consumer_offsets, where Kafka's own kafka-consumer-groups sees them) and the
groups' records live in koord's compacted upstream topic (__koord_groups).

- A consumer group commits through koord; kafka-consumer-groups run against the upstream shows
  the offsets. koord is killed with -9 and started again on an empty data dir: the member carries
  on in the same generation (its group came back from __koord_groups), no committed offset is
  lost, and it reads the rest exactly once.
- Kafka Streams' word count with exactly_once_v2 through koord: its offsets go into its upstream
  transactions (TxnOffsetCommit forwarded inside them), and every count is exact.

Run by scripts/test.sh's gateway tier (KOORD_UPSTREAM: a 3-broker Kafka 4.4); skipped without it.
"""

import collections
import shutil
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groups_util import librdkafka_generation
from test_gateway import DEADLINE, UPSTREAM, create_topic, gateway, upstream_offsets
from test_streams import (EOS, OutputCounts, StreamsEvents, StreamsInstance, produce_sentences,
                          tasks_split)

pytestmark = pytest.mark.skipif(not UPSTREAM, reason="KOORD_UPSTREAM (a Kafka cluster) not set")

PARTITIONS = 3


def produce(bootstrap, topic, first, n):
    """Records first..first+n-1 (value "v:i"), acks=all; returns {i: (partition, offset)}."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True})
    acked, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[int(msg.value().decode().split(":")[1])] = (msg.partition(), msg.offset())

    for i in range(first, first + n):
        p.produce(topic, key=f"key-{i % 17}", value=f"v:{i}", on_delivery=delivered)
    assert p.flush(DEADLINE) == 0 and not errors, errors[:5]
    assert len(acked) == n
    return acked


def read(consumer, want, deadline):
    """Polls until `want` records are read; returns {i: (partition, offset)}."""
    got = {}
    while len(got) < want:
        assert time.monotonic() < deadline, f"read {len(got)} of {want}"
        for m in consumer.consume(500, 0.2):
            if m.error():
                continue
            i = int(m.value().decode().split(":")[1])
            assert i not in got, f"record {i} twice"
            got[i] = (m.partition(), m.offset())
    return got


def member_of(admin, group):
    d = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return str(d.state), [m.member_id for m in d.members]


def test_offsets_are_upstreams_and_a_group_survives_koord_killed(koord):
    k = gateway(koord)
    topic = f"gw-state-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    group = f"gw-state-{uuid.uuid4().hex[:8]}"
    first = produce(k.bootstrap, topic, 0, 600)

    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 30000})
    c.subscribe([topic])
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    try:
        assert read(c, 600, time.monotonic() + DEADLINE) == first
        c.commit(asynchronous=False)
        ends = {}
        for part, off in first.values():
            ends[(topic, part)] = max(ends.get((topic, part), 0), off + 1)
        assert upstream_offsets(group) == ends, "the upstream cluster has koord's commits"
        state, members = member_of(admin, group)
        assert state.endswith("STABLE") and len(members) == 1, (state, members)
        generation = librdkafka_generation(c)

        # kill -9, and back on the same port with nothing on disk.
        k.proc.kill()
        k.proc.wait()
        shutil.rmtree(k.workdir / "data")
        k.start(port=k.port)

        second = produce(k.bootstrap, topic, 600, 300)
        assert read(c, 300, time.monotonic() + DEADLINE) == second, \
            "the member read on from its committed offsets, nothing twice"
        assert member_of(admin, group) == (state, members), "the same member, still Stable"
        assert librdkafka_generation(c) == generation, "in the same generation: no rebalance"
        c.commit(asynchronous=False)
        for part, off in second.values():
            ends[(topic, part)] = max(ends[(topic, part)], off + 1)
        committed = c.committed([CkTopicPartition(topic, q) for q in range(PARTITIONS)],
                                timeout=DEADLINE)
        assert {(topic, tp.partition): tp.offset for tp in committed} == ends
        assert upstream_offsets(group) == ends
    finally:
        c.close()


def test_streams_exactly_once_word_count_through_koord(koord, tmp_path):
    """Kafka Streams 4.4 with exactly_once_v2 through koord, scaled 1 -> 2: FindCoordinator for
    its transactions answers an upstream broker's koord port, its offsets are committed inside
    its upstream transactions, read_committed sees every count once, in sequence."""
    k = gateway(koord)
    app_id = f"gw-wordcount-{uuid.uuid4().hex[:8]}"
    input_topic, output_topic = f"{app_id}-input", f"{app_id}-output"
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    # Replicated as the cluster's min.insync.replicas (2) needs for acks=all.
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 3)
                                  for t in (input_topic, output_topic)]).values():
        f.result(timeout=DEADLINE)
    events = StreamsEvents()
    instances = []
    output = OutputCounts(k.bootstrap, output_topic, exactly_once=True)
    expected = collections.Counter()

    def start(name):
        inst = StreamsInstance(events, name, tmp_path, k.bootstrap, app_id, input_topic,
                               output_topic, tmp_path / f"{name}-state", *EOS)
        instances.append(inst)
        return inst

    try:
        produce_sentences(k.bootstrap, input_topic, 0, 200, expected)
        start("s1")
        events.wait_for("s1 RUNNING with every task", tasks_split(["s1"]))
        output.wait_for(dict(expected), "s1 alone")
        start("s2")
        events.wait_for("s1 and s2 RUNNING, the tasks split between them",
                        tasks_split(["s1", "s2"]))
        produce_sentences(k.bootstrap, input_topic, 200, 200, expected)
        output.wait_for(dict(expected), "s1 and s2")
        # Its input offsets were committed in the transactions that published the counts:
        # upstream's group for the app has every sentence consumed.
        committed = upstream_offsets(app_id)
        assert sum(o for (t, _), o in committed.items() if t == input_topic) == 400, committed
        for inst in instances:
            inst.stop()
    finally:
        output.stop()
        for inst in instances:
            inst.kill()
