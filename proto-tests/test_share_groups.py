"""Share groups (KIP-932) with the Java KafkaShareConsumer 4.4: what a user of share groups relies
on, each delivery and acknowledgement as the consumers themselves report it.

- 20,000 records on 2 partitions, 8 consumers of one group (two JVMs of 4, one committing with
  commitSync, the other with commitAsync), explicit acknowledgement: every record is delivered
  once, with delivery count 1, and ACCEPTed once, successfully, with its value as produced.
- The same with implicit acknowledgement (2,000 records, 3 consumers, no commit call: the
  acknowledgements go with the next ShareFetch and with close()).
- RELEASE: records released on their first delivery come again (to one of the two consumers)
  with delivery count 2, and are then accepted; no other record comes twice.
- REJECT: rejected records are delivered once and never again (records produced afterwards are
  delivered, and the rejected ones still are not).
- share.delivery.count.limit=3: a record released on every delivery is delivered exactly 3
  times (counts 1, 2, 3) and then never again (same after-the-fact check).
- librdkafka's share consumer (confluent-kafka's ShareConsumer), 3 of them, explicit
  acknowledgement: every record accepted once, released ones delivered again with count 2.
- The dead-letter queue (KIP-1191, Kafka 4.4): rejected records and records whose delivery
  count ran out are written to the group's queue topic once each, with the original record and
  Kafka's `__dlq.errors.*` headers.
- A consumer that crashes (Runtime.halt) holding acquired records: another consumer gets them
  with delivery count 2, and every record is accepted once (Kafka releases them when the
  crashed consumer's connection closes; their locks would expire anyway).
- A consumer that stalls holding acquired records, connected and heartbeating: once their
  locks expire (share.record.lock.duration.ms=2000 for the group) another consumer gets them
  with delivery count 2; the stalled consumer's late acknowledgement changes nothing.
- Admin: describeShareGroups shows the group Stable with its 3 members (by client.id), each
  with a non-empty assignment covering every partition; listGroups (type share, and every type)
  lists it as a share group; listShareGroupOffsets lists both partitions with lag 0 once all is
  acknowledged; after the members close the group is Empty.
- kafka-share-groups (Kafka 4.4's tool): --list, --describe --state/--members/--offsets,
  --reset-offsets (the records from the new start offset are delivered again, as new),
  --delete-offsets, --delete.
- share.acquire.mode=record_limit (ShareFetch v2): no poll over max.poll.records.
- 16 consumers on one partition under a stream of appends (ShareBench): no record delivered
  twice, no acknowledgement failed.
- koord killed -9 under two consumers mid-stream and restarted (koord only): every record
  produced after the restart is delivered once (standalone: koord's logs start over with it);
  in gateway mode every record is accepted in the end (or the answer to its acknowledgement
  was lost in the kill, and nothing is left to deliver) and none whose acceptance koord
  confirmed before the kill is delivered again (the records and the share states are
  upstream's).

Each group's configs are set before its consumers start, with incrementalAlterConfigs on the
GROUP resource: share.auto.offset.reset=earliest (the records produced before the consumers
started are delivered), and the lock duration and delivery-count limit where a test needs them.

The consumers are java/.../ShareMember.java (JSON lines: record, ack, commit, joined, halting,
closed, error); the admin steps java/.../ShareAdmin.java. Nothing waits on a clock: every wait
is on the consumers' events or the broker's answers, with a deadline that only bounds a failure.

KOORD_BOOTSTRAP=HOST:PORT runs the same tests against a running broker instead (the Apache
Kafka 4.4 of `scripts/kafka.sh start`, which sets the share-group minimums these need: a 1 s
minimum record lock duration, 6 s sessions, 1 s heartbeats). SHARE_CLIENT_LOG=debug (or trace)
logs org.apache.kafka at that level to each JVM's stderr file under the test's tmp dir.

KOORD_UPSTREAM=HOST:PORT,... (scripts/test.sh's gateway tier, a 3-broker Kafka 4.4 formatted with
share groups off, share.version=0) runs them against koord in gateway mode in front of it: koord
is the share groups' coordinator and the share-partition leader of every partition they read,
reading the records from upstream; the clients see only koord's ports (one per upstream broker,
a share session on each).
"""

import collections
import json
import os
import re
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import JAVA_DIR

EXTERNAL_BOOTSTRAP = os.environ.get("KOORD_BOOTSTRAP")
UPSTREAM = os.environ.get("KOORD_UPSTREAM", "")
# koord's settings for these tests: scripts/kafka.sh's group.share.* lines (locks a group may
# set down to 1 s, 6 s sessions, 1 s heartbeats; koord assigns in the heartbeat anyway).
KOORD_SETTINGS = (
    "group.share.min.record.lock.duration.ms=1000",
    "group.share.min.session.timeout.ms=1000",
    "group.share.session.timeout.ms=6000",
    "group.share.min.heartbeat.interval.ms=500",
    "group.share.heartbeat.interval.ms=1000",
)
TIMEOUT = 60.0  # seconds a step may take before the test fails
POLL_INTERVAL = 0.2  # between admin polls; not a wait for an outcome
CLIENT_LOG = os.environ.get("SHARE_CLIENT_LOG", "warn")


@pytest.fixture
def bootstrap(request):
    if EXTERNAL_BOOTSTRAP:
        return EXTERNAL_BOOTSTRAP
    gateway = (f"upstream.bootstrap.servers={UPSTREAM}",) if UPSTREAM else ()
    koord = request.getfixturevalue("koord")(*KOORD_SETTINGS, *gateway)
    request.node.koord = koord  # for a test that kills it
    return koord.bootstrap


@pytest.fixture
def names(request):
    """Unique topic and group names for this test."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    tag = uuid.uuid4().hex[:6]
    return {"topic": f"{base}-{tag}", "group": f"{base}-g-{tag}"}


def java_cmd(main, *args):
    cp_file = JAVA_DIR / "target" / "classpath.txt"
    classes = JAVA_DIR / "target" / "classes"
    if not cp_file.exists() or not (classes / "koord" / "tests" / "ShareMember.class").exists():
        pytest.fail(f"{classes} or {cp_file} missing: build proto-tests/java "
                    "(cd proto-tests/java && mvn -B compile)")
    cp = f"{classes}:{cp_file.read_text().strip()}"
    return ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            f"-Dorg.slf4j.simpleLogger.log.org.apache.kafka={CLIENT_LOG}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            "-cp", cp, f"koord.tests.{main}", *map(str, args)]


def share_admin(*args):
    """One ShareAdmin step; returns its JSON line (fails the test on an error)."""
    p = subprocess.run(java_cmd("ShareAdmin", *args), capture_output=True, text=True,
                       timeout=TIMEOUT)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        pytest.fail(f"ShareAdmin {' '.join(map(str, args))} exited {p.returncode}: "
                    f"{lines or p.stdout[-1000:]}\nstderr: {p.stderr[-3000:]}")
    return lines[-1]


def set_group_config(bootstrap, group, **configs):
    """incrementalAlterConfigs on the group; asserts describeConfigs then shows the values."""
    kvs = [f"{k.replace('_', '.')}={v}" for k, v in configs.items()]
    described = share_admin("set-config", bootstrap, group, *kvs)["configs"]
    for kv in kvs:
        key, value = kv.split("=", 1)
        assert described.get(key) == value, f"{key}: described as {described.get(key)!r}"


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap, topic, values, partitions):
    """values[i] to partition i % partitions, key "k<i>"; returns {(partition, offset): value}."""
    out = {}
    errors = []

    def done(err, msg):
        if err is not None:
            errors.append(err)
        else:
            out[(msg.partition(), msg.offset())] = msg.value().decode()

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), key=b"k%d" % i, partition=i % partitions,
                  on_delivery=done)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0, "records still undelivered after 30 s"
    assert not errors, errors[:5]
    assert len(out) == len(values)
    return out


# --- the consumers' events ------------------------------------------------------------------

class ShareLog:
    """Every event of a test's share consumers, indexed as they arrive (a test sees tens of
    thousands of them), with waiters woken on each."""

    FAILING = ("error", "died")

    def __init__(self):
        self._cond = threading.Condition()
        self.events = []
        # (partition, offset) -> [(member, delivery_count, ack)] in arrival order
        self.deliveries = collections.defaultdict(list)
        # (partition, offset) -> [(member, type, error)] from the acknowledgement callbacks
        self.acks = collections.defaultdict(list)
        self.accepted = set()  # (partition, offset) acknowledged ACCEPT or IMPLICIT without error
        self.by_event = collections.defaultdict(list)  # event name -> events (not record/ack)

    def add(self, e):
        with self._cond:
            self.events.append(e)
            kind = e["event"]
            if kind == "record":
                self.deliveries[(e["partition"], e["offset"])].append(
                    (e["member"], e["delivery_count"], e["ack"]))
            elif kind == "ack":
                for o in e["offsets"]:
                    self.acks[(e["partition"], o)].append((e["member"], e["type"], e["error"]))
                    if e["type"] in ("ACCEPT", "IMPLICIT") and e["error"] is None:
                        self.accepted.add((e["partition"], o))
            else:
                self.by_event[kind].append(e)
            self._cond.notify_all()

    def confirmed_accepts(self):
        """(a mark of the events so far, the records whose ACCEPT was confirmed by then)."""
        with self._cond:
            mark = len(self.events)
            confirmed = {(e["partition"], o) for e in self.events[:mark]
                         if e["event"] == "ack" and e["error"] is None and e["type"] == "ACCEPT"
                         for o in e["offsets"]}
        return mark, confirmed

    def check_none_again(self, mark, confirmed):
        """Something was confirmed accepted before `mark`, and none of it delivered after."""
        with self._cond:
            again = {(e["partition"], e["offset"]) for e in self.events[mark:]
                     if e["event"] == "record"}
        assert confirmed, "nothing was accepted before the kill"
        assert not confirmed & again, sorted(confirmed & again)[:10]
        print(f"{len(confirmed)} accepted before the kill, {len(again)} delivered after it")

    def wait_for(self, what, check, timeout=TIMEOUT):
        """check() (under the lock, so it may read the indexes) until it returns other than
        None; fails on a consumer's error or death, or at the deadline."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                bad = [e for k in self.FAILING for e in self.by_event[k]]
                if bad:
                    pytest.fail(f"a consumer failed while waiting for {what}: {bad[0]}\n"
                                f"{self.summary()}")
                result = check()
                if result is not None:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 1.0))
        pytest.fail(f"not reached within {timeout:.0f}s: {what}\n{self.summary()}")

    def summary(self, last=25):
        with self._cond:
            per_member = collections.Counter(e["member"] for e in self.events
                                             if e["event"] == "record")
            other = [e for e in self.events if e["event"] not in ("record", "ack")]
            return (f"{len(self.deliveries)} offsets delivered, {len(self.accepted)} accepted; "
                    f"deliveries per member {dict(per_member)}\nlast events:\n"
                    + "\n".join(f"  {json.dumps(e)}" for e in other[-last:]))


class ShareJvm:
    """One ShareMember JVM (its consumers are threads in it), its events going to `log`. An
    exit that was not asked for (close()) nor expected (`crash=True`: --hold) is a "died"
    event."""

    def __init__(self, log, tmp_path, bootstrap, group, topics, name, *flags, crash=False):
        self.log = log
        self.name = name
        self.crash = crash
        self.closing = False
        self.stderr_path = tmp_path / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        args = ["--bootstrap", bootstrap, "--group", group, "--topics", ",".join(topics),
                "--name", name, *flags]
        self.proc = subprocess.Popen(java_cmd("ShareMember", *args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.log.add(json.loads(line))
        code = self.proc.wait()
        if not (self.closing and code == 0) and not (self.crash and code == 137):
            tail = self.stderr_path.read_text(errors="replace").splitlines()[-20:]
            self.log.add({"member": self.name, "event": "died", "code": code, "stderr": tail})
        self.log.add({"member": self.name, "event": "exited", "code": code})

    def close(self):
        """End of stdin: every consumer closes (sending its last acknowledgements)."""
        self.closing = True
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def wait_exit(self):
        self.log.wait_for(f"{self.name} to exit", lambda: True if any(
            e["member"] == self.name for e in self.log.by_event["exited"]) else None)

    def stop(self):
        """At teardown: close, and kill what does not exit."""
        self.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        self._stderr.close()


@pytest.fixture
def share(bootstrap, names, tmp_path):
    """The test's ShareLog, and start(name, *flags) for ShareMember JVMs of the test's group."""
    log = ShareLog()
    jvms = []

    def start(name, *flags, crash=False, topics=None):
        jvm = ShareJvm(log, tmp_path, bootstrap, names["group"], topics or [names["topic"]],
                       name, *flags, crash=crash)
        jvms.append(jvm)
        return jvm

    log.start = start
    yield log
    for jvm in jvms:
        jvm.stop()


def close_all(log, *jvms):
    for jvm in jvms:
        jvm.close()
    for jvm in jvms:
        jvm.wait_exit()


def all_accepted(log, keys):
    keys = set(keys)
    return lambda: True if keys <= log.accepted else None


def wait_all_done(log, bootstrap, group, produced, timeout=120):
    """After koord (or a node) was killed under the consumers: every record is accepted in the
    end, or its acknowledgement was answered with an error (the answer lost with the node;
    whether the ACCEPT was stored first is not known to the client) and the group has nothing
    left to deliver (lag 0 on every partition): then the ACCEPT was stored, or the record
    would have come again."""
    keys = set(produced)

    def accepted_or_answer_lost():
        failed = {k for k, acks in log.acks.items() if any(a[2] for a in acks)}
        return True if keys <= log.accepted | failed else None

    log.wait_for("every record accepted, or the answer to its acknowledgement lost",
                 accepted_or_answer_lost, timeout=timeout)
    with log._cond:
        lost = keys - log.accepted
    if lost:
        partitions = {p for p, _ in keys}
        poll_admin(f"nothing left to deliver ({len(lost)} acknowledgements' answers lost)",
                   lambda: share_admin("offsets", bootstrap, group)["offsets"],
                   lambda o: len(o) == len(partitions) and all(v["lag"] == 0 for v in o.values()),
                   timeout=timeout)
    print(f"{len(keys) - len(lost)} records accepted; {len(lost)} with the answer to their "
          f"acknowledgement lost, none left to deliver")


def check_once_each(log, produced):
    """Every produced record delivered exactly once, with delivery count 1 and the value
    produced, and acknowledged once, successfully, as accepted."""
    with log._cond:
        assert set(log.deliveries) == set(produced), (
            f"delivered offsets differ from produced: missing "
            f"{sorted(set(produced) - set(log.deliveries))[:10]}, unknown "
            f"{sorted(set(log.deliveries) - set(produced))[:10]}")
        twice = {k: v for k, v in log.deliveries.items() if len(v) != 1 or v[0][1] != 1}
        assert not twice, f"delivered more than once or with count > 1: {list(twice.items())[:10]}"
        bad_acks = {k: v for k, v in log.acks.items()
                    if len(v) != 1 or v[0][1] not in ("ACCEPT", "IMPLICIT") or v[0][2]}
        assert not bad_acks, f"not acknowledged once as accepted: {list(bad_acks.items())[:10]}"
        assert set(log.acks) == set(produced)
    for e in log.events:
        if e["event"] == "record":
            assert e["value"] == produced[(e["partition"], e["offset"])], e
            assert e["key"] is not None


def member_counts(log):
    return dict(collections.Counter(e["member"] for e in log.events if e["event"] == "record"))


# --- the tests --------------------------------------------------------------------------------

def test_explicit_every_record_accepted_once(bootstrap, names, share):
    """8 consumers (2 JVMs of 4; commitSync in one, commitAsync in the other) share 20,000
    records on 2 partitions: each delivered and accepted exactly once across the group."""
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    produced = produce(bootstrap, names["topic"], [f"v-{i}" for i in range(20_000)], 2)
    a = share.start("sync", "--count", 4, "--commit", "sync")
    b = share.start("async", "--count", 4, "--commit", "async")
    share.wait_for("all 20,000 records accepted", all_accepted(share, produced))
    close_all(share, a, b)
    check_once_each(share, produced)
    closed = share.by_event["closed"]
    assert len(closed) == 8, closed
    assert sum(e["deliveries"] for e in closed) == 20_000
    # Which consumers get records is up to timing (a fetch acquires whole batches, thousands
    # of records): a commitSync consumer that had any commits them, and each commit succeeds.
    commits = share.by_event["commit"]
    counts = member_counts(share)
    print(f"deliveries per consumer: {counts}")
    if any(m.startswith("sync") for m in counts):
        assert commits, counts
    assert all(v is None for c in commits for v in c["result"].values()), commits[:5]


def test_implicit_every_record_accepted_once(bootstrap, names, share):
    """share.acknowledgement.mode=implicit, no commit call: 2,000 records on 2 partitions, 3
    consumers; each record delivered once and acknowledged (implicitly) once."""
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    produced = produce(bootstrap, names["topic"], [f"v-{i}" for i in range(2_000)], 2)
    a = share.start("implicit", "--count", 3, "--ack-mode", "implicit")
    share.wait_for("all 2,000 records acknowledged", all_accepted(share, produced))
    close_all(share, a)
    check_once_each(share, produced)
    assert all(t == "IMPLICIT" for v in share.acks.values() for _, t, _ in v)
    print(f"deliveries per consumer: {member_counts(share)}")


def test_release_redelivers_with_count_2(bootstrap, names, share):
    """Two consumers release every "rel-" record on its first delivery: each comes again, to
    one of them, with delivery count 2, and is accepted; every other record comes once."""
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    values = [f"rel-{i}" if i % 10 == 0 else f"v-{i}" for i in range(400)]
    produced = produce(bootstrap, names["topic"], values, 2)
    a = share.start("rel", "--count", 2, "--release", "^rel-", "--release-below", 2,
                    "--commit", "sync")
    share.wait_for("all 400 records accepted", all_accepted(share, produced))
    close_all(share, a)
    released = {k for k, v in produced.items() if v.startswith("rel-")}
    assert len(released) == 40
    with share._cond:
        for k in produced:
            d = share.deliveries[k]
            acks = share.acks[k]
            if k in released:
                assert [(c, t) for _, c, t in d] == [(1, "RELEASE"), (2, "ACCEPT")], (k, d)
                assert [(t, err) for _, t, err in acks] == [("RELEASE", None), ("ACCEPT", None)], \
                    (k, acks)
            else:
                assert [(c, t) for _, c, t in d] == [(1, "ACCEPT")], (k, d)
                assert [(t, err) for _, t, err in acks] == [("ACCEPT", None)], (k, acks)
    print(f"deliveries per consumer: {member_counts(share)}; released records went again to "
          f"{collections.Counter(share.deliveries[k][1][0] for k in released)}")


def after_the_fact(share, bootstrap, names, partitions, count=10):
    """Produces `count` more records to each partition and waits until they are accepted:
    anything released or still available before them would have been delivered by then
    (a share partition hands out its lowest available offsets first)."""
    values = [f"after-{i}" for i in range(count * partitions)]
    more = produce(bootstrap, names["topic"], values, partitions)
    share.wait_for("the records produced afterwards accepted", all_accepted(share, more))
    return more


def test_reject_is_never_redelivered(bootstrap, names, share):
    """Two consumers reject every "rej-" record: each is delivered once, rejected successfully,
    and not delivered again, even after records produced later have been."""
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    values = [f"rej-{i}" if i % 7 == 0 else f"v-{i}" for i in range(300)]
    produced = produce(bootstrap, names["topic"], values, 2)
    rejected = {k for k, v in produced.items() if v.startswith("rej-")}
    a = share.start("rej", "--count", 2, "--reject", "^rej-", "--commit", "async")

    def done():
        ok = set(produced) - rejected <= share.accepted and all(
            any(t == "REJECT" and err is None for _, t, err in share.acks[k]) for k in rejected)
        return True if ok else None

    share.wait_for("accepted and rejected acknowledgements of all 300", done)
    more = after_the_fact(share, bootstrap, names, 2)
    close_all(share, a)
    with share._cond:
        for k in rejected:
            assert [(c, t) for _, c, t in share.deliveries[k]] == [(1, "REJECT")], \
                (k, share.deliveries[k])
        for k in set(produced) - rejected:
            assert [(c, t) for _, c, t in share.deliveries[k]] == [(1, "ACCEPT")], \
                (k, share.deliveries[k])
        assert set(share.deliveries) == set(produced) | set(more)


def test_delivery_count_limit(bootstrap, names, share):
    """share.delivery.count.limit=3: a record released on every delivery is delivered with
    counts 1, 2 and 3, and never again (records produced after it are delivered; it is not)."""
    create_topic(bootstrap, names["topic"], 1)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest",
                     share_delivery_count_limit=3)
    values = [f"rel-{i}" if i in (3, 11) else f"v-{i}" for i in range(20)]
    produced = produce(bootstrap, names["topic"], values, 1)
    doomed = {k for k, v in produced.items() if v.startswith("rel-")}
    a = share.start("limit", "--release", "^rel-", "--commit", "sync")

    def done():
        ok = set(produced) - doomed <= share.accepted and all(
            sum(1 for _, t, err in share.acks[k] if t == "RELEASE" and err is None) >= 3
            for k in doomed)
        return True if ok else None

    share.wait_for("the others accepted and the doomed records released 3 times", done)
    after_the_fact(share, bootstrap, names, 1)
    close_all(share, a)
    with share._cond:
        for k in doomed:
            assert [(c, t) for _, c, t in share.deliveries[k]] == \
                [(1, "RELEASE"), (2, "RELEASE"), (3, "RELEASE")], (k, share.deliveries[k])
        for k in set(produced) - doomed:
            assert [(c, t) for _, c, t in share.deliveries[k]] == [(1, "ACCEPT")], \
                (k, share.deliveries[k])


def read_topic(bootstrap, topic, count, timeout=TIMEOUT):
    """The first `count` records of every partition of `topic` (fails if fewer come by the
    deadline), each as (partition, key, value, headers dict)."""
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.key(), m.value(),
                        {k: (v.decode() if v is not None else None)
                         for k, v in (m.headers() or [])}))
        assert len(out) >= count, f"{len(out)} of {count} records on {topic}"
        return out
    finally:
        c.close()


def queue_end(bootstrap, topic):
    """The end offset of `topic`'s partition 0."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"w-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        c.close()


def topic_knows(bootstrap, topic, key):
    """Whether the broker describes `key` among `topic`'s configs (a Kafka before 4.4, behind
    koord in gateway mode, does not know the dead-letter queue config)."""
    from confluent_kafka.admin import ConfigResource
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return key in admin.describe_configs([res])[res].result(30)


def create_dead_letter_topic(bootstrap, name):
    """`name` with errors.deadletterqueue.group.enable=true, or without it where the broker does
    not know the config (then any topic serves as a queue)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(name, 1, 1, config={
            "errors.deadletterqueue.group.enable": "true"})])[name].result(30)
    except Exception as e:  # noqa: BLE001 - an older Kafka: INVALID_CONFIG
        if "INVALID_CONFIG" not in str(e) and "Unknown topic config" not in str(e):
            raise
        create_topic(bootstrap, name, 1)


def test_dead_letter_queue(bootstrap, names, share):
    """KIP-1191 (Kafka 4.4): a share group with errors.deadletterqueue.topic.name (a topic made
    with errors.deadletterqueue.group.enable=true) and copy.record.enable=true. Records the
    consumer rejects, and records it releases until share.delivery.count.limit=2 runs out, go
    to the queue, once each, with the original key and value and Kafka's headers (source
    topic, partition, offset, group, delivery count, the reason in Kafka's words); they are
    never delivered again, and every other record is accepted once."""
    topic, group = names["topic"], names["group"]
    dlq = f"dlq.{topic}"
    create_topic(bootstrap, topic, 2)
    create_dead_letter_topic(bootstrap, dlq)
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest",
                     share_delivery_count_limit=2,
                     errors_deadletterqueue_topic_name=dlq,
                     errors_deadletterqueue_copy_record_enable="true")
    values = [f"rej-{i}" if i % 10 == 3 else f"rel-{i}" if i % 10 == 7 else f"v-{i}"
              for i in range(100)]
    produced = produce(bootstrap, topic, values, 2)
    doomed = {k for k, v in produced.items() if not v.startswith("v-")}
    a = share.start("dlq", "--reject", "^rej-", "--release", "^rel-", "--commit", "sync")

    def done():
        def settled(k):
            ok = [t for _, t, err in share.acks[k] if err is None]
            return ok == ["REJECT"] if produced[k].startswith("rej-") else \
                ok.count("RELEASE") >= 2
        ok = set(produced) - doomed <= share.accepted and all(settled(k) for k in doomed)
        return True if ok else None

    share.wait_for("the others accepted, the doomed rejected or released twice", done)
    letters = read_topic(bootstrap, dlq, len(doomed))
    more = after_the_fact(share, bootstrap, names, 2)
    close_all(share, a)
    assert queue_end(bootstrap, dlq) == len(doomed), "records in the queue twice"
    by_source = {}
    for _, key, value, headers in letters:
        assert headers["__dlq.errors.topic"] == topic, headers
        assert headers["__dlq.errors.group"] == group, headers
        k = (int(headers["__dlq.errors.partition"]), int(headers["__dlq.errors.offset"]))
        assert k not in by_source, f"{k} in the queue twice"
        by_source[k] = (key, value, headers)
    assert set(by_source) == doomed, sorted(set(by_source) ^ doomed)
    for k, (key, value, headers) in by_source.items():
        assert value.decode() == produced[k], (k, value)
        assert key is not None and key.startswith(b"k"), (k, key)
        if produced[k].startswith("rej-"):
            assert headers["__dlq.errors.delivery.count"] == "1", headers
            assert headers["__dlq.errors.message"] == "Offset rejected by client.", headers
        else:
            assert headers["__dlq.errors.delivery.count"] == "2", headers
            assert headers["__dlq.errors.message"] == \
                "Offset delivery count exceeded the threshold.", headers
    with share._cond:
        for k in doomed:
            want = [(1, "REJECT")] if produced[k].startswith("rej-") else \
                [(1, "RELEASE"), (2, "RELEASE")]
            assert [(c, t) for _, c, t in share.deliveries[k]] == want, (k, share.deliveries[k])
        assert set(share.deliveries) == set(produced) | set(more)


def test_dead_letter_queue_refused_archives_regardless(bootstrap, names, share):
    """A group whose errors.deadletterqueue.topic.name is a topic made without
    errors.deadletterqueue.group.enable: Kafka will not write to it, and archives the rejected
    records regardless: they are never delivered again, and the topic stays empty."""
    topic, group = names["topic"], names["group"]
    dlq = f"dlq.{topic}"
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, dlq, 1)
    if not topic_knows(bootstrap, dlq, "errors.deadletterqueue.group.enable"):
        pytest.skip("the broker does not know errors.deadletterqueue.group.enable (a Kafka "
                    "before 4.4 behind koord): any topic serves as a queue")
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest",
                     errors_deadletterqueue_topic_name=dlq)
    values = [f"rej-{i}" if i % 4 == 0 else f"v-{i}" for i in range(40)]
    produced = produce(bootstrap, topic, values, 1)
    rejected = {k for k, v in produced.items() if v.startswith("rej-")}
    a = share.start("dlq-off", "--reject", "^rej-", "--commit", "sync")
    share.wait_for("the others accepted, the rejected ones rejected", lambda: True if (
        set(produced) - rejected <= share.accepted and all(
            any(t == "REJECT" and err is None for _, t, err in share.acks[k])
            for k in rejected)) else None)
    more = after_the_fact(share, bootstrap, names, 1)
    close_all(share, a)
    with share._cond:
        for k in rejected:
            assert [(c, t) for _, c, t in share.deliveries[k]] == [(1, "REJECT")], \
                (k, share.deliveries[k])
        assert set(share.deliveries) == set(produced) | set(more)
    # Archived, not left on their way to the queue: the group has nothing left.
    poll_admin("lag 0: the rejected records archived",
               lambda: share_admin("offsets", bootstrap, group)["offsets"],
               lambda o: len(o) == 1 and all(v["lag"] == 0 for v in o.values()))
    high = queue_end(bootstrap, dlq)
    assert high == 0, f"{high} records written to {dlq}, which is not a dead-letter queue"


def test_librdkafka_share_consumers(bootstrap, names):
    """librdkafka's share consumer (confluent-kafka's ShareConsumer), three of them in one
    group, explicit acknowledgement with commit_sync: 3,000 records on 2 partitions, each
    delivered once with delivery count 1 and accepted once, except the "rel-" records, released
    on their first delivery, which come again with delivery count 2 and are then accepted."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    topic, group = names["topic"], names["group"]
    create_topic(bootstrap, topic, 2)
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest")
    values = [f"rel-{i}" if i % 50 == 0 else f"v-{i}" for i in range(3000)]
    produced = produce(bootstrap, topic, values, 2)
    cond = threading.Condition()
    deliveries = collections.defaultdict(list)  # (partition, offset) -> [delivery count]
    accepted = collections.Counter()
    failures = []
    stop = threading.Event()

    def run(i):
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "client.id": f"rd-{i}", "share.acknowledgement.mode": "explicit"})
        try:
            c.subscribe([topic])
            while not stop.is_set():
                msgs = c.poll(0.5)
                if not msgs:
                    continue
                taken = []
                for m in msgs:
                    if m.error():
                        with cond:
                            failures.append(str(m.error()))
                        continue
                    k = (m.partition(), m.offset())
                    release = m.value().startswith(b"rel-") and m.delivery_count() == 1
                    c.acknowledge(m, AcknowledgeType.RELEASE if release else
                                  AcknowledgeType.ACCEPT)
                    taken.append((k, m.delivery_count(), release))
                result = c.commit_sync()
                bad = {str(tp): str(e) for tp, e in (result or {}).items() if e is not None}
                with cond:
                    for k, count, release in taken:
                        deliveries[k].append(count)
                        if not release and not bad:
                            accepted[k] += 1
                    if bad:
                        failures.append(bad)
                    cond.notify_all()
        except Exception as e:  # noqa: BLE001 - reported as the test's failure
            with cond:
                failures.append(repr(e))
                cond.notify_all()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        with cond:
            while not failures and set(accepted) != set(produced):
                left = deadline - time.monotonic()
                assert left > 0, f"{len(accepted)} of {len(produced)} accepted"
                cond.wait(min(left, 1.0))
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failures, failures[:5]
    for k, v in produced.items():
        want = [1, 2] if v.startswith("rel-") else [1]
        # Sorted: another consumer may report the second delivery before the first's
        # consumer reports its own.
        assert sorted(deliveries[k]) == want, (k, v, deliveries[k])
        assert accepted[k] == 1, (k, accepted[k])


def test_crashed_consumer_records_go_to_another(bootstrap, names, share):
    """A consumer crashes (Runtime.halt) holding the records of its first poll,
    unacknowledged. Another consumer gets them with delivery count 2, and every record is
    accepted once. (Kafka 4.4 releases them as soon as the crashed consumer's connection
    closes, its share session going with it; at the latest their locks expire, after
    share.record.lock.duration.ms=2000.)"""
    create_topic(bootstrap, names["topic"], 1)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest",
                     share_record_lock_duration_ms=2000)
    produced = produce(bootstrap, names["topic"], [f"v-{i}" for i in range(50)], 1)
    victim = share.start("victim", "--hold", crash=True)
    victim.wait_exit()
    halting = share.by_event["halting"]
    assert len(halting) == 1 and halting[0]["held"] > 0, halting
    held = {k for k, v in share.deliveries.items() if any(m == "victim" for m, _, _ in v)}
    assert len(held) == halting[0]["held"]
    assert not share.acks, f"the victim acknowledged: {dict(share.acks)}"
    survivor = share.start("survivor", "--commit", "sync")
    share.wait_for("every record accepted by the survivor", all_accepted(share, produced))
    close_all(share, survivor)
    with share._cond:
        for k in produced:
            d = share.deliveries[k]
            if k in held:
                assert [(m, c) for m, c, _ in d] == [("victim", 1), ("survivor", 2)], (k, d)
            else:
                # Acquired by the victim's fetch without reaching its poll (count 2), or never.
                assert [m for m, _, _ in d] == ["survivor"] and d[0][1] in (1, 2), (k, d)
            assert [(m, t, err) for m, t, err in share.acks[k]] == [("survivor", "ACCEPT", None)]
    print(f"the victim held {len(held)} records; the survivor got "
          f"{collections.Counter(share.deliveries[k][-1][1] for k in produced)} by count")


def poll_admin(what, step, check, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = step()
        if check(last):
            return last
        time.sleep(POLL_INTERVAL)
    pytest.fail(f"not reached within {timeout:.0f}s: {what}; last answer: {last}")


def test_admin_describe_list_offsets(bootstrap, names, share):
    """describeShareGroups: Stable, 3 members known by their client.id, each assigned, every
    partition assigned; listGroups lists it as a share group; listShareGroupOffsets: lag 0 on
    every partition once every record is accepted; Empty once the members have left."""
    topic, group = names["topic"], names["group"]
    create_topic(bootstrap, topic, 2)
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest")
    produced = produce(bootstrap, topic, [f"v-{i}" for i in range(100)], 2)
    a = share.start("adm", "--count", 3, "--commit", "sync")
    share.wait_for("all 100 records accepted", all_accepted(share, produced))
    members = {"adm-0", "adm-1", "adm-2"}

    def stable(d):
        return (d["state"] == "Stable" and {m["client_id"] for m in d["members"]} == members
                and all(m["assignment"] for m in d["members"])
                and {p for m in d["members"] for p in m["assignment"]}
                == {f"{topic}-0", f"{topic}-1"})

    d = poll_admin("Stable with 3 assigned members", lambda: share_admin("describe", bootstrap,
                                                                          group), stable)
    assert d["group"] == group
    assert len({m["member_id"] for m in d["members"]}) == 3
    assert all(m["member_epoch"] > 0 for m in d["members"]), d
    assert d["assignment_epoch"] == d["group_epoch"], d
    print(f"described: {d}")

    listed = share_admin("list", bootstrap)
    mine = [g for g in listed["share"] if g["group"] == group]
    assert len(mine) == 1 and mine[0]["type"] == "Share", listed["share"]
    assert mine[0]["state"] == "Stable", mine
    assert all(g["type"] == "Share" for g in listed["share"]), listed["share"]
    mine_all = [g for g in listed["all"] if g["group"] == group]
    assert len(mine_all) == 1 and mine_all[0]["type"] == "Share", listed["all"]

    # Every record is acknowledged: lag 0 on both partitions. (Kafka 4.4 still says start
    # offset 0 here, its share-partition start offset as last written to the share
    # coordinator; anything up to the end offset is right.)
    ends = {f"{topic}-{p}": 1 + max(o for q, o in produced if q == p) for p in (0, 1)}
    offsets = poll_admin(
        "both partitions listed with lag 0",
        lambda: share_admin("offsets", bootstrap, group)["offsets"],
        lambda o: set(o) == set(ends) and all(v["lag"] == 0 for v in o.values()))
    assert all(0 <= v["start_offset"] <= ends[k] for k, v in offsets.items()), offsets
    print(f"listShareGroupOffsets: {offsets}")

    close_all(share, a)
    d = poll_admin("Empty with no member once they closed",
                   lambda: share_admin("describe", bootstrap, group),
                   lambda d: d["state"] == "Empty" and not d["members"])


def test_stalled_consumer_lock_expires(bootstrap, names, share):
    """A consumer holds the records of its first poll and stops polling, its connection and
    membership alive (the client's background thread heartbeats). Once their locks expire
    (share.record.lock.duration.ms=2000) another consumer gets them with a higher delivery
    count and accepts them. The stalled consumer then resumes and accepts them too: that late
    acknowledgement changes nothing (Kafka 4.4 answers it without an error: the records are
    already acknowledged, below the share partition's start offset; an error would do as
    well), and nothing is delivered after the other consumer's acceptance. (The stalled
    consumer's client may fetch in the background and take expired records again, count 2,
    before the other consumer gets them, count 3: a waiting fetch wakes when locks expire.)"""
    create_topic(bootstrap, names["topic"], 1)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest",
                     share_record_lock_duration_ms=2000)
    produced = produce(bootstrap, names["topic"], [f"v-{i}" for i in range(50)], 1)
    stalled = share.start("stalled", "--stall")
    share.wait_for("the consumer stalled holding records",
                   lambda: share.by_event["stalled"][0] if share.by_event["stalled"] else None)
    held = {k for k, v in share.deliveries.items() if any(m == "stalled" for m, _, _ in v)}
    assert len(held) == share.by_event["stalled"][0]["held"] > 0
    other = share.start("other", "--commit", "sync")
    share.wait_for("every record accepted by the other consumer", all_accepted(share, produced))
    stalled.proc.stdin.write("resume stalled\n")
    stalled.proc.stdin.flush()
    share.wait_for("the stalled consumer's acknowledgement answered", lambda: True if any(
        e["member"] == "stalled" for e in share.by_event["commit"]) else None)
    close_all(share, stalled, other)
    commit = next(e for e in share.by_event["commit"] if e["member"] == "stalled")
    print(f"the stalled consumer's late acknowledgement: {commit}; acks "
          f"{[e for e in share.events if e['event'] == 'ack' and e['member'] == 'stalled']}")
    with share._cond:
        for k in produced:
            d = share.deliveries[k]
            counts = [c for _, c, _ in d]
            # Each delivery under a count of its own; the other consumer's is the last one.
            assert len(set(counts)) == len(counts), (k, d)
            by_other = [c for m, c, _ in d if m == "other"]
            assert by_other == [max(counts)], (k, d)
            if k in held:
                assert d[0][:2] == ("stalled", 1) and max(counts) >= 2, (k, d)
                late = [t for m, t, _ in share.acks[k] if m == "stalled"]
                assert late and set(late) == {"ACCEPT"}, (k, share.acks[k])
            ok = [(m, t) for m, t, err in share.acks[k] if m == "other" and err is None]
            assert ok == [("other", "ACCEPT")], (k, share.acks[k])



@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP or UPSTREAM),
                    reason="kills koord standalone: needs the koord process this test starts")
def test_koord_killed_and_restarted_mid_stream(request, bootstrap, names, share):
    """koord is killed -9 while two consumers are accepting 20,000 records, and started again
    on the same port with the same data dir. The consumers ride it out (they reconnect; their
    sessions are gone, so acknowledgements in flight fail and nothing of theirs is applied to
    the new logs), the group and its configs come back from the store, and every record
    produced after the restart is delivered exactly once, with delivery count 1, and accepted. koord's own logs live in memory (README): the records produced before the kill are
    gone with them, and the share partitions start over at offset 0 of the new logs (the same
    offsets as records acknowledged before: none of those counts for the new records)."""
    koord = request.node.koord
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    produce(bootstrap, names["topic"], [f"pre-{i}" for i in range(20_000)], 2)
    a = share.start("r", "--count", 2, "--commit", "sync")
    share.wait_for("some records accepted", lambda: True if len(share.accepted) >= 200 else None)
    koord.proc.kill()
    koord.proc.wait()
    with share._cond:
        mark = len(share.events)
        before = len(share.accepted)
    koord.start(port=koord.port)
    described = share_admin("set-config", bootstrap, names["group"])["configs"]
    assert described.get("share.auto.offset.reset") == "earliest", described
    post = produce(bootstrap, names["topic"], [f"post-{i}" for i in range(2_000)], 2)

    def after_mark():
        """Record and ack events since the restart, by the produced post- records' keys."""
        deliveries = collections.defaultdict(list)
        accepted = collections.Counter()
        for e in share.events[mark:]:
            if e["event"] == "record" and e["value"].startswith("post-"):
                deliveries[(e["partition"], e["offset"])].append(e)
            elif e["event"] == "ack" and e["error"] is None and e["type"] == "ACCEPT":
                for o in e["offsets"]:
                    accepted[(e["partition"], o)] += 1
        return deliveries, accepted

    share.wait_for("every record produced after the restart accepted",
                   lambda: True if set(post) <= set(after_mark()[1]) else None, timeout=120)
    close_all(share, a)
    with share._cond:
        deliveries, accepted = after_mark()
        assert set(deliveries) == set(post), sorted(set(post) ^ set(deliveries))[:10]
        for k, d in deliveries.items():
            assert [(e["value"], e["delivery_count"]) for e in d] == [(post[k], 1)], (k, d)
            # At least once: an acknowledgement answered before the kill may reach the
            # callback after it, and name the same offset of the old log.
            assert accepted[k] >= 1, (k, accepted[k])
        failed = [e for e in share.events[mark:] if e["event"] == "ack" and e["error"]]
    print(f"{before} records accepted before the kill; acknowledgements that failed across "
          f"the restart: {collections.Counter((e['error'], len(e['offsets'])) for e in failed)}")


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP or not UPSTREAM), reason="gateway mode: KOORD_UPSTREAM")
def test_gateway_serves_share_groups_the_upstream_has_not(bootstrap, names):
    """The upstream cluster has share groups off: Kafka's own tool, pointed at it, is refused
    (UnsupportedVersionException); through koord the same command gets koord's answer (no such
    group yet, as Kafka with share groups on answers it)."""
    out = share_tool(UPSTREAM.split(",")[0], "--describe", "--group", names["group"], check=False)
    assert "UnsupportedVersionException" in out, out
    out = share_tool(bootstrap, "--describe", "--group", names["group"], check=False)
    assert f"GroupIdNotFoundException: Group {names['group']} not found." in out, out


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP or not UPSTREAM),
                    reason="kills koord in gateway mode: needs KOORD_UPSTREAM")
def test_gateway_koord_killed_and_restarted_mid_stream(request, bootstrap, names, share):
    """Gateway mode: koord is killed -9 while two consumers are accepting 20,000 records and
    started again on the same port. The records and the share-partition states are upstream's,
    so the group goes on where koord's store left it: every record is accepted in the end (or
    the answer to its ACCEPT was lost with koord, and the group has nothing left to deliver),
    and no record whose ACCEPT koord confirmed before the kill is delivered again after it."""
    koord = request.node.koord
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    produced = produce(bootstrap, names["topic"], [f"v-{i}" for i in range(20_000)], 2)
    a = share.start("r", "--count", 2, "--commit", "sync")
    share.wait_for("some records accepted", lambda: True if len(share.accepted) >= 200 else None)
    koord.proc.kill()
    koord.proc.wait()
    mark, confirmed = share.confirmed_accepts()
    koord.start(port=koord.port)
    wait_all_done(share, bootstrap, names["group"], produced)
    close_all(share, a)
    share.check_none_again(mark, confirmed)


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP or not UPSTREAM),
                    reason="cluster mode: needs KOORD_UPSTREAM")
def test_cluster_share_group_through_another_node_and_its_failover(tmp_path, names):
    """Cluster mode, two nodes: the consumers know only the node that does not serve their
    group (its ports are every partition's leader for them), so each share fetch and
    acknowledgement goes through it to the group's node, on that node's port for the same
    upstream broker. Records are accepted that way; then the group's node is killed -9: the
    other takes its shard (the share states come from upstream), every record is accepted in
    the end (or the answer to its ACCEPT was lost with the node, and the group has nothing left
    to deliver), and none whose ACCEPT was confirmed before the kill is delivered again."""
    from test_cluster import Cluster
    from test_gateway_state import kp_admin

    cluster = Cluster(tmp_path, size=2, settings=KOORD_SETTINGS)
    log = ShareLog()
    jvm = None
    try:
        cluster.start()
        cluster.wait_settled([0, 1])
        front, owner = cluster.nodes
        kp = kp_admin(front.bootstrap)
        try:
            async def coordinator(g):
                return await kp._find_coordinator_id(g)
            group = next(g for g in (f"{names['group']}-{i}" for i in range(64))
                         if kp._manager.run(coordinator, g) == 1002)
        finally:
            kp.close()
        create_topic(front.bootstrap, names["topic"], 2)
        # Set through the node that does not serve the group; the group's node learns it.
        set_group_config(front.bootstrap, group, share_auto_offset_reset="earliest")
        poll_admin("the group's node to see the config set through the other",
                   lambda: share_admin("set-config", owner.bootstrap, group)["configs"],
                   lambda c: c.get("share.auto.offset.reset") == "earliest")
        produced = produce(front.bootstrap, names["topic"],
                           [f"v-{i}" for i in range(20_000)], 2)
        jvm = ShareJvm(log, tmp_path, front.bootstrap, group, [names["topic"]], "c",
                       "--count", 2, "--commit", "sync")
        log.wait_for("some records accepted through the other node",
                     lambda: True if len(log.accepted) >= 200 else None)
        owner.proc.kill()
        owner.proc.wait()
        mark, confirmed = log.confirmed_accepts()
        wait_all_done(log, front.bootstrap, group, produced)
        close_all(log, jvm)
        log.check_none_again(mark, confirmed)
    finally:
        if jvm is not None:
            jvm.stop()
        cluster.stop()


def share_tool(bootstrap, *args, check=True):
    """kafka-share-groups (Kafka 4.4's ShareGroupCommand) with `args`: its stdout and stderr (it
    prints some answers to the one, some to the other); with `check`, the test fails with its
    output if it exits other than 0."""
    p = subprocess.run(java_cmd_main("org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                                     "--bootstrap-server", bootstrap, *args),
                       capture_output=True, text=True, timeout=TIMEOUT)
    if check and p.returncode != 0:
        pytest.fail(f"kafka-share-groups {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n"
                    f"{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def java_cmd_main(main, *args):
    """java_cmd for a class outside koord.tests (a Kafka tool on the classpath)."""
    cmd = java_cmd("ShareAdmin", *args)
    cmd[cmd.index("koord.tests.ShareAdmin")] = main
    return cmd


def tool_rows(out, group):
    """The table rows of a kafka-share-groups answer that belong to `group`, split."""
    return [line.split() for line in out.splitlines() if line.split()[:1] == [group]]


def test_kafka_share_groups_tool(bootstrap, names, share):
    """kafka-share-groups (Kafka 4.4's tool) on a group that accepted 100 records on 2
    partitions and closed: --list, --describe --state/--members/--offsets (lag 0 on each
    partition), --reset-offsets --to-offset 20 on partition 1 (then described at
    20 with lag 30, and a consumer gets exactly offsets 20-49 of it again, as new deliveries),
    --reset-offsets --to-latest, --delete-offsets, --delete."""
    topic, group = names["topic"], names["group"]
    create_topic(bootstrap, topic, 2)
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest")
    produced = produce(bootstrap, topic, [f"v-{i}" for i in range(100)], 2)
    a = share.start("tool", "--commit", "sync")
    share.wait_for("all 100 records accepted", all_accepted(share, produced))
    close_all(share, a)

    assert group in share_tool(bootstrap, "--list").split()
    state = poll_admin("the group Empty", lambda: tool_rows(
        share_tool(bootstrap, "--describe", "--group", group, "--state"), group),
        lambda rows: len(rows) == 1 and rows[0][-2:] == ["Empty", "0"])
    print(f"--state: {state}")
    members = share_tool(bootstrap, "--describe", "--group", group, "--members")
    assert f"Share group '{group}' has no active members." in members, members
    # GROUP TOPIC PARTITION START-OFFSET LAG
    # Lag 0 on both. (Kafka 4.4 may still say start offset 0, its share-partition start offset
    # as last written to its share coordinator; koord says 50.)
    offsets = tool_rows(share_tool(bootstrap, "--describe", "--group", group, "--offsets"), group)
    assert sorted((r[1], r[2], r[4]) for r in offsets) == [(topic, "0", "0"), (topic, "1", "0")], \
        offsets
    assert all(0 <= int(r[3]) <= 50 for r in offsets), offsets

    reset = tool_rows(share_tool(bootstrap, "--reset-offsets", "--group", group, "--topic",
                                 f"{topic}:1", "--to-offset", "20", "--execute"), group)
    assert [r[1:] for r in reset] == [[topic, "1", "20"]], reset
    offsets = tool_rows(share_tool(bootstrap, "--describe", "--group", group, "--offsets"), group)
    assert sorted((r[1], r[2], r[4]) for r in offsets) == [(topic, "0", "0"), (topic, "1", "30")], \
        offsets
    assert [r[3] for r in offsets if r[2] == "1"] == ["20"], offsets
    again = {(1, o) for o in range(20, 50)}
    with share._cond:
        mark = len(share.events)
    b = share.start("again", "--commit", "sync")

    def redelivered():
        got = [e for e in share.events[mark:] if e["event"] == "record"]
        return got if {(e["partition"], e["offset"]) for e in got} >= again else None

    share.wait_for("partition 1's records from offset 20 delivered again", redelivered)
    close_all(share, b)
    with share._cond:
        got = [(e["partition"], e["offset"], e["delivery_count"])
               for e in share.events[mark:] if e["event"] == "record"]
    assert sorted(got) == sorted((p, o, 1) for p, o in again), got

    latest = tool_rows(share_tool(bootstrap, "--reset-offsets", "--group", group, "--all-topics",
                                  "--to-latest", "--execute"), group)
    assert sorted(r[1:] for r in latest) == [[topic, "0", "50"], [topic, "1", "50"]], latest

    # Kafka marks the reset topic's state initialized a moment after the reset answers; until
    # then it has no offset information to delete for it.
    poll_admin("the topic's offsets deleted",
               lambda: share_tool(bootstrap, "--delete-offsets", "--group", group, "--topic", topic,
                                  check=False),
               lambda out: [topic, "Successful"] in [line.split() for line in out.splitlines()])
    out = share_tool(bootstrap, "--describe", "--group", group, "--offsets")
    assert f"Share group '{group}' has no offset information." in out, out

    out = share_tool(bootstrap, "--delete", "--group", group)
    assert f"Deletion of requested share groups ('{group}') was successful." in out, out
    assert group not in share_tool(bootstrap, "--list").split()


def test_record_limit_acquire_mode(bootstrap, names, share):
    """share.acquire.mode=record_limit (ShareFetch v2, KIP-1206) with max.poll.records=7: no
    ShareFetch answer holds more than 7 records, though the producer wrote batches of many more,
    and each of 1,000 records is delivered once and accepted. The client shows it per poll: a
    poll holds at most 7 records per broker the partitions are fetched from (the Java client
    finishes a batch it started from the next broker's answer: in gateway mode in front of a
    3-broker Kafka the 2 partitions may have 2 leaders)."""
    create_topic(bootstrap, names["topic"], 2)
    set_group_config(bootstrap, names["group"], share_auto_offset_reset="earliest")
    produced = produce(bootstrap, names["topic"], [f"v-{i}" for i in range(1_000)], 2)
    a = share.start("limit", "--count", 2, "--commit", "sync", "--report-polls",
                    "share.acquire.mode=record_limit", "max.poll.records=7")
    share.wait_for("all 1,000 records accepted", all_accepted(share, produced))
    close_all(share, a)
    check_once_each(share, produced)
    polls = [e["records"] for e in share.by_event["poll"]]
    topic = names["topic"]
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    leaders = {p.leader for p in meta.topics[topic].partitions.values()}
    assert polls and max(polls) <= 7 * len(leaders), (leaders, polls)
    print(f"{len(polls)} polls, sizes {collections.Counter(polls)}")


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="koord's own /metrics and status API")
def test_metrics_and_status_page_show_share_groups(request, bootstrap, names, share):
    """koord's /metrics counts share-group records by outcome and /api/groups/{id} shows the
    share group, its members and its partitions: 200 records on 2 partitions, 20 released once
    and accepted on their second delivery, the other 180 accepted at once."""
    import urllib.parse
    import urllib.request
    from test_observe import scrape, value
    koord = request.node.koord
    topic, group = names["topic"], names["group"]
    before = scrape(koord)
    create_topic(bootstrap, topic, 2)
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest")
    values = [f"rel-{i}" if i % 10 == 0 else f"v-{i}" for i in range(200)]
    produced = produce(bootstrap, topic, values, 2)
    a = share.start("obs", "--count", 2, "--commit", "sync", "--release", "^rel-",
                    "--release-below", 2)
    share.wait_for("all 200 records accepted", all_accepted(share, produced))

    def status():
        url = f"{koord.http}/api/groups/{urllib.parse.quote(group)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    g = poll_admin("the status API shows both members", status,
                   lambda g: len(g["members"]) == 2)
    assert (g["kind"], g["state"], g["protocol_type"], g["assignor"]) == \
        ("share", "Stable", "share", "simple"), g
    assert {f"{p['topic']}-{p['partition']}" for m in g["members"] for p in m["partitions"]} \
        == {f"{topic}-0", f"{topic}-1"}, g
    parts = {p["partition"]: p for p in g["share_partitions"]}
    assert set(parts) == {0, 1}, g
    assert all(p["start_offset"] == 100 and p["acquired"] == 0 for p in parts.values()), g
    close_all(share, a)

    after = scrape(koord)

    def grew(outcome):
        name = "koord_share_records_total"
        return value(after, name, outcome=outcome) - value(before, name, outcome=outcome)

    assert grew("accepted") == 200
    assert grew("released") == 20
    assert grew("redelivered") == 20
    assert grew("acquired") == 220
    assert grew("rejected") == 0 and grew("archived") == 0
    assert value(after, "koord_share_records_in_flight") == 0


def test_records_appended_while_consumers_share_a_partition(bootstrap, names):
    """16 consumers (implicit acknowledgement) share one partition while a producer appends
    5,000 records/s to it for 6 s (ShareBench, bench/share.sh's load program, latency phase
    only): their fetches race with the appends and with each other, and still no record is
    delivered twice and no acknowledgement fails. (koord once let a fetch whose read of the log
    was older than another member's acquisition start the partition over: here 100-450 records
    went out twice with delivery count 1, and the first holders' acknowledgements failed.)"""
    p = subprocess.run(java_cmd("ShareBench", "run", "--bootstrap", bootstrap,
                                "--topic", names["topic"], "--group", names["group"],
                                "--partitions", 1, "--consumers", 16, "--records", 1000,
                                "--rate", 5000, "--seconds", 6, "--warmup-s", 0),
                       capture_output=True, text=True, timeout=4 * TIMEOUT)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert p.returncode == 0 and lines, f"ShareBench exited {p.returncode}: {p.stdout[-1000:]}" \
        f"\n{p.stderr[-3000:]}"
    r = lines[-1]
    print({k: r.get(k) for k in ("records", "sent", "deliveries", "redeliveries", "duplicates",
                                 "ack_errors", "latency_lost")})
    assert r["sent"] >= 20_000, r
    assert (r["duplicates"], r["ack_errors"], r["latency_lost"]) == (0, 0, 0), r
