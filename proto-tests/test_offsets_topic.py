"""`__consumer_offsets` as clients and Kafka's tools see it (issue 40).

Standalone koord lists Kafka's internal topics in Metadata, marked internal, and serves
`__consumer_offsets` from its own store's writes in Kafka's record format, in the partition
Kafka would put the group in, from its first read on (then every stored group's records first,
as Kafka's log shows them once compacted). So:

- a franz-go member subscribed by the regular expression `.*` sees `__consumer_offsets` marked
  internal in Metadata and is never assigned it nor reads it, while it consumes the topic it
  should (franz-go skips internal topics in regex subscriptions; a coordinator that hid the
  topic, or did not mark it, would fail its own integration tests);
- Kafka's `kafka-console-consumer` with `OffsetsMessageFormatter` reads, in the group's
  partition, the commit a confluent-kafka consumer made a moment before, and with
  `GroupMetadataMessageFormatter` the classic group's metadata (protocol, generation, member);
- `__transaction_state` likewise: with `TransactionLogMessageFormatter`, a confluent-kafka
  transaction's states (Ongoing with its partition, then CompleteCommit) in the transactional
  id's partition.

With KOORD_BOOTSTRAP=HOST:PORT the same tests run against that server (scripts/test.sh runs them
against Apache Kafka 4.4), proving the expectations are Kafka's. Every wait is on an event (a
member's JSON line, a tool's output line), with a deadline.
"""

import codecs
import json
import os
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groups_util import Group, java_command

EXTERNAL_BOOTSTRAP = os.environ.get("KOORD_BOOTSTRAP")
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
DEADLINE = 120.0


@pytest.fixture
def bootstrap(request):
    if EXTERNAL_BOOTSTRAP:
        return EXTERNAL_BOOTSTRAP
    return request.getfixturevalue("koord")(*GROUP_SETTINGS).bootstrap


def java_hash(s):
    """Java's String.hashCode of `s`."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def group_partition(bootstrap, group, topic=OFFSETS_TOPIC):
    """The partition of internal `topic` that holds `group` (or transactional id):
    Utils.abs(hashCode) % partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + DEADLINE
    while True:
        # Kafka creates the topic at a group's (transactional id's) first request; its
        # metadata follows shortly.
        t = admin.list_topics(topic, timeout=30).topics.get(topic)
        if t is not None and t.error is None and t.partitions:
            partitions = len(t.partitions)
            break
        assert time.monotonic() < deadline, f"{topic} not listed: {t}"
        time.sleep(0.2)
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def watch(bootstrap, group, topic=OFFSETS_TOPIC):
    """Reads the end of `group`'s partition of internal `topic` (ListOffsets), as a lag
    monitor does before groups change: koord writes the topic from its first read on (before
    that it holds what its store holds, written when first read), Kafka always."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watcher-{group}"})
    try:
        low, high = c.get_watermark_offsets(
            TopicPartition(topic, group_partition(bootstrap, group, topic)), timeout=30)
        assert 0 <= low <= high, (low, high)
    finally:
        c.close()


def commit(bootstrap, group, topic, offset, subscribe=False):
    """Commits `offset` for partition 0 of `topic` as `group` (a confluent-kafka consumer),
    after joining the group (classic protocol) and getting its assignment if `subscribe`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        if subscribe:
            assigned = threading.Event()
            c.subscribe([topic], on_assign=lambda _c, ps: assigned.set())
            deadline = time.monotonic() + DEADLINE
            while not assigned.is_set():
                assert time.monotonic() < deadline, "no assignment"
                c.poll(0.2)
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def formatted(bootstrap, group, formatter, found, topic=OFFSETS_TOPIC, owner="group"):
    """Runs kafka-console-consumer on `group`'s partition of internal `topic` from the
    earliest offset with `formatter`, until `found(record)` holds for a printed record whose
    key's `owner` field is `group`; returns that record (the parsed JSON line)."""
    partition = group_partition(bootstrap, group, topic)
    cmd = java_command("org.apache.kafka.tools.consumer.ConsoleConsumer",
                       "--bootstrap-server", bootstrap, "--topic", topic,
                       "--partition", partition, "--offset", "earliest",
                       "--formatter", f"org.apache.kafka.tools.consumer.{formatter}",
                       "--consumer-property", "exclude.internal.topics=false")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    printed = []
    match = []

    def read():
        # The formatters print one JSON object per record, not always a line each: the
        # output is read as it comes and split into objects.
        decoder = json.JSONDecoder()
        text = codecs.getincrementaldecoder("utf-8")()
        pending = ""
        while chunk := os.read(proc.stdout.fileno(), 65536):
            pending += text.decode(chunk)
            while True:
                pending = pending.lstrip()
                if not pending.startswith("{"):
                    # Not a record (a tool's message): skip to the next line.
                    if "\n" not in pending:
                        break
                    pending = pending.split("\n", 1)[1]
                    continue
                try:
                    record, end = decoder.raw_decode(pending)
                except json.JSONDecodeError:
                    break
                pending = pending[end:]
                printed.append(record)
                if record["key"]["data"].get(owner) == group and found(record):
                    match.append(record)
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(DEADLINE)
    proc.kill()
    _, err = proc.communicate()
    assert match, (f"{formatter} printed no matching record of {group} in partition "
                   f"{partition} within {DEADLINE} s:\n{printed[-20:]}\n"
                   f"{err.decode()[-3000:]}")
    return match[0]


def new_topic(bootstrap, partitions=1):
    name = f"offsets-topic-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def test_the_offsets_formatter_reads_a_commit_made_a_moment_before(bootstrap):
    """A confluent-kafka consumer commits offset 42 as a new group; kafka-console-consumer with
    OffsetsMessageFormatter reads it in the group's partition of __consumer_offsets, as Kafka
    4.4 writes it (OffsetCommitValue version 4)."""
    group = f"formatted-{uuid.uuid4().hex[:8]}"
    topic = new_topic(bootstrap)
    commit(bootstrap, group, topic, 42)
    record = formatted(bootstrap, group, "OffsetsMessageFormatter",
                       lambda r: r["key"]["data"]["topic"] == topic)
    assert record["key"] == {"type": 1, "data": {"group": group, "topic": topic,
                                                  "partition": 0}}, record
    value = record["value"]
    assert value["version"] == 4, record
    assert (value["data"]["offset"], value["data"]["leaderEpoch"],
            value["data"]["metadata"]) == (42, -1, ""), record
    assert value["data"]["commitTimestamp"] > 0, record


def test_the_group_metadata_formatter_reads_a_classic_group(bootstrap):
    """With the topic watched, a confluent-kafka consumer joins a classic group, gets its
    assignment, commits and leaves; kafka-console-consumer with GroupMetadataMessageFormatter
    reads the group's metadata record of generation 1 (protocol range, the member and its
    client id), written before the group went Empty."""
    group = f"metadata-{uuid.uuid4().hex[:8]}"
    topic = new_topic(bootstrap)
    watch(bootstrap, group)
    commit(bootstrap, group, topic, 7, subscribe=True)
    record = formatted(bootstrap, group, "GroupMetadataMessageFormatter",
                       lambda r: r["value"] is not None
                       and r["value"]["data"]["generation"] == 1
                       and r["value"]["data"]["members"])
    assert record["key"] == {"type": 2, "data": {"group": group}}, record
    data = record["value"]["data"]
    assert record["value"]["version"] == 3, record
    assert (data["protocolType"], data["protocol"]) == ("consumer", "range"), record
    [member] = data["members"]
    assert data["leader"] == member["memberId"], record
    assert member["clientId"] == "rdkafka", record
    assert member["sessionTimeout"] == 6000, record


def test_franz_go_regex_subscription_sees_the_offsets_topic_as_internal_and_skips_it(
        bootstrap, tmp_path):
    """A franz-go member subscribed to `.*` (new partitions from their end) sees
    __consumer_offsets marked internal, is assigned the group's topic and never
    __consumer_offsets, and consumes its topic's 30 records from the offsets the group
    committed."""
    g = Group(bootstrap, tmp_path, partitions=3, name="franz-regex")
    try:
        produced = sum(g.produce(30).values())
        # The group's offsets committed at the records' start (which also makes Kafka create
        # __consumer_offsets): the member reads its topic from them, every other topic the
        # regex matches from its end.
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": g.id,
                      "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(g.topic, p, 0) for p in range(3)],
                     asynchronous=False)
        finally:
            c.close()
        g.franz("r", "range", topic=".*", extra=("-regex", "-from-end"))
        metadata = g.events.wait_for("franz-go's Metadata", lambda log: next(
            (e for e in log if e["event"] == "metadata"), None), timeout=DEADLINE)
        assert OFFSETS_TOPIC in metadata["internal"], metadata
        g.events.wait_for(f"{g.topic} assigned", lambda log: any(
            e["event"] == "assigned" and g.topic in e["topics"] for e in log) or None,
            timeout=DEADLINE)

        def consumed(log):
            n = sum(r[3] for e in log if e["event"] == "records"
                    for t, r in zip(e["topics"], e["ranges"]) if t == g.topic)
            return n if n >= produced else None

        assert g.events.wait_for(f"{produced} records consumed", consumed,
                                 timeout=DEADLINE) == produced
        touched = [e for e in g.events.snapshot() if OFFSETS_TOPIC in (e.get("topics") or [])]
        assert not touched, f"franz-go consumed or was assigned {OFFSETS_TOPIC}: {touched}"
    finally:
        g.shutdown()


def test_the_transaction_log_formatter_reads_a_transactions_states(bootstrap):
    """A confluent-kafka transactional producer, its id's partition of __transaction_state
    watched once it is initialised, writes a record in a transaction and commits;
    kafka-console-consumer with TransactionLogMessageFormatter reads the transaction Ongoing
    with its partition, then CompleteCommit, as Kafka 4.4 writes them (TransactionLogValue
    version 1)."""
    from confluent_kafka import Producer
    txn_id = f"formatted-tx-{uuid.uuid4().hex[:8]}"
    topic = new_topic(bootstrap)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    watch(bootstrap, txn_id, TRANSACTION_TOPIC)
    p.begin_transaction()
    p.produce(topic, value=b"v", partition=0)
    p.commit_transaction(30)

    def state(status):
        return lambda r: r["value"] is not None and \
            r["value"]["data"]["transactionStatus"] == status

    args = ("TransactionLogMessageFormatter",)
    kw = {"topic": TRANSACTION_TOPIC, "owner": "transactionalId"}
    ongoing = formatted(bootstrap, txn_id, *args, state("Ongoing"), **kw)
    assert ongoing["key"] == {"type": 0, "data": {"transactionalId": txn_id}}, ongoing
    assert ongoing["value"]["version"] == 1, ongoing
    data = ongoing["value"]["data"]
    assert data["transactionPartitions"] == [{"topic": topic, "partitionIds": [0]}], ongoing
    assert data["transactionTimeoutMs"] == 60000, ongoing
    assert data["transactionStartTimestampMs"] > 0, ongoing
    committed = formatted(bootstrap, txn_id, *args, state("CompleteCommit"), **kw)
    done = committed["value"]["data"]
    assert done["producerId"] == data["producerId"] >= 0, (ongoing, committed)
    assert done["transactionPartitions"] == [], committed
