"""Transactions with real clients: a transactional producer (Java, then confluent-kafka) commits
every other transaction and aborts the rest; read_committed consumers (Java, confluent-kafka)
read exactly the committed records, in order, partition by partition.

Transaction t writes "t:0".."t:PER_TXN-1", record i to partition i % PARTITIONS; even t commit.
And koord killed with -9 mid-transaction: the transactional id is back after the restart.
"""

import time
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from conftest import java

TOPIC = "txn"
PARTITIONS = 2
TRANSACTIONS = 6
PER_TXN = 50
DEADLINE = 30.0


def committed_per_partition():
    out = defaultdict(list)
    for t in range(0, TRANSACTIONS, 2):
        for i in range(PER_TXN):
            out[i % PARTITIONS].append(f"{t}:{i}")
    return dict(out)


def expected_count():
    return sum(len(v) for v in committed_per_partition().values())


def by_partition(recs):
    out = defaultdict(list)
    for partition, value in recs:
        out[partition].append(value)
    return dict(out)


def produce_java(bootstrap, txn_id):
    lines = java("txn-produce", bootstrap, TOPIC, txn_id, TRANSACTIONS, PER_TXN)
    assert [line["committed"] for line in lines] == [t % 2 == 0 for t in range(TRANSACTIONS)], lines


def produce_confluent(bootstrap, txn_id):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    for t in range(TRANSACTIONS):
        p.begin_transaction()
        for i in range(PER_TXN):
            p.produce(TOPIC, value=f"{t}:{i}", partition=i % PARTITIONS)
        if t % 2 == 0:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)


def consume_java(bootstrap):
    lines = java("consume-committed", bootstrap, TOPIC, expected_count(), int(DEADLINE * 1000))
    return [(line["partition"], line["value"]) for line in lines if "value" in line]


def consume_confluent(bootstrap):
    # read_committed is librdkafka's default isolation level; set here to say so.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([CkTopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        recs, deadline = [], time.monotonic() + DEADLINE
        while len(recs) < expected_count() and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    continue
                recs.append((m.partition(), m.value().decode()))
        # Nothing more arrives: no aborted record shows up late.
        for m in c.consume(num_messages=1000, timeout=1.0):
            if not m.error():
                recs.append((m.partition(), m.value().decode()))
        return recs
    finally:
        c.close()


def check(recs, who):
    assert by_partition(recs) == committed_per_partition(), f"{who}: not exactly the committed records"


def test_java_transactional_producer_is_read_exactly_by_read_committed_consumers(koord):
    k = koord(f"topics={TOPIC}:{PARTITIONS}")
    produce_java(k.bootstrap, "tx-java")
    check(consume_java(k.bootstrap), "java consumer")
    check(consume_confluent(k.bootstrap), "confluent-kafka consumer")


def test_confluent_transactional_producer_is_read_exactly_by_read_committed_consumers(koord):
    k = koord(f"topics={TOPIC}:{PARTITIONS}")
    produce_confluent(k.bootstrap, "tx-confluent")
    check(consume_confluent(k.bootstrap), "confluent-kafka consumer")
    check(consume_java(k.bootstrap), "java consumer")


def test_after_kill_9_a_new_producer_fences_the_old_one_and_commits(koord):
    """koord killed with -9 while a transaction is open: the transactional id's state is back
    after the restart, so a new producer with the same transactional.id aborts the open
    transaction and fences the old producer, whose commit then fails. (The partition logs are
    memory-only: records written before the crash are gone; tests/transactions.rs checks the
    stored producer id and epoch on the wire.)"""
    from confluent_kafka import KafkaException

    k = koord(f"topics={TOPIC}:{PARTITIONS}")
    conf = {"bootstrap.servers": k.bootstrap, "transactional.id": "tx-crash"}
    old = Producer(conf)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(TOPIC, value="before", partition=0)
    old.commit_transaction(30)
    old.begin_transaction()
    old.produce(TOPIC, value="open", partition=0)
    assert old.flush(30) == 0
    k.proc.kill()
    k.proc.wait()
    k.start(port=k.port)

    new = Producer(conf)
    new.init_transactions(30)
    new.begin_transaction()
    new.produce(TOPIC, value="after", partition=0)
    new.commit_transaction(30)
    try:
        old.commit_transaction(15)
        raise AssertionError("the old producer's commit succeeded after it was fenced")
    except KafkaException as e:
        # Fenced by the stored epoch's bump; a lost state would give the new producer a new
        # producer id instead, and the old one INVALID_PRODUCER_ID_MAPPING (abortable).
        assert e.args[0].fatal(), e
        assert e.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                    KafkaError.INVALID_PRODUCER_EPOCH), e
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "unused-assign-only",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([CkTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        values, deadline = [], time.monotonic() + DEADLINE
        while "after" not in values and time.monotonic() < deadline:
            values += [m.value().decode() for m in c.consume(100, timeout=0.5) if not m.error()]
        assert values == ["after"], values
    finally:
        c.close()
