"""Gateway mode when upstream's group coordinator is slow, moves or loads: real clients must
get every record and commit through koord.

koord forwards a group's OffsetFetch and OffsetCommit to upstream's group coordinator. When that
coordinator cannot answer (starting, loading its __consumer_offsets partition, its broker dead
until upstream elects a new leader), koord retries for up to `upstream.write.timeout.ms` and then
answers COORDINATOR_LOAD_IN_PROGRESS, which every client retries on the same coordinator. It
must never pass on NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE): librdkafka then looks its
coordinator up, finds koord again and never re-sends the OffsetFetch, so the partitions it was
for are never consumed (their positions stay INVALID).

- test_fresh_upstream_busy_cores: a fresh single-broker Kafka 4.4 of its own (scripts/kafka.sh
  in .build/kafka-fresh, wiped first, started with KAFKA_READY=broker so that it has no
  __consumer_offsets yet, with Kafka's default 50 partitions for it), both cores kept busy by
  two shell busy-loops; 3,000 records in 3 partitions through koord; three groups of two
  members each (confluent-kafka cooperative-sticky, Java classic range, franz-go
  cooperative-sticky) started at once, their first requests making upstream create and load
  __consumer_offsets (NOT_COORDINATOR from upstream for seconds): each group reads every
  partition to its end and commits it, as upstream's own OffsetFetch then shows.
- test_offsets_leader_killed_as_groups_join: on the tier's 3-broker upstream, the broker that
  leads the groups' __consumer_offsets partition (and their __koord_groups partition) is killed
  with -9 just as the members of three groups (librdkafka, Java, franz-go) join; every record is
  consumed and committed, then the broker is restarted.
- test_clients_retry_coordinator_load_in_progress: koord with upstream.write.timeout.ms=500, so
  that while the groups' __consumer_offsets leader is dead (about 3 s in kafka.sh's cluster)
  koord must answer COORDINATOR_LOAD_IN_PROGRESS to OffsetFetch and OffsetCommit; confluent-kafka
  (commit(asynchronous=False)), Java (commitSync) and kafka-python (commit()) members retry and
  end with every record consumed and the final offsets upstream. koord's log must show the
  answer given to OffsetFetch and commits failed upstream, and the clients' own logs that they
  were answered COORDINATOR_LOAD_IN_PROGRESS (never NOT_COORDINATOR or
  COORDINATOR_NOT_AVAILABLE) and retried; so must koord's /metrics, where it counts the
  gateway's answers (binaries before that are checked by their log only).

Skipped unless KOORD_UPSTREAM is set (the gateway tier); the kill tests also need the upstream's
scripts/kafka.sh directory (KAFKA_DIR), and leave the cluster whole (every replica in sync, the
preferred leaders elected again). Every wait is on the members' events, with a deadline. koord
runs with KOORD_LOG=info,koord::gateway=debug (its retries of upstream, counted for the
report); confluent-kafka members log librdkafka's cgrp and topic debug to files beside the test.
"""

import collections
import logging
import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import (ConsumerGroupTopicPartitions, ElectionType, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KpTopicPartition

import conftest
from conftest import ROOT, run
from groups_util import (STOP_TIMEOUT, ConfluentMember, Events, FranzMember, JavaMembers,
                         KafkaPythonMember)
from test_gateway import (create_topic, java_partition, kafka_sh, upstream_dir,
                          upstream_offsets)

UPSTREAM = os.environ.get("KOORD_UPSTREAM", "")
pytestmark = pytest.mark.skipif(not UPSTREAM, reason="KOORD_UPSTREAM (a Kafka cluster) not set")

RECORDS = 3_000
PARTITIONS = 3
DEADLINE = 300.0  # seconds a group may take to read and commit everything (a busy machine)
# Sessions of the members in the kill tests: longer than upstream's failover (a member's
# requests queue behind a commit koord holds meanwhile), as in test_gateway.py.
KILL_SESSION_MS = 20_000
FRESH_DIR = ROOT / ".build" / "kafka-fresh"
KAFKA_SH = ROOT / "scripts" / "kafka.sh"


# --- members that report what they read and commit it -----------------------------------------

class CommitsWhatItReads:
    """For the Python members: each poll's records are reported ("records", as Java's and
    franz-go's members report them) and committed synchronously. A commit that fails is kept
    and tried again after the next poll, for the partitions the member still owns (and before
    a partition is revoked), each failure reported as "commit_retried" with its error.

    Gates (threading.Event), for a test that must have a request sent at a given moment: with
    `hold_commit`, the member's first commit waits for it ("commit_held" when it starts
    waiting); with `hold_assign`, its first assignment callback does ("assign_held"), so that
    the client asks for the partitions' committed offsets (OffsetFetch) only once it is set."""

    def setup_commits(self, hold_commit=None, hold_assign=None):
        self.pending = {}  # partition -> next offset, not committed yet
        self.hold_commit = hold_commit
        self.hold_assign = hold_assign

    def hold(self, gate, event, **fields):
        self.emit(event, **fields)
        if not gate.wait(DEADLINE):
            raise TimeoutError(f"{event}: not released within {DEADLINE:.0f}s")

    def report_and_commit(self, ranges):
        """`ranges`: {partition: (first offset, last offset, count)} of one poll."""
        self.emit("records", ranges=[[p, f, last, n] for p, (f, last, n) in sorted(ranges.items())])
        self.pending.update({p: last + 1 for p, (_f, last, _n) in ranges.items()})
        self.commit_pending()

    def commit_pending(self, only=None):
        self.pending = {p: o for p, o in self.pending.items() if p in self.owned}
        offsets = {p: o for p, o in self.pending.items() if only is None or p in only}
        if not offsets:
            return
        if self.hold_commit is not None:
            gate, self.hold_commit = self.hold_commit, None
            self.hold(gate, "commit_held", offsets={str(p): o for p, o in offsets.items()})
        try:
            self.commit_offsets(offsets)
        except Exception as e:  # noqa: BLE001 - any client's failure, reported and retried
            self.emit("commit_retried", error=f"{type(e).__name__}: {e}"[:300])
            return
        for p, o in offsets.items():
            if self.pending.get(p) == o:
                del self.pending[p]
        self.emit("committed", offsets={str(p): o for p, o in offsets.items()})

    def callback(self, event, partitions):
        if event == "revoked":
            self.commit_pending(only={tp.partition for tp in partitions})
        if event == "assigned" and self.hold_assign is not None:
            gate, self.hold_assign = self.hold_assign, None
            self.hold(gate, "assign_held", partitions=sorted(tp.partition for tp in partitions))
        super().callback(event, partitions)


class CommittingConfluent(CommitsWhatItReads, ConfluentMember):
    """A confluent-kafka member committing with commit(asynchronous=False); librdkafka's debug
    log (cgrp, topic: the answers to its OffsetFetch and OffsetCommit) goes to a file beside
    the test."""

    def __init__(self, group, name, assignor, session_ms, heartbeat_ms, **gates):
        log = logging.getLogger(f"rdkafka.{group.id}.{name}")
        log.propagate = False
        log.setLevel(logging.DEBUG)
        self.log_path = group.workdir / f"{group.id}-{name}.rdkafka.log"
        handler = logging.FileHandler(self.log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        super().__init__(group, name, assignor,
                         {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms,
                          "debug": "cgrp,topic", "logger": log})
        self.setup_commits(**gates)

    def poll(self, consumer):
        ranges = {}
        for m in consumer.consume(500, 0.1):
            if m.error():
                self.emit("client_error", error=str(m.error()))
                continue
            f, last, n = ranges.get(m.partition(), (m.offset(), m.offset(), 0))
            ranges[m.partition()] = (min(f, m.offset()), max(last, m.offset()), n + 1)
        if ranges:
            self.report_and_commit(ranges)
        else:
            self.commit_pending()

    def commit_offsets(self, offsets):
        done = self.consumer.commit(
            offsets=[TopicPartition(self.group.topic, p, o) for p, o in offsets.items()],
            asynchronous=False)
        bad = [tp for tp in done or [] if tp.error]
        if bad:
            raise KafkaException(bad[0].error)


class CommittingKafkaPython(CommitsWhatItReads, KafkaPythonMember):
    """A kafka-python member committing with commit() (commit_offsets_sync)."""

    def __init__(self, group, name, assignor, session_ms, **gates):
        super().__init__(group, name, assignor, session_ms=session_ms)
        self.setup_commits(**gates)

    def poll(self, consumer):
        ranges = {}
        # A second, not 100 ms: poll returns as soon as records come, and a join that outlasts
        # a poll's timeout (a loaded machine, upstream's coordinator moving) makes kafka-python
        # 3.0 rejoin at once, which the gated members of these tests cannot follow.
        for tp, records in consumer.poll(timeout_ms=1000).items():
            if records:
                ranges[tp.partition] = (records[0].offset, records[-1].offset, len(records))
        if ranges:
            self.report_and_commit(ranges)
        else:
            self.commit_pending()

    def commit_offsets(self, offsets):
        self.consumer.commit({KpTopicPartition(self.group.topic, p): OffsetAndMetadata(o, "", -1)
                              for p, o in offsets.items()})


class FaultEvents(Events):
    """One event log for every group of a test; a failure also shows how far each group got."""

    def __init__(self):
        super().__init__()
        self.groups = []
        self.ends = {}

    def add(self, event):
        event.setdefault("at", time.monotonic())  # when the test heard of it
        super().add(event)

    def timeline(self, since):
        """Each member's first assignment and first and last records, in seconds after
        `since` (a time.monotonic())."""
        firsts = {}
        for e in self.snapshot():
            if e["event"] in ("assigned", "records"):
                d = firsts.setdefault(e["member"], {})
                d.setdefault(e["event"], round(e["at"] - since, 1))
                if e["event"] == "records":
                    d["last records"] = round(e["at"] - since, 1)
        return firsts

    def summary(self, last=40):
        log = self.snapshot()
        lines = [super().summary(last)]
        for g in self.groups:
            read, committed = progress(log, set(g.members))
            lines.append(f"{g.label} {g.id}: read to {read}, committed {committed}, "
                         f"ends {self.ends}")
        retried = collections.Counter((e["member"], e.get("error", "")[:120]) for e in log
                                      if e["event"] in ("commit_retried", "commit_failed"))
        lines += [f"  {m} commit retried/failed {n}x: {err}" for (m, err), n in retried.items()]
        return "\n".join(lines)


class FaultGroup:
    """One group on the test's topic; the attributes are those groups_util's members use."""

    def __init__(self, label, bootstrap, workdir, group_id, topic, events):
        self.label = label
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.id = group_id
        self.topic = topic
        self.events = events
        self.members = {}  # name -> member (JavaMembers registers its members itself)
        self.jvm = None
        events.groups.append(self)

    def confluent(self, name, session_ms, heartbeat_ms=500, assignor="cooperative-sticky",
                  **gates):
        m = CommittingConfluent(self, name, assignor, session_ms, heartbeat_ms, **gates)
        self.members[name] = m
        m.start()

    def kafka_python(self, name, session_ms, assignor="range", **gates):
        m = CommittingKafkaPython(self, name, assignor, session_ms, **gates)
        self.members[name] = m
        m.start()

    def java(self, name, session_ms, heartbeat_ms=500, assignor="range", **props):
        if self.jvm is None:
            self.jvm = JavaMembers(self, self.label)
        self.jvm.start(name, "--commit", session_timeout_ms=session_ms,
                       heartbeat_interval_ms=heartbeat_ms, partition_assignment_strategy=assignor,
                       **props)

    def franz(self, name, session_ms, balancer="cooperative-sticky"):
        self.members[name] = FranzMember(self, name, balancer, session_ms=session_ms)

    def shutdown(self):
        for m in self.members.values():
            if not isinstance(m, JavaMembers):
                m.close()
        for m in self.members.values():
            if isinstance(m, FranzMember):
                m.stop()
            elif not isinstance(m, JavaMembers):
                m.join(STOP_TIMEOUT)
        if self.jvm is not None:
            self.jvm.stop()


def progress(log, names):
    """({partition: next offset past the last one read}, {partition: highest offset
    committed}) over the events of the members `names`."""
    read, committed = {}, {}
    for e in log:
        if e["member"] not in names:
            continue
        if e["event"] == "records":
            for p, _first, last, _n in e["ranges"]:
                read[p] = max(read.get(p, 0), last + 1)
        elif e["event"] == "committed":
            for p, o in e["offsets"].items():
                committed[int(p)] = max(committed.get(int(p), 0), o)
    return read, committed


def wait_read_and_committed(groups, ends, timeout=DEADLINE):
    """Waits until in every group each partition was read to its end by some member and
    committed there."""
    deadline = time.monotonic() + timeout
    events = groups[0].events
    events.ends = ends
    for g in groups:
        names = set(g.members)

        def check(log, names=names):
            read, committed = progress(log, names)
            done = all(read.get(p, 0) >= end and committed.get(p, 0) >= end
                       for p, end in ends.items())
            return True if done else None

        events.wait_for(f"{g.label} group {g.id}: every partition read to its end {ends} "
                        "and committed", check, timeout=max(1.0, deadline - time.monotonic()))


def retried_commits(events):
    """{(client, error): count} of the commits the Python members tried again."""
    return collections.Counter((e.get("client"), e.get("error", "")[:100])
                               for e in events.snapshot() if e["event"] == "commit_retried")


# --- upstream and koord helpers -------------------------------------------------------------

def produce(bootstrap, topic, count, first=0):
    """Records first..first+count-1, record i to partition i % PARTITIONS (idempotent,
    acks=all); returns {partition: end offset} of what was acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5})
    ends, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for i in range(first, first + count):
        p.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % PARTITIONS,
                  on_delivery=delivered)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(DEADLINE) == 0, "records still unacknowledged"
    assert not errors, errors[:5]
    return ends


# What koord logs when it answers a group's request itself because upstream could not serve it
# in time (the code it answered: 14 COORDINATOR_LOAD_IN_PROGRESS, 15 COORDINATOR_NOT_AVAILABLE,
# 16 NOT_COORDINATOR), and when a commit it was writing upstream failed (answered by its store,
# an upstream that did not take the write in time being COORDINATOR_LOAD_IN_PROGRESS). koord's
# /metrics did not count the gateway connections' answers up to commit 3d8c370 (no
# koord_requests_total sample at all), so its log is what tells there; check_metrics asserts
# on /metrics too once it does.
ANSWERED = re.compile(r"could not serve the group's request in time "
                      r'group="([^"]*)" api="([^"]*)" .*answered=(-?\d+)')
COMMIT_FAILED = re.compile(r"upstream refused a group write group=(\S+) error=(.*)")
LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16


def koord_retries(k, group_ids):
    """{group: count} of koord's retries of upstream's coordinator for the groups (its debug
    log), and how many times its group writes waited for upstream (a leader elected)."""
    retried = collections.Counter()
    waited = 0
    for line in k.log_path.read_text(errors="replace").splitlines():
        if "upstream coordinator: retrying" in line:
            m = re.search(r'group="([^"]*)"', line)
            if m and m.group(1) in group_ids:
                retried[m.group(1)] += 1
        elif "upstream writes waited" in line:
            waited += 1
    print(f"koord retried upstream's coordinator for the groups {dict(retried)}; its group "
          f"writes waited for upstream {waited} times")
    return retried, waited


def koord_answers(k, group_ids):
    """{(api, code): count} of the answers koord logged giving the groups' requests itself, and
    [(group, error)] of the groups' commits koord could not write upstream."""
    answered, commits = collections.Counter(), []
    for line in k.log_path.read_text(errors="replace").splitlines():
        if (m := ANSWERED.search(line)) and m.group(1) in group_ids:
            answered[(m.group(2), int(m.group(3)))] += 1
        elif (m := COMMIT_FAILED.search(line)) and m.group(1) in group_ids:
            commits.append((m.group(1), m.group(2)))
    print(f"koord answered itself (api, code): {dict(answered)}; commits not written upstream: "
          f"{dict(collections.Counter(gid for gid, _ in commits))}, e.g. "
          f"{collections.Counter(e for _, e in commits).most_common(2)}")
    return answered, commits


def check_never_not_coordinator(answered):
    """koord's promise since the fix: a group's OffsetFetch (or any group API it forwards
    upstream) is never answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE."""
    wrong = {key: n for key, n in answered.items()
             if key[1] in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)}
    assert not wrong, f"koord answered {wrong}: a client may never ask again (librdkafka)"


def metrics_answers(k):
    """{(api, error): count} of koord's error answers as its /metrics counts them
    (koord_request_errors_total, over versions), or None where its gateway connections are not
    counted there (no koord_requests_total sample at all)."""
    with urllib.request.urlopen(f"{k.http}/metrics", timeout=10) as r:
        text = r.read().decode()
    if not re.search(r"^koord_requests_total\{", text, re.M):
        print("koord's /metrics does not count the gateway's requests (no koord_requests_total)")
        return None
    out = collections.Counter()
    for m in re.finditer(r"^koord_request_errors_total\{([^}]*)\} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        out[(labels["api"], labels["error"])] += int(float(m.group(2)))
    print(f"koord's /metrics, error answers: {dict(out)}")
    return out


def check_metrics(k, answered=()):
    """Where koord's /metrics counts the gateway's answers: OffsetFetch and OffsetCommit never
    answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, and each API of `answered` answered
    COORDINATOR_LOAD_IN_PROGRESS at least once."""
    counted = metrics_answers(k)
    if counted is None:
        return
    wrong = {key: n for key, n in counted.items() if key[0] in ("OffsetFetch", "OffsetCommit")
             and key[1] in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")}
    assert not wrong, f"koord answered {wrong} (its /metrics)"
    for api in answered:
        assert counted[(api, "COORDINATOR_LOAD_IN_PROGRESS")] >= 1, \
            f"koord's /metrics: {api} never answered COORDINATOR_LOAD_IN_PROGRESS ({counted})"


# librdkafka's debug lines (cgrp, topic) with the answers to its OffsetFetch and OffsetCommit.
RDKAFKA_ANSWER = re.compile(r"(OffsetFetch) for \S+ partition\(s\).* returned (.*)$"
                            r"|(OffsetCommit) for \S+ partition\(s\).* returned: (.*)$")


def rdkafka_answers(group):
    """{(member, api, error): count} of the errors koord answered the group's confluent-kafka
    members' OffsetFetch and OffsetCommit, as librdkafka logged them."""
    out = collections.Counter()
    for m in group.members.values():
        if isinstance(m, CommittingConfluent):
            for line in m.log_path.read_text(errors="replace").splitlines():
                if a := RDKAFKA_ANSWER.search(line):
                    api, error = (a.group(1), a.group(2)) if a.group(1) else (a.group(3),
                                                                              a.group(4))
                    if error.strip() != "Success":
                        out[(m.name, api, error.strip())] += 1
    print(f"librdkafka's errors for {group.id}: {dict(out)}")
    return out


def check_rdkafka_never_not_coordinator(group):
    """librdkafka was never told NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE for an
    OffsetFetch or OffsetCommit (it would look for its coordinator, find koord again and,
    for an OffsetFetch, never ask again: the partitions are left unconsumed)."""
    wrong = {k: n for k, n in rdkafka_answers(group).items()
             if k[2] in ("Broker: Not coordinator", "Broker: Coordinator not available")}
    assert not wrong, f"koord answered librdkafka {wrong}"
    return wrong


def leaders(topic):
    """{partition: leader} of an upstream topic, asked of upstream itself."""
    md = AdminClient({"bootstrap.servers": UPSTREAM}).list_topics(topic, timeout=60)
    t = md.topics[topic]
    assert t.error is None, f"{topic} upstream: {t.error}"
    return {p: pm.leader for p, pm in t.partitions.items()}


def groups_on_one_offsets_leader(count, koord_groups_on_victim):
    """A victim broker and `count` group ids whose __consumer_offsets partition (Kafka's
    placement: abs(String.hashCode(id)) % partitions) it leads, the same partition for all;
    their __koord_groups partition (koord's same placement) is led by the victim too, or by
    another broker, as `koord_groups_on_victim` says."""
    offsets = leaders("__consumer_offsets")
    koord = leaders("__koord_groups")
    target = java_partition(f"fault-{uuid.uuid4().hex}", len(offsets))
    victim = offsets[target]
    ids = []
    for _ in range(100_000):
        gid = f"fault-{uuid.uuid4().hex[:10]}"
        if java_partition(gid, len(offsets)) != target:
            continue
        if (koord[java_partition(gid, len(koord))] == victim) == koord_groups_on_victim:
            ids.append(gid)
            if len(ids) == count:
                return victim, target, ids
    pytest.fail(f"no group ids found for broker {victim}: __consumer_offsets {offsets}, "
                f"__koord_groups {koord}")


def cluster_whole(timeout=180.0):
    """Waits until the upstream has its three brokers back and every partition has a leader
    and all its replicas in sync, then elects the preferred leaders again (leadership moved
    off the killed broker): the cluster as it was before the test."""
    deadline = time.monotonic() + timeout
    while True:
        # A new client each time (test_gateway.end_offsets: a long-lived one kept stale epochs).
        md = AdminClient({"bootstrap.servers": UPSTREAM}).list_topics(timeout=30)
        short = sorted((t, p) for t, tm in md.topics.items()
                       for p, pm in tm.partitions.items()
                       if pm.leader < 0 or len(pm.isrs) < len(pm.replicas))
        if len(md.brokers) == 3 and not short:
            break
        assert time.monotonic() < deadline, f"upstream not whole again: brokers " \
            f"{sorted(md.brokers)}, short of replicas {short[:10]}"
        time.sleep(0.5)  # poll interval between Metadata requests, not a wait for an outcome
    admin = AdminClient({"bootstrap.servers": UPSTREAM})  # held until the answer is in
    try:
        # (No request_timeout: confluent-kafka 2.16.1 raises SystemError on any keyword.)
        admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=90)
    except KafkaException as e:  # ELECTION_NOT_NEEDED for partitions led as preferred
        print(f"preferred leader election: {e}")


# --- 1. a fresh upstream, both cores busy ---------------------------------------------------

def kafka_libs():
    """A directory holding Kafka 4.4's jars already (the tier's upstream's, or .build/kafka's)."""
    up = upstream_dir()
    for d in ([up] if up else []) + [ROOT / ".build" / "kafka"]:
        libs = d / "libs"
        if (libs / "kafka_2.13-4.4.0.jar").exists():
            return libs.resolve()
    return None


@pytest.fixture
def fresh_kafka():
    """A single-broker Kafka 4.4 of this test's own, in a wiped .build/kafka-fresh, stopped at
    the end: (bootstrap, seconds scripts/kafka.sh start took). KAFKA_READY=broker: started
    without asking its group coordinator (that creates __consumer_offsets), so it has no topic
    at all, as a new cluster. With Kafka's own 50 __consumer_offsets partitions (kafka.sh's
    one partition is created and loaded within about 0.2 s; 50 of them, on a starved machine,
    answer NOT_COORDINATOR for seconds: about 4 s measured). KOORD_FRESH_KAFKA_CONFIG
    replaces that (scripts/kafka.sh's KAFKA_CONFIG)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_CONFIG", "KAFKA_SECURITY")}
    env |= {"KAFKA_DIR": str(FRESH_DIR), "KAFKA_BROKERS": "1", "KAFKA_READY": "broker",
            "KAFKA_CONFIG": os.environ.get("KOORD_FRESH_KAFKA_CONFIG",
                                           "offsets.topic.num.partitions=")}
    if (FRESH_DIR / "kafka.pid").exists():  # an interrupted run's broker
        run([str(KAFKA_SH), "stop"], env=env, timeout=120)
    FRESH_DIR.mkdir(parents=True, exist_ok=True)
    libs = FRESH_DIR / "libs"
    for child in FRESH_DIR.iterdir():
        if child == libs and (libs / "kafka_2.13-4.4.0.jar").exists():
            continue
        if child.is_dir() and not child.is_symlink():
            subprocess.run(["rm", "-rf", str(child)], check=True)
        else:
            child.unlink()
    shared = kafka_libs()
    if not libs.exists() and shared is not None and shared != libs.resolve():
        libs.symlink_to(shared)  # else scripts/kafka.sh fetches the jars into it
    started = time.monotonic()
    out = run([str(KAFKA_SH), "start"], env=env, timeout=300).stdout
    took = time.monotonic() - started
    bootstrap = out.strip().splitlines()[-1]
    print(f"fresh Kafka 4.4 at {bootstrap}: scripts/kafka.sh start took {took:.1f}s")
    try:
        yield bootstrap, took
    finally:
        run([str(KAFKA_SH), "stop"], env=env, timeout=120)


@pytest.fixture
def busy_cores():
    """Two shell busy-loops (both cores of the test machines), killed at the end."""
    loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    yield
    for p in loops:
        p.kill()
        p.wait()


def test_fresh_upstream_busy_cores(fresh_kafka, busy_cores, koord, tmp_path, monkeypatch):
    """Three groups of two members (confluent-kafka cooperative-sticky, Java classic, franz-go)
    started at once through koord in front of a fresh Kafka, with both cores busy: each group
    reads every partition to its end and commits it, as upstream's OffsetFetch shows."""
    bootstrap, _took = fresh_kafka
    upstream = AdminClient({"bootstrap.servers": bootstrap})
    assert "__consumer_offsets" not in upstream.list_topics(timeout=60).topics, \
        "the fresh Kafka has __consumer_offsets already: its groups' requests would not load it"
    # koord creates and reads back its group topic on a fresh, starved upstream before it
    # serves: that can take longer than conftest's 15 s.
    monkeypatch.setattr(conftest, "START_TIMEOUT", 120.0)
    monkeypatch.setenv("KOORD_LOG", "info,koord::gateway=debug")  # its retries, for the report
    t0 = time.monotonic()
    k = koord(f"upstream.bootstrap.servers={bootstrap}")
    topic = f"fresh-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=DEADLINE)
    ends = produce(k.bootstrap, topic, RECORDS)
    assert sum(ends.values()) == RECORDS, ends
    print(f"koord started, topic created and {RECORDS} records produced in "
          f"{time.monotonic() - t0:.1f}s")
    assert "__consumer_offsets" not in upstream.list_topics(timeout=60).topics, \
        "koord's start created __consumer_offsets: the groups' requests would not load it"

    events = FaultEvents()
    groups = [FaultGroup(label, k.bootstrap, tmp_path, f"fresh-{label}-{uuid.uuid4().hex[:8]}",
                         topic, events) for label in ("confluent", "java", "franz")]
    # The clients' default sessions (45 s, heartbeats every 3 s): a starved machine is slow,
    # and a member losing its session is not what this test is about.
    t1 = time.monotonic()
    try:
        for name in ("c1", "c2"):
            groups[0].confluent(name, session_ms=45_000, heartbeat_ms=3_000)
        for name in ("j1", "j2"):
            groups[1].java(name, session_ms=45_000, heartbeat_ms=3_000)
        for name in ("f1", "f2"):
            groups[2].franz(name, session_ms=45_000)
        wait_read_and_committed(groups, ends)
        print(f"every group read and committed everything {time.monotonic() - t1:.1f}s after "
              f"its members started")
    finally:
        for g in groups:
            g.shutdown()
    print(f"commits retried by the Python members: {dict(retried_commits(events))}")
    print(f"seconds after the members started: {events.timeline(t1)}")
    retried, _waited = koord_retries(k, {g.id for g in groups})
    # The scenario's point: the groups' first requests met upstream's coordinator not ready yet
    # (creating and loading __consumer_offsets), and koord had to wait it out.
    assert retried, "upstream's coordinator was ready for the groups' first requests: the " \
                    "scenario did not exercise a loading coordinator"
    for g in groups:
        got = upstream.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g.id, [TopicPartition(topic, p)
                                                 for p in range(PARTITIONS)])],
            request_timeout=30)[g.id].result()
        assert {tp.partition: tp.offset for tp in got.topic_partitions} == ends, \
            f"{g.label} group's offsets upstream"
    answered, _commits = koord_answers(k, {g.id for g in groups})
    check_never_not_coordinator(answered)
    check_rdkafka_never_not_coordinator(groups[0])
    check_metrics(k)


# --- 2. the groups' __consumer_offsets leader killed as they join ---------------------------

def needs_kafka_sh():
    if upstream_dir() is None:
        pytest.skip("the upstream is not a scripts/kafka.sh cluster under .build (KAFKA_DIR)")


def test_offsets_leader_killed_as_groups_join(koord, tmp_path, monkeypatch):
    """Three groups (librdkafka cooperative-sticky, Java range, franz-go cooperative-sticky) whose
    __consumer_offsets partition, and __koord_groups partition, one upstream broker leads: it is
    killed with -9 as soon as the first member has its assignment, while the others join.
    koord holds the groups' reads and writes through the failover (upstream.write.timeout.ms,
    10 s): every group reads every record and commits it, upstream shows the offsets, and koord
    never answered the offsets APIs NOT_COORDINATOR."""
    needs_kafka_sh()
    monkeypatch.setenv("KOORD_LOG", "info,koord::gateway=debug")  # its retries, for the report
    k = koord(f"upstream.bootstrap.servers={UPSTREAM}", "group.initial.rebalance.delay.ms=0")
    topic = f"fault-join-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic, PARTITIONS)
    ends = produce(k.bootstrap, topic, RECORDS)
    victim, target, ids = groups_on_one_offsets_leader(3, koord_groups_on_victim=True)
    print(f"groups {ids}: __consumer_offsets partition {target} and their __koord_groups "
          f"partitions led by broker {victim}")

    events = FaultEvents()
    groups = [FaultGroup(label, k.bootstrap, tmp_path, gid, topic, events)
              for label, gid in zip(("confluent", "java", "franz"), ids)]
    down = False
    try:
        for name in ("c1", "c2"):
            groups[0].confluent(name, session_ms=KILL_SESSION_MS)
        for name in ("j1", "j2"):
            groups[1].java(name, session_ms=KILL_SESSION_MS)
        for name in ("f1", "f2"):
            groups[2].franz(name, session_ms=KILL_SESSION_MS)
        first = events.wait_for("a member's first assignment", lambda log: next(
            (e for e in log if e["event"] == "assigned"), None))
        killed = time.monotonic()
        down = True
        kafka_sh("kill", victim)
        print(f"broker {victim} killed as {first['member']} got {first['assignment']}")
        wait_read_and_committed(groups, ends)
        print(f"every group read and committed everything {time.monotonic() - killed:.1f}s "
              "after the kill")
    finally:
        try:
            for g in groups:
                g.shutdown()
        finally:
            if down:
                kafka_sh("restart", victim)
                cluster_whole()
    print(f"commits retried by the Python members: {dict(retried_commits(events))}")
    lost = [e for e in events.snapshot() if e["event"] == "lost"]
    print(f"members that lost their partitions: {[e['member'] for e in lost]}")
    print(f"seconds after the kill: {events.timeline(killed)}")
    retried, waited = koord_retries(k, set(ids))
    assert retried or waited, "the kill met none of the groups' requests upstream"
    for g in groups:
        assert upstream_offsets(g.id) == {(topic, p): o for p, o in ends.items()}, \
            f"{g.label} group's offsets upstream"
    answered, _commits = koord_answers(k, set(ids))
    check_never_not_coordinator(answered)
    check_rdkafka_never_not_coordinator(groups[0])
    check_metrics(k)


# --- 3. the clients retry COORDINATOR_LOAD_IN_PROGRESS --------------------------------------

def test_clients_retry_coordinator_load_in_progress(koord, tmp_path, monkeypatch, caplog):
    """koord with upstream.write.timeout.ms=500, so that while the broker leading the groups'
    __consumer_offsets partition is dead (about 3 s) koord answers their OffsetFetch and
    OffsetCommit COORDINATOR_LOAD_IN_PROGRESS. (Their __koord_groups partitions are led by
    other brokers; every koord write still waits about as long, for the dead broker to leave
    the in-sync replicas, so the groups are settled before the kill.) Three groups of two
    members, both in the group's first generation (koord's initial rebalance delay):
    confluent-kafka (cooperative-sticky) and kafka-python (range), where one member's first
    commit (of records it read) and the other's first assignment callback (so its OffsetFetch)
    wait for the kill; Java (range, one record a poll, commitSync each), consuming throughout.
    Every group ends with every record read and committed upstream; koord's log shows it
    answered OffsetFetch COORDINATOR_LOAD_IN_PROGRESS (never NOT_COORDINATOR) and failed
    commits upstream could not take; the clients retried them."""
    needs_kafka_sh()
    monkeypatch.setenv("KOORD_LOG", "info,koord::gateway=debug")  # its retries, for the report
    caplog.set_level(logging.DEBUG, logger="kafka.coordinator")  # kafka-python's retries
    k = koord(f"upstream.bootstrap.servers={UPSTREAM}", "upstream.write.timeout.ms=500")
    topic = f"fault-retry-{uuid.uuid4().hex[:8]}"
    create_topic(k.bootstrap, topic, PARTITIONS)
    ends = produce(k.bootstrap, topic, RECORDS)
    victim, target, ids = groups_on_one_offsets_leader(3, koord_groups_on_victim=False)
    print(f"groups {ids}: __consumer_offsets partition {target} led by broker {victim}, "
          "their __koord_groups partitions by others")

    events = FaultEvents()
    groups = [FaultGroup(label, k.bootstrap, tmp_path, gid, topic, events)
              for label, gid in zip(("confluent", "java", "kafka-python"), ids)]
    killed = threading.Event()
    down = False
    try:
        groups[0].confluent("c1", session_ms=KILL_SESSION_MS, hold_commit=killed)
        groups[0].confluent("c2", session_ms=KILL_SESSION_MS, hold_assign=killed)
        groups[1].java("j1", session_ms=KILL_SESSION_MS, max_poll_records=1)
        groups[1].java("j2", session_ms=KILL_SESSION_MS, max_poll_records=1)
        # (kafka-python 3.0 does not heartbeat while an assignment callback runs: p2's
        # session must outlast its wait.)
        groups[2].kafka_python("p1", session_ms=KILL_SESSION_MS, hold_commit=killed)
        groups[2].kafka_python("p2", session_ms=KILL_SESSION_MS, hold_assign=killed)
        ready = {("c1", "commit_held"), ("c2", "assign_held"), ("p1", "commit_held"),
                 ("p2", "assign_held"), ("j1", "committed"), ("j2", "committed")}
        events.wait_for(f"every member at its gate or committing: {sorted(ready)}", lambda log:
                        True if ready <= {(e["member"], e["event"]) for e in log} else None)
        killed_at = time.monotonic()
        down = True
        kafka_sh("kill", victim)
        print(f"broker {victim} killed in {time.monotonic() - killed_at:.1f}s (scripts/kafka.sh)")
        killed.set()
        wait_read_and_committed(groups, ends)
        print(f"every group read and committed everything {time.monotonic() - killed_at:.1f}s "
              "after the kill")
    finally:
        killed.set()
        try:
            for g in groups:
                g.shutdown()
        finally:
            if down:
                kafka_sh("restart", victim)
                cluster_whole()
    for g in groups:
        assert upstream_offsets(g.id) == {(topic, p): o for p, o in ends.items()}, \
            f"{g.label} group's offsets upstream"

    # What the clients saw and did about it (for the report).
    print(f"commits retried by the Python members: {dict(retried_commits(events))}")
    # Each client was answered COORDINATOR_LOAD_IN_PROGRESS and retried (each ended with
    # everything read and committed): librdkafka's debug log, kafka-python's log, the Java
    # consumer's warnings. librdkafka logs a commit it retries itself as "Local: Operation in
    # progress", without the answer; it gives the answer up to the application only once its
    # own retries are spent (then CommittingConfluent retries, as Java's commitSync does).
    load = "Broker: Coordinator load in progress"
    rd = rdkafka_answers(groups[0])
    check_rdkafka_never_not_coordinator(groups[0])
    assert rd[("c2", "OffsetFetch", load)] >= 1, \
        f"librdkafka's OffsetFetch was not answered {load}: {dict(rd)}"
    assert rd[("c1", "OffsetCommit", load)] + \
        rd[("c1", "OffsetCommit", "Local: Operation in progress")] >= 1, \
        f"librdkafka's OffsetCommit was not refused and retried: {dict(rd)}"
    kp = collections.Counter(r.getMessage().replace(groups[2].id, "G") for r in caplog.records
                             if "CoordinatorLoadInProgress" in r.getMessage())
    print(f"kafka-python's retries: {dict(kp)}")
    # (Its OffsetFetch is not always held until the kill: kafka-python's leader sometimes
    # rejoins right after its first assignment, and p2, held in its callback, cannot rejoin
    # until its session expires. So only its commit, which p1 holds, is sure to meet it.)
    assert kp["OffsetCommit for group G failed: CoordinatorLoadInProgressError"] >= 1, dict(kp)
    java_lines = [line for line in groups[1].jvm.stderr_path.read_text(errors="replace")
                  .splitlines() if "Offset commit failed on partition" in line]
    print(f"Java: {len(java_lines)} commit warnings; first: {java_lines[:2]}")
    assert any("The coordinator is loading" in line for line in java_lines), \
        "the Java consumer's commitSync was never answered COORDINATOR_LOAD_IN_PROGRESS"

    print(f"seconds after the kill: {events.timeline(killed_at)}")
    koord_retries(k, set(ids))
    answered, commits = koord_answers(k, set(ids))
    check_never_not_coordinator(answered)
    assert answered[("OffsetFetch", LOAD_IN_PROGRESS)] >= 1, \
        "koord never answered OffsetFetch COORDINATOR_LOAD_IN_PROGRESS while upstream's " \
        f"coordinator was down: the retry path was not exercised ({dict(answered)})"
    failed = {gid for gid, _error in commits}
    assert failed == set(ids), f"only the commits of {failed} of the groups {ids} failed " \
                               "upstream while its coordinator was down"
    check_metrics(k, answered=("OffsetFetch", "OffsetCommit"))
