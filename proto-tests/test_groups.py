"""Classic consumer groups with real clients: members join, leave, crash and restart, and every
partition always ends up owned by exactly one live member, as the members' own rebalance
callbacks report it and as DescribeGroups reports it (groups_util.py has the members and checks).

Each test runs its own koord with group.initial.rebalance.delay.ms=0 and
group.min.session.timeout.ms=1000 and members with session.timeout.ms=6000 and
heartbeat.interval.ms=500, so that rebalances are quick. No step passes because of a sleep: each
waits, with a deadline, for the state it expects, and fails with what the members saw. (The one
sleep, in the static-membership test, only leaves a wrong rebalance the time to happen.)

KOORD_BOOTSTRAP=HOST:PORT runs the same tests against a running broker instead (e.g. the
Apache Kafka of `scripts/kafka.sh start`); each test makes its own topic and group there.
"""

import os
import re
import subprocess
import time

import pytest
from confluent_kafka import ConsumerGroupState

from groups_util import (OWNERSHIP_EVENTS, SESSION_TIMEOUT_MS, Group, check_cooperative,
                         consumed_offsets, java_command)

GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
EXTERNAL_BOOTSTRAP = os.environ.get("KOORD_BOOTSTRAP")


@pytest.fixture
def bootstrap(request):
    if EXTERNAL_BOOTSTRAP:
        return EXTERNAL_BOOTSTRAP
    return request.getfixturevalue("koord")(*GROUP_SETTINGS).bootstrap


@pytest.fixture
def group(bootstrap, tmp_path, request):
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    g = Group(bootstrap, tmp_path, name=name)
    yield g
    g.shutdown()


# --- membership changes -----------------------------------------------------------------------

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
    two = group.wait_settled(["m4", "m5"], {6}, after=left.generation,
                             what="m3 killed and expired after its session timeout")

    group.check_history()
    if assignor == "cooperative-sticky":
        check_cooperative(group, three, five, left, two)


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
        check_cooperative(group, three, two)


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


# --- static membership ----------------------------------------------------------------------

def test_static_members_restart_without_rebalance(group):
    """Static members (group.instance.id) that close, or are killed, and come back within their
    session timeout get their partitions back in the same generation, and the others see no
    rebalance: the leader (s1, the first to join) restarts twice in a new JVM, after a clean
    close and after kill -9; then a follower (s3) closes and restarts in its JVM."""
    leader_jvm, others = group.java(), group.java()
    leader_jvm.start("s1", group_instance_id="s1")
    alone = group.wait_settled(["s1"], {12}, what="s1 alone, the leader")
    others.start("s2", group_instance_id="s2")
    others.start("s3", group_instance_id="s3")
    before = group.wait_settled(["s1", "s2", "s3"], {4}, after=alone.generation,
                                what="3 static members")
    live = {"s1": "s1", "s2": "s2", "s3": "s3"}  # member name -> its group.instance.id

    # The Java client sends no LeaveGroup when a static member closes: s1 stays a member.
    group.close("s1")
    leader_jvm.stop()
    state, members = group.describe()
    assert before.member_ids["s1"] in members, f"s1 left the group on close: {state} {members}"
    restart_static(group, before, live, "s1", "s1-after-close", group.java())

    group.jvms[-1].kill()
    killed_at = time.monotonic()
    restart_static(group, before, live, "s1-after-close", "s1-after-kill", group.java())

    group.close("s3")
    restart_static(group, before, live, "s3", "s3-after-close", others)

    # Observation window for the negative claim: had the coordinator kept the session timer of a
    # replaced instance, it would expire within one session timeout of its last heartbeat.
    time.sleep(max(0.0, killed_at + SESSION_TIMEOUT_MS / 1000 + 1 - time.monotonic()))
    check_unchanged(group, before, live)
    moved = [e for e in group.events.snapshot()[before.index:]
             if e["event"] in OWNERSHIP_EVENTS and e["member"] == "s2"]
    assert not moved, f"s2 saw a rebalance: {moved}"
    group.check_history()


def restart_static(group, before, live, old, new, jvm):
    """Member `new` (on `jvm`) takes over the instance of member `old`, which is gone: it gets the
    instance's partitions at `before`'s generation, and every member is as it was."""
    instance = live.pop(old)
    since = len(group.events)
    jvm.start(new, group_instance_id=instance)
    back = group.wait_event(f"{new} assigned", [new], "assigned", since)[new]
    want = (before.generation, before.owned[instance])
    assert (back["generation"], set(back["assignment"])) == want, (
        f"{new} rejoined as instance {instance} at generation {back['generation']} with "
        f"{back['assignment']}; want generation {want[0]} with {sorted(want[1])}\n"
        f"{group.events.summary()}")
    live[new] = instance
    check_unchanged(group, before, live)


def check_unchanged(group, before, live):
    """Every live member (name -> instance) is at `before`'s generation with the partitions its
    instance had, as the members themselves and DescribeGroups say."""
    ids = {}
    for name, instance in live.items():
        status = group.status(name)
        want = (before.generation, before.owned[instance])
        assert (status["generation"], set(status["assignment"])) == want, (
            f"{name}: generation {status['generation']} with {status['assignment']}; want "
            f"{want[0]} with {sorted(want[1])}\n{group.events.summary()}")
        ids[status["member_id"]] = (instance, sorted(before.owned[instance]))
    state, described = group.describe()
    assert (state, described) == (ConsumerGroupState.STABLE, ids), (
        f"DescribeGroups: {state} {described}")


# --- committed offsets ----------------------------------------------------------------------

RECORDS = 30_000


def test_members_resume_from_committed_offsets(group):
    """3 members commit (commitSync) after every poll and each stop cleanly after 3,000
    records; 3 new members resume from the committed offsets: every one of the 30,000 records is
    consumed exactly once over both runs."""
    jvm = group.java()
    for m in ("c1", "c2", "c3"):
        jvm.start(m, "--commit", "--stop-after=3000", max_poll_records=500)
    group.wait_settled(["c1", "c2", "c3"], {4}, what="3 committing members")
    per_partition = group.produce(RECORDS)
    group.wait_event("c1, c2, c3 consumed 3,000 records each and closed",
                     ["c1", "c2", "c3"], "closed")
    first_run = group.events.snapshot()
    committed = group.committed()
    first_count = sum(len(o) for o in consumed_offsets(first_run).values())
    assert 9_000 <= first_count < RECORDS, f"first run consumed {first_count}"

    for m in ("c4", "c5", "c6"):
        jvm.start(m, "--commit", max_poll_records=500)
    group.events.wait_for(
        f"all {RECORDS} records consumed",
        lambda log: True if sum(map(len, consumed_offsets(log).values())) >= RECORDS else None)
    group.close("c4", "c5", "c6")

    log = group.events.snapshot()
    failed = [e for e in log if e["event"] == "commit_failed"]
    assert not failed, f"commits failed: {failed}"
    offsets = consumed_offsets(log)
    for p, n in per_partition.items():
        assert sorted(offsets[p]) == list(range(n)), (
            f"partition {p}: consumed {len(offsets[p])} records, {len(set(offsets[p]))} distinct, "
            f"of offsets 0..{n - 1}")
        second = consumed_offsets(log[len(first_run):])[p]
        resume_at = max(committed[p], 0)  # nothing committed (-1001): auto.offset.reset=earliest
        assert not second or second[0] == resume_at, (
            f"partition {p}: second run started at {second[0]}, committed was {committed[p]}")
    assert group.committed() == per_partition
    group.check_history()


# --- kafka-consumer-groups ------------------------------------------------------------------

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def consumer_groups(group, *commands):
    """Runs kafka-consumer-groups (ConsumerGroupCommand of kafka-tools) once per argument list,
    all at once; returns their stdouts in order."""
    procs = [subprocess.Popen(
        java_command(CONSUMER_GROUP_COMMAND, "--bootstrap-server", group.bootstrap, *args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for args in commands]
    outs = []
    for args, p in zip(commands, procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, (
            f"kafka-consumer-groups {' '.join(args)} exited {p.returncode}\n{out}\n{err}")
        outs.append(out)
    return outs


def table(text):
    """The rows of a kafka-consumer-groups table as dicts keyed by its header."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    start = next(i for i, words in enumerate(lines) if words[0] == "GROUP")
    return [dict(zip(lines[start], words)) for words in lines[start + 1:]]


def committed_in(log):
    """{partition: the last offset a member's commitSync reported committed}."""
    committed = {}
    for e in log:
        if e["event"] == "committed":
            committed.update({int(p): o for p, o in e["offsets"].items()})
    return committed


def test_kafka_consumer_groups_tool(group):
    """kafka-consumer-groups lists the group, describes its members, their assignment and a lag
    of 0 once everything is consumed, resets the empty group's offsets to the earliest, and
    deletes it."""
    per_partition = group.produce(1200)
    jvm = group.java()
    jvm.start("a", "--commit")
    jvm.start("b", "--commit")
    settled = group.wait_settled(["a", "b"], {6}, what="2 members")
    group.events.wait_for("everything consumed and committed",
                          lambda log: True if committed_in(log) == per_partition else None)

    listed, described, members = consumer_groups(
        group, ["--list"], ["--describe", "--group", group.id],
        ["--describe", "--group", group.id, "--members", "--verbose"])
    assert group.id in listed.split(), listed
    owner = {p: settled.member_ids[m] for m, parts in settled.owned.items() for p in parts}
    rows = {int(r["PARTITION"]): r for r in table(described) if r["TOPIC"] == group.topic}
    assert {p: (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"])
            for p, r in rows.items()} == {
        p: (str(n), str(n), "0", owner[p]) for p, n in per_partition.items()}, described
    want_members = {settled.member_ids[m]: f"{group.topic}:{','.join(map(str, sorted(parts)))}"
                    for m, parts in settled.owned.items()}
    assignments = {r["CONSUMER-ID"]: r["CURRENT-ASSIGNMENT"] for r in table(members)}
    assert assignments == want_members, members

    group.close("a", "b")
    [reset] = consumer_groups(group, ["--reset-offsets", "--to-earliest", "--execute",
                                      "--group", group.id, "--topic", group.topic])
    new_offsets = {int(r["PARTITION"]): r["NEW-OFFSET"] for r in table(reset)}
    assert new_offsets == {p: "0" for p in per_partition}, reset
    [described] = consumer_groups(group, ["--describe", "--group", group.id])
    rows = {int(r["PARTITION"]): r for r in table(described)}
    assert {p: (r["CURRENT-OFFSET"], r["LAG"], r["CONSUMER-ID"]) for p, r in rows.items()} == {
        p: ("0", str(n), "-") for p, n in per_partition.items()}, described
    assert group.committed() == {p: 0 for p in per_partition}

    [deleted] = consumer_groups(group, ["--delete", "--group", group.id])
    assert "successful" in deleted, deleted
    [listed] = consumer_groups(group, ["--list"])
    assert group.id not in listed.split(), listed

