"""Server-side assignment (group.assignor) with real clients: koord decodes each member's
subscription, assigns when the join phase completes, lets the leader compute its plan as in
Kafka (SkipAssignment only for a replaced static leader, KIP-814), and answers every SyncGroup
with koord's own assignment.

Each scenario scales a group of one client 3 -> 5 -> 3 members on a 12-partition topic and checks
every settled state the members' own rebalance callbacks report: each partition has exactly one
owner, loads differ by at most one, DescribeGroups shows the assignor as the group's protocol,
and, for `uniform`, the partitions that changed owner between two settled states are exactly as
many as a balanced, sticky assignor must move (no more). Cooperative members never see a
partition they keep revoked, and no partition is held by two members at once. No step takes
more than groups_util.MAX_GENERATIONS_PER_CHANGE generations per member that joined or left (the
members' own reported generations; issue 24 was a group that never stopped rebalancing). With
group.assignor=client the same Java groups behave as in Kafka: the leader assigns.

One more test drives the wire by hand (kafka-python's protocol classes) to replay, step by step,
the race a group of real clients starting together runs into: the first member's generation
completes, a second member joins before the first one's SyncGroup, which fails with
REBALANCE_IN_PROGRESS, so the first member never had the partitions koord assigned it.

koord runs with the quick-rebalance settings of test_groups.py. These tests are about koord's
own configuration: with KOORD_BOOTSTRAP (the suite against another server) they are skipped.
"""

import os
import re
import socket
import struct
import time

import pytest
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from kafka.protocol.parser import KafkaProtocol

from groups_util import (POLL_INTERVAL, SETTLE_TIMEOUT, Group, balanced, check_cooperative,
                         owners_at_once, scale_3_5_3)

GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
PARTITIONS = 12

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KOORD_BOOTSTRAP")),
    reason="koord-only: server-side assignment needs koord started with group.assignor "
           "(KOORD_BOOTSTRAP points at another server)")


@pytest.fixture
def make_group(koord, tmp_path, request):
    """Factory: `make_group(assignor)` starts a koord with group.assignor=ASSIGNOR and returns a
    Group on a fresh 12-partition topic there."""
    groups = []
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")

    def make(assignor):
        k = koord(*GROUP_SETTINGS, f"group.assignor={assignor}")
        g = Group(k.bootstrap, tmp_path, partitions=PARTITIONS, name=name)
        groups.append(g)
        return g

    yield make
    for g in groups:
        g.shutdown()


def owners(settled):
    return {p: m for m, parts in settled.owned.items() for p in parts}


def min_moves(before, after, partitions):
    """The fewest partitions a balanced assignor must move from `before` to `after`'s members:
    P - max kept, where every member of `after` has a quota of P // N, and P % N of them one
    more, given to the surviving members that owned the most; a survivor keeps at most its
    quota of what it owned."""
    base, extra = divmod(partitions, len(after.owned))
    survivors = sorted((len(before.owned[m]) for m in after.owned if m in before.owned),
                       reverse=True)
    kept = sum(min(owned, base + (i < extra)) for i, owned in enumerate(survivors))
    return partitions - kept


def moved(before, after):
    """Partitions whose owner changed from `before` to `after`."""
    a, b = owners(before), owners(after)
    return sorted(p for p in b if a.get(p) != b[p])


def check_settles(group, settles, protocol, sticky):
    """Each settled state: one owner per partition, loads within one of each other, `protocol`
    in DescribeGroups; with `sticky`, each step moved exactly the minimum."""
    for s in settles:
        assert sorted(owners(s)) == list(range(group.partitions)), s.owned
        loads = [len(parts) for parts in s.owned.values()]
        assert max(loads) - min(loads) <= 1, f"unbalanced: {s.owned}"
    assert group.protocol() == protocol
    if sticky:
        for before, after in zip(settles, settles[1:]):
            want = min_moves(before, after, group.partitions)
            got = moved(before, after)
            assert len(got) == want, (
                f"{len(got)} partitions changed owner {got}, the minimum is {want}\n"
                f"before: { {m: sorted(p) for m, p in before.owned.items()} }\n"
                f"after:  { {m: sorted(p) for m, p in after.owned.items()} }")


def check_no_double_owner(group, settles, cooperative):
    """No member lost partitions or failed; no partition in two assignments of one generation,
    nor held by two members at once in the (single-stream) event log; cooperative members saw
    revoked exactly what they gave up."""
    group.check_history()
    overlaps = owners_at_once(group.events.snapshot())
    assert not overlaps, (f"(event index, partition, member, other holder): {overlaps}\n"
                          f"{group.events.summary()}")
    if cooperative:
        check_cooperative(group, *settles)


def starter(group, client, assignor):
    """start(name) adds a member of `client` with client-side assignor `assignor` (what it
    declares in JoinGroup); Java members all run in one JVM so that their events are one
    ordered stream."""
    if client == "java":
        jvm = group.java()
        return lambda name: jvm.start(name, partition_assignment_strategy=assignor)
    if client == "confluent-kafka":
        return lambda name: group.confluent(name, assignor)
    return lambda name: group.kafka_python(name, assignor)


@pytest.mark.parametrize("client,assignor", [
    ("java", "range"),
    ("java", "cooperative-sticky"),
    ("confluent-kafka", "cooperative-sticky"),
    ("kafka-python", "range"),
])
def test_uniform_assignment_with_real_clients(make_group, client, assignor):
    """group.assignor=uniform: the members get koord's balanced, sticky assignment whatever
    they declare, 3 -> 5 -> 3 members, and DescribeGroups shows "uniform"."""
    group = make_group("uniform")
    settles = scale_3_5_3(group, starter(group, client, assignor))
    check_no_double_owner(group, settles, cooperative=assignor == "cooperative-sticky")
    check_settles(group, settles, "uniform", sticky=True)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_client_assignment_with_java(make_group, assignor):
    """group.assignor=client: the Java leader assigns as in Kafka, 3 -> 5 -> 3 members, and
    DescribeGroups shows the client's assignor."""
    group = make_group("client")
    settles = scale_3_5_3(group, starter(group, "java", assignor))
    check_no_double_owner(group, settles, cooperative=assignor == "cooperative-sticky")
    check_settles(group, settles, assignor, sticky=False)


# --- the undelivered assignment, step by step on the wire ------------------------------------

REBALANCE_IN_PROGRESS = 27
REBALANCE_WAIT = 10.0
MEMBER_ID_REQUIRED = 79


class RawMember:
    """One consumer-group member speaking the protocol itself over its own connection: requests
    may be sent now and their response read later (a JoinGroup the coordinator parks)."""

    def __init__(self, bootstrap, name, group, topic, protocol):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=SETTLE_TIMEOUT)
        self.wire = KafkaProtocol(client_id=name)  # koord's member ids start with it
        self.group, self.topic, self.protocol = group, topic, protocol
        self.member_id = ""
        self.generation = -1

    def send(self, request):
        self.wire.send_request(request)
        self.sock.sendall(self.wire.send_bytes())

    def recv(self):
        while True:
            data = self.sock.recv(65536)
            assert data, "koord closed the connection"
            responses = self.wire.receive_bytes(data)
            if responses:
                return responses[0][1]

    def call(self, request):
        self.send(request)
        return self.recv()

    def close(self):
        self.sock.close()

    def subscription(self):
        """ConsumerProtocolSubscription v0: the topic, null user data (no owned partitions)."""
        t = self.topic.encode()
        return struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", -1)

    def send_join(self):
        protocol = JoinGroupRequest.JoinGroupRequestProtocol(name=self.protocol,
                                                             metadata=self.subscription())
        self.send(JoinGroupRequest[5](
            group_id=self.group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
            member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[protocol]))

    def joined(self):
        """Reads a JoinGroup response; a v5 join without a member id is MEMBER_ID_REQUIRED."""
        r = self.recv()
        if r.error_code == MEMBER_ID_REQUIRED and not self.member_id:
            self.member_id = r.member_id
            return r
        assert r.error_code == 0, r
        self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def join(self):
        self.send_join()
        r = self.joined()
        if r.error_code == MEMBER_ID_REQUIRED:
            self.send_join()
            r = self.joined()
        return r

    def send_sync(self):
        self.send(SyncGroupRequest[5](
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None, protocol_type="consumer", protocol_name=self.protocol,
            assignments=[]))

    def heartbeat(self):
        return self.call(HeartbeatRequest[3](
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None)).error_code

    def describe(self):
        return self.call(DescribeGroupsRequest[5](
            groups=[self.group], include_authorized_operations=False)).groups[0]

    def recorded(self):
        """What DescribeGroups says koord assigned this member (its installed record)."""
        for m in self.describe().members:
            if m.member_id == self.member_id and m.member_assignment:
                return assigned(m.member_assignment)
        return []


def assigned(assignment):
    """The partitions of a ConsumerProtocolAssignment (any version: v0 fields come first)."""
    off = 2
    (topics,) = struct.unpack_from(">i", assignment, off)
    off += 4
    out = []
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", assignment, off)
        off += 2 + name_len
        (n,) = struct.unpack_from(">i", assignment, off)
        off += 4
        out += struct.unpack_from(f">{n}i", assignment, off)
        off += 4 * n
    return sorted(out)


def sync_all(members):
    """Every member's SyncGroup at once (a follower's may wait for the assignment); returns
    {member id: partitions}."""
    for m in members:
        m.send_sync()
    got = {}
    for m in members:
        r = m.recv()
        assert r.error_code == 0, f"SyncGroup of {m.member_id} at {m.generation}: {r}"
        got[m.member_id] = assigned(r.assignment)
    return got


def wait_until(what, probe, timeout=SETTLE_TIMEOUT):
    deadline = time.monotonic() + timeout
    while (result := probe()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what}")
        time.sleep(POLL_INTERVAL)
    return result


@pytest.mark.parametrize("protocol", ["range", "cooperative-sticky"])
def test_assignment_the_leader_never_received_is_not_held(koord, protocol):
    """a joins alone: generation 1, and koord assigns it all 12 partitions (DescribeGroups shows
    the assignment installed). b joins before a's SyncGroup, which fails with REBALANCE_IN_PROGRESS: a never had them, and rejoins declaring
    no owned partitions. Every partition must reach a member without anyone doing more than
    the protocol asks: in generation 2 or, if koord withholds some from b under the cooperative
    rule (a partition is not given to a new owner while another holds it), in a rebalance
    koord itself starts (no member revokes anything, so no member would rejoin)."""
    k = koord(*GROUP_SETTINGS, "group.assignor=uniform", f"topics=t:{PARTITIONS}")
    a, b = (RawMember(k.bootstrap, name, "undelivered", "t", protocol) for name in "ab")
    try:
        first = a.join()
        assert (first.generation_id, first.leader) == (1, a.member_id), first
        # koord installs the assignment once it is durable; b must join after that.
        wait_until("koord's generation-1 assignment of every partition to a installed",
                   lambda: True if a.recorded() == list(range(PARTITIONS)) else None)
        b.send_join()
        assert b.joined().error_code == MEMBER_ID_REQUIRED
        b.send_join()  # waits for a to rejoin; a's connection asks how the group is meanwhile
        wait_until("b's join starts a rebalance",
                   lambda: True if a.describe().group_state == "PreparingRebalance" else None)
        a.send_sync()
        assert a.recv().error_code == REBALANCE_IN_PROGRESS
        a.send_join()
        a.joined()
        b.joined()
        assert a.generation == b.generation == 2
        got = sync_all([a, b])
        if protocol == "cooperative-sticky" and sorted(sum(got.values(), [])) != list(
                range(PARTITIONS)):
            # Withheld: only a rebalance koord starts on its own can hand them out, and it
            # has no reason to wait (REBALANCE_WAIT: seconds it is given).
            wait_until(f"a rebalance after generation 2 gave out only {got}", lambda: True if {
                a.heartbeat(), b.heartbeat()} & {REBALANCE_IN_PROGRESS} else None,
                timeout=REBALANCE_WAIT)
            a.send_join()
            b.send_join()
            a.joined()
            b.joined()
            got = sync_all([a, b])
        assert sorted(sum(got.values(), [])) == list(range(PARTITIONS)), (
            f"partitions given out after a's undelivered generation-1 assignment: {got}")
        assert sorted(map(len, got.values())) == [6, 6], got
    finally:
        a.close()
        b.close()
