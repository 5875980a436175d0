"""Gateway mode: koord in front of a 3-broker Apache Kafka 4.4 (scripts/kafka.sh with
KAFKA_BROKERS=3), real clients talking only to koord.

Run by scripts/test.sh's gateway tier, which starts the upstream once and sets KOORD_UPSTREAM to
its bootstrap list; skipped when KOORD_UPSTREAM is not set (the python tier has no upstream).
The broker-kill scenario kills and restarts one upstream broker with scripts/kafka.sh, in the
KAFKA_DIR whose bootstrap file is KOORD_UPSTREAM (found under .build when KAFKA_DIR is not set).
KOORD_GATEWAY_RECORDS (default 30,000) is how many records each scaled-group scenario writes.
"""

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient
from kafka.errors import KafkaError as KafkaPythonError

from conftest import JAVA_DIR, ROOT, java, run
from groups_util import (HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS, STOP_TIMEOUT, Events,
                         JavaMembers, PythonMember, views, wait_then_close)

UPSTREAM = os.environ.get("KOORD_UPSTREAM", "")
pytestmark = pytest.mark.skipif(not UPSTREAM, reason="KOORD_UPSTREAM (a Kafka cluster) not set")

N = 3_000
PARTITIONS = 3
DEADLINE = 60.0  # seconds a step may take


def upstream_ports():
    return {int(a.rsplit(":", 1)[1]) for a in UPSTREAM.split(",")}


def gateway(koord):
    return koord(f"upstream.bootstrap.servers={UPSTREAM}", "group.initial.rebalance.delay.ms=0")


def upstream_offsets(group):
    """The group's committed offsets as the upstream cluster's kafka-consumer-groups (Kafka
    4.4's ConsumerGroupCommand) shows them: {(topic, partition): offset}."""
    cp = f"{JAVA_DIR / 'target' / 'classes'}:{(JAVA_DIR / 'target' / 'classpath.txt').read_text().strip()}"
    out = run(["java", "-cp", cp, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
               "--bootstrap-server", UPSTREAM.split(",")[0], "--describe", "--offsets",
               "--group", group], timeout=DEADLINE).stdout
    offsets = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == group and cols[2].isdigit():
            offsets[(cols[1], int(cols[2]))] = int(cols[3]) if cols[3].isdigit() else None
    return offsets


def create_topic(bootstrap, name, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3,
                                        config={"min.insync.replicas": "2"})])[name]
    fut.result(timeout=DEADLINE)
    # Kafka answers CreateTopics before every broker has the topic in its metadata: wait until
    # the broker asked (any of the three, through koord) knows it and each partition's leader.
    deadline = time.monotonic() + DEADLINE
    while True:
        t = admin.list_topics(name, timeout=DEADLINE).topics[name]
        if t.error is None and len(t.partitions) == partitions and \
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


# --- a group scaled 3 -> 5 -> 3 by Java, confluent-kafka and kcat, with an upstream broker lost ---

SCALE_RECORDS = int(os.environ.get("KOORD_GATEWAY_RECORDS", "30000"))
SCALE_PARTITIONS = 6


def expected_record(value):
    """(source, i, key, headers) a record's value stands for: each producer writes record i of
    its third with its own key and headers (kcat gives every record of a run the same ones)."""
    src, i = value.split(":")[:2]
    i = int(i)
    if src == "java":  # Client.produce
        return src, i, f"key-{i}", [["idx", str(i)], ["src", "java"]]
    if src == "confluent":
        return src, i, f"ck-{i}", [["idx", str(i)], ["src", "confluent"]]
    return src, i, f"kk-{i}", [["src", "kcat"]]


class Ledger:
    """Every record any member delivered to the test, as (member, partition, offset, key, value,
    headers), in delivery order per member; waiters wake on each new batch."""

    def __init__(self):
        self._cond = threading.Condition()
        self.deliveries = []
        self.by_source = defaultdict(int)
        self.positions = set()  # (partition, offset) delivered at least once

    def add(self, member, records):
        with self._cond:
            for p, o, key, value, headers in records:
                self.deliveries.append((member, p, o, key, value, headers))
                self.positions.add((p, o))
                self.by_source[value.split(":")[0]] += 1
            self._cond.notify_all()

    def wait(self, what, check, timeout=DEADLINE):
        deadline = time.monotonic() + timeout
        with self._cond:
            while not check(self):
                left = deadline - time.monotonic()
                assert left > 0, f"not reached within {timeout:.0f}s: {what} " \
                                 f"(delivered so far: {dict(self.by_source)})"
                self._cond.wait(min(left, 1.0))


class LedgerEvents(Events):
    """The group's events, with the records members report kept in a Ledger instead."""

    def __init__(self, ledger):
        super().__init__()
        self.ledger = ledger

    def add(self, event):
        if event["event"] == "records":
            self.ledger.add(event["member"], event["records"])
        else:
            super().add(event)


class ScaledGroup:
    """A consumer group on a fresh replicated topic (3 replicas, min.insync.replicas=2) through
    koord; the attributes are those groups_util's JavaMembers uses."""

    def __init__(self, bootstrap, workdir, protocol, session_ms=SESSION_TIMEOUT_MS):
        suffix = uuid.uuid4().hex[:8]
        self.session_ms = session_ms  # classic members' session.timeout.ms
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.protocol = protocol
        self.id = f"gw-scale-{suffix}"
        self.topic = f"gw-scale-{suffix}"
        self.partitions = SCALE_PARTITIONS
        self.ledger = Ledger()
        self.events = LedgerEvents(self.ledger)
        self.members = {}
        self.jvm = None
        self.admin = create_topic(bootstrap, self.topic, SCALE_PARTITIONS)
        self.kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)

    def start(self, name, client):
        """Member `name` of `client` (java, confluent or kcat): commits after each batch it
        processed and before it gives a partition up, so no record is delivered twice."""
        if client == "java":
            if self.jvm is None:
                self.jvm = JavaMembers(self, "jvm")
            props = ({"group_protocol": "consumer"} if self.protocol == "consumer"
                     else {"session_timeout_ms": self.session_ms})
            self.jvm.start(name, "--commit", "--print", **props)
        elif client == "confluent":
            member = RecordingConfluent(self, name)
            self.members[name] = member
            member.start()
        else:
            self.members[name] = KcatMember(self, name)

    def close(self, *names):
        since = len(self.events)
        for name in names:
            self.members[name].close(name)

        def check(log):
            done = {e["member"] for e in log[since:] if e["event"] == "closed"}
            return True if done >= set(names) else None
        self.events.wait_for(f"{names} closed", check)

    def wait_members(self, names):
        """Waits until the coordinator describes the group Stable with exactly the members named
        (client.id), every partition assigned to one of them, each member's assignment what it
        is being moved to (consumer protocol) and what the member's own callbacks report (Java,
        confluent-kafka)."""
        names = set(names)
        deadline = time.monotonic() + DEADLINE
        while True:
            problem = self._members_problem(names)
            if problem is None:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"group not settled on {sorted(names)}: {problem}\n"
                            f"{self.events.summary()}")
            time.sleep(0.1)  # poll interval between DescribeGroups, not a wait for an outcome

    def _members_problem(self, names):
        vs = views(self.events.snapshot())
        if self.protocol == "classic":
            # kafka-python's DescribeGroups, with the members' assignments decoded. (librdkafka's
            # AdminClient works too: it used to fail with _DESTROY_BROKER while the gateway's
            # Metadata left koord's coordinator out; test_gateway_state.py uses it.)
            try:
                d = self.kp.describe_groups([self.id])[self.id]
            except KafkaPythonError as e:
                return f"DescribeGroups failed: {e!r}"
            if d["error"] or d["group_state"] != "Stable":
                return f"state {d['group_state']} {d['error'] or ''}"
            owned = {m["client_id"]: sorted(p for a in m["member_assignment"]["assigned_partitions"]
                                            for p in a["partitions"])
                     for m in d["members"]}
        else:
            # The consumer protocol's members all report their assignment (Java and
            # confluent-kafka); DescribeGroups does not describe a consumer group.
            live = {c for c, v in vs.items() if v.joined and not v.gone}
            owned = {c: sorted(vs[c].owned) for c in live}
        if set(owned) != names:
            return f"members {sorted(owned)}"
        if sorted(p for ps in owned.values() for p in ps) != list(range(self.partitions)):
            return f"assignment {owned}"
        for c in names:
            if c in vs and sorted(vs[c].owned) != owned[c]:
                return f"{c} reports {sorted(vs[c].owned)}, the coordinator {owned[c]}"
        return None

    def committed(self):
        """The group's committed offsets by partition (OffsetFetch through kafka-python)."""
        got = self.kp.list_group_offsets(self.id)
        return {tp.partition: o.offset for tp, o in got.get(self.id, got).items()
                if tp.topic == self.topic}

    def shutdown(self):
        for m in self.members.values():
            if isinstance(m, (RecordingConfluent, KcatMember)):
                m.close()
        for m in self.members.values():
            if isinstance(m, RecordingConfluent):
                m.join(STOP_TIMEOUT)
            elif isinstance(m, KcatMember):
                wait_then_close(m)
        if self.jvm is not None:
            self.jvm.stop()
        self.kp.close()


class RecordingConfluent(PythonMember):
    """A confluent-kafka member that hands each batch to the ledger and then commits it
    synchronously; a revocation comes inside consume(), after the last batch's commit."""

    client = "confluent-kafka"

    def __init__(self, group, name):
        super().__init__(group, name)
        self.config = {"bootstrap.servers": group.bootstrap, "group.id": group.id,
                       "client.id": name, "group.protocol": group.protocol,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if group.protocol == "classic":
            self.config |= {"partition.assignment.strategy": "range",
                            "session.timeout.ms": group.session_ms,
                            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS}
        self.consumer = None

    def identity(self):
        return None, self.consumer.memberid()

    def subscribe(self):
        self.consumer = Consumer(self.config)
        self.consumer.subscribe(
            [self.group.topic],
            on_assign=lambda c, ps: self.callback("assigned", ps),
            on_revoke=lambda c, ps: self.callback("revoked", ps),
            on_lost=lambda c, ps: self.callback("lost", ps))
        return self.consumer

    def poll(self, consumer):
        records, offsets = [], {}
        for m in consumer.consume(500, 0.1):
            if m.error():
                self.emit("client_error", error=str(m.error()))
                continue
            headers = [[k, v.decode()] for k, v in m.headers() or []]
            records.append([m.partition(), m.offset(), m.key().decode(), m.value().decode(),
                            headers])
            offsets[m.partition()] = m.offset() + 1
        if not records:
            return
        self.emit("records", records=records)
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                consumer.commit(offsets=[CkTopicPartition(self.group.topic, p, o)
                                         for p, o in offsets.items()], asynchronous=False)
                self.emit("committed", offsets=offsets)
                return
            except KafkaException as e:
                # KIP-848: a commit sent just before the member's epoch moves on is refused
                # (STALE_MEMBER_EPOCH) though the member still owns the partitions (it gives
                # them up only in a callback of a later consume()); librdkafka does not retry
                # it (the Java client does), so this member does, with the new epoch. So too a
                # commit that failed with a retriable error after librdkafka's own few retries
                # (NOT_COORDINATOR while the upstream partition koord writes the group to
                # elects a new leader, as against Kafka while its coordinator moves): Java's
                # commitSync retries those until its timeout, and so does this member.
                error = e.args[0]
                again = error.code() == KafkaError.STALE_MEMBER_EPOCH or error.retriable()
                if not again or time.monotonic() > deadline:
                    self.emit("commit_failed", error=str(e))
                    return
                self.emit("commit_retried", error=str(e))
                time.sleep(0.01)  # poll interval, not a wait for an outcome


class KcatMember:
    """kcat's balanced consumer (-G, classic protocol, range): one process, its records read
    line by line. librdkafka commits what kcat printed every 100 ms and when a partition is
    revoked; SIGTERM makes kcat close the consumer (a final commit, LeaveGroup)."""

    FORMAT = "%p\t%o\t%k\t%s\t%h\n"

    def __init__(self, group, name):
        self.group = group
        self.name = name
        self.stderr_path = group.workdir / f"{group.id}-{name}.kcat.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            ["kcat", "-C", "-b", group.bootstrap, "-G", group.id, group.topic, "-u", "-q",
             "-f", self.FORMAT, "-X", f"client.id={name}", "-X", "auto.offset.reset=earliest",
             "-X", "partition.assignment.strategy=range", "-X", "auto.commit.interval.ms=100",
             "-X", f"session.timeout.ms={group.session_ms}",
             "-X", f"heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            p, o, key, value, hdrs = line.rstrip("\n").split("\t")
            headers = [h.split("=", 1) for h in hdrs.split(",")] if hdrs else []
            self.group.events.add({"member": self.name, "event": "records",
                                   "records": [[int(p), int(o), key, value, headers]]})
        code = self.proc.wait()
        event = {"event": "closed"} if code == 0 else {"event": "error", "error": f"exit {code}"}
        self.group.events.add({"member": self.name, "client": "kcat", **event})

    def close(self, _name=None):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)


def produce_java(bootstrap, topic, count):
    """Client.produce: the Java producer (idempotent, acks=all) writes java:0..count-1; returns
    {i: (partition, offset)} of the acknowledged records."""
    line = java("produce", bootstrap, topic, count, timeout=DEADLINE * 2)[-1]
    assert line.get("failed") == 0 and "positions" in line, line
    return {i: tuple(pos) for i, pos in enumerate(line["positions"])}


def produce_confluent(bootstrap, topic, count):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5})
    acked, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[int(msg.value().decode().split(":")[1])] = (msg.partition(), msg.offset())

    for i in range(count):
        p.produce(topic, key=f"ck-{i}", value=f"confluent:{i}",
                  headers=[("idx", str(i)), ("src", "confluent")], on_delivery=delivered)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(DEADLINE * 2) == 0, "every record acknowledged"
    assert not errors, errors[:5]
    return acked


def produce_kcat(bootstrap, topic, count):
    lines = "".join(f"kk-{i}\tkcat:{i}\n" for i in range(count))
    run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-H", "src=kcat",
         "-X", "acks=all", "-X", "enable.idempotence=true"], input=lines, timeout=DEADLINE * 2)
    return None  # kcat does not tell where its records went


class Background(threading.Thread):
    """A producer on a thread of its own; join() returns its result or raises its failure."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True)
        self.fn, self.args, self.result, self.failure = fn, args, None, None

    def run(self):
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # noqa: B036 - pytest.fail too, re-raised in join()
            self.failure = e

    def join(self, timeout=DEADLINE * 3):
        super().join(timeout)
        assert not self.is_alive(), f"{self.fn.__name__} still running after {timeout}s"
        if self.failure is not None:
            raise self.failure
        return self.result


def upstream_dir():
    """The scripts/kafka.sh directory of the upstream cluster (KAFKA_DIR, or the one under
    .build whose bootstrap file is KOORD_UPSTREAM), for killing and restarting a broker."""
    dirs = [Path(os.environ["KAFKA_DIR"]).resolve()] if os.environ.get("KAFKA_DIR") else []
    for d in dirs + sorted((ROOT / ".build").glob("*/")):
        try:
            if (d / "bootstrap").read_text().strip() == UPSTREAM:
                return d
        except OSError:
            pass
    return None


def kafka_sh(*args):
    env = {**os.environ, "KAFKA_DIR": str(upstream_dir()), "KAFKA_BROKERS": "3"}
    run([str(ROOT / "scripts" / "kafka.sh"), *map(str, args)], timeout=150, env=env)


def end_offsets(bootstrap, topic, partitions):
    """{partition: end offset}, or None if ListOffsets failed. A new AdminClient each time: a
    long-lived one, after an upstream broker's restart, kept failing with FENCED_LEADER_EPOCH
    for a minute, through koord and straight to Kafka alike (librdkafka 2.16's admin does not
    refresh its leader epochs for it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({CkTopicPartition(topic, q): OffsetSpec.latest()
                                  for q in range(partitions)}, request_timeout=10)
    try:
        return {tp.partition: f.result().offset for tp, f in futures.items()}
    except KafkaException as e:
        print(f"ListOffsets: {e}")
        return None


def java_partition(group, partitions):
    """The partition Kafka (and koord, for __koord_groups) keeps `group` in:
    Utils.abs(group.hashCode()) % partitions."""
    h = 0
    for unit in group.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


# Sessions of the broker-kill run: longer than upstream takes to give the dead broker's partitions
# new leaders (it must notice the broker gone, broker.session.timeout.ms, 3 s in kafka.sh's
# cluster, after electing a new controller if the dead one was active), for koord holds the
# group's writes until then (upstream.write.timeout.ms) and a member's requests queue behind its
# commit meanwhile; as Kafka's own coordinator does not answer meanwhile, against which a member
# whose session is shorter than the failover loses its partitions too.
KILL_SESSION_MS = 20_000


def coordinating_leader(g):
    """The upstream broker that leads the group's __koord_groups partition, where koord writes
    the group's records: killing it takes them away until Kafka elects a new leader (about
    broker.session.timeout.ms). (With as many __koord_groups partitions as __consumer_offsets
    ones, as by default, its leader is often that of the group's offsets too.)"""
    md = AdminClient({"bootstrap.servers": UPSTREAM}).list_topics(timeout=DEADLINE)
    parts = md.topics["__koord_groups"].partitions
    return parts[java_partition(g.id, len(parts))].leader


def scale_3_5_3(k, workdir, protocol, kill_broker=False):
    """Members m1..m3 consume; the Java producer writes its third while m4 and m5 join; the
    confluent-kafka producer writes its third while m1 and m2 leave (with `kill_broker`: the
    upstream leader of the group's __koord_groups partition is killed with -9 at that moment and restarted once the group
    has settled on three members); kcat writes the last third. Each step waits for the records
    of the previous producer to be arriving and for the coordinator's view of the group; the
    run ends when every record is delivered and the group's committed offsets are the end
    offsets. Returns the group and the producers' {i: (partition, offset)} where known."""
    g = ScaledGroup(k.bootstrap, workdir, protocol,
                    session_ms=KILL_SESSION_MS if kill_broker else SESSION_TIMEOUT_MS)
    third = SCALE_RECORDS // 3
    counts = {"java": third, "confluent": third, "kcat": SCALE_RECORDS - 2 * third}
    # kcat's consumer is classic only (librdkafka 2.0.2): a third Java member takes its place.
    first = ["java", "confluent", "kcat" if protocol == "classic" else "java"]
    positions = {}
    victim = None  # the upstream broker killed and not yet restarted
    try:
        for i, client in enumerate(first):
            g.start(f"m{i + 1}", client)
        g.wait_members(["m1", "m2", "m3"])

        producer = Background(produce_java, k.bootstrap, g.topic, counts["java"])
        producer.start()
        g.ledger.wait("the Java producer's records arriving",
                      lambda ledger: ledger.by_source["java"] > 0)
        g.start("m4", "java")
        g.start("m5", "confluent")
        g.wait_members(["m1", "m2", "m3", "m4", "m5"])
        positions["java"] = producer.join()

        producer = Background(produce_confluent, k.bootstrap, g.topic, counts["confluent"])
        producer.start()
        g.ledger.wait("the confluent-kafka producer's records arriving",
                      lambda ledger: ledger.by_source["confluent"] > 0)
        if kill_broker:
            victim = coordinating_leader(g)
            kafka_sh("kill", victim)
        g.close("m1", "m2")
        g.wait_members(["m3", "m4", "m5"])
        positions["confluent"] = producer.join()
        if victim is not None:
            kafka_sh("restart", victim)
            victim = None

        produce_kcat(k.bootstrap, g.topic, counts["kcat"])
        g.ledger.wait("every record delivered",
                      lambda ledger: len(ledger.positions) >= SCALE_RECORDS, timeout=DEADLINE * 2)
        deadline = time.monotonic() + DEADLINE
        while (committed := g.committed()) != (ends := end_offsets(k.bootstrap, g.topic,
                                                                   g.partitions)):
            assert time.monotonic() < deadline, f"committed {committed}, end offsets {ends}"
            time.sleep(0.1)  # poll interval between OffsetFetches, not a wait for an outcome
    finally:
        try:
            g.shutdown()
        finally:
            if victim is not None:  # the next test needs the whole cluster
                kafka_sh("restart", victim)
    return g, counts, positions, ends


def check_exactly_once(g, counts, positions, ends):
    """Every record produced is delivered exactly once: no (partition, offset) twice, each
    member's deliveries of a partition in offset order, the offsets of each partition 0..end
    without a gap, each record at one offset (where the producer told: the one it was
    acknowledged at) with the key and headers it was written with."""
    log = g.events.snapshot()
    trouble = [e for e in log if e["event"] in ("lost", "error", "commit_failed")]
    assert not trouble, f"members lost partitions, failed or failed to commit: {trouble[:5]}"
    seen, twice = {}, []
    per_member = defaultdict(list)
    for member, p, o, key, value, headers in g.ledger.deliveries:
        if (p, o) in seen:
            twice.append(((p, o), seen[(p, o)][0], member))
        seen[(p, o)] = (member, key, value, headers)
        per_member[(member, p)].append(o)
    assert not twice, f"{len(twice)} records delivered twice ((partition, offset), first " \
                      f"member, second member): {twice[:10]}"
    for (member, p), offsets in per_member.items():
        assert all(a < b for a, b in zip(offsets, offsets[1:])), \
            f"{member} got partition {p} out of order: {offsets[:20]}..."
    for p in range(g.partitions):
        got = sorted(o for q, o in seen if q == p)
        assert got == list(range(ends[p])), f"partition {p}: gaps below its end {ends[p]}"
    records = {}
    for (p, o), (member, key, value, headers) in seen.items():
        src, i, want_key, want_headers = expected_record(value)
        assert (key, headers) == (want_key, want_headers), f"{value} at {p}:{o} via {member}"
        assert (src, i) not in records, f"{value} written twice: {records[(src, i)]}, {(p, o)}"
        records[(src, i)] = (p, o)
        if src in positions:
            assert positions[src][i] == (p, o), f"{value} at {p}:{o}, acknowledged at " \
                                                f"{positions[src][i]}"
    assert set(records) == {(src, i) for src, n in counts.items() for i in range(n)}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_scaled_3_5_3_gets_every_record_exactly_once(koord, tmp_path, protocol):
    """Java, confluent-kafka and kcat producers (acks=all) write SCALE_RECORDS records with keys
    and headers to a topic of 3 replicas (min.insync.replicas 2) while a group of Java,
    confluent-kafka and kcat (classic only) members, committing synchronously what they
    processed, is scaled 3 -> 5 -> 3: each record is delivered once, in order per partition,
    with its key and headers, and the group's committed offsets end at the end offsets, in
    the upstream's __consumer_offsets (kafka-consumer-groups against the upstream)."""
    k = gateway(koord)
    g, counts, positions, ends = scale_3_5_3(k, tmp_path, protocol)
    check_exactly_once(g, counts, positions, ends)
    # The commits are the upstream cluster's: its own kafka-consumer-groups shows them.
    assert upstream_offsets(g.id) == {(g.topic, p): o for p, o in ends.items()}


def test_upstream_broker_killed_during_a_scaled_run(koord, tmp_path):
    """As above (classic), with the upstream leader of the group's __koord_groups partition
    killed with -9 while records are produced and consumed and the group shrinks, and restarted
    afterwards: the clients carry on through koord, and no acknowledged record is lost or
    delivered twice."""
    if upstream_dir() is None:
        pytest.skip("the upstream is not a scripts/kafka.sh cluster under .build (KAFKA_DIR)")
    k = gateway(koord)
    check_exactly_once(*scale_3_5_3(k, tmp_path, "classic", kill_broker=True))
