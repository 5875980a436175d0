"""Gateway mode keeps nothing a group needs on koord's disk: committed offsets are the upstream
cluster's (in its __consumer_offsets, where Kafka's own kafka-consumer-groups sees them) and the
groups' records live in koord's compacted upstream topic (__koord_groups).

- A consumer group commits through koord; kafka-consumer-groups run against the upstream shows
  the offsets. koord is killed with -9 and started again on an empty data dir: the member carries
  on in the same generation (its group came back from __koord_groups), no committed offset is
  lost, and it reads the rest exactly once.
- Kafka Streams' word count with exactly_once_v2 through koord: its offsets go into its upstream
  transactions (TxnOffsetCommit forwarded inside them), and every count is exact.
- Transaction version 2 through koord, as against Kafka 4.4: clients are told upstream's
  `transaction.version`, so the Java 4.4 producer (and Streams) end every transaction with EndTxn
  v5 and add partitions through Produce v12+ (whose KIP-951 leader endpoints koord rewrites);
  read_committed consumers read exactly the committed records. `kafka-transactions abort`
  through koord ends a transaction left open upstream (WriteTxnMarkers forwarded to the leader).
- OffsetDelete and DeleteGroups through koord delete upstream (kafka-consumer-groups
  --delete-offsets / --delete), a deleted group does not come back from __koord_groups after a
  restart, and the refusals (NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC) are the upstream Kafka's
  own for the same situation.
- OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT while a transaction through koord
  holds an offset, as the upstream Kafka does, and the offset once the transaction commits.
- The upstream's groups koord does not have (a team's groups from before koord) are listed and
  described through koord as the upstream has them, and deleted through koord; koord's own groups
  are listed as koord has them (a Stable group is not listed as Empty).

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
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.consumer import OffsetFetchRequest

from conftest import JAVA_DIR, java, run
from groups_util import librdkafka_generation
from test_gateway import DEADLINE, UPSTREAM, create_topic, gateway, upstream_offsets
from test_streams import (EOS, OutputCounts, StreamsEvents, StreamsInstance, produce_sentences,
                          tasks_split)
from test_transactions import kafka_transactions

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
        # Streams 4.4 ran transaction version 2 against upstream through koord.
        assert set(k.requests_by_version("EndTxn")) == {5}, k.requests_by_version("EndTxn")
    finally:
        output.stop()
        for inst in instances:
            inst.kill()


def read_committed(bootstrap, topic, partitions, until):
    """(partition, value) of what a confluent-kafka read_committed consumer reads of `topic`
    from the start, until `until(records)` holds (or the deadline), then a moment more: nothing
    aborted shows up late."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([CkTopicPartition(topic, q, 0) for q in range(partitions)])
        recs, deadline = [], time.monotonic() + DEADLINE
        while not until(recs) and time.monotonic() < deadline:
            recs += [(m.partition(), m.value().decode())
                     for m in c.consume(num_messages=1000, timeout=0.5) if not m.error()]
        recs += [(m.partition(), m.value().decode())
                 for m in c.consume(num_messages=1000, timeout=1.0) if not m.error()]
        return recs
    finally:
        c.close()


def test_java_producer_runs_transaction_version_2_through_koord(koord):
    """The Java 4.4 transactional producer through koord: every EndTxn at v5 (epoch bumped per
    transaction), no AddPartitionsToTxn (Produce v12+ adds the partitions upstream), and
    read_committed reads exactly the committed transactions."""
    k = gateway(koord)
    topic = f"gw-tv2-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    transactions, per_txn = 6, 30
    lines = java("txn-produce", k.bootstrap, topic, f"tx-{topic}", transactions, per_txn)
    assert [line["committed"] for line in lines] == [t % 2 == 0 for t in range(transactions)]
    assert k.requests_by_version("EndTxn") == {5: transactions}
    assert k.requests_by_version("AddPartitionsToTxn") == {}
    assert max(k.requests_by_version("Produce")) >= 12
    want = collections.defaultdict(list)
    for t in range(0, transactions, 2):
        for i in range(per_txn):
            want[i % PARTITIONS].append(f"{t}:{i}")
    count = sum(len(v) for v in want.values())
    recs = read_committed(k.bootstrap, topic, PARTITIONS, lambda r: len(r) >= count)
    got = collections.defaultdict(list)
    for q, value in recs:
        got[q].append(value)
    assert dict(got) == dict(want), "exactly the committed records, in order"


def test_kafka_transactions_abort_through_koord_ends_an_upstream_transaction(koord):
    """kafka-transactions abort through koord (WriteTxnMarkers to the partition's leader,
    forwarded): a transaction left open upstream holds read_committed consumers at its first
    offset; once aborted, its records are skipped and a record written after them is read."""
    k = gateway(koord)
    topic = f"gw-abort-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    p = Producer({"bootstrap.servers": k.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"open:{i}", partition=0)
    assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": k.bootstrap})
    plain.produce(topic, value="after", partition=0)
    assert plain.flush(30) == 0
    [out] = kafka_transactions(
        k.bootstrap, ["abort", "--topic", topic, "--partition", "0", "--start-offset", "0"])
    recs = read_committed(k.bootstrap, topic, 1, lambda r: (0, "after") in r)
    assert recs == [(0, "after")], (recs, out)


def group_command(bootstrap, *args):
    """Kafka 4.4's kafka-consumer-groups (ConsumerGroupCommand) against `bootstrap`; its stdout
    (a non-zero exit fails the test)."""
    cp = f"{JAVA_DIR / 'target' / 'classes'}:{(JAVA_DIR / 'target' / 'classpath.txt').read_text().strip()}"
    return run(["java", "-cp", cp, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                "--bootstrap-server", bootstrap, *args], timeout=DEADLINE).stdout


def listed(bootstrap, *args):
    """The group ids `kafka-consumer-groups --list` shows (with `args`, e.g. --state Empty)."""
    out = group_command(bootstrap, "--list", *args)
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def joined_member(bootstrap, group, topic):
    """A librdkafka consumer of `group` subscribed to `topic`, once it has its partitions."""
    assigned = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 30000})
    c.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(ps))
    deadline = time.monotonic() + DEADLINE
    while not assigned:
        assert time.monotonic() < deadline, f"{group}: no assignment"
        c.poll(0.2)
    return c


def kp_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def refusals(bootstrap, group, subscribed):
    """What kafka-python's admin is told for a group with a member: DeleteGroups' answer for
    it, and OffsetDelete's error code per partition of the `subscribed` topic."""
    kp = kp_admin(bootstrap)
    try:
        deleted = kp.delete_groups([group])[group]
        offsets = kp.delete_group_offsets(
            group, [KpTopicPartition(subscribed, p) for p in range(PARTITIONS)])
        return deleted, {tp.partition: err.errno for tp, err in offsets.items()}
    finally:
        kp.close()


def all_offsets(bootstrap, group):
    """OffsetFetch of every offset of `group` (kafka-python): {(topic, partition): offset}."""
    kp = kp_admin(bootstrap)
    try:
        got = kp.list_group_offsets(group)[group]
        return {(tp.topic, tp.partition): om.offset for tp, om in got.items()}
    finally:
        kp.close()


def described(bootstrap, group):
    """DescribeGroups (kafka-python): (state, protocol type, member count)."""
    kp = kp_admin(bootstrap)
    try:
        d = kp.describe_groups([group])[group]
        return d["group_state"], d["protocol_type"], len(d["members"])
    finally:
        kp.close()


def stable_fetch(bootstrap, group, topic, partitions):
    """OffsetFetch v8 with RequireStable, as a read_committed consumer asks it (sent as it is,
    no retry): {partition: (offset, error code)}."""
    kp = kp_admin(bootstrap)
    g = OffsetFetchRequest.OffsetFetchRequestGroup
    req = OffsetFetchRequest(
        groups=[g(group_id=group, topics=[g.OffsetFetchRequestTopics(
            name=topic, partition_indexes=list(partitions))])],
        require_stable=True, min_version=8, max_version=8)

    async def ask():
        node = await kp._find_coordinator_id(group)
        return await kp._manager.send(req, node_id=node)

    try:
        resp = kp._manager.run(ask)
    finally:
        kp.close()
    answer = resp.groups[0]
    assert answer.error_code == 0, answer
    return {p.partition_index: (p.committed_offset, p.error_code)
            for t in answer.topics for p in t.partitions}


NON_EMPTY_GROUP = "NonEmptyGroupError"
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88


def test_offset_delete_and_delete_groups_go_upstream(koord):
    k = gateway(koord)
    consumed, other = (f"gw-del-{uuid.uuid4().hex[:8]}" for _ in range(2))
    for t in (consumed, other):
        create_topic(k.bootstrap, t)
    group = f"gw-del-{uuid.uuid4().hex[:8]}"
    native = f"gw-del-native-{uuid.uuid4().hex[:8]}"
    c = joined_member(k.bootstrap, group, consumed)
    # The same situation straight on the upstream Kafka, for its answers.
    n = joined_member(UPSTREAM, native, consumed)
    try:
        # Offsets for the topic the group consumes and for one it does not.
        c.commit(offsets=[CkTopicPartition(t, p, 3 + p) for t in (consumed, other)
                          for p in range(PARTITIONS)], asynchronous=False)
        offsets = {(t, p): 3 + p for t in (consumed, other) for p in range(PARTITIONS)}
        assert upstream_offsets(group) == offsets

        # With a member in: Kafka's refusals, exactly as the upstream gives them.
        expected = (NON_EMPTY_GROUP, {p: GROUP_SUBSCRIBED_TO_TOPIC for p in range(PARTITIONS)})
        assert refusals(UPSTREAM, native, consumed) == expected, "Kafka 4.4's own answers"
        assert refusals(k.bootstrap, group, consumed) == expected
        assert upstream_offsets(group) == offsets, "nothing was deleted upstream"

        # The offsets of the topic it does not consume go, member or not.
        group_command(k.bootstrap, "--delete-offsets", "--group", group, "--topic", other)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] == consumed}
        assert upstream_offsets(group) == offsets
        assert all_offsets(k.bootstrap, group) == offsets
    finally:
        c.close()
        n.close()

    # Empty: kafka-consumer-groups --delete through koord deletes it, upstream too.
    assert described(k.bootstrap, group)[:2] == ("Empty", "consumer")
    group_command(k.bootstrap, "--delete", "--group", group)
    assert all_offsets(UPSTREAM, group) == {}, "no offset left upstream"
    assert group not in listed(UPSTREAM)
    assert group not in listed(k.bootstrap)

    # koord killed and started on an empty data dir: __koord_groups has tombstones for the
    # group, so it does not come back (before the delete, it would: the test above).
    k.proc.kill()
    k.proc.wait()
    shutil.rmtree(k.workdir / "data")
    k.start(port=k.port)
    assert described(k.bootstrap, group)[0] == "Dead"
    assert group not in listed(k.bootstrap)


def test_require_stable_sees_an_open_transactions_offset_as_kafka_does(koord):
    k = gateway(koord)
    topic = f"gw-stable-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    group = f"gw-stable-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    # An offset committed before the transaction.
    c.commit(offsets=[CkTopicPartition(topic, 0, 5)], asynchronous=False)
    p = Producer({"bootstrap.servers": k.bootstrap,
                  "transactional.id": f"gw-stable-{uuid.uuid4().hex[:8]}"})
    try:
        p.init_transactions(DEADLINE)
        p.begin_transaction()
        p.produce(topic, value=b"x", partition=0)
        p.send_offsets_to_transaction([CkTopicPartition(topic, 0, 7)],
                                      c.consumer_group_metadata(), DEADLINE)
        # Open: through koord as from the upstream itself, the partition is unstable.
        unstable = {0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (-1, 0)}
        assert stable_fetch(UPSTREAM, group, topic, [0, 1]) == unstable, "Kafka 4.4's answer"
        assert stable_fetch(k.bootstrap, group, topic, [0, 1]) == unstable
        p.commit_transaction(DEADLINE)
        # The commit marker reaches upstream's offsets after EndTxn's answer: until then the
        # partition stays unstable, then it is the transaction's offset.
        deadline = time.monotonic() + DEADLINE
        while (got := stable_fetch(k.bootstrap, group, topic, [0, 1])) != {0: (7, 0), 1: (-1, 0)}:
            assert got[0] == (-1, UNSTABLE_OFFSET_COMMIT), got
            assert time.monotonic() < deadline, got
            time.sleep(0.05)  # poll interval, not a wait for an outcome
    finally:
        c.close()


def test_upstream_groups_are_listed_described_and_deleted_through_koord(koord):
    k = gateway(koord)
    topic = f"gw-list-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic)
    # A team's group from before koord: its consumer talked to the upstream, committed, left.
    old = f"gw-old-{uuid.uuid4().hex[:8]}"
    c = joined_member(UPSTREAM, old, topic)
    c.commit(offsets=[CkTopicPartition(topic, p, 10) for p in range(PARTITIONS)],
             asynchronous=False)
    c.close()
    upstream_view = described(UPSTREAM, old)
    assert upstream_view == ("Empty", "consumer", 0)
    # koord's own group, Stable (upstream sees only its offsets: an Empty group there).
    mine = f"gw-mine-{uuid.uuid4().hex[:8]}"
    m = joined_member(k.bootstrap, mine, topic)
    try:
        m.commit(offsets=[CkTopicPartition(topic, 0, 1)], asynchronous=False)
        assert mine in listed(UPSTREAM, "--state", "Empty"), "upstream has it as offsets only"

        assert {old, mine} <= listed(k.bootstrap)
        empty, stable = listed(k.bootstrap, "--state", "Empty"), listed(k.bootstrap, "--state", "Stable")
        assert old in empty and old not in stable
        assert mine in stable and mine not in empty, "koord's group as koord has it"

        assert described(k.bootstrap, old) == upstream_view
        assert all_offsets(k.bootstrap, old) == {(topic, p): 10 for p in range(PARTITIONS)}

        # Its offsets, then itself, deleted through koord: upstream's.
        kp = kp_admin(k.bootstrap)
        try:
            deleted = kp.delete_group_offsets(old, [KpTopicPartition(topic, 0)])
        finally:
            kp.close()
        assert {tp.partition: err.errno for tp, err in deleted.items()} == {0: 0}
        assert all_offsets(UPSTREAM, old) == {(topic, p): 10 for p in range(1, PARTITIONS)}

        group_command(k.bootstrap, "--delete", "--group", old)
        assert old not in listed(UPSTREAM)
        assert old not in listed(k.bootstrap)
        assert described(k.bootstrap, old)[0] == "Dead"
    finally:
        m.close()
