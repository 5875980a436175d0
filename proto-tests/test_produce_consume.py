"""Every producer's records come back to every consumer exactly once, in partition order.

For each producer (kcat, confluent-kafka, the Java producer) one koord is started and N records
with keys and headers are produced into a 3-partition topic; then each consumer (kcat,
confluent-kafka, kafka-python, Java) reads the topic with assign() from the beginning, without a
consumer group or commits, until it has N records or its deadline passes.
"""

import time
from collections import defaultdict
from typing import NamedTuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from conftest import Koord, java, run

N = 10_000
TOPIC = "records"
PARTITIONS = 3
DEADLINE = 30.0  # seconds a consumer may take to read all N records
KCAT_HEADERS = (("src", "kcat"), ("run", "proto-tests"))  # kcat -H sets the same on every record


class Rec(NamedTuple):
    partition: int
    offset: int
    key: str
    value: str
    headers: tuple


def value(src, i):
    """Record i's value; Client.java's value() writes the same."""
    return f"{src}:{i}:" + "abcdefghij" * (i % 10)


def headers(src, i):
    return KCAT_HEADERS if src == "kcat" else (("idx", str(i)), ("src", src))


# --- producers: each returns {i: (partition, offset)} as acknowledged, or None (kcat) ---

def produce_kcat(bootstrap):
    lines = "".join(f"key-{i}\t{value('kcat', i)}\n" for i in range(N))
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", TOPIC, "-K", "\t"]
    for k, v in KCAT_HEADERS:
        cmd += ["-H", f"{k}={v}"]
    run(cmd, input=lines)
    return None


def produce_confluent(bootstrap):
    # librdkafka's idempotence is off by default; turned on here to drive InitProducerId and
    # sequence numbers through librdkafka too (kcat covers the non-idempotent path).
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    positions, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            positions[int(msg.key()[4:])] = (msg.partition(), msg.offset())

    for i in range(N):
        p.produce(TOPIC, key=f"key-{i}", value=value("confluent", i),
                  headers=list(headers("confluent", i)), on_delivery=delivered)
        p.poll(0)
    assert p.flush(30) == 0, "confluent-kafka: records still undelivered after 30 s"
    assert not errors, f"confluent-kafka: {len(errors)} delivery errors, first: {errors[0]}"
    return positions


def produce_java(bootstrap):
    [result] = java("produce", bootstrap, TOPIC, N)
    assert (result["acked"], result["failed"]) == (N, 0), f"java producer: {result['first_error']}"
    return {i: tuple(pos) for i, pos in enumerate(result["positions"])}


PRODUCERS = {"kcat": produce_kcat, "confluent": produce_confluent, "java": produce_java}


# --- consumers: each returns ([Rec] in delivery order, {partition: end offset} or None) ---

def consume_kcat(bootstrap):
    # -e: exit once every partition is read to its end; kcat -C without -G uses assign().
    out = run(["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q",
               "-f", "%p\t%o\t%k\t%h\t%s\n"], timeout=DEADLINE).stdout
    recs = []
    for line in out.splitlines():
        p, o, k, h, v = line.split("\t", 4)
        hs = tuple(tuple(kv.split("=", 1)) for kv in h.split(",")) if h else ()
        recs.append(Rec(int(p), int(o), k, v, hs))
    return recs, None


def consume_confluent(bootstrap):
    # librdkafka insists on a group.id; with assign() and no commits it never joins the group.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        tps = [CkTopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        c.assign(tps)
        recs, deadline = [], time.monotonic() + DEADLINE
        while len(recs) < N and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    continue
                hs = tuple((k, v.decode()) for k, v in m.headers() or [])
                recs.append(Rec(m.partition(), m.offset(), m.key().decode(), m.value().decode(), hs))
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        return recs, ends
    finally:
        c.close()


def consume_kafka_python(bootstrap):
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    try:
        tps = [KpTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        recs, deadline = [], time.monotonic() + DEADLINE
        while len(recs) < N and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                for m in batch:
                    hs = tuple((k, v.decode()) for k, v in m.headers)
                    recs.append(Rec(m.partition, m.offset, m.key.decode(), m.value.decode(), hs))
        ends = {tp.partition: off for tp, off in c.end_offsets(tps).items()}
        return recs, ends
    finally:
        c.close()


def consume_java(bootstrap):
    lines = java("consume-assign", bootstrap, TOPIC, N, int(DEADLINE * 1000))
    ends = {int(p): o for p, o in lines.pop()["end_offsets"].items()}
    recs = [Rec(r["p"], r["o"], r["k"], r["v"], tuple(map(tuple, r["h"]))) for r in lines]
    return recs, ends


CONSUMERS = {"kcat": consume_kcat, "confluent": consume_confluent,
             "kafka-python": consume_kafka_python, "java": consume_java}


@pytest.fixture(scope="module", params=list(PRODUCERS), ids=lambda p: f"from-{p}")
def produced(request, tmp_path_factory):
    """A koord holding N records written by one producer: (koord, producer, acked positions)."""
    src = request.param
    k = Koord(tmp_path_factory.mktemp(f"produce-{src}"), [f"topics={TOPIC}:{PARTITIONS}"])
    k.start()
    try:
        positions = PRODUCERS[src](k.bootstrap)
        yield k, src, positions
    finally:
        k.stop()


@pytest.mark.parametrize("consumer", list(CONSUMERS), ids=lambda c: f"by-{c}")
def test_every_record_once_in_partition_order(produced, consumer):
    k, src, positions = produced
    recs, ends = CONSUMERS[consumer](k.bootstrap)

    seen = {}
    for r in recs:
        assert r.key.startswith("key-"), f"unexpected key {r.key!r} in {r}"
        i = int(r.key[4:])
        assert i not in seen, f"record {i} delivered twice: {seen[i]} and {r}"
        seen[i] = r
    missing = sorted(set(range(N)) - seen.keys())
    assert not missing, f"{len(missing)} of {N} records missing, first {missing[:5]}; got {len(recs)}"

    for i, r in seen.items():
        assert (r.value, r.headers) == (value(src, i), headers(src, i)), f"record {i}: {r}"

    by_partition = defaultdict(list)
    for r in recs:
        by_partition[r.partition].append(r)
    assert sorted(by_partition) == list(range(PARTITIONS)), "records not spread over partitions"
    for p, rs in by_partition.items():
        offsets = [r.offset for r in rs]
        assert offsets == list(range(len(rs))), f"partition {p}: offsets not 0..{len(rs) - 1} in order"
        order = [int(r.key[4:]) for r in rs]
        assert order == sorted(order), f"partition {p}: records out of production order"
    if ends is not None:
        assert ends == {p: len(rs) for p, rs in by_partition.items()}, "end offsets"
    if positions is not None:
        assert {i: (r.partition, r.offset) for i, r in seen.items()} == positions, \
            "consumed positions differ from the producer's acknowledged ones"
