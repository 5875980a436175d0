"""Cluster mode: three koord nodes (one cluster.name) in front of a 3-broker Apache Kafka 4.4,
sharing the groups of real clients, one node killed and restarted under them.

Run by scripts/test.sh's gateway tier (KOORD_UPSTREAM: the upstream's bootstrap list); skipped
without it. Every wait is on an event: a member's report, or a node's log saying what it serves.
"""

import os
import re
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from conftest import Koord, free_port
from groups_util import ConfluentMember, Events, JavaMembers, views

UPSTREAM = os.environ.get("KOORD_UPSTREAM", "")
pytestmark = pytest.mark.skipif(not UPSTREAM, reason="KOORD_UPSTREAM (a Kafka cluster) not set")

SHARDS = 50  # partitions of __koord_groups: the default
GROUPS = 50
PARTITIONS = 4
DEADLINE = 90.0  # seconds a step may take
# Members' sessions outlast a node's failover (the nodes' session, 6 s, plus a rejoin and a
# load): librdkafka and Java classic members that hear nothing for a whole session give their
# partitions up on their own, as they would against Kafka while its coordinator moves.
MEMBER_SESSION_MS = 20_000
COORDINATOR_MOVES = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                     KafkaError.COORDINATOR_NOT_AVAILABLE)
APPLIED = re.compile(rb"cluster assignment applied generation=(\d+) shards=(\d+)")


class Node(Koord):
    """One koord node of the cluster."""

    def held(self, since=0):
        """(generation, shards) of the newest assignment this node applied after log offset
        `since`, or None."""
        with open(self.log_path, "rb") as log:
            log.seek(since)
            found = APPLIED.findall(log.read())
        return (int(found[-1][0]), int(found[-1][1])) if found else None

    def log_size(self):
        return self.log_path.stat().st_size if self.log_path.exists() else 0


class Cluster:
    def __init__(self, tmp_path, size=3, settings=()):
        name = f"c-{uuid.uuid4().hex[:8]}"
        self.nodes = [
            Node(tmp_path / f"node{i}", [
                f"upstream.bootstrap.servers={UPSTREAM}", f"cluster.name={name}",
                f"node.id={1001 + i}", "group.initial.rebalance.delay.ms=0", *settings])
            for i in range(size)]
        self.marks = [0] * size  # log offsets from which each node's assignments count

    def start(self, count=None):
        """Starts the first `count` nodes (all by default); every node has its port from here
        on, so clients can be told of one started later."""
        for n in self.nodes:
            n.port = n.port or free_port()
        for n in self.nodes[:count]:
            n.start(port=n.port)
        return self

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes)

    def wait_settled(self, live):
        """Waits until the live nodes (indexes) have applied one generation's assignment that
        covers every shard, each holding some; returns {index: shards}."""
        deadline = time.monotonic() + DEADLINE
        while True:
            held = {i: self.nodes[i].held(self.marks[i]) for i in live}
            gens = {h[0] for h in held.values() if h}
            if None not in held.values() and len(gens) == 1 and \
                    sum(h[1] for h in held.values()) == SHARDS and \
                    all(h[1] > 0 for h in held.values()):
                return {i: h[1] for i, h in held.items()}
            if time.monotonic() > deadline:
                pytest.fail(f"the cluster did not settle on nodes {live}: {held}\n"
                            + "\n".join(self.nodes[i].log_tail(20) for i in live))
            time.sleep(0.1)  # poll interval over the nodes' logs, not a wait for an outcome

    def mark(self, i):
        """Only assignments node `i` applies from now on count."""
        self.marks[i] = self.nodes[i].log_size()

    def stop(self):
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.stop()


class CommittingConfluent(ConfluentMember):
    """A confluent-kafka member that commits what it consumed, synchronously, after each
    message (and reports it as the Java members do)."""

    def poll(self, consumer):
        msg = consumer.poll(0.1)
        if msg is None:
            return
        if msg.error():
            self.emit("client_error", error=str(msg.error()))
            return
        while True:
            try:
                consumer.commit(message=msg, asynchronous=False)
                break
            except KafkaException as e:
                # Retried as Java's commitSync retries them: librdkafka does not flag the
                # coordinator's moves and loads as retriable.
                if not e.args[0].retriable() and e.args[0].code() not in COORDINATOR_MOVES:
                    self.emit("commit_failed", error=str(e))
                    return
        self.emit("committed", offsets={str(msg.partition()): msg.offset() + 1}, group=self.gid)


class Fleet:
    """Members of many groups on one topic, one event log; the attributes JavaMembers reads
    (bootstrap, id, topic, workdir, events, members) are set per member started."""

    def __init__(self, bootstrap, workdir, topic):
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.topic = topic
        self.id = None
        self.events = Events()
        self.members = {}
        self.group_of = {}  # member name -> group id
        self.jvm = JavaMembers(self, "jvm")

    def java(self, gid, name, protocol, **extra):
        self.id = gid
        props = ({"group_protocol": "consumer"} if protocol == "consumer"
                 else {"session_timeout_ms": MEMBER_SESSION_MS})
        self.jvm.start(name, "--commit", **props, **extra)
        self.group_of[name] = gid

    def confluent(self, gid, name):
        self.id = gid
        m = CommittingConfluent(self, name, "range", {"session.timeout.ms": MEMBER_SESSION_MS})
        m.gid = gid
        self.members[name] = m
        self.group_of[name] = gid
        m.start()

    def stop(self):
        for m in self.members.values():
            if isinstance(m, CommittingConfluent):
                m.close()
        for m in self.members.values():
            if isinstance(m, CommittingConfluent):
                m.join(30)
        self.jvm.stop()


def produce(bootstrap, topic, count):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        p.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(DEADLINE) == 0


def end_offsets(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=DEADLINE)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def settled_groups(fleet, groups):
    """None until every group's live members own each partition exactly once; then the views."""
    vs = views(fleet.events.snapshot())
    for gid, names in groups.items():
        owned = [p for n in names if not vs[n].gone for p in vs[n].owned] \
            if all(n in vs for n in names) else []
        if sorted(owned) != list(range(PARTITIONS)) or \
                not all(vs[n].joined for n in names):
            return None
    return vs


def committed_up_to(fleet, groups, ends):
    """Checks each group's latest commits (as its members report them) reached `ends`."""
    def check(log):
        best = {}
        for e in log:
            if e["event"] == "committed" and e["member"] in fleet.group_of:
                g = fleet.group_of[e["member"]]
                for p, o in e["offsets"].items():
                    key = (g, int(p))
                    best[key] = max(best.get(key, 0), o)
        missing = [(g, p) for g in groups for p in range(PARTITIONS)
                   if best.get((g, p), 0) < ends[p]]
        return True if not missing else None
    return check


class Scenario:
    """A cluster, a replicated topic and the groups of a fleet of members on it."""

    def __init__(self, tmp_path, started=3):
        self.cluster = Cluster(tmp_path).start(started)
        self.fleet = None
        self.tmp_path = tmp_path
        self.cluster.wait_settled(list(range(started)))
        # Clients know every node, also one started later.
        self.bootstrap = self.cluster.bootstrap
        self.topic = f"cl-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(self.topic, PARTITIONS, 3)])[self.topic].result(
            timeout=DEADLINE)
        self.groups = {}

    def start_groups(self, count, kinds, **java):
        """`count` groups of two members each, kinds ("classic", "consumer", "confluent") in
        turn, Java members with the consumer properties `java`; waits until each is settled
        and has committed what there is."""
        produce(self.bootstrap, self.topic, 400)
        self.fleet = Fleet(self.bootstrap, self.tmp_path, self.topic)
        self.java_props = java
        for i in range(count):
            gid = f"cl-{i:02d}-{uuid.uuid4().hex[:6]}"
            names = [f"g{i:02d}a", f"g{i:02d}b"]
            self.groups[gid] = names
            kind = kinds[i % len(kinds)]
            for name in names:
                if kind == "confluent":
                    self.fleet.confluent(gid, name)
                else:
                    self.fleet.java(gid, name, kind, **java)
        settled = self.fleet.events.wait_for(
            "every group settled", lambda _: settled_groups(self.fleet, self.groups),
            timeout=DEADLINE)
        self.catch_up("every group committed")
        return settled

    def catch_up(self, what, count=0, timeout=DEADLINE):
        """Produces `count` more records, then waits until every group committed up to the end."""
        if count:
            produce(self.bootstrap, self.topic, count)
        ends = end_offsets(self.bootstrap, self.topic)
        self.fleet.events.wait_for(what, committed_up_to(self.fleet, self.groups, ends),
                                   timeout=timeout)
        return ends

    def check_offsets(self, ends):
        """No acknowledged commit lost: OffsetFetch through the nodes (each group's coordinator,
        wherever its shard now is) has every group at the end of every partition."""
        kp = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30_000)
        try:
            for gid in self.groups:
                listed = kp.list_group_offsets(gid)
                got = {tp.partition: o.offset for tp, o in listed.get(gid, listed).items()
                       if tp.topic == self.topic}
                assert got == ends, f"{gid}: committed {got}, end offsets {ends}"
        finally:
            kp.close()

    def check_owned_once(self):
        """Every group's live members own each partition exactly once."""
        assert settled_groups(self.fleet, self.groups) is not None, self.fleet.events.summary()

    def stop(self):
        if self.fleet is not None:
            self.fleet.stop()
        self.cluster.stop()


def test_a_killed_node_s_groups_move_to_the_others_and_back_without_a_rebalance(tmp_path):
    s = Scenario(tmp_path)
    try:
        # 50 groups of two members: Java classic, Java consumer protocol (KIP-848), confluent.
        before = s.start_groups(GROUPS, ["classic", "consumer", "confluent"])
        settled_at = len(s.fleet.events)
        cluster = s.cluster

        # kill -9 one node: the others load its shards and serve its groups.
        victim = cluster.nodes[0]
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        cluster.mark(1)
        cluster.mark(2)
        cluster.wait_settled([1, 2])
        s.catch_up("every group committed after the failover", 400)

        # The node restarted rejoins and takes shards back.
        for i in range(3):
            cluster.mark(i)
        victim.start(port=victim.port)
        back = cluster.wait_settled([0, 1, 2])
        assert back[0] > 0
        ends = s.catch_up("every group committed after the node came back", 400)

        # Nobody noticed: no member gave a partition up or lost one, no commit failed, every
        # member holds what it held (the same generation for those that report one).
        log = s.fleet.events.snapshot()
        moved = [e for e in log[settled_at:] if e["event"] in ("assigned", "revoked", "lost")]
        assert not moved, f"members were rebalanced: {moved[:5]}"
        failed = [e for e in log if e["event"] == "commit_failed"]
        assert not failed, f"commits failed: {failed[:5]}"
        after = settled_groups(s.fleet, s.groups)
        assert after is not None
        for name, v in before.items():
            assert after[name].owned == v.owned and after[name].generation == v.generation, name
        s.check_offsets(ends)
    finally:
        s.stop()


def test_a_paused_node_is_fenced_and_serves_nothing_it_lost(tmp_path):
    """SIGSTOP for longer than the nodes' session: the others take its shards (fencing its
    producer epochs); resumed, it finds itself out of the nodes' group, drops every shard
    without serving or writing any of them again, and rejoins. Its members (Java, both
    protocols; their requests to the paused node hang until the client gives up on it, as with
    a hung Kafka broker) end up served by the others, nothing committed lost."""
    s = Scenario(tmp_path)
    try:
        # A request to the paused node is given up after 10 s (Kafka's default: 30 s).
        s.start_groups(12, ["classic", "consumer"], request_timeout_ms=10_000,
                       default_api_timeout_ms=20_000)
        cluster = s.cluster
        paused = cluster.nodes[0]
        mark = paused.log_size()
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            cluster.mark(1)
            cluster.mark(2)
            cluster.wait_settled([1, 2])
            # Members rejoin where their coordinator's requests time out: a few rounds of
            # request.timeout.ms on top of the failover.
            s.catch_up("every group committed while a node is paused", 200, timeout=3 * DEADLINE)
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        for i in range(3):
            cluster.mark(i)
        cluster.wait_settled([0, 1, 2])
        with open(paused.log_path, "rb") as log:
            log.seek(mark)
            resumed = log.read()
        assert b"no longer a member of the cluster's group: dropping every shard" in resumed, \
            paused.log_tail()
        ends = s.catch_up("every group committed after the node came back", 200)
        s.check_owned_once()
        failed = [e for e in s.fleet.events.snapshot() if e["event"] == "commit_failed"]
        assert not failed, f"commits failed: {failed[:5]}"
        s.check_offsets(ends)
    finally:
        s.stop()


def test_a_node_added_under_load_takes_shards_without_a_stuck_group_or_a_lost_commit(tmp_path):
    """Two nodes serving groups while records keep coming; a third joins: shards move to it
    (each given up by its owner before the new one loads it) while the groups rebalance."""
    s = Scenario(tmp_path, started=2)
    try:
        s.start_groups(12, ["classic", "consumer", "confluent"])
        cluster = s.cluster
        stop = threading.Event()

        def keep_producing():
            while not stop.is_set():
                produce(s.bootstrap, s.topic, 50)

        producer = threading.Thread(target=keep_producing, daemon=True)
        producer.start()
        try:
            # One more member in half the groups: they rebalance while the shards move.
            for i, gid in enumerate(list(s.groups)[::2]):
                name = f"g{list(s.groups).index(gid):02d}c"
                s.groups[gid].append(name)
                s.fleet.java(gid, name, "classic" if i % 2 == 0 else "consumer", **s.java_props)
            for i in range(2):
                cluster.mark(i)
            cluster.nodes[2].start(port=cluster.nodes[2].port)
            held = cluster.wait_settled([0, 1, 2])
            assert held[2] > 0
        finally:
            stop.set()
            producer.join(DEADLINE)
        s.fleet.events.wait_for("every group settled", lambda _: settled_groups(s.fleet, s.groups),
                                timeout=DEADLINE)
        ends = s.catch_up("every group committed after the node joined")
        s.check_owned_once()
        s.check_offsets(ends)
    finally:
        s.stop()
