"""Kafka Streams 4.4 with group.protocol=streams (KIP-1071 streams groups): the coordinator
assigns the tasks.

- The word count of test_streams.py scales 1 -> 2 -> 3 -> 1 instances; every count it publishes
  is exact in every phase. On koord (its default learner assignor), the stateful tasks an
  instance takes over are warmed up on it first: koord's log shows warm-ups planned and
  promoted.
- With group.streams.num.standby.replicas=1 (koord's setting), two instances each keep standbys
  of the other's stateful tasks.
- Static membership (group.instance.id, Kafka 4.4's streams groups): an instance closed without
  leaving and started again with the same instance id gets its tasks back, and the other
  instance's tasks never change meanwhile (koord and Kafka 4.4 alike).

Every wait is on an event (a JSON line of an instance, a record read back); deadlines only bound
a failure. KOORD_BOOTSTRAP=HOST:PORT runs the scaling test against a running broker instead
(Apache Kafka 4.4 in the conformance tier, whose sticky assignor moves tasks at once).
"""

import collections
import re
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from test_streams import (EXTERNAL_BOOTSTRAP, PARTITIONS, TASKS, OutputCounts, StreamsEvents,
                          StreamsInstance, instance_views, produce_sentences, tasks_split, tool,
                          unique)

STREAMS_PROTOCOL = "group.protocol=streams"
# koord's settings for these tests: members heartbeat every second so a scale-out takes seconds,
# not the 5 s rounds of the default (the protocol is the same).
KOORD_SETTINGS = ("group.streams.heartbeat.interval.ms=1000",)
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"  # kafka-streams-groups
STATEFUL = frozenset(f"1_{p}" for p in range(PARTITIONS))


def topics(bootstrap, app_id):
    input_topic, output_topic = f"{app_id}-input", f"{app_id}-output"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(input_topic, PARTITIONS, 1),
                                  NewTopic(output_topic, PARTITIONS, 1)]).values():
        f.result(timeout=30)
    return input_topic, output_topic


def koord_log_lines(k, needle):
    try:
        return [line for line in k.log_path.read_text(errors="replace").splitlines()
                if needle in line]
    except OSError:
        return []


def test_streams_group_word_count_scales_1_2_3_1_with_exact_counts(koord, tmp_path, request):
    k = None
    if EXTERNAL_BOOTSTRAP:
        bootstrap = EXTERNAL_BOOTSTRAP
    else:
        k = koord(*KOORD_SETTINGS)
        bootstrap = k.bootstrap
    app_id = unique(request, "app")
    input_topic, output_topic = topics(bootstrap, app_id)
    events = StreamsEvents()
    instances = {}
    output = OutputCounts(bootstrap, output_topic)
    expected = collections.Counter()

    def start(name):
        instances[name] = StreamsInstance(events, name, tmp_path, bootstrap, app_id, input_topic,
                                          output_topic, tmp_path / f"{name}-state",
                                          STREAMS_PROTOCOL)

    try:
        produce_sentences(bootstrap, input_topic, 0, 300, expected)
        start("s1")
        alone = events.wait_for("s1 RUNNING with every task", tasks_split(["s1"]))
        assert alone == {"s1": TASKS}
        output.wait_for(dict(expected), "phase 1 (s1 alone)")

        start("s2")
        events.wait_for("s1 and s2 RUNNING, the tasks split between them",
                        tasks_split(["s1", "s2"]))
        produce_sentences(bootstrap, input_topic, 300, 300, expected)
        output.wait_for(dict(expected), "phase 2 (s1 and s2)")

        start("s3")
        three = events.wait_for("s1, s2 and s3 RUNNING, the tasks split among them",
                                tasks_split(["s1", "s2", "s3"]))
        produce_sentences(bootstrap, input_topic, 600, 300, expected)
        output.wait_for(dict(expected), "phase 3 (s1, s2 and s3)")
        # kafka-streams-groups (kafka-tools 4.4) describes the members with their tasks, and
        # the lag of every input and repartition partition.
        # A task the learner assignor moves after its warm-up is between two members for a
        # moment (revoked from one, not yet active on the other): describe once none is.
        described = describe_reconciled(bootstrap, app_id)
        assert members_active_tasks(described, app_id) == TASKS, described
        offsets = tool(STREAMS_GROUP_COMMAND, bootstrap, "--describe", "--group", app_id,
                       "--offsets")
        lags = re.findall(rf"^{re.escape(app_id)}\s+(\S+)\s+(\d+)\s+(\d+)\s*$", offsets, re.M)
        assert sorted((t, int(p)) for t, p, _ in lags) == sorted(
            (t, p) for t in (input_topic, f"{app_id}-words-repartition")
            for p in range(PARTITIONS)), offsets

        instances["s1"].stop()
        instances["s2"].stop()
        events.wait_for("s3 RUNNING with every task after s1 and s2 closed",
                        tasks_split(["s3"], gone=["s1", "s2"]))
        produce_sentences(bootstrap, input_topic, 900, 300, expected)
        output.wait_for(dict(expected), "phase 4 (s3 alone)")
        instances["s3"].stop()

        if k is not None:
            # The learner assignor warmed moved stateful tasks up before moving them.
            planned = koord_log_lines(k, "warm-up planned")
            promoted = koord_log_lines(k, "warm-up promoted")
            assert planned and promoted, (
                f"no warm-ups in koord's log: planned {planned[:3]}, promoted {promoted[:3]}")
        print(f"tasks with 3 instances: {three}")
    finally:
        output.stop()
        for inst in instances.values():
            inst.kill()


@pytest.mark.skipif(EXTERNAL_BOOTSTRAP is not None,
                    reason="standbys are koord's group.streams.num.standby.replicas setting")
def test_streams_group_keeps_standbys_on_the_other_instance(koord, tmp_path, request):
    k = koord(*KOORD_SETTINGS, "group.streams.num.standby.replicas=1")
    bootstrap = k.bootstrap
    app_id = unique(request, "app")
    input_topic, output_topic = topics(bootstrap, app_id)
    events = StreamsEvents()
    instances = []
    output = OutputCounts(bootstrap, output_topic)
    expected = collections.Counter()
    try:
        produce_sentences(bootstrap, input_topic, 0, 200, expected)
        for name in ("s1", "s2"):
            instances.append(StreamsInstance(events, name, tmp_path, bootstrap, app_id,
                                             input_topic, output_topic,
                                             tmp_path / f"{name}-state", STREAMS_PROTOCOL))

        def standbys_placed(log):
            split = tasks_split(["s1", "s2"])(log)
            if split is None:
                return None
            views = instance_views(log)
            standby = {n: standby_of(log, n) for n in ("s1", "s2")}
            covered = standby["s1"] | standby["s2"]
            if covered != STATEFUL:
                return None
            if any(standby[n] & views[n]["active"] for n in ("s1", "s2")):
                return None
            return standby

        placed = events.wait_for("every stateful task with a standby on the other instance",
                                 standbys_placed)
        output.wait_for(dict(expected), "counts with standbys")
        for inst in instances:
            inst.stop()
        print(f"standbys: {placed}")
    finally:
        output.stop()
        for inst in instances:
            inst.kill()


def balanced(live):
    """tasks_split of `live`, each instance with as many tasks as the others and some of the
    stateful ones: where both koord's learner assignor (once its warm-ups are promoted) and
    Kafka's sticky assignor settle."""
    def check(log):
        split = tasks_split(live)(log)
        if split is None:
            return None
        even = len(TASKS) // len(live)
        if any(len(a) != even or not a & STATEFUL for a in split.values()):
            return None
        return split
    return check


def test_a_static_member_restarted_gets_its_tasks_back_and_nothing_else_moves(
        koord, tmp_path, request):
    if EXTERNAL_BOOTSTRAP:
        bootstrap = EXTERNAL_BOOTSTRAP
    else:
        bootstrap = koord(*KOORD_SETTINGS).bootstrap
    app_id = unique(request, "app")
    input_topic, output_topic = topics(bootstrap, app_id)
    events = StreamsEvents()
    instances = []
    output = OutputCounts(bootstrap, output_topic)
    expected = collections.Counter()

    def start(name, instance_id):
        instances.append(StreamsInstance(
            events, name, tmp_path, bootstrap, app_id, input_topic, output_topic,
            tmp_path / f"{instance_id}-state", STREAMS_PROTOCOL,
            f"group.instance.id={app_id}-{instance_id}", "koord.test.close=remain"))
        return instances[-1]

    try:
        produce_sentences(bootstrap, input_topic, 0, 200, expected)
        start("s1", "one")
        start("s2", "two")
        split = events.wait_for("s1 and s2 RUNNING with half the tasks each", balanced(["s1", "s2"]))
        settled_at = len(events.snapshot())
        output.wait_for(dict(expected), "s1 and s2")
        # s2 closes remaining in the group (a static member's temporary leave), and comes back
        # as a new process with the same instance id and state directory.
        instances[1].stop()
        start("s2-again", "two")
        back = events.wait_for("s2 back with its tasks, s1 RUNNING",
                               tasks_split(["s1", "s2-again"], gone=["s2"]))
        assert back == {"s1": split["s1"], "s2-again": split["s2"]}, (split, back)
        produce_sentences(bootstrap, input_topic, 200, 200, expected)
        output.wait_for(dict(expected), "after the restart")
        s1_tasks = [frozenset(e["active"]) for e in events.snapshot()[settled_at:]
                    if e["member"] == "s1" and e["event"] == "tasks"]
        assert all(t == split["s1"] for t in s1_tasks), (
            f"s1's tasks changed while s2 was away: {s1_tasks}")
        for inst in instances:
            inst.stop()
    finally:
        output.stop()
        for inst in instances:
            inst.kill()


def tasks_of(segment):
    """The tasks of one "0:[1, 2]; 1:[0];" segment, as {"0_1", ...}."""
    return {f"{sub}_{p.strip()}" for sub, parts in re.findall(r"(\w+):\[([^\]]*)\]", segment)
            for p in parts.split(",") if p.strip()}


def reconciled(described, app_id):
    """Whether every member line holds exactly its target's active tasks."""
    lines = [line for line in described.splitlines()
             if line.startswith(app_id) and " ACTIVE:" in line]
    def segment(line, key):
        # From the key to the next one (STANDBY:, TARGET-WARMUP: ...).
        return re.split(r"\s[A-Z][A-Z-]*:", line.split(key, 1)[1])[0]
    for line in lines:
        if tasks_of(segment(line, " ACTIVE:")) != tasks_of(segment(line, " TARGET-ACTIVE:")):
            return False
    return bool(lines)


def describe_reconciled(bootstrap, app_id, deadline_s=60):
    """kafka-streams-groups --describe --members --verbose, again until every member holds its
    target's active tasks (the event), or `deadline_s` passes (the last answer then)."""
    deadline = time.monotonic() + deadline_s
    while True:
        described = tool(STREAMS_GROUP_COMMAND, bootstrap, "--describe", "--group", app_id,
                         "--members", "--verbose")
        if reconciled(described, app_id) or time.monotonic() > deadline:
            return described
        time.sleep(0.5)


def members_active_tasks(described, app_id):
    """kafka-streams-groups --describe --members --verbose: the active tasks of every member
    line ("ACTIVE: 0:[1, 2]; 1:[0]; TARGET-ACTIVE: ..."), as {"0_1", ...}."""
    tasks = set()
    for line in described.splitlines():
        if not line.startswith(app_id) or " ACTIVE:" not in line:
            continue
        active = line.split(" ACTIVE:", 1)[1].split("TARGET-ACTIVE:", 1)[0]
        for sub, parts in re.findall(r"(\w+):\[([^\]]*)\]", active):
            tasks.update(f"{sub}_{p.strip()}" for p in parts.split(",") if p.strip())
    return frozenset(tasks)


def standby_of(log, name):
    """The standby tasks of instance `name` by its latest tasks line."""
    last = frozenset()
    for e in log:
        if e["member"] == name and e["event"] == "tasks":
            last = frozenset(e.get("standby", ()))
    return last
