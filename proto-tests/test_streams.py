"""Kafka Streams, a client-side custom assignor and Kafka's admin tools against koord on its
defaults: koord started with nothing but its port and data dir, as a user would run it.

- A stateful Kafka Streams 4.4 word count (java/.../StreamsApp.java: groupBy through a
  repartition topic, count() in a RocksDB store, at_least_once) scales 1 -> 2 -> 1 instances;
  every count it publishes is exact, and its committed repartition records are purged.
- The same word count with exactly_once_v2 scales 1 -> 2 -> 1, and in a second run survives
  one instance killed with -9 mid-stream and restarted: read with read_committed, every count is
  published exactly once, in sequence (transactions, TxnOffsetCommit, require_stable fetches).
- A group of Java consumers whose assignor only the client knows ("koord-custom",
  java/.../CustomAssignor.java) gets exactly the leader's assignment and user data.
- kafka-topics and kafka-configs (kafka-tools 4.4) create, describe, alter and delete a topic
  with configs, and kafka-topics adds partitions to it (and refuses a count that is no increase,
  with Kafka's message).

Every wait is on an event (a JSON line of a client, a record read back, an answer of the broker),
with a deadline that only bounds a failure. KOORD_BOOTSTRAP=HOST:PORT runs the same tests
against a running broker instead (e.g. the Apache Kafka 4.4 of `scripts/kafka.sh start`).
"""

import collections
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from groups_util import Events, Group, java_command

EXTERNAL_BOOTSTRAP = os.environ.get("KOORD_BOOTSTRAP")
STREAMS_TIMEOUT = 60.0  # seconds a Streams instance may take to reach an expected state
POLL_INTERVAL = 0.1  # between polls of the broker's answers; not a wait for an outcome
PARTITIONS = 3  # of the input topic, so of each sub-topology: tasks 0_0..0_2 and 1_0..1_2
TASKS = frozenset(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))


@pytest.fixture
def bootstrap(request):
    if EXTERNAL_BOOTSTRAP:
        return EXTERNAL_BOOTSTRAP
    return request.getfixturevalue("koord")().bootstrap


def unique(request, what):
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    return f"{name}-{what}-{uuid.uuid4().hex[:8]}"


def wait_until(what, check, timeout=STREAMS_TIMEOUT):
    """Polls check() (a question to the broker) until it returns something other than None.
    `what` says what is awaited, or is a function saying it (with what was last seen)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result is not None:
            return result
        time.sleep(POLL_INTERVAL)
    pytest.fail(f"not reached within {timeout:.0f}s: {what() if callable(what) else what}")


# --- Kafka Streams ----------------------------------------------------------------------------

class StreamsEvents(Events):
    """The Streams instances' JSON lines, each tagged with "member" (the instance's name).
    An instance that exits without having been stopped adds "died"."""

    FAILING = ("error", "died")
    TIMEOUT = STREAMS_TIMEOUT

    def summary(self, last=40):
        log = self.snapshot()
        lines = ["instances:"]
        lines += [f"  {name}: {v}" for name, v in instance_views(log).items()]
        lines.append(f"last {min(last, len(log))} of {len(log)} events:")
        lines += [f"  {json.dumps(e)}" for e in log[-last:]]
        return "\n".join(lines)


def instance_views(log):
    """Each instance's latest state and active tasks, by its own lines."""
    out = {}
    for e in log:
        v = out.setdefault(e["member"], {"state": None, "active": frozenset(), "gone": False})
        if e["event"] == "state":
            v["state"] = e["state"]
        elif e["event"] == "tasks":
            v["active"] = frozenset(e["active"])
            v["tasks_state"] = e["state"]
        elif e["event"] in ("closed", "exited", "died"):
            v["gone"] = True
    return out


class StreamsInstance:
    """One StreamsApp JVM (Client.java's `streams` step); its stdout lines go to the test's
    StreamsEvents."""

    def __init__(self, events, name, workdir, *args):
        self.events = events
        self.name = name
        self.stopping = False
        self.stderr_path = workdir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(java_command("koord.tests.Client", "streams", *args),
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                event["member"] = self.name
                self.events.add(event)
        code = self.proc.wait()
        self.events.add({"member": self.name, "event": "exited" if self.stopping else "died",
                         "code": code, "stderr": self.stderr_tail()})

    def stderr_tail(self, lines=15):
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        """SIGTERM: KafkaStreams.close() leaving the group; the JVM must then exit 0."""
        if self.proc.poll() is not None:
            return
        self.stopping = True
        self.proc.send_signal(signal.SIGTERM)
        exited = self.events.wait_for(
            f"{self.name} closed and exited",
            lambda log: next((e for e in log if e["member"] == self.name
                              and e["event"] == "exited"), None))
        closed = [e for e in self.events.snapshot()
                  if e["member"] == self.name and e["event"] == "closed"]
        assert exited["code"] == 0 and closed and closed[-1]["clean"], (
            f"{self.name} did not close cleanly: {closed} {exited}")

    def crash(self):
        """SIGKILL now, mid-stream (kill -9): no close, no leave, its transaction left open."""
        self.stopping = True
        self.proc.kill()
        self.events.wait_for(f"{self.name} killed", lambda log: next(
            (e for e in log if e["member"] == self.name and e["event"] == "exited"), None))

    def kill(self):
        """SIGKILL if still running (teardown of a failed test)."""
        if self.proc.poll() is None:
            self.stopping = True
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


class OutputCounts(threading.Thread):
    """Reads the output topic from the beginning (assign(), no group) and keeps the last count
    per word, as a compacted topic would; waiters wake on every record.

    `exactly_once`: read with isolation.level=read_committed, and every record of a word must
    be its previous count plus one: a count published twice (a duplicate) or skipped fails."""

    def __init__(self, bootstrap, topic, exactly_once=False):
        super().__init__(daemon=True)
        self.topic = topic
        self.counts = {}
        self.records = 0
        self.exactly_once = exactly_once
        self.broken = []  # (word, previous count, published count) out of sequence
        self.cond = threading.Condition()
        self.running = True
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                  "enable.auto.commit": False,
                                  "isolation.level": ("read_committed" if exactly_once
                                                      else "read_uncommitted")})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.start()

    def run(self):
        while self.running:
            msgs = self.consumer.consume(500, timeout=0.2)
            with self.cond:
                for m in msgs:
                    if m.error():
                        continue  # partition EOF and the like
                    word, count = m.key().decode(), int(m.value().decode())
                    if self.exactly_once and count != self.counts.get(word, 0) + 1:
                        self.broken.append((word, self.counts.get(word, 0), count))
                    self.counts[word] = count
                    self.records += 1
                if msgs:
                    self.cond.notify_all()
        self.consumer.close()

    def wait_for(self, expected, what, timeout=STREAMS_TIMEOUT):
        """Waits until the last count of every word is exactly `expected`'s; fails at once on a
        count above it (a record counted twice) or a word never produced."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                assert not self.broken, (
                    f"{what}: counts out of sequence (word, previous, published): "
                    f"{self.broken[:10]}")
                over = {w: (c, expected.get(w, 0)) for w, c in self.counts.items()
                        if c > expected.get(w, 0)}
                assert not over, f"{what}: counted more than produced (count, want): {over}"
                if self.counts == expected:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = {w: (self.counts.get(w), c) for w, c in expected.items()
                               if self.counts.get(w) != c}
                    pytest.fail(f"{what}: counts not reached within {timeout:.0f}s after "
                                f"{self.records} output records; (count, want): {missing}")
                self.cond.wait(min(left, 1.0))

    def stop(self):
        self.running = False
        self.join(10)


WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu").split()


def produce_sentences(bootstrap, topic, first, count, expected):
    """Sentences first..first+count-1 (3 to 8 words each, seeded by their number) to `topic`;
    adds their words to `expected` (a Counter)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + count):
        rnd = random.Random(i)
        words = [rnd.choice(WORDS) for _ in range(rnd.randint(3, 8))]
        expected.update(words)
        # Mixed case and punctuation: the app lowercases and splits on non-word characters.
        sentence = " ".join(w.capitalize() if j == 0 else w for j, w in enumerate(words)) + "."
        p.produce(topic, key=b"s%d" % i, value=sentence.encode())
    assert p.flush(30) == 0, "sentences still undelivered after 30 s"


def tasks_split(live, gone=()):
    """A check for StreamsEvents.wait_for: every instance of `live` RUNNING (by its state line
    and its latest tasks line), each owning some active tasks, together each task once; the
    instances of `gone` closed. Returns {instance: active tasks}."""
    def check(log):
        vs = instance_views(log)
        if any(n not in vs or not vs[n]["gone"] for n in gone):
            return None
        if any(n not in vs or vs[n]["gone"] or vs[n]["state"] != "RUNNING"
               or vs[n].get("tasks_state") != "RUNNING" or not vs[n]["active"] for n in live):
            return None
        owned = [t for n in live for t in vs[n]["active"]]
        if sorted(owned) != sorted(TASKS):
            return None
        return {n: vs[n]["active"] for n in live}
    return check


def test_streams_word_count_scales_out_and_in(bootstrap, tmp_path, request):
    """A Kafka Streams word count (repartition + RocksDB count, at_least_once) scales 1 -> 2 -> 1
    instances with input produced in each phase: instance 1 alone owns all 6 tasks (and a RocksDB
    store for each of the 3 counting ones under its state dir); with
    instance 2 both are RUNNING and own some tasks each, every task once; once instance 1 has
    closed, instance 2 owns all 6 again. After each phase the output topic's last count of every
    word is exactly what was produced so far (never more: no record counted twice across the
    rebalances). Finally the repartition topic's log start offset has advanced on every
    partition: Streams purged its committed records (DeleteRecords)."""
    app_id = unique(request, "app")
    input_topic, output_topic = f"{app_id}-input", f"{app_id}-output"
    repartition = f"{app_id}-words-repartition"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(input_topic, PARTITIONS, 1),
                                  NewTopic(output_topic, PARTITIONS, 1)]).values():
        f.result(timeout=30)
    del admin  # its connections close now, not when a failed test's traceback is dropped
    events = StreamsEvents()
    instances = []
    output = OutputCounts(bootstrap, output_topic)
    expected = collections.Counter()

    def start(name):
        inst = StreamsInstance(events, name, tmp_path, bootstrap, app_id, input_topic,
                               output_topic, tmp_path / f"{name}-state")
        instances.append(inst)
        return inst

    try:
        produce_sentences(bootstrap, input_topic, 0, 300, expected)
        s1 = start("s1")
        alone = events.wait_for("s1 RUNNING with every task", tasks_split(["s1"]))
        assert alone == {"s1": TASKS}
        output.wait_for(dict(expected), "phase 1 (s1 alone)")
        stores = sorted(p.parent.parent.name for p in
                        (tmp_path / "s1-state" / app_id).glob("*/rocksdb/counts"))
        assert stores == [f"1_{p}" for p in range(PARTITIONS)], (
            f"RocksDB stores of s1: {stores}")

        start("s2")
        both = events.wait_for("s1 and s2 RUNNING, the tasks split between them",
                               tasks_split(["s1", "s2"]))
        produce_sentences(bootstrap, input_topic, 300, 300, expected)
        output.wait_for(dict(expected), "phase 2 (s1 and s2)")

        s1.stop()
        events.wait_for("s2 RUNNING with every task after s1 closed",
                        tasks_split(["s2"], gone=["s1"]))
        produce_sentences(bootstrap, input_topic, 600, 300, expected)
        output.wait_for(dict(expected), "phase 3 (s2 alone)")

        # Purged: Streams deletes the repartition records its tasks committed (DeleteRecords,
        # every repartition.purge.interval.ms = 200 ms), so ListOffsets(earliest) moves past 0.
        watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                               "enable.auto.commit": False})
        seen = {}
        try:
            def purged():
                seen.update({p: watermarks.get_watermark_offsets(
                    TopicPartition(repartition, p), timeout=10) for p in range(PARTITIONS)})
                return dict(seen) if all(low > 0 for low, _ in seen.values()) else None
            offsets = wait_until(
                lambda: f"{repartition}: log start offset > 0 on every partition "
                        f"(DeleteRecords); (earliest, latest) by partition: {seen}",
                purged, timeout=30)
        finally:
            watermarks.close()
        assert all(0 < low <= high for low, high in offsets.values()), offsets
        instances[1].stop()
        print(f"tasks with 2 instances: {both}; repartition (earliest, latest): {offsets}")
    finally:
        output.stop()
        for inst in instances:
            inst.kill()


# Exactly-once: the same word count with processing.guarantee=exactly_once_v2. Sessions of 6 s
# (the broker's minimum) so that a killed instance's member leaves the group soon, and
# transactions of 5 s so that its open transaction is aborted by the coordinator soon after.
EOS = ("processing.guarantee=exactly_once_v2", "consumer.session.timeout.ms=6000",
       "producer.transaction.timeout.ms=5000")


def streams_topics(bootstrap, app_id):
    """Creates the input and output topics of a word count: (input, output)."""
    input_topic, output_topic = f"{app_id}-input", f"{app_id}-output"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(input_topic, PARTITIONS, 1),
                                  NewTopic(output_topic, PARTITIONS, 1)]).values():
        f.result(timeout=30)
    return input_topic, output_topic


def test_streams_exactly_once_word_count_scales_out_and_in(bootstrap, tmp_path, request):
    """The word count with exactly_once_v2 (transactions, TxnOffsetCommit, read_committed,
    require_stable offset fetches) scales 1 -> 2 -> 1. Read with read_committed, every word's
    counts are published exactly once each, in sequence, and end at what was produced."""
    app_id = unique(request, "app")
    input_topic, output_topic = streams_topics(bootstrap, app_id)
    events = StreamsEvents()
    instances = []
    output = OutputCounts(bootstrap, output_topic, exactly_once=True)
    expected = collections.Counter()

    def start(name):
        inst = StreamsInstance(events, name, tmp_path, bootstrap, app_id, input_topic,
                               output_topic, tmp_path / f"{name}-state", *EOS)
        instances.append(inst)
        return inst

    try:
        produce_sentences(bootstrap, input_topic, 0, 300, expected)
        s1 = start("s1")
        events.wait_for("s1 RUNNING with every task", tasks_split(["s1"]))
        output.wait_for(dict(expected), "phase 1 (s1 alone)")
        start("s2")
        events.wait_for("s1 and s2 RUNNING, the tasks split between them",
                        tasks_split(["s1", "s2"]))
        produce_sentences(bootstrap, input_topic, 300, 300, expected)
        output.wait_for(dict(expected), "phase 2 (s1 and s2)")
        s1.stop()
        events.wait_for("s2 RUNNING with every task after s1 closed",
                        tasks_split(["s2"], gone=["s1"]))
        produce_sentences(bootstrap, input_topic, 600, 300, expected)
        output.wait_for(dict(expected), "phase 3 (s2 alone)")
        instances[1].stop()
    finally:
        output.stop()
        for inst in instances:
            inst.kill()


def test_streams_exactly_once_survives_an_instance_killed_mid_stream(bootstrap, tmp_path,
                                                                      request):
    """Two exactly_once_v2 instances; while they count a large input, one is killed with -9
    (its transaction open) and started again on the same state dir. Its open transaction is
    aborted (by the restarted producer's fencing or the coordinator's timeout), the survivor
    takes over and hands back, and read with read_committed every count is published exactly
    once, in sequence, ending at what was produced."""
    app_id = unique(request, "app")
    input_topic, output_topic = streams_topics(bootstrap, app_id)
    events = StreamsEvents()
    instances = []
    output = OutputCounts(bootstrap, output_topic, exactly_once=True)
    expected = collections.Counter()

    def start(name, state):
        inst = StreamsInstance(events, name, tmp_path, bootstrap, app_id, input_topic,
                               output_topic, tmp_path / f"{state}-state", *EOS)
        instances.append(inst)
        return inst

    try:
        start("s1", "s1")
        s2 = start("s2", "s2")
        events.wait_for("s1 and s2 RUNNING, the tasks split between them",
                        tasks_split(["s1", "s2"]))
        produce_sentences(bootstrap, input_topic, 0, 3000, expected)
        # Mid-stream: some counts are out, far from all of them.
        with output.cond:
            output.cond.wait_for(lambda: output.records > 0, timeout=STREAMS_TIMEOUT)
        s2.crash()
        start("s2-again", "s2")
        events.wait_for("s1 and the restarted s2 RUNNING, the tasks split between them",
                        tasks_split(["s1", "s2-again"]))
        produce_sentences(bootstrap, input_topic, 3000, 300, expected)
        output.wait_for(dict(expected), "after the kill and restart", timeout=2 * STREAMS_TIMEOUT)
        for inst in instances:
            inst.stop()
    finally:
        output.stop()
        for inst in instances:
            inst.kill()


# --- a client-side assignor koord does not know -----------------------------------------------

CUSTOM_ASSIGNOR = "koord.tests.CustomAssignor"  # protocol name "koord-custom"


def leader_plan_installed(names):
    """A check for Events.wait_for: the latest plan the leader's CustomAssignor computed for
    exactly `names`, and after it every member of `names` got, in one generation, exactly its
    partitions and user data (onAssignment) and holds exactly those partitions (its rebalance
    listener). Returns (plan event, generation)."""
    def check(log):
        plans = [i for i, e in enumerate(log) if e["event"] == "leader_assigned"
                 and sorted(a["name"] for a in e["assignments"].values()) == sorted(names)]
        if not plans:
            return None
        start = plans[-1]
        plan = log[start]
        by_name = {a["name"]: (mid, a) for mid, a in plan["assignments"].items()}
        generations = set()
        for name in names:
            got = [e for e in log[start:] if e["member"] == name]
            custom = [e for e in got if e["event"] == "custom_assignment"]
            assigned = [e for e in got if e["event"] == "assigned"]
            if not custom or not assigned:
                return None
            member_id, want = by_name[name]
            c = custom[-1]
            assert (c["member_id"], c["partitions"], c["user_data"]) == (
                member_id, want["partitions"], want["user_data"]), (
                f"{name} got {c}, but the leader assigned {member_id}: {want}")
            assert sorted(assigned[-1]["assignment"]) == want["partitions"], (
                f"{name} holds {assigned[-1]}, the leader assigned {want}")
            generations |= {c["generation"], assigned[-1]["generation"]}
        assert len(generations) == 1, f"members at generations {generations}"
        return plan, generations.pop()
    return check


def test_custom_client_assignor_is_installed_as_the_leader_sent_it(bootstrap, tmp_path, request):
    """Two Java consumers with an assignor only the client knows ("koord-custom"): the first
    alone gets every partition; with the second, the leader's plan (first member 1 partition,
    the other 11, which no balancing assignor would do) reaches each member exactly, user data
    included ("plan=NONCE;for=NAME;member=ID;partitions=..."), and DescribeGroups names
    koord-custom as the group's protocol."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    group = Group(bootstrap, tmp_path, name=name[:40])
    try:
        jvm = group.java()
        jvm.start("c1", partition_assignment_strategy=CUSTOM_ASSIGNOR)
        alone, gen1 = group.events.wait_for("c1 alone got the leader's plan",
                                            leader_plan_installed(["c1"]))
        assert [a["partitions"] for a in alone["assignments"].values()] == [list(range(12))]

        jvm.start("c2", partition_assignment_strategy=CUSTOM_ASSIGNOR)
        both, gen2 = group.events.wait_for("c1 and c2 got the leader's plan",
                                           leader_plan_installed(["c1", "c2"]))
        assert gen2 > gen1
        plan = {a["name"]: a["partitions"] for a in both["assignments"].values()}
        assert plan == {"c1": [0], "c2": list(range(1, 12))}, both
        assert group.protocol() == "koord-custom"
        group.check_history()
    finally:
        group.shutdown()


# --- kafka-topics and kafka-configs -----------------------------------------------------------

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"  # kafka-topics.sh
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh


def tools(bootstrap, *commands):
    """Runs kafka-tools command lines against `bootstrap`, all at once, each (MAIN_CLASS, ARGS...);
    returns their stdouts in order (fails the test on a non-zero exit, with its output)."""
    procs = [subprocess.Popen(java_command(main, "--bootstrap-server", bootstrap, *args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for main, *args in commands]
    outs = []
    for (main, *args), p in zip(commands, procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, (f"{main.rsplit('.', 1)[1]} {' '.join(args)} exited "
                                   f"{p.returncode}\nstdout: {out[-2000:]}\n"
                                   f"stderr: {err[-3000:]}")
        outs.append(out)
    return outs


def tool(main_class, bootstrap, *args):
    [out] = tools(bootstrap, (main_class, *args))
    return out


def tool_fails(main_class, bootstrap, *args):
    """Runs a kafka-tools command line that must fail; returns its stdout."""
    p = subprocess.run(java_command(main_class, "--bootstrap-server", bootstrap, *args),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, f"{' '.join(args)} succeeded\nstdout: {p.stdout[-2000:]}"
    return p.stdout


def topics_described(out):
    """kafka-topics --describe: the topic line's fields (PartitionCount, Configs, ...) and the
    partition lines."""
    head = next(line for line in out.splitlines() if "PartitionCount:" in line)
    fields = dict(re.findall(r"(\w+):\s*(\S*)", head))
    configs = dict(kv.split("=", 1) for kv in fields.get("Configs", "").split(",") if kv)
    parts = [line for line in out.splitlines() if re.search(r"\bPartition: \d+", line)]
    return fields, configs, parts


def dynamic_configs(out):
    """kafka-configs --describe: the topic's own (dynamic) configs, {name: value}."""
    return dict(re.findall(r"^\s+([\w.]+)=(\S*) sensitive=", out, re.M))


def test_kafka_topics_and_kafka_configs_tools(bootstrap, request):
    """kafka-topics creates a topic with --config retention.ms and describes it (3 partitions,
    the config shown); kafka-configs describes the config, adds max.message.bytes, and both tools
    show both; kafka-topics --alter raises it to 5 partitions (a produced record reaches the new
    last one) and refuses 4; kafka-topics deletes it and --list no longer has it."""
    topic = unique(request, "topic")[-60:].lstrip("-")

    # A client per question: none outlives the broker (a failed test's traceback keeps its
    # locals, and a live client would go on reconnecting to the stopped koord).
    def metadata_has(present):
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        return True if (topic in topics) == present else None

    def config_is(name, value):
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        entries = admin.describe_configs([res])[res].result(timeout=10)
        return True if name in entries and entries[name].value == value else None

    out = tool(TOPIC_COMMAND, bootstrap, "--create", "--topic", topic, "--partitions", "3",
               "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert f"Created topic {topic}." in out, out
    wait_until(f"{topic} in the metadata", lambda: metadata_has(True), timeout=30)

    describe_topic = (TOPIC_COMMAND, "--describe", "--topic", topic)
    describe_configs = (CONFIG_COMMAND, "--describe", "--entity-type", "topics",
                        "--entity-name", topic)
    topic_out, configs_out = tools(bootstrap, describe_topic, describe_configs)
    fields, configs, parts = topics_described(topic_out)
    assert fields["Topic"] == topic and fields["PartitionCount"] == "3", fields
    assert configs.get("retention.ms") == "3600000", configs
    assert len(parts) == 3, parts
    assert f"Dynamic configs for topic {topic} are:" in configs_out, configs_out
    assert dynamic_configs(configs_out) == {"retention.ms": "3600000"}, configs_out

    out = tool(CONFIG_COMMAND, bootstrap, "--alter", "--entity-type", "topics",
               "--entity-name", topic, "--add-config", "max.message.bytes=2097152")
    assert f"Completed updating config for topic {topic}." in out, out
    wait_until("max.message.bytes altered", lambda: config_is("max.message.bytes", "2097152"),
               timeout=30)
    topic_out, configs_out = tools(bootstrap, describe_topic, describe_configs)
    both = {"retention.ms": "3600000", "max.message.bytes": "2097152"}
    assert dynamic_configs(configs_out) == both, configs_out
    _, configs, _ = topics_described(topic_out)
    assert {k: configs.get(k) for k in both} == both, configs

    tool(TOPIC_COMMAND, bootstrap, "--alter", "--topic", topic, "--partitions", "5")

    def partitions_are(n):
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        return True if topic in topics and len(topics[topic].partitions) == n else None

    wait_until(f"{topic} has 5 partitions", lambda: partitions_are(5), timeout=30)
    fields, configs, parts = topics_described(tool(TOPIC_COMMAND, bootstrap, *describe_topic[1:]))
    assert fields["PartitionCount"] == "5" and len(parts) == 5, (fields, parts)
    assert {k: configs.get(k) for k in both} == both, configs

    def produce_to(partition):
        delivered = []
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, value=b"new", partition=partition,
                         on_delivery=lambda e, m: delivered.append((e, m.partition())))
        producer.flush(30)
        return delivered

    assert produce_to(4) == [(None, 4)]
    out = tool_fails(TOPIC_COMMAND, bootstrap, "--alter", "--topic", topic, "--partitions", "4")
    assert (f"The topic {topic} currently has 5 partition(s); 4 would not be an increase."
            in out), out

    tool(TOPIC_COMMAND, bootstrap, "--delete", "--topic", topic)
    wait_until(f"{topic} gone from the metadata", lambda: metadata_has(False), timeout=30)
    listed = tool(TOPIC_COMMAND, bootstrap, "--list")
    assert topic not in listed.split(), listed
