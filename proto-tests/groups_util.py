"""Consumer-group members of every client, the rebalance events they report, and the checks
test_groups*.py make on them.

A member reports what its own rebalance callbacks saw, as one event dict:
    {"member": NAME, "event": "assigned" | "revoked" | "lost", "partitions": [...],
     "assignment": [...], "generation": G, "member_id": ..., "instance_id": ...}
"partitions" is what the callback was given, "assignment" what the member holds once the callback
is done; "generation" is None where the client does not expose it (confluent-kafka). Members
also report "records" (offset ranges of one poll), "committed", "commit_failed", "status",
"closed", "error", and the harness adds "killed"; Java and franz-go members' events also carry
"ts_ms" (the client's wall clock, epoch ms, when the event was emitted). confluent-kafka members
add "group_generation": the generation librdkafka holds, read from its serialized group metadata
(it has no other way to tell), kept apart from "generation" because librdkafka need not call a
callback in a generation that changes nothing for the member. Java members run as threads of a
GroupClient JVM (java/src/main/java/koord/tests/GroupClient.java, several members per JVM);
confluent-kafka and kafka-python members run as threads of the test process; franz-go members
(franz/main.go) each run as a process of their own. All events of a test
go to one Events log, and every check waits on it with a deadline: nothing here sleeps for an
outcome.
"""

import collections
import json
import os
import signal
import struct
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions,
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from conftest import HERE, JAVA_DIR

FRANZ_BIN = Path(os.environ.get("FRANZ_MEMBER_BIN", HERE / "franz" / "bin" / "franz-member"))

SETTLE_TIMEOUT = 45.0  # seconds a group may take to reach an expected state
POLL_INTERVAL = 0.1  # between DescribeGroups polls; not a wait for an outcome
STOP_TIMEOUT = 30.0

JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
KAFKA_PYTHON_ASSIGNORS = {"range": RangePartitionAssignor,
                          "roundrobin": RoundRobinPartitionAssignor}
# Fast rebalances: the broker runs with group.min.session.timeout.ms=1000.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
OWNERSHIP_EVENTS = ("assigned", "revoked", "lost")
# Generations a group may go through per member joining or leaving: at most two (the join and,
# with a cooperative assignor, the follow-up rebalance after the revocation; measured: at most
# one per change with Java, librdkafka, kafka-python and franz-go on koord and Kafka 4.4),
# doubled for members that rejoin once more on their own (e.g. kafka-python after a metadata
# update). A coordinator that makes its members rejoin after every assignment (issue 24: a
# franz-go group went through 45,029 generations) exceeds it within seconds.
MAX_GENERATIONS_PER_CHANGE = 4


def java_command(main_class, *args):
    """The java command line for a main class of the proto-tests Maven project (or a tool on
    its classpath), with the classpath scripts/test.sh writes."""
    cp_file = JAVA_DIR / "target" / "classpath.txt"
    classes = JAVA_DIR / "target" / "classes"
    if not cp_file.exists() or not (classes / "koord" / "tests" / "GroupClient.class").exists():
        pytest.fail(f"{classes} or {cp_file} missing: run scripts/test.sh "
                    "(it builds proto-tests/java)")
    cp = f"{classes}:{cp_file.read_text().strip()}"
    # C1 only: these JVMs live for seconds, and start-up dominates.
    return ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, main_class, *map(str, args)]


# --- the event log and what members own according to it ---------------------------------------

class Events:
    """Every event of a test's members in arrival order; waiters wake on each new event.

    `FAILING` names the events that fail a wait at once; `TIMEOUT` is the default wait."""

    FAILING = ("error",)
    TIMEOUT = SETTLE_TIMEOUT

    def __init__(self):
        self._cond = threading.Condition()
        self._log = []

    def add(self, event):
        with self._cond:
            self._log.append(event)
            self._cond.notify_all()

    def snapshot(self):
        with self._cond:
            return list(self._log)

    def __len__(self):
        with self._cond:
            return len(self._log)

    def wait_for(self, what, check, timeout=None):
        """Re-runs check(events) on every new event until it returns something other than None,
        and returns that. Fails on a `FAILING` event, or with `what` at the deadline."""
        timeout = self.TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                errors = [e for e in self._log if e["event"] in self.FAILING]
                if errors:
                    pytest.fail(f"a member failed while waiting for {what}: {errors[0]}\n"
                                f"{self.summary()}")
                result = check(self._log)
                if result is not None:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 1.0))
        pytest.fail(f"not reached within {timeout:.0f}s: {what}\n{self.summary()}")

    def summary(self, last=40):
        """The member views and the last ownership and life-cycle events, for failure messages."""
        log = self.snapshot()
        lines = ["member views:"]
        for v in views(log).values():
            lines.append(f"  {v}")
        interesting = [e for e in log if e["event"] not in ("records", "committed")]
        lines.append(f"last {min(last, len(interesting))} of {len(log)} events "
                     "(records/committed left out):")
        lines += [f"  {json.dumps(e)}" for e in interesting[-last:]]
        return "\n".join(lines)


@dataclass
class MemberView:
    """A member as its own latest events describe it."""
    name: str
    owned: frozenset = frozenset()
    generation: int | None = None
    member_id: str | None = None
    joined: bool = False  # has had an assignment
    gone: bool = False  # closed or killed

    def __str__(self):
        return (f"{self.name}: owns {sorted(self.owned)} gen={self.generation} "
                f"id={self.member_id}{' (gone)' if self.gone else ''}")


def views(log):
    out = {}
    for e in log:
        v = out.setdefault(e["member"], MemberView(e["member"]))
        if e["event"] in OWNERSHIP_EVENTS:
            v.owned = frozenset(e["assignment"])
            v.member_id = e.get("member_id") or v.member_id
        if e["event"] == "assigned":
            v.generation = e.get("generation")
            v.joined = True
        elif e["event"] in ("closed", "killed"):
            v.gone = True
    return out


@dataclass
class Settled:
    """A group state every live member agreed on: who owns what, at which generation."""
    generation: int | None
    owned: dict  # member name -> frozenset of partitions
    member_ids: dict  # member name -> member id
    index: int  # length of the event log when it was reached
    # The newest generation any member reported up to `index` (None: no client told).
    top_generation: int | None = None


def reported_generation(event):
    """The group generation an event says its member was in: "generation", or for
    confluent-kafka "group_generation"; None where the client does not tell (or before the
    member's first join: -1 or 0)."""
    g = event.get("generation")
    if g is None:
        g = event.get("group_generation")
    return g if g is not None and g > 0 else None


def top_generation(log):
    """The newest generation any event of `log` reports, or None."""
    gens = [g for g in map(reported_generation, log) if g is not None]
    return max(gens) if gens else None


def ownership_problem(log, live, partitions, sizes, after):
    """Why the live members' own views are not (yet) a settled group; None once they are."""
    vs = views(log)
    missing = [m for m in live if m not in vs or not vs[m].joined]
    if missing:
        return f"no assignment yet for {missing}"
    owned = sorted(p for m in live for p in vs[m].owned)
    if owned != list(range(partitions)):
        return f"partitions owned {owned}, want each of 0..{partitions - 1} once"
    counts = {m: len(vs[m].owned) for m in live}
    if not all(c in sizes for c in counts.values()):
        return f"partition counts {counts}, want each in {sorted(sizes)}"
    gens = {vs[m].generation for m in live if vs[m].generation is not None}
    if len(gens) > 1:
        return f"members at different generations {gens}"
    if after is not None and gens and min(gens) <= after:
        return f"generation {min(gens)} not past {after}"
    return None


def revoked_kept(log, member):
    """Partitions `member` saw revoked but still holds in the assignment that followed the
    revocation (its next "assigned" event): must be empty with a cooperative assignor."""
    bad = []
    pending = None  # (event, revoked partitions) awaiting the member's next assignment
    for e in log:
        if e["member"] != member:
            continue
        if e["event"] == "revoked":
            pending = (e, set(e["partitions"]))
        elif e["event"] == "assigned" and pending:
            kept = pending[1] & set(e["assignment"])
            if kept:
                bad.append((pending[0], e, sorted(kept)))
            pending = None
    return bad


def generation_overlaps(log):
    """Partitions two members were assigned in the same generation (each member keyed by its
    group.instance.id when it has one, so that a restarted static member is one member)."""
    by_gen = collections.defaultdict(dict)
    for e in log:
        if e["event"] == "assigned" and e.get("generation") is not None:
            key = e.get("instance_id") or e["member"]
            by_gen[e["generation"]][key] = set(e["assignment"])
    overlaps = []
    for gen, assignment in sorted(by_gen.items()):
        seen = {}
        for key, parts in assignment.items():
            for p in parts:
                if p in seen:
                    overlaps.append((gen, p, seen[p], key))
                seen[p] = key
    return overlaps


def consumed_offsets(log):
    """{partition: [offsets in the order they were consumed]} over every member's polls."""
    offsets = collections.defaultdict(list)
    for e in log:
        if e["event"] == "records":
            for p, first, last, _count in e["ranges"]:
                offsets[p].extend(range(first, last + 1))
    return offsets


def owners_at_once(log):
    """Partitions two members held at the same moment, replaying every ownership event in log
    order (a member holds what its latest event's "assignment" says; closing or being killed
    frees everything): (index of the event, partition, member, the other holder).

    The log order is a happens-before order only for members whose events share one stream,
    i.e. the threads of this process (confluent-kafka, kafka-python) or the members of one JVM:
    a member's callback reports before the client goes on to rejoin."""
    held = {}
    overlaps = []
    for i, e in enumerate(log):
        if e["event"] in OWNERSHIP_EVENTS:
            held[e["member"]] = set(e["assignment"])
        elif e["event"] in ("closed", "killed"):
            held[e["member"]] = set()
        else:
            continue
        if e["event"] == "assigned":
            for other, parts in held.items():
                if other != e["member"]:
                    overlaps += [(i, p, e["member"], other)
                                 for p in sorted(parts & held[e["member"]])]
    return overlaps


def revoked_in(log, member):
    return {p for e in log if e["member"] == member and e["event"] == "revoked"
            for p in e["partitions"]}


def check_cooperative(group, *settles):
    """With a cooperative assignor, between each two consecutive settled states every member saw
    revoked exactly the partitions it gave up, none that it kept; and no revocation anywhere
    listed a partition of the member's next assignment."""
    log = group.events.snapshot()
    for before, after in zip(settles, settles[1:]):
        step = log[before.index:after.index]
        for m, owned in after.owned.items():
            lost = before.owned.get(m, frozenset()) - owned
            assert revoked_in(step, m) == lost, (
                f"{m} owned {sorted(before.owned.get(m, ()))}, then {sorted(owned)}, "
                f"but saw revoked {sorted(revoked_in(step, m))}\n{group.events.summary()}")
    for m in {e["member"] for e in log}:
        kept = revoked_kept(log, m)
        assert not kept, f"{m} saw revoked partitions it kept: {kept}"


# --- the scale scenario ---------------------------------------------------------------------

def balanced(partitions, members):
    """The partition counts of a balanced assignment: floor and ceiling of the mean."""
    return {partitions // members, -(-partitions // members)}


def scale_3_5_3(group, start, before_change=None):
    """m1..m3 join; m4 and m5 join; m1 and m2 (the first leader among them) close. Each step
    waits until the members settle on a balanced assignment, and fails as soon as a member
    reports a generation more than MAX_GENERATIONS_PER_CHANGE per member that joined or left
    past the newest one reported before the step. `before_change(step)` (0, 1, 2) runs right
    before each step's change. Returns the three settled states."""
    p = group.partitions
    steps = [("3 members", ["m1", "m2", "m3"], [], ["m1", "m2", "m3"]),
             ("m4 and m5 joined", ["m4", "m5"], [], ["m1", "m2", "m3", "m4", "m5"]),
             ("m1 and m2 left", [], ["m1", "m2"], ["m3", "m4", "m5"])]
    settles = []
    for i, (what, joining, leaving, live) in enumerate(steps):
        before = settles[-1] if settles else None
        top = before.top_generation if before else 0
        assert top is not None, f"no member reported a generation before step {what!r}"
        limit = top + MAX_GENERATIONS_PER_CHANGE * (len(joining) + len(leaving))
        if before_change:
            before_change(i)
        for m in joining:
            start(m)
        if leaving:
            group.close(*leaving)
        settles.append(group.wait_settled(live, balanced(p, len(live)),
                                          after=before.generation if before else None,
                                          what=what, max_generation=limit))
        print(f"{what}: settled at generation {settles[-1].top_generation} (bound {limit})")
    return settles


# --- the group under test ---------------------------------------------------------------------

class Group:
    """One consumer group on a fresh topic, its members of any client, and its checks."""

    def __init__(self, bootstrap, workdir, partitions=12, name="g"):
        self.bootstrap = bootstrap
        self.workdir = workdir
        suffix = uuid.uuid4().hex[:8]
        self.id = f"{name}-{suffix}"
        self.topic = f"{name}-topic-{suffix}"
        self.partitions = partitions
        self.events = Events()
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.members = {}  # name -> JavaMembers or a Python member thread
        self.jvms = []
        created = self.admin.create_topics([NewTopic(self.topic, partitions, 1)])
        created[self.topic].result(timeout=30)

    # members

    def java(self):
        """A new GroupClient JVM for this group's Java members."""
        jvm = JavaMembers(self, f"jvm{len(self.jvms)}")
        self.jvms.append(jvm)
        return jvm

    def confluent(self, name, assignor, **config):
        return self._add(ConfluentMember(self, name, assignor, config))

    def kafka_python(self, name, assignor):
        return self._add(KafkaPythonMember(self, name, assignor))

    def franz(self, name, balancer, **kw):
        """A franz-go member (a franz-member process) with kgo balancer `balancer` (`kw`: as
        FranzMember's)."""
        member = FranzMember(self, name, balancer, **kw)
        self.members[name] = member
        return member

    def _add(self, member):
        self.members[member.name] = member
        member.start()
        return member

    def close(self, *names):
        """Closes members cleanly (a dynamic member leaves the group) and waits until they have."""
        for name in names:
            self.members[name].close(name)
        self.wait_event(f"{', '.join(names)} closed", names, "closed")

    def wait_event(self, what, names, event, since=0):
        """Waits for each of `names` to report `event` after index `since` of the log; returns
        the first such event of each, by member."""
        def check(log):
            found = {}
            for e in log[since:]:
                if e["member"] in names and e["event"] == event:
                    found.setdefault(e["member"], e)
            return found if len(found) == len(names) else None
        return self.events.wait_for(what, check)

    def status(self, name):
        """The member's generation, member id and assignment, asked from its poll thread."""
        since = len(self.events)
        self.members[name].status(name)
        return self.wait_event(f"status of {name}", [name], "status", since)[name]

    # checks

    def wait_settled(self, live, sizes, after=None, what="settle", max_generation=None):
        """Waits until the live members' own callbacks show every partition owned by exactly one
        of them, each holding a count in `sizes`, all at one generation newer than `after`; then
        until the coordinator (DescribeGroups) reports the group Stable with exactly those
        members and assignments. Returns the Settled state. With `max_generation`, fails as soon
        as a member reports a newer generation than that (a rebalance storm), and if the group
        settled past it."""
        live = list(live)

        def check(log):
            self._check_generation(log, max_generation, what)
            if ownership_problem(log, live, self.partitions, sizes, after):
                return None
            return self._settled(log, live)

        settled = self.events.wait_for(
            f"{what}: {self.partitions} partitions over {live} with counts in {sorted(sizes)}",
            check)
        self.wait_described(settled, what, max_generation)
        return settled

    def _check_generation(self, log, max_generation, what):
        top = top_generation(log)
        if max_generation is not None and top is not None and top > max_generation:
            pytest.fail(f"{what}: a member reports generation {top}, over the bound "
                        f"{max_generation}\n{self.events.summary()}")

    def _settled(self, log, live):
        vs = views(log)
        gens = {vs[m].generation for m in live} - {None}
        return Settled(generation=max(gens) if gens else None,
                       owned={m: vs[m].owned for m in live},
                       member_ids={m: vs[m].member_id for m in live}, index=len(log),
                       top_generation=top_generation(log))

    def describe(self):
        """The coordinator's view: (state, {member id: (instance id, sorted partitions)})."""
        d = self.admin.describe_consumer_groups([self.id], request_timeout=10)[self.id].result()
        members = {m.member_id: (m.group_instance_id,
                                 sorted(tp.partition for tp in m.assignment.topic_partitions))
                   for m in d.members}
        return d.state, members

    def protocol(self):
        """The group's protocol as DescribeGroups reports it (the assignor's name)."""
        d = self.admin.describe_consumer_groups([self.id], request_timeout=10)[self.id].result()
        return d.partition_assignor

    def wait_described(self, settled, what, max_generation=None):
        want = {settled.member_ids[m]: sorted(settled.owned[m]) for m in settled.owned}
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            self._check_generation(self.events.snapshot(), max_generation, what)
            state, members = self.describe()
            got = {mid: parts for mid, (_, parts) in members.items()}
            if state == ConsumerGroupState.STABLE and got == want:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: the members agree, but DescribeGroups says {state} "
                            f"with {got}; want STABLE with {want}\n{self.events.summary()}")
            time.sleep(POLL_INTERVAL)

    def check_history(self):
        """What must hold over the whole test: no member lost partitions (no session expired
        under a live member), no member failed, no partition in two members' assignments of one
        generation."""
        log = self.events.snapshot()
        bad = [e for e in log if e["event"] in ("lost", "error")]
        assert not bad, f"unexpected events: {bad}\n{self.events.summary()}"
        overlaps = generation_overlaps(log)
        assert not overlaps, f"(generation, partition, member, member) owned twice: {overlaps}"

    # data

    def produce(self, count):
        """`count` records, record i to partition i % partitions; returns records per partition."""
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for i in range(count):
            p.produce(self.topic, value=b"v%d" % i, key=b"k%d" % i, partition=i % self.partitions)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(30) == 0, "records still undelivered after 30 s"
        return {q: len(range(q, count, self.partitions)) for q in range(self.partitions)}

    def committed(self):
        """The group's committed offsets by partition, as OffsetFetch returns them."""
        req = ConsumerGroupTopicPartitions(
            self.id, [TopicPartition(self.topic, q) for q in range(self.partitions)])
        res = self.admin.list_consumer_group_offsets([req], request_timeout=10)[self.id].result()
        return {tp.partition: tp.offset for tp in res.topic_partitions}

    def shutdown(self):
        """Stops every member still running (at test teardown)."""
        for m in self.members.values():
            if isinstance(m, threading.Thread):
                m.close(m.name)
        for m in self.members.values():
            if isinstance(m, threading.Thread):
                m.join(STOP_TIMEOUT)
            elif isinstance(m, FranzMember):
                m.stop()
        for jvm in self.jvms:
            jvm.stop()
        self.admin = None  # its connections close now, before the broker stops


# --- Java members ---------------------------------------------------------------------------

class JavaMembers:
    """One GroupClient JVM; its members are threads in it, driven through its stdin."""

    def __init__(self, group, label):
        self.group = group
        self.label = label
        self.names = []
        self.stderr_path = group.workdir / f"{group.id}-{label}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(java_command("koord.tests.GroupClient"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                event["client"] = "java"
                self.group.events.add(event)

    def _send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def start(self, name, *flags, **props):
        """Starts member `name`; props are consumer properties with dots written as
        underscores (session_timeout_ms=3000), flags GroupClient's (--commit, --stop-after=N)."""
        config = {k.replace("_", "."): v for k, v in props.items()}
        if config.get("group.protocol") != "consumer":
            # The classic protocol's settings; the consumer protocol (KIP-848) refuses them:
            # the coordinator sets the heartbeat interval and assigns.
            config = {"session.timeout.ms": SESSION_TIMEOUT_MS,
                      "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                      "partition.assignment.strategy": JAVA_ASSIGNORS["range"], **config}
            strategy = config["partition.assignment.strategy"]
            config["partition.assignment.strategy"] = JAVA_ASSIGNORS.get(strategy, strategy)
        args = [*flags, *(f"{k}={v}" for k, v in config.items())]
        g = self.group
        self._send(f"start {name} {g.bootstrap} {g.id} {g.topic} {' '.join(args)}")
        self.names.append(name)
        self.group.members[name] = self
        return self

    def close(self, name):
        self._send(f"close {name}")

    def status(self, name):
        self._send(f"status {name}")

    def kill(self):
        """SIGKILL: the JVM's members vanish without a word to the coordinator."""
        self.proc.kill()
        self.proc.wait()
        for name in self.names:
            self.group.events.add({"member": name, "event": "killed"})

    def stop(self):
        """End of stdin: every member closes, then the JVM exits."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        wait_then_close(self)


def wait_then_close(member):
    """Waits for a member process asked to stop (killing it after STOP_TIMEOUT), then for its
    output reader, and closes its stderr file."""
    try:
        member.proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        member.proc.kill()
        member.proc.wait()
    member._reader.join(5)
    member._stderr.close()


# --- franz-go members -----------------------------------------------------------------------

class FranzMember:
    """One franz-go member: a franz-member process (franz/main.go; scripts/test.sh builds it,
    FRANZ_MEMBER_BIN overrides where it is) whose JSON lines go to the group's events. Closing
    sends SIGTERM: it commits, leaves the group and reports "closed". An exit without "closed"
    is reported as an "error" event. franz-go's own log goes to a file beside the test.
    `session_ms`: its session.timeout.ms (SESSION_TIMEOUT_MS unless a test needs longer);
    `topic`: what it subscribes to (the group's topic unless given), `extra`: more flags."""

    def __init__(self, group, name, balancer, session_ms=SESSION_TIMEOUT_MS, topic=None,
                 extra=()):
        if not FRANZ_BIN.exists():
            pytest.fail(f"{FRANZ_BIN} missing: run scripts/test.sh (it builds proto-tests/franz)")
        self.group = group
        self.name = name
        self.stderr_path = group.workdir / f"{group.id}-{name}.franz.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [str(FRANZ_BIN), "-bootstrap", group.bootstrap, "-group", group.id,
             "-topic", topic or group.topic, "-balancer", balancer, "-name", name,
             "-session-ms", str(session_ms), "-heartbeat-ms", str(HEARTBEAT_INTERVAL_MS),
             *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        closed = False
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                closed = closed or event["event"] == "closed"
                self.group.events.add(event)
        code = self.proc.wait()
        if not closed:
            self.group.events.add({"member": self.name, "event": "error", "client": "franz-go",
                                   "error": f"exited {code} without leaving",
                                   "log": self.log_tail()})

    def close(self, _name=None):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self):
        self.close()
        wait_then_close(self)

    def log_tail(self, lines=20):
        try:
            return self.stderr_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []

    def log_lines(self, text):
        """The lines of franz-go's log that contain `text`."""
        return [line for line in self.stderr_path.read_text(errors="replace").splitlines()
                if text in line]


# --- Python members -------------------------------------------------------------------------

class PythonMember(threading.Thread):
    """A member polling on its own thread; callbacks update `owned` and report events."""

    client = "?"

    def __init__(self, group, name):
        super().__init__(name=name, daemon=True)
        self.group = group
        self.owned = set()
        self._closing = threading.Event()
        self._status = threading.Event()

    def close(self, _name=None):
        self._closing.set()

    def status(self, _name=None):
        self._status.set()

    def emit(self, event, **fields):
        self.group.events.add({"member": self.name, "event": event, "client": self.client,
                               **fields})

    def callback(self, event, partitions):
        parts = sorted(tp.partition for tp in partitions)
        if event == "assigned":
            self.owned |= set(parts)
        else:
            self.owned -= set(parts)
        generation, member_id = self.identity()
        self.emit(event, partitions=parts, assignment=sorted(self.owned),
                  generation=generation, member_id=member_id, **self.more())

    def more(self):
        """Client-specific fields of an ownership event."""
        return {}

    def run(self):
        try:
            consumer = self.subscribe()
            while not self._closing.is_set():
                self.poll(consumer)
                if self._status.is_set():
                    self._status.clear()
                    generation, member_id = self.identity()
                    self.emit("status", generation=generation, member_id=member_id,
                              assignment=sorted(self.owned), **self.more())
            consumer.close()
            self.emit("closed")
        except Exception as e:  # reported, and fails the test's next wait
            self.emit("error", error=type(e).__name__, message=str(e))


class ConfluentMember(PythonMember):
    client = "confluent-kafka"

    def __init__(self, group, name, assignor, config):
        super().__init__(group, name)
        self.config = {"bootstrap.servers": group.bootstrap, "group.id": group.id,
                       "client.id": name, "group.protocol": "classic",
                       "partition.assignment.strategy": assignor,
                       "session.timeout.ms": SESSION_TIMEOUT_MS,
                       "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest", **config}
        if self.config["group.protocol"] == "consumer":
            # KIP-848: the coordinator assigns (with the assignor named here) and sets the
            # heartbeat interval; librdkafka refuses the classic settings.
            for key in ("partition.assignment.strategy", "session.timeout.ms",
                        "heartbeat.interval.ms"):
                del self.config[key]
            self.config["group.remote.assignor"] = assignor
        self.consumer = None

    def identity(self):
        return None, self.consumer.memberid()  # librdkafka does not expose the generation

    def more(self):
        return {"group_generation": librdkafka_generation(self.consumer)}

    def subscribe(self):
        self.consumer = Consumer(self.config)
        self.consumer.subscribe(
            [self.group.topic],
            on_assign=lambda c, ps: self.callback("assigned", ps),
            on_revoke=lambda c, ps: self.callback("revoked", ps),
            on_lost=lambda c, ps: self.callback("lost", ps))
        return self.consumer

    def poll(self, consumer):
        msg = consumer.poll(0.1)
        if msg is not None and msg.error():
            self.emit("client_error", error=str(msg.error()))


def librdkafka_generation(consumer):
    """The generation librdkafka holds for the group: consumer_group_metadata() is its
    serialized form (rd_kafka_consumer_group_metadata_write): "CGMDv2:", the generation as a
    native int32, then the group id, member id, ... ."""
    data = consumer.consumer_group_metadata()
    magic = b"CGMDv2:"
    assert data[:len(magic)] == magic, f"unknown librdkafka group metadata format: {data!r}"
    return struct.unpack_from("=i", data, len(magic))[0]


class KafkaPythonMember(PythonMember):
    """`session_ms`: its session_timeout_ms (SESSION_TIMEOUT_MS unless a test needs longer)."""

    client = "kafka-python"

    def __init__(self, group, name, assignor, session_ms=SESSION_TIMEOUT_MS):
        super().__init__(group, name)
        self.assignor = KAFKA_PYTHON_ASSIGNORS[assignor]
        self.session_ms = session_ms
        self.consumer = None

    def identity(self):
        meta = self.consumer._coordinator.group_metadata()  # not public: the generation
        return meta.generation_id, meta.member_id

    def subscribe(self):
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_assigned(self, assigned):
                member.callback("assigned", assigned)

            def on_partitions_revoked(self, revoked):
                member.callback("revoked", revoked)

            def on_partitions_lost(self, lost):
                member.callback("lost", lost)

        self.consumer = KafkaConsumer(
            bootstrap_servers=self.group.bootstrap, group_id=self.group.id, client_id=self.name,
            partition_assignment_strategy=[self.assignor],
            session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            enable_auto_commit=False, auto_offset_reset="earliest")
        # Work-around for a kafka-python 3.0.12 race: a leader that assigns before it has the
        # topic's metadata rejoins once the metadata arrives, and if that JoinGroup outlasts a
        # poll() whose timeout then expires, join_group_async() later sees need_rejoin() False
        # (the assignment snapshot was updated by the in-flight join) and returns without ever
        # completing the join: no assignment callback, heartbeats stay disabled, and the session
        # expires. Having the metadata before subscribing avoids the rejoin.
        self.consumer.partitions_for_topic(self.group.topic)
        self.consumer.subscribe([self.group.topic], listener=Listener())
        # The coordinator's metadata snapshot, though, is only taken on the next metadata update:
        # a leader that assigns before that records an empty snapshot and rejoins as soon as the
        # update comes (the same race, seen with members joining while the leader rejoins). Take
        # it now from the metadata just fetched.
        coordinator = self.consumer._coordinator
        coordinator._handle_metadata_update(coordinator._cluster)
        return self.consumer

    def poll(self, consumer):
        consumer.poll(timeout_ms=100)
