"""Gateway mode: koord in front of a 3-broker Apache Kafka 4.4 (scripts/kafka.sh with
KAFKA_BROKERS=3), real clients talking only to koord.

Run by scripts/test.sh's gateway tier, which starts the upstream once and sets KOORD_UPSTREAM to
its bootstrap list; skipped when KOORD_UPSTREAM is not set (the python tier has no upstream).
"""

import os
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from conftest import java, run

UPSTREAM = os.environ.get("KOORD_UPSTREAM", "")
pytestmark = pytest.mark.skipif(not UPSTREAM, reason="KOORD_UPSTREAM (a Kafka cluster) not set")

N = 3_000
PARTITIONS = 3
DEADLINE = 60.0  # seconds a step may take


def upstream_ports():
    return {int(a.rsplit(":", 1)[1]) for a in UPSTREAM.split(",")}


def gateway(koord):
    return koord(f"upstream.bootstrap.servers={UPSTREAM}", "group.initial.rebalance.delay.ms=0")


def create_topic(bootstrap, name):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=3,
                                        config={"min.insync.replicas": "2"})])[name]
    fut.result(timeout=DEADLINE)
    # Kafka answers CreateTopics before every broker has the topic in its metadata: wait until
    # the broker asked (any of the three, through koord) knows it and each partition's leader.
    deadline = time.monotonic() + DEADLINE
    while True:
        t = admin.list_topics(name, timeout=DEADLINE).topics[name]
        if t.error is None and len(t.partitions) == PARTITIONS and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return admin
        assert time.monotonic() < deadline, f"topic {name} not in metadata: {t.error}"
        time.sleep(0.05)  # poll interval, not a wait for an outcome


def test_metadata_through_koord_names_only_koord_endpoints(koord):
    k = gateway(koord)
    topic = f"gw-meta-{uuid.uuid4().hex[:8]}"
    admin = create_topic(k.bootstrap, topic)
    md = admin.list_topics(topic, timeout=DEADLINE)
    # Every upstream broker is presented, and koord itself (the group coordinator) is named
    # among them, as Kafka names its coordinators.
    own = {i for i in md.brokers if md.brokers[i].port == k.port}
    assert len(own) == 1 and sorted(set(md.brokers) - own) == [1, 2, 3], md.brokers
    ports = {b.port for i, b in md.brokers.items() if i not in own}
    assert len(ports) == 3, "one koord port per upstream broker"
    assert not ports & upstream_ports(), "no upstream endpoint is ever shown"
    assert all(b.host == "127.0.0.1" for b in md.brokers.values())
    assert len(md.topics[topic].partitions) == PARTITIONS
    # kafka-python's admin client: DescribeCluster / Metadata through koord too.
    kp = KafkaAdminClient(bootstrap_servers=k.bootstrap, request_timeout_ms=30000)
    try:
        cluster = kp.describe_cluster()
        assert {b["port"] for b in cluster["brokers"]} == ports | {k.port}
        assert cluster["controller_id"] in (1, 2, 3)
    finally:
        kp.close()


def test_produce_and_consume_in_a_group_through_koord(koord):
    """librdkafka producer (idempotent, acks=all) and a consumer group of two members, all
    through koord: every record comes back exactly once, in order per partition, with its key
    and headers; the group's commits are koord's and read back."""
    k = gateway(koord)
    topic = f"gw-records-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    group = f"gw-group-{uuid.uuid4().hex[:8]}"

    assigned = defaultdict(set)

    def on_assign(name):
        def cb(_consumer, partitions):
            assigned[name] = {p.partition for p in partitions}
        return cb

    consumers = {}
    for name in ("a", "b"):
        c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000})
        c.subscribe([topic], on_assign=on_assign(name))
        consumers[name] = c
    try:
        # The group settles before anything is produced: no record is read by a member that
        # then loses its partition.

        deadline = time.monotonic() + DEADLINE
        while not (assigned["a"] and assigned["b"]
                   and assigned["a"] | assigned["b"] == set(range(PARTITIONS))
                   and not assigned["a"] & assigned["b"]):
            assert time.monotonic() < deadline, f"group did not settle: {dict(assigned)}"
            for c in consumers.values():
                m = c.poll(0.2)
                assert m is None or m.error(), "nothing was produced yet"

        p = Producer({"bootstrap.servers": k.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5})
        acked, errors = {}, []

        def delivered(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked[int(msg.value().decode().split(":")[1])] = (msg.partition(), msg.offset())

        for i in range(N):
            p.produce(topic, key=f"key-{i % 50}", value=f"v:{i}",
                      headers=[("idx", str(i)), ("src", "gateway")], on_delivery=delivered)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(DEADLINE) == 0, "every record acknowledged"
        assert not errors, errors[:5]
        assert len(acked) == N

        got = defaultdict(list)  # partition -> [(offset, i, key, headers)]
        count = 0
        while count < N:
            assert time.monotonic() < deadline + DEADLINE, f"read {count} of {N}"
            # Batches with a short wait each: a member that has read all of its partitions
            # must not hold up the other.
            for c in consumers.values():
                for m in c.consume(500, 0.05):
                    if m.error():
                        continue
                    i = int(m.value().decode().split(":")[1])
                    got[m.partition()].append((m.offset(), i, m.key().decode(), m.headers()))
                    count += 1
        for c in consumers.values():
            c.commit(asynchronous=False)

        seen = set()
        for part, recs in got.items():
            offsets = [r[0] for r in recs]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), \
                f"partition {part}: out of order or duplicated"
            for off, i, key, hdrs in recs:
                assert acked[i] == (part, off), f"record {i} not where it was acknowledged"
                assert key == f"key-{i % 50}"
                assert hdrs == [("idx", str(i).encode()), ("src", b"gateway")]
                assert i not in seen, f"record {i} twice"
                seen.add(i)
        assert seen == set(range(N)), "every record exactly once"

        # The commits are koord's group offsets: read back through koord.
        ends = {}
        for i, (part, off) in acked.items():
            ends[part] = max(ends.get(part, -1), off + 1)
        reader = Consumer({"bootstrap.servers": k.bootstrap, "group.id": group})
        try:
            committed = reader.committed(
                [CkTopicPartition(topic, q) for q in range(PARTITIONS)], timeout=DEADLINE)
            assert {tp.partition: tp.offset for tp in committed} == \
                {q: ends.get(q, 0) for q in range(PARTITIONS) if q in ends} | \
                {q: -1001 for q in range(PARTITIONS) if q not in ends}
        finally:
            reader.close()
    finally:
        for c in consumers.values():
            try:
                c.close()
            except KafkaException:
                pass


def test_java_transactions_through_koord(koord):
    """The Java client's transactional producer and read_committed consumer through koord: the
    transaction coordinator is found (FindCoordinator rewritten to koord's port for it) and
    every transactional request forwarded; only committed transactions are read."""
    k = gateway(koord)
    topic = f"gw-txn-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    transactions, per_txn = 4, 10
    lines = java("txn-produce", k.bootstrap, topic, f"gw-txn-{uuid.uuid4().hex[:8]}",
                 transactions, per_txn)
    assert [line["committed"] for line in lines] == [t % 2 == 0 for t in range(transactions)]
    committed = [f"{t}:{i}" for t in range(0, transactions, 2) for i in range(per_txn)]
    lines = java("consume-committed", k.bootstrap, topic, len(committed), int(DEADLINE * 1000))
    values = [line["value"] for line in lines if "value" in line]
    assert sorted(values) == sorted(committed), "committed transactions only, each once"


def test_kcat_produces_and_consumes_in_a_group_through_koord(koord):
    """kcat (librdkafka's balanced consumer, -G) through koord: keys and headers come back,
    every record once, offsets in order per partition."""
    k = gateway(koord)
    topic = f"gw-kcat-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    n = 600
    lines = "".join(f"key-{i % 37}\tv:{i}\n" for i in range(n))
    run(["kcat", "-P", "-b", k.bootstrap, "-t", topic, "-K", "\t", "-H", "src=kcat",
         "-X", "acks=all"], input=lines)
    out = run(["kcat", "-C", "-b", k.bootstrap, "-G", f"gw-kcat-{uuid.uuid4().hex[:8]}", topic,
               "-o", "beginning", "-e", "-q", "-f", "%p\t%o\t%k\t%s\t%h\n",
               "-X", "auto.offset.reset=earliest"], timeout=DEADLINE * 2).stdout
    by_partition = defaultdict(list)
    seen = set()
    for line in out.splitlines():
        part, off, key, value, hdrs = line.split("\t")
        i = int(value.split(":")[1])
        assert key == f"key-{i % 37}" and hdrs == "src=kcat", line
        assert i not in seen, f"record {i} twice"
        seen.add(i)
        by_partition[part].append(int(off))
    assert seen == set(range(n))
    for part, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {part} out of order"
