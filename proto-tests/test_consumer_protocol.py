"""Consumer groups of KIP-848 (group.protocol=consumer) with real clients: Java 4.4 and
confluent-kafka members join, leave and crash, and every partition ends up owned by exactly one
live member, as the members themselves report it, never by two at once; with the uniform
assignor no partition moves between members that stay. The coordinator assigns: the members
name the assignor with group.remote.assignor.

koord runs with group.consumer.session.timeout.ms=6000 and heartbeats every 500 ms, so that a
killed member expires within a test. No step passes because of a sleep: each asks the members
for their state (their poll threads answer) until it is the expected one, with a deadline.

KOORD_BOOTSTRAP=HOST:PORT runs the same tests against a running broker (e.g. the Apache Kafka
of `scripts/kafka.sh start`, which has the same consumer-group settings).
"""

import os
import re
import subprocess
import time

import pytest
from confluent_kafka.admin import NewTopic

from groups_util import (POLL_INTERVAL, SETTLE_TIMEOUT, Group, consumed_offsets, java_command,
                         owners_at_once, reported_generation)

SETTINGS = ("group.consumer.min.session.timeout.ms=1000",
            "group.consumer.session.timeout.ms=6000",
            "group.consumer.min.heartbeat.interval.ms=100",
            "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.assignors=uniform,range")
EXTERNAL_BOOTSTRAP = os.environ.get("KOORD_BOOTSTRAP")


@pytest.fixture
def bootstrap(request):
    if EXTERNAL_BOOTSTRAP:
        return EXTERNAL_BOOTSTRAP
    return request.getfixturevalue("koord")(*SETTINGS).bootstrap


@pytest.fixture
def group(bootstrap, tmp_path, request):
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    g = Group(bootstrap, tmp_path, name=name)
    yield g
    g.shutdown()


def settle(group, live, sizes, after, what):
    """Asks each live member for its epoch and assignment until every partition is held by
    exactly one of them, each holding a count in `sizes`, all at one member epoch newer than
    `after` (a stable consumer group: every member is at the target's epoch). Returns
    (epoch, {member: frozenset of partitions})."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        status = {m: group.status(m) for m in live}
        owned = {m: frozenset(s["assignment"]) for m, s in status.items()}
        # (None: a client that does not tell its epoch.)
        epochs = {reported_generation(s) for s in status.values()} - {None}
        held = sorted(p for parts in owned.values() for p in parts)
        if (held == list(range(group.partitions))
                and all(len(parts) in sizes for parts in owned.values())
                and len(epochs) <= 1 and all(e > after for e in epochs)):
            epoch = min(epochs, default=after)
            print(f"{what}: settled at epoch {epoch}: {dict(owned)}")
            return epoch, owned
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: members hold {owned} at epochs {epochs}\n"
                        f"{group.events.summary()}")
        time.sleep(POLL_INTERVAL)


def no_errors(group):
    bad = [e for e in group.events.snapshot() if e["event"] in ("error", "lost")]
    assert not bad, f"unexpected events: {bad}\n{group.events.summary()}"


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_java_members_join_leave_and_crash(group, assignor):
    """3 Java members get 4 partitions each; 2 more join; 2 close; one more is killed (-9) and
    is removed once its session times out. Never two owners at once among the members of one
    JVM, and with uniform no partition moves between two members that stay."""
    props = {"group_protocol": "consumer", "group_remote_assignor": assignor}
    members, victim = group.java(), group.java()
    members.start("m1", **props)
    members.start("m2", **props)
    victim.start("m3", **props)
    e3, three = settle(group, ["m1", "m2", "m3"], {4}, 0, "3 members")

    members.start("m4", **props)
    members.start("m5", **props)
    e5, five = settle(group, ["m1", "m2", "m3", "m4", "m5"], {2, 3}, e3, "m4 and m5 joined")

    group.close("m1", "m2")
    e_left, left = settle(group, ["m3", "m4", "m5"], {4}, e5, "m1 and m2 left")

    victim.kill()
    _, two = settle(group, ["m4", "m5"], {6}, e_left, "m3 killed, expired after its session")

    no_errors(group)
    overlaps = owners_at_once(group.events.snapshot())
    assert not overlaps, f"(event, partition, member, other holder): {overlaps}"
    if assignor == "uniform":
        # Minimum moves: scaling up, members that stay only give partitions away; scaling
        # down, they only gain.
        for before, after in [(three, five)]:
            for m, parts in after.items():
                assert parts <= before.get(m, parts), f"{m}: {before.get(m)} -> {parts}"
        for before, after in [(five, left), (left, two)]:
            for m, parts in after.items():
                assert before[m] <= parts, f"{m}: {before[m]} -> {parts}"


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_confluent_members_join_and_leave(group, assignor):
    """confluent-kafka (librdkafka) members with group.protocol=consumer: 3, then 5, then 3."""
    for m in ("c1", "c2", "c3"):
        group.confluent(m, assignor, **{"group.protocol": "consumer"})
    e3, _ = settle(group, ["c1", "c2", "c3"], {4}, 0, "3 members")
    for m in ("c4", "c5"):
        group.confluent(m, assignor, **{"group.protocol": "consumer"})
    e5, _ = settle(group, ["c1", "c2", "c3", "c4", "c5"], {2, 3}, e3, "c4 and c5 joined")
    group.close("c1", "c2")
    settle(group, ["c3", "c4", "c5"], {4}, e5, "c1 and c2 left")
    no_errors(group)
    overlaps = owners_at_once(group.events.snapshot())
    assert not overlaps, f"(event, partition, member, other holder): {overlaps}"


def test_kafka_consumer_groups_describes_a_consumer_group(group):
    """kafka-consumer-groups --describe --members and --list show the consumer group, its
    members and their partitions (through ConsumerGroupDescribe and ListGroups v5)."""
    props = {"group_protocol": "consumer", "group_remote_assignor": "uniform"}
    members = group.java()
    members.start("m1", **props)
    members.start("m2", **props)
    settle(group, ["m1", "m2"], {6}, 0, "2 members")
    tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    out = subprocess.run(
        java_command(tool, "--bootstrap-server", group.bootstrap, "--describe", "--members",
                     "--group", group.id),
        capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith(group.id)]
    assert len(rows) == 2, out.stdout
    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
    assert sorted(int(r[4]) for r in rows) == [6, 6], out.stdout
    listed = subprocess.run(
        java_command(tool, "--bootstrap-server", group.bootstrap, "--list", "--type"),
        capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    print(listed.stdout)
    line = next(l for l in listed.stdout.splitlines() if l.startswith(group.id))
    assert line.split()[1:] == ["Consumer"], listed.stdout


def test_regex_subscription_picks_up_a_topic_created_later(group):
    """Members subscribed with a regular expression (SubscriptionPattern, resolved by the
    coordinator) get the partitions of a matching topic created after the group formed."""
    members = group.java()
    regex = f"--regex={re.escape(group.topic)}.*"
    for m in ("x1", "x2"):
        members.start(m, regex, group_protocol="consumer", group_remote_assignor="uniform")
    settle(group, ["x1", "x2"], {6}, 0, "2 members on the first topic")
    later = f"{group.topic}-later"
    created = group.admin.create_topics([NewTopic(later, 4, 1)])
    created[later].result(timeout=30)
    want = sorted([f"{group.topic}:{p}" for p in range(group.partitions)]
                  + [f"{later}:{p}" for p in range(4)])
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        held = sorted(tp for m in ("x1", "x2") for tp in group.status(m)["topic_partitions"])
        if held == want:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"held {held}, want {want}\n{group.events.summary()}")
        time.sleep(POLL_INTERVAL)
    no_errors(group)


def test_static_member_restarts_without_moving_partitions(group):
    """A static member (group.instance.id) that closes and starts again under a new member id
    gets its own partitions back, and no other member's partitions move."""
    members = group.java()

    def start(m):
        members.start(m, group_protocol="consumer", group_remote_assignor="uniform",
                      group_instance_id=f"instance-{m}")

    for m in ("s1", "s2", "s3"):
        start(m)
    epoch, owned = settle(group, ["s1", "s2", "s3"], {4}, 0, "3 static members")
    before = len(group.events)
    group.close("s2")
    start("s2")
    after, owned_after = settle(group, ["s1", "s2", "s3"], {4}, epoch - 1, "s2 restarted")
    assert owned_after == owned, f"{owned} -> {owned_after}"
    moved = [e for e in group.events.snapshot()[before:]
             if e["member"] in ("s1", "s3") and e["event"] in ("revoked", "assigned", "lost")
             and e["partitions"]]
    assert not moved, f"other members' partitions moved: {moved}"
    no_errors(group)


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="restarts the koord it started")
@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
def test_group_resumes_after_koord_restarts(koord, tmp_path, how):
    """koord stopped (SIGTERM) or killed (-9) under a consumer-protocol group: once it is back
    on the same data dir, the members carry on at the same epoch with the same partitions (no
    partition lost or moved), commits go on, and the group is described as before."""
    server = koord(*SETTINGS)
    group = Group(server.bootstrap, tmp_path, name=f"restart-{how}")
    try:
        # No rebootstrap while the only broker is down (as in test_durability.py).
        props = {"group_protocol": "consumer", "group_remote_assignor": "uniform",
                 "metadata_recovery_strategy": "none"}
        members = group.java()
        members.start("r1", "--commit", **props)
        members.start("r2", "--commit", **props)
        epoch, owned = settle(group, ["r1", "r2"], {6}, 0, "2 members")
        if how == "sigterm":
            server.restart()
        else:
            server.proc.kill()
            server.proc.wait()
            server.start(port=server.port)
        produced = group.produce(240)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while group.committed() != produced:
            if time.monotonic() > deadline:
                pytest.fail(f"commits after the restart: {group.committed()}, want {produced}\n"
                            f"{group.events.summary()}")
            time.sleep(POLL_INTERVAL)
        after, owned_after = settle(group, ["r1", "r2"], {6}, epoch - 1, "after the restart")
        assert (after, owned_after) == (epoch, owned), group.events.summary()
        no_errors(group)
        # The 4.4 consumer commits by topic id once it knows the ids, as against Kafka 4.4:
        # OffsetCommit v10 (KIP-848).
        assert 10 in server.requests_by_version("OffsetCommit")
    finally:
        group.shutdown()


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="koord's learner assignor")
def test_learner_moves_a_partition_only_after_the_warm_up(koord, tmp_path):
    """With the learner assignor and unmodified consumer-protocol members, a newcomer's
    partitions are first learned: the old owner keeps them (and keeps consuming) until
    learner.warmup.ms after the newcomer joined, and only then are they moved. A lower bound on
    time, which no slow machine can make fail; the settle itself waits on the members."""
    warmup_ms = 3000
    server = koord(*SETTINGS[:-1], "group.consumer.assignors=learner,uniform",
                   f"learner.warmup.ms={warmup_ms}")
    group = Group(server.bootstrap, tmp_path, name="learner-consumer")
    try:
        props = {"group_protocol": "consumer", "group_remote_assignor": "learner"}
        members = group.java()
        members.start("l1", **props)
        # l1 holds everything long enough to be warm (a cold owner's tasks move at once).
        epoch, _ = settle(group, ["l1"], {12}, 0, "l1 alone")
        time.sleep(warmup_ms / 1000)  # l1 becomes a warm owner: setup, not a wait for a result
        joined = time.time() * 1000
        members.start("l2", **props)
        epoch, owned = settle(group, ["l1", "l2"], {6}, epoch, "l2 joined and learned")
        first = min(e["ts_ms"] for e in group.events.snapshot()
                    if e["member"] == "l2" and e["event"] == "assigned" and e["partitions"])
        assert first - joined >= warmup_ms, f"l2 got partitions {first - joined:.0f} ms after joining"
        no_errors(group)
        overlaps = owners_at_once(group.events.snapshot())
        assert not overlaps, f"(event, partition, member, other holder): {overlaps}"
    finally:
        group.shutdown()


def group_type(group):
    """The group's type as kafka-consumer-groups --list --type shows it (Classic, Consumer)."""
    listed = subprocess.run(
        java_command("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                     "--bootstrap-server", group.bootstrap, "--list", "--type"),
        capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    line = next(l for l in listed.stdout.splitlines() if l.startswith(group.id + " "))
    return line.split()[1]


def test_rolling_upgrade_to_the_consumer_protocol_and_back(group):
    """A classic group of 3 Java members (cooperative-sticky) consuming and committing restarts
    one member at a time with group.protocol=consumer, then one at a time back (online
    migration, group.consumer.migration.policy=bidirectional): the group becomes a consumer
    group, then a classic group again; at every step each partition has one live owner and
    never two at once, no record is skipped or consumed twice, and the committed offsets end at
    the end of every partition."""
    classic = {"partition_assignment_strategy": "cooperative-sticky", "max_poll_records": 200}
    consumer = {"group_protocol": "consumer", "group_remote_assignor": "uniform",
                "max_poll_records": 200}
    jvm = group.java()
    live = ["k1", "k2", "k3"]
    for m in live:
        jvm.start(m, "--commit", **classic)
    epoch, _ = settle(group, live, {4}, 0, "3 classic members")
    assert group_type(group) == "Classic"
    produced = group.produce(2400)
    steps = [("k1", "u1", consumer), ("k2", "u2", consumer), ("k3", "u3", consumer),
             ("u1", "d1", classic), ("u2", "d2", classic), ("u3", "d3", classic)]
    for i, (old, new, props) in enumerate(steps):
        group.close(old)
        group.wait_event(f"{old} closed", [old], "closed")
        live = [m for m in live if m != old] + [new]
        jvm.start(new, "--commit", **props)
        epoch, _ = settle(group, live, {4}, epoch, f"{old} restarted as {new}")
        for q, n in group.produce(600).items():
            produced[q] += n
        if i == 2:
            assert group_type(group) == "Consumer"
    assert group_type(group) == "Classic"

    total = sum(produced.values())
    group.events.wait_for(
        f"all {total} records consumed",
        lambda log: True if sum(map(len, consumed_offsets(log).values())) >= total else None)
    group.close(*live)
    group.wait_event("the last members closed", live, "closed")
    log = group.events.snapshot()
    no_errors(group)
    failed = [e for e in log if e["event"] == "commit_failed"]
    assert not failed, f"commits failed: {failed}"
    overlaps = owners_at_once(log)
    assert not overlaps, f"(event, partition, member, other holder): {overlaps}"
    offsets = consumed_offsets(log)
    for q, n in produced.items():
        assert sorted(offsets[q]) == list(range(n)), (
            f"partition {q}: consumed {len(offsets[q])} records, {len(set(offsets[q]))} distinct,"
            f" of offsets 0..{n - 1}")
    assert group.committed() == produced
