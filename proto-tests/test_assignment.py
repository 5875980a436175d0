"""Server-side assignment (group.assignor) with real clients: koord decodes each member's
subscription, assigns when the join phase completes, tells a JoinGroup v9 leader to skip
assigning, and answers every SyncGroup with koord's own assignment.

Each scenario scales a group of one client 3 -> 5 -> 3 members on a 12-partition topic and checks
every settled state the members' own rebalance callbacks report: each partition has exactly one
owner, loads differ by at most one, DescribeGroups shows the assignor as the group's protocol,
and, for `uniform`, the partitions that changed owner between two settled states are exactly as
many as a balanced, sticky assignor must move (no more). Cooperative members never see a
partition they keep revoked, and no partition is held by two members at once. With
group.assignor=client the same Java groups behave as in Kafka: the leader assigns.

koord runs with the quick-rebalance settings of test_groups.py. These tests are about koord's
own configuration: with KOORD_BOOTSTRAP (the suite against another server) they are skipped.
"""

import os
import re

import pytest

from groups_util import Group, check_cooperative, owners_at_once

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


def balanced(partitions, members):
    """The partition counts of a balanced assignment: floor and ceiling of the mean."""
    return {partitions // members, -(-partitions // members)}


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


def scale_3_5_3(group, start):
    """m1..m3 join; m4 and m5 join; m1 and m2 (the first leader among them) close. Returns the
    three settled states."""
    for m in ("m1", "m2", "m3"):
        start(m)
    three = group.wait_settled(["m1", "m2", "m3"], balanced(PARTITIONS, 3), what="3 members")
    start("m4")
    start("m5")
    five = group.wait_settled(["m1", "m2", "m3", "m4", "m5"], balanced(PARTITIONS, 5),
                              after=three.generation, what="m4 and m5 joined")
    group.close("m1", "m2")
    back = group.wait_settled(["m3", "m4", "m5"], balanced(PARTITIONS, 3),
                              after=five.generation, what="m1 and m2 left")
    return [three, five, back]


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
