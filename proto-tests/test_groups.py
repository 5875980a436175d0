"""Classic consumer groups with real clients: members join, leave, crash and restart, and every
partition always ends up owned by exactly one live member, as the members' own rebalance
callbacks report it and as DescribeGroups reports it (groups_util.py has the members and checks).

Each test runs its own koord with group.initial.rebalance.delay.ms=0 and
group.min.session.timeout.ms=1000 and members with session.timeout.ms=6000 and
heartbeat.interval.ms=500, so that rebalances are quick. Nothing waits on a clock: every step
waits, with a deadline, for the state it expects.

PROTO_TESTS_BOOTSTRAP=HOST:PORT runs the same tests against a running broker instead (e.g. the
Apache Kafka of `scripts/kafka.sh start`); each test makes its own topic and group there.
"""

import os
import re

import pytest

from groups_util import Group, revoked_kept

GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
EXTERNAL_BOOTSTRAP = os.environ.get("PROTO_TESTS_BOOTSTRAP")


@pytest.fixture
def bootstrap(request):
    if EXTERNAL_BOOTSTRAP:
        return EXTERNAL_BOOTSTRAP
    return request.getfixturevalue("koord")(*GROUP_SETTINGS).bootstrap


@pytest.fixture
def group(bootstrap, tmp_path, request):
    g = Group(bootstrap, tmp_path, name=re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-"))
    yield g
    g.shutdown()


def revoked_in(log, member):
    return {p for e in log if e["member"] == member and e["event"] == "revoked" for p in e["partitions"]}


def check_step(group, before, after):
    """Between two settled states, with a cooperative assignor: each member that stayed saw
    revoked exactly the partitions it gave up, none that it kept."""
    step = group.events.snapshot()[before.index:after.index]
    for m, owned in after.owned.items():
        lost = before.owned.get(m, frozenset()) - owned
        assert revoked_in(step, m) == lost, (
            f"{m} owned {sorted(before.owned.get(m, ()))}, then {sorted(owned)}, "
            f"but saw revoked {sorted(revoked_in(step, m))}\n{group.events.summary()}")


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_java_members_join_leave_and_crash(group, assignor):
    """3 Java members get 4 partitions each; 2 more join (2 or 3 each); 2 close and leave; one
    more is killed (-9) and is removed once its session times out."""
    members, victim = group.java(), group.java()
    members.start("m1", partition_assignment_strategy=assignor)
    members.start("m2", partition_assignment_strategy=assignor)
    victim.start("m3", partition_assignment_strategy=assignor)
    three = group.wait_settled(["m1", "m2", "m3"], {4}, what="3 members")

    members.start("m4", partition_assignment_strategy=assignor)
    members.start("m5", partition_assignment_strategy=assignor)
    five = group.wait_settled(["m1", "m2", "m3", "m4", "m5"], {2, 3}, after=three.generation,
                              what="m4 and m5 joined")

    group.close("m1", "m2")
    left = group.wait_settled(["m3", "m4", "m5"], {4}, after=five.generation, what="m1 and m2 left")

    victim.kill()
    group.wait_settled(["m4", "m5"], {6}, after=left.generation,
                       what="m3 killed and expired after its session timeout")

    group.check_history()
    if assignor == "cooperative-sticky":
        check_step(group, three, five)
        check_step(group, five, left)
        log = group.events.snapshot()
        for m in ("m1", "m2", "m3", "m4", "m5"):
            assert not revoked_kept(log, m), f"{m} saw revoked partitions it kept: {revoked_kept(log, m)}"


@pytest.mark.parametrize("client,assignor", [
    ("confluent-kafka", "range"),
    ("confluent-kafka", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
])
def test_python_members_join_and_leave(group, client, assignor):
    """3 members of one Python client get 4 partitions each; one closes and the other two take
    its partitions over."""
    add = group.confluent if client == "confluent-kafka" else group.kafka_python
    for name in ("p1", "p2", "p3"):
        add(name, assignor)
    three = group.wait_settled(["p1", "p2", "p3"], {4}, what="3 members")

    group.close("p2")
    two = group.wait_settled(["p1", "p3"], {6}, after=three.generation, what="p2 left")

    group.check_history()
    if assignor == "cooperative-sticky":
        check_step(group, three, two)


def test_mixed_clients_in_one_group(group):
    """A Java, a confluent-kafka and a kafka-python member share a range group: 4 partitions
    each; when the Java member leaves, the other two take its partitions over."""
    group.java().start("java", partition_assignment_strategy="range")
    group.confluent("confluent", "range")
    group.kafka_python("kafka-python", "range")
    three = group.wait_settled(["java", "confluent", "kafka-python"], {4}, what="3 clients")

    group.close("java")
    group.wait_settled(["confluent", "kafka-python"], {6}, after=three.generation, what="java left")
    group.check_history()
