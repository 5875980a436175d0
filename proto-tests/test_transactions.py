"""Transactions with real clients: a transactional producer (Java, then confluent-kafka) commits
every other transaction and aborts the rest; read_committed consumers (Java, confluent-kafka)
read exactly the committed records, in order, partition by partition. Kafka's admin tool
kafka-transactions (list, describe, describe-producers) shows an open and a committed
transaction.

Transaction t writes "t:0".."t:PER_TXN-1", record i to partition i % PARTITIONS; even t commit.
And koord killed with -9 mid-transaction: the transactional id is back after the restart.
"""

import subprocess
import time
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from conftest import java
from groups_util import java_command

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
    # The 4.4 producer runs transaction version 2, as against Kafka 4.4: every EndTxn at v5,
    # and no AddPartitionsToTxn (its Produce requests add the partitions).
    assert k.requests_by_version("EndTxn") == {5: TRANSACTIONS}
    assert k.requests_by_version("AddPartitionsToTxn") == {}
    assert max(k.requests_by_version("Produce")) >= 12
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


# --- kafka-transactions ----------------------------------------------------------------------

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh


def kafka_transactions(bootstrap, *commands):
    """Runs kafka-transactions (TransactionsCommand of kafka-tools 4.4) once per argument list,
    all at once; returns their stdouts in order."""
    procs = [subprocess.Popen(
        java_command(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for args in commands]
    outs = []
    for args, p in zip(commands, procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, (
            f"kafka-transactions {' '.join(args)} exited {p.returncode}\n{out}\n{err}")
        outs.append(out)
    return outs


def rows(text):
    """The rows of a kafka-transactions table as dicts keyed by its header (columns are
    separated by runs of spaces; no cell here holds one)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return [dict(zip(lines[0], words)) for words in lines[1:]]


def test_kafka_transactions_lists_describes_and_shows_producers(koord):
    """kafka-transactions list, describe --transactional-id and describe-producers --topic
    --partition against koord, while a confluent-kafka transaction is open and after it
    committed: the id, its producer id and state, the transaction's partitions, and the
    partition's producer with the open transaction's first offset."""
    k = koord(f"topics={TOPIC}:{PARTITIONS}")
    txn_id = "tx-admin"
    p = Producer({"bootstrap.servers": k.bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, value=f"open:{i}", partition=1)
    assert p.flush(30) == 0

    listed, described, producers = kafka_transactions(
        k.bootstrap,
        ["list"],
        ["describe", "--transactional-id", txn_id],
        ["describe-producers", "--topic", TOPIC, "--partition", "1"])
    listed = [r for r in rows(listed) if r["TransactionalId"] == txn_id]
    assert len(listed) == 1, listed
    assert listed[0]["TransactionState"] == "Ongoing", listed
    producer_id = listed[0]["ProducerId"]
    [d] = rows(described)
    assert (d["TransactionalId"], d["ProducerId"], d["TransactionState"]) == (
        txn_id, producer_id, "Ongoing"), d
    assert d["TopicPartitions"] == f"{TOPIC}-1", d
    assert int(d["CurrentTransactionStartTimeMs"]) > 0, d
    [prod] = rows(producers)
    assert prod["ProducerId"] == producer_id, prod
    assert (prod["LastSequence"], prod["CurrentTransactionStartOffset"]) == ("2", "0"), prod
    assert prod["LatestCoordinatorEpoch"] == "-1", "no marker yet"

    p.commit_transaction(30)
    described, producers = kafka_transactions(
        k.bootstrap,
        ["describe", "--transactional-id", txn_id],
        ["describe-producers", "--topic", TOPIC, "--partition", "1"])
    [d] = rows(described)
    assert d["TransactionState"] == "CompleteCommit", d
    [prod] = rows(producers)
    assert prod["CurrentTransactionStartOffset"] == "None", prod
    assert prod["LatestCoordinatorEpoch"] == "0", "the commit marker's"


def test_kafka_transactions_abort_ends_a_transaction_left_open_at_a_partition(koord):
    """kafka-transactions abort --topic --partition --start-offset (Admin abortTransaction,
    WriteTxnMarkers to the partition's leader): a confluent-kafka transaction left open holds
    read_committed consumers at its first offset; once aborted by the tool, its records are
    skipped and a record written after them is read."""
    k = koord(f"topics={TOPIC}:{PARTITIONS}")
    p = Producer({"bootstrap.servers": k.bootstrap, "transactional.id": "tx-hanging"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, value=f"open:{i}", partition=0)
    assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": k.bootstrap})
    plain.produce(TOPIC, value="after", partition=0)
    assert plain.flush(30) == 0

    [out] = kafka_transactions(
        k.bootstrap, ["abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0"])
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "unused-assign-only",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([CkTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        values, deadline = [], time.monotonic() + DEADLINE
        while "after" not in values and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                if not m.error():
                    values.append(m.value().decode())
        assert values == ["after"], (values, out)
    finally:
        c.close()
