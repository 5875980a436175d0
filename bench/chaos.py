"""Chaos soak of koord's gateway and cluster mode: three koord nodes (one cluster.name) in front
of a 3-broker Apache Kafka 4.4, real clients of every kind consuming and committing through
them, and faults injected at random under them. bench/chaos.sh starts the Kafka and runs this
for DURATION seconds; proto-tests/test_chaos.py runs a 2-minute version against the gateway
tier's Kafka. The upstream is KOORD_UPSTREAM (its bootstrap list) in KAFKA_DIR (its
scripts/kafka.sh directory, for `kill N` and `restart N`).

Workload (clients bootstrap from the three koord nodes):
- one idempotent producer (acks=all) writing RATE records a second to each client kind's topic
  (PARTITIONS partitions, 3 replicas), and SENTENCE_RATE sentences a second to a word count's
  input;
- per client kind, GROUPS_PER_KIND groups of two members reading the kind's topic and committing
  what they read: Java classic (range, then cooperative-sticky), Java consumer protocol
  (KIP-848), librdkafka (confluent-kafka, commit(asynchronous=False)) and franz-go (range, then
  cooperative-sticky); classic members with 30 s sessions (above every failover);
- STREAMS_INSTANCES instances of proto-tests' Kafka Streams word count with exactly_once_v2.

Faults, one every FAULT_GAP seconds (seeded by SEED), drawn from a shuffled deck of every kind
(so each comes up in turn), each kind only when it may: at most one broker and one koord node
down at a time, a broker fault only while upstream is whole (every replica in sync), a koord
fault only while the nodes agree on one assignment of every shard, one CPU starvation at a time:
- broker-kill: kill -9 of an upstream broker (scripts/kafka.sh kill), restarted after a while
  (scripts/kafka.sh restart, which waits until it answers); the victim is a random broker, or
  the leader of the __consumer_offsets partition of a random group (koord's own cluster group,
  koord-cluster-<name>, among them) or of its __koord_groups partition, or the broker hosting
  the word count's transactions (ListTransactions: its __transaction_state partition's leader);
- broker-stop: SIGSTOP of a broker, SIGCONT after a while;
- koord-kill: kill -9 of a koord node, started again (same port and data dir) after a while;
- koord-stop: SIGSTOP of a koord node, SIGCONT after a while;
- cpu-starve: a busy loop per core for tens of seconds.

Checks, all along and at the end:
- commits lost: every CHECK_INTERVAL the groups' committed offsets are read from upstream itself
  (kafka-python's KafkaAdminClient: OffsetFetch at upstream's group coordinators) and compared
  with the highest offset each client had been told was committed before the read; at the end
  the groups' commit records are read back from upstream's __consumer_offsets: no record may
  go below an offset acknowledged before it was written, and the final offsets not below the
  highest acknowledged. (An OffsetFetch answer behind, with no such record, is Kafka answering
  from a coordinator that has not caught up, right after a leader change: reported as stale.)
- stalls: for each group and partition, the longest time a record was there to read and the
  group's committed offset did not move (the producer's acknowledgement times against the
  members' "committed" events; for the word count, its offsets read from upstream); a stall
  that lasts STALL_BOUND seconds outside any fault makes the group stuck, and at the end every
  group must commit every partition to its end;
- ownership: no partition in two members' assignments of one generation (classic groups), and
  never two members holding a partition at once by their own callbacks (groups_util's
  generation_overlaps and owners_at_once over each group's events);
- the word count's output, read from upstream with read_committed: every count in sequence
  (proto-tests' OutputCounts) and, at the end, exactly the words of the input topic;
- no member crashed, every koord node restarted and stopped cleanly.
Members that crash are replaced (and counted) so the workload goes on. koord's error answers
(koord_request_errors_total, scraped from each node) are tallied by the faults active when they
were given. Every wait is on an event or a poll of the system; sleeps are only the fault
schedule, the producer's pace and poll intervals.

    proto-tests/.venv/bin/python bench/chaos.py      (bench/chaos.sh sets the environment)
"""

import collections
import datetime
import json
import logging
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "proto-tests"))

import pytest  # noqa: E402  (proto-tests' helpers fail with pytest.fail)
from confluent_kafka import (Consumer, ElectionType, KafkaError, KafkaException,  # noqa: E402
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaAdminClient  # noqa: E402
from kafka import TopicPartition as KpTopicPartition  # noqa: E402

import conftest  # noqa: E402
from groups_util import (Events, FranzMember, JavaMembers, generation_overlaps,  # noqa: E402
                         owners_at_once)
from test_cluster import APPLIED, SHARDS, Cluster, CommittingConfluent  # noqa: E402
from test_gateway import java_partition, kafka_sh, upstream_dir  # noqa: E402
from test_streams import (WORDS, OutputCounts, StreamsEvents, StreamsInstance,  # noqa: E402
                          tasks_split)
from test_streams import PARTITIONS as STREAMS_PARTITIONS  # noqa: E402

UPSTREAM = os.environ.get("KOORD_UPSTREAM", "")
FAILED = pytest.fail.Exception  # what proto-tests' helpers raise

KINDS = ("java-classic", "java-consumer", "confluent", "franz")
# Classic members' sessions: above a koord node's failover (6 s session, a rejoin, a load) and
# upstream's (a dead broker's partitions get new leaders within about 3 s in kafka.sh's
# cluster, koord holding a group's writes meanwhile), so that a fault alone never expires one.
# KIP-848 members get koord's group.consumer.session.timeout.ms (45 s).
MEMBER_SESSION_MS = 30_000
FAULTS = {  # kind: what the table calls it
    "broker-kill": "broker kill -9 (random broker)",
    "broker-kill-offsets": "broker kill -9 (__consumer_offsets leader)",
    "broker-kill-groups": "broker kill -9 (__koord_groups leader)",
    "broker-kill-txn": "broker kill -9 (__transaction_state leader)",
    "broker-stop": "broker SIGSTOP/SIGCONT",
    "koord-kill": "koord node kill -9 + restart",
    "koord-stop": "koord node SIGSTOP/SIGCONT",
    "cpu-starve": "CPU starvation (busy loop per core)",
}
JAVA_LOG_TIMES = ("-Dorg.slf4j.simpleLogger.showDateTime=true "
                  "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd_HH:mm:ss.SSS")
# What the clients' logs say when an answer carried a coordinator error: (client kind, error,
# pattern; group 1 is the line's time where the client logs one).
COORDINATOR_ERRORS = [
    ("java", "NOT_COORDINATOR", r"^(\S+) .*This is not the correct coordinator"),
    ("java", "COORDINATOR_NOT_AVAILABLE", r"^(\S+) .*The coordinator is not available"),
    ("java", "COORDINATOR_LOAD_IN_PROGRESS", r"^(\S+) .*The coordinator is loading"),
    ("confluent", "NOT_COORDINATOR", r"^(\S+) .*Broker: Not coordinator"),
    ("confluent", "COORDINATOR_NOT_AVAILABLE", r"^(\S+) .*Broker: Coordinator not available"),
    ("confluent", "COORDINATOR_LOAD_IN_PROGRESS",
     r"^(\S+) .*Broker: Coordinator load in progress"),
    ("franz", "NOT_COORDINATOR", r"()NOT_COORDINATOR"),
    ("franz", "COORDINATOR_NOT_AVAILABLE", r"()COORDINATOR_NOT_AVAILABLE"),
    ("franz", "COORDINATOR_LOAD_IN_PROGRESS", r"()COORDINATOR_LOAD_IN_PROGRESS"),
]
POLL = 0.5  # seconds between polls of the system's state; not a wait for an outcome
WHOLE_TIMEOUT = 180.0  # seconds upstream may take to be whole again after a broker fault
SETTLE_TIMEOUT = 120.0  # seconds the koord nodes may take to agree again after a node fault
START_TIMEOUT = 90.0  # a koord node's start-up ("groups loaded"), on a starved machine


def env_range(name, default):
    """A "LOW,HIGH" pair of seconds from the environment."""
    raw = os.environ.get(name)
    if not raw:
        return default
    low, high = (float(x) for x in raw.split(","))
    return low, high


@dataclass
class Settings:
    workdir: Path
    duration: float = 600.0
    seed: int = 1
    groups_per_kind: int = 2
    partitions: int = 4
    rate: float = 8.0  # records a second to each client kind's topic
    sentence_rate: float = 4.0
    streams_instances: int = 2
    fault_gap: tuple = (3.0, 10.0)  # seconds between two faults' starts
    broker_kill_s: tuple = (5.0, 20.0)  # how long a killed broker stays down
    broker_stop_s: tuple = (3.0, 12.0)
    koord_kill_s: tuple = (2.0, 15.0)
    koord_stop_s: tuple = (3.0, 15.0)
    starve_s: tuple = (10.0, 40.0)
    stall_bound: float = 60.0  # seconds a partition may stall outside any fault
    check_interval: float = 3.0
    drain_timeout: float = 180.0  # seconds the groups may take to catch up at the end

    @classmethod
    def from_env(cls, workdir):
        s = cls(workdir=workdir)
        for name, cast in (("duration", float), ("seed", int), ("groups_per_kind", int),
                           ("partitions", int), ("rate", float), ("sentence_rate", float),
                           ("streams_instances", int), ("stall_bound", float),
                           ("check_interval", float), ("drain_timeout", float)):
            if os.environ.get(name.upper()):
                setattr(s, name, cast(os.environ[name.upper()]))
        for name in ("fault_gap", "broker_kill_s", "broker_stop_s", "koord_kill_s",
                     "koord_stop_s", "starve_s"):
            setattr(s, name, env_range(name.upper(), getattr(s, name)))
        return s


# --- where time went: faults, commits, stalls --------------------------------------------------

@dataclass
class Fault:
    n: int
    kind: str
    target: str
    planned_s: float
    start: float
    end: float | None = None  # when the fault was over (restarted, resumed, stopped)
    ok: bool | None = None  # its own actions succeeded (the victim came back)
    recovered_s: float | None = None  # fault end to upstream whole / the nodes agreeing again
    note: str = ""
    survived: bool | None = None

    def line(self, t0):
        end = f"{self.end - t0:7.1f}" if self.end else "      -"
        rec = f" back after {self.recovered_s:.1f}s" if self.recovered_s is not None else ""
        return (f"#{self.n:<3} {self.kind:<20} {self.target:<36} {self.start - t0:7.1f} .. {end}"
                f"{rec}{' ' + self.note if self.note else ''}")


def merged(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(a, b, spans):
    """Seconds of [a, b] inside the merged intervals `spans`."""
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans)


class ChaosEvents(Events):
    """Every member's events, each stamped with "t" (the client's clock, ts_ms, where it tells;
    else its arrival) and "arrived"; commits indexed by group and partition as they come, so
    that waits and checks never rescan the log. No event fails a wait: crashes are counted."""

    FAILING = ()
    TIMEOUT = 120.0

    def __init__(self):
        super().__init__()
        self.group_of = {}  # member name -> group id
        self.best = {}  # (group, partition) -> (offset, t, member): highest commit acknowledged
        self.advances = collections.defaultdict(list)  # (group, partition) -> [(t, offset)]
        self.behind = []  # commits acknowledged below one acknowledged before
        self.last = {}  # (group, partition) -> (offset, t, member): the latest acknowledged

    def add(self, event):
        now = time.time()
        event["arrived"] = now
        event["t"] = event["ts_ms"] / 1000.0 if "ts_ms" in event else now
        if event["event"] == "committed":
            gid = self.group_of.get(event["member"])
            with self._cond:
                for p, o in event["offsets"].items():
                    key = (gid, int(p))
                    self.last[key] = (o, event["t"], event["member"])
                    prev = self.best.get(key)
                    if prev is None or o > prev[0]:
                        self.best[key] = (o, event["t"], event["member"])
                        self.advances[key].append((event["t"], o))
                    elif o < prev[0]:
                        self.behind.append((key, o, prev, event["member"], event["t"]))
        super().add(event)

    def acknowledged(self):
        """{(group, partition): highest offset acknowledged so far}."""
        with self._cond:
            return {k: v[0] for k, v in self.best.items()}


class ChaosStreamsEvents(StreamsEvents):
    """The word count instances' lines; a death fails a wait only while FAILING names it (at
    start-up; afterwards the run counts and replaces a failed instance)."""

    def __init__(self):
        super().__init__()
        self.FAILING = ("error", "died")

    def add(self, event):
        event["t"] = time.time()
        super().add(event)


class Slot:
    """What groups_util's members read of their group (bootstrap, workdir, id, topic, events,
    members): one per member, or the shared one of the JVM hosting every Java member (set to
    a member's group and topic before it starts, as test_cluster's Fleet does)."""

    def __init__(self, run, gid, topic, bootstrap=None):
        self.bootstrap = bootstrap or run.bootstrap
        self.workdir = run.workdir
        self.id = gid
        self.topic = topic
        self.events = run.events
        self.members = run.members


@dataclass
class GroupSpec:
    gid: str
    kind: str
    topic: str
    variant: str  # assignor / balancer
    names: list = field(default_factory=list)


class SteadyProducer(threading.Thread):
    """One idempotent producer (acks=all) through koord: every 1/rate s one record to each data
    topic (partition i % partitions), and sentences to the word count's input at its own pace.
    Remembers when each offset was acknowledged."""

    def __init__(self, run):
        super().__init__(daemon=True, name="producer")
        s = run.settings
        self.topics = list(run.topics.values())
        self.partitions = s.partitions
        self.rate = s.rate
        self.sentence_every = max(1, round(s.rate / s.sentence_rate)) if s.sentence_rate else 0
        self.input = run.streams_input
        self.acked = collections.defaultdict(dict)  # (topic, partition) -> {offset: time}
        self.ends = {}  # (topic, partition) -> next offset
        self.errors = []
        self.gaps = []  # (seconds between acknowledgements, at)
        self.last_ack = None
        self.sentences = 0
        self.unknown_offsets = 0
        self.failure = None  # what stopped the producing thread, if anything did
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.producer = Producer({"bootstrap.servers": run.bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 10, "client.id": "chaos-producer"})

    def delivered(self, err, msg):
        now = time.time()
        if err is not None:
            self.errors.append((now, str(err)))
            return
        with self.lock:
            key = (msg.topic(), msg.partition())
            if msg.offset() is None:
                # Acknowledged without an offset: librdkafka's idempotent producer reports a
                # batch upstream already had (a retry after a closed connection; Kafka's
                # DUPLICATE_SEQUENCE_NUMBER) as delivered, offset unknown.
                self.unknown_offsets += 1
                return
            self.acked[key][msg.offset()] = now
            self.ends[key] = max(self.ends.get(key, 0), msg.offset() + 1)
            if self.last_ack is not None:
                self.gaps.append((now - self.last_ack, self.last_ack))
            self.last_ack = now

    def ack_time(self, topic, partition, offset):
        with self.lock:
            return self.acked[(topic, partition)].get(offset)

    def send(self, topic, **kw):
        while True:
            try:
                self.producer.produce(topic, on_delivery=self.delivered, **kw)
                return
            except BufferError:
                self.producer.poll(0.5)  # the queue is full: serve callbacks, then again

    def run(self):
        try:
            self.produce()
        except Exception as e:  # noqa: BLE001 - a check fails on it (no workload without it)
            self.failure = f"{type(e).__name__}: {e}"
            print(f"the producer stopped: {self.failure}", flush=True)

    def produce(self):
        i = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stopping.is_set():
            for t in self.topics:
                self.send(t, key=f"k{i}", value=f"v{i}", partition=i % self.partitions)
            if self.sentence_every and i % self.sentence_every == 0:
                self.send(self.input, key=f"s{self.sentences}", value=sentence(self.sentences))
                self.sentences += 1
            self.producer.poll(0)
            i += 1
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                self.stopping.wait(pause)  # the producer's pace
            else:
                next_at = time.monotonic()  # behind (a stall): no burst to catch up

    def stop(self, timeout):
        """Stops producing, waits for every record's acknowledgement; returns those missing."""
        self.stopping.set()
        self.join(30)
        missing = self.producer.flush(timeout)
        self.producer = None  # its connections close now, before the nodes stop
        return missing


def sentence(i):
    """Sentence i: 3 to 8 of test_streams' words, seeded by i."""
    rnd = random.Random(i)
    return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 8))) + "."


def words_of(text):
    """The words StreamsApp counts in a value: lowercased, split on non-word characters."""
    return [w for w in re.split(r"\W+", text.lower(), flags=re.ASCII) if w]


def offset_commit_key(key):
    """(group, topic, partition) of a __consumer_offsets record key of an offset commit (key
    versions 0 and 1: group, topic, partition), or None for any other record."""
    if key is None or len(key) < 2 or struct.unpack_from(">h", key)[0] not in (0, 1):
        return None
    o = 2
    fields = []
    for _ in range(2):
        n = struct.unpack_from(">h", key, o)[0]
        fields.append(key[o + 2:o + 2 + n].decode())
        o += 2 + n
    return fields[0], fields[1], struct.unpack_from(">i", key, o)[0]


def upstream_admin():
    """kafka-python's admin client on upstream itself (pure Python: a client of librdkafka's
    AdminClient aborted the whole process, rdkafka_queue.h:1086 eonce->refcnt > 0, when its
    ListConsumerGroupOffsets timed out while a broker was down)."""
    return KafkaAdminClient(bootstrap_servers=UPSTREAM, request_timeout_ms=10_000,
                            client_id="chaos-checker")


def close_quietly(kp):
    if kp is not None:
        try:
            kp.close()
        except Exception:  # noqa: BLE001 - closing a client that already failed
            pass


def error_answers(node):
    """({(api, error): count} of koord_request_errors_total on a node's /metrics, whether
    it has koord_requests_total at all)."""
    with urllib.request.urlopen(f"{node.http}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = collections.Counter()
    for m in re.finditer(r"^koord_request_errors_total\{([^}]*)\} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        out[(labels["api"], labels["error"])] += int(float(m.group(2)))
    return out, "\nkoord_requests_total{" in text


def normalize(line):
    """A log line without its timestamp, numbers and ids, for counting alike lines."""
    line = re.sub(r"^\S*\d{4}-\d\d-\d\dT\S+\s*", "", line)
    line = re.sub(r"^\[[^\]]*\d{4}-\d\d-\d\d[^\]]*\]\s*", "", line)
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    line = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27,}|[A-Za-z0-9_-]{22}(?=\W)", "ID", line)
    line = re.sub(r"\d+", "N", line)
    return line.strip()[:240]


# --- the run ---------------------------------------------------------------------------------

class Run:
    """One chaos run: set-up, the fault schedule, the end checks and the report."""

    def __init__(self, settings):
        if not UPSTREAM:
            raise SystemExit("chaos: KOORD_UPSTREAM (the upstream's bootstrap list) not set")
        self.settings = s = settings
        self.workdir = s.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(s.seed)
        self.kafka_dir = upstream_dir()
        if self.kafka_dir is None:
            raise SystemExit(f"chaos: no scripts/kafka.sh directory has {UPSTREAM} as its "
                             "bootstrap (set KAFKA_DIR)")
        self.suffix = uuid.uuid4().hex[:6]
        self.events = ChaosEvents()
        self.members = {}  # name -> member object (JavaMembers for Java members)
        self.groups = {}  # group id -> GroupSpec
        self.kind_of = {}  # member name -> client kind
        self.topics = {k: f"chaos-{k}-{self.suffix}" for k in KINDS}
        self.app_id = f"chaos-wc-{self.suffix}"
        self.streams_input = f"{self.app_id}-input"
        self.streams_output = f"{self.app_id}-output"
        self.streams_events = ChaosStreamsEvents()
        self.streams = []  # StreamsInstance, current and replaced
        self.streams_live = {}  # slot name -> current instance
        self.streams_advances = collections.defaultdict(list)  # partition -> [(t, offset)]
        self.streams_best = {}
        self.output = None
        self.producer = None
        self.jvm = None
        self.jvm_slot = None
        self.cluster = None
        self.faults = []
        self.fault_threads = []
        self.broker_busy = False
        self.koord_busy = False
        self.starving = False
        self.node_state = {}  # node index -> "up" | "killed" | "stopped"
        self.stopped_brokers = set()  # broker pids sent SIGSTOP and not yet SIGCONT
        self.busy_loops = []
        # (group, partition, acknowledged offset) -> an upstream read that was behind it
        self.behind_reads = {}
        self.client_regressions = []
        self.offsets_log = {}  # (group, partition) -> [(record time, offset)] in log order
        self.respawned = collections.Counter()  # kind -> members replaced after a crash
        self.crashes = []  # (kind, member, event)
        self.koord_failures = []  # what went wrong with koord processes themselves
        self.errors_seen = collections.defaultdict(collections.Counter)  # (api, err) -> {faults: n}
        self.metric_last = {}
        self.scrapes = collections.Counter()
        self.metric_at = {}
        self.applied = {}  # node index -> [log offset, (generation, shards) or None]
        self.done = threading.Event()
        self.check_done = threading.Event()
        self.meta = None  # an AdminClient on upstream, for Metadata
        self.t0 = None  # the chaos starts
        self.t_ready = None  # stalls count from here
        self.t_end = None
        self.t_final = None  # the groups caught up (or gave up on): ongoing stalls end here
        self.ends = {}
        self.input_ends = {}
        self.final_offsets = {}
        self.streams_exact, self.streams_problem = False, "not checked"
        self.lock = threading.Lock()
        self.t_created = time.time()

    @property
    def bootstrap(self):
        return self.cluster.bootstrap

    def log(self, msg):
        t = (f"{time.time() - self.t0:7.1f}s" if self.t0
             else f"setup {time.time() - self.t_created:5.1f}s")
        line = f"[{t}] {msg}"
        print(line, flush=True)
        with open(self.workdir / "chaos.log", "a") as f:
            f.write(line + "\n")

    # set-up

    def setup(self):
        s = self.settings
        self.saved_start_timeout = conftest.START_TIMEOUT
        conftest.START_TIMEOUT = START_TIMEOUT
        # The JVMs' client logs with times (slf4j-simple reads JAVA_TOOL_OPTIONS' properties).
        self.saved_java_options = os.environ.get("JAVA_TOOL_OPTIONS")
        os.environ["JAVA_TOOL_OPTIONS"] = JAVA_LOG_TIMES
        self.meta = AdminClient({"bootstrap.servers": UPSTREAM})
        # The topics exist upstream before the nodes start, as a deployment's do before its
        # consumers: a node reads upstream's topics as it starts. (A classic group that joins
        # a node which does not know its topic yet is assigned nothing and stays so; see
        # wait_topics_known.)
        topics = [NewTopic(t, s.partitions, 3) for t in self.topics.values()]
        topics += [NewTopic(t, STREAMS_PARTITIONS, 3)
                   for t in (self.streams_input, self.streams_output)]
        for f in self.meta.create_topics(topics).values():
            f.result(timeout=60)
        names = [t.topic for t in topics]
        self.wait_topics_known(names, [UPSTREAM])
        self.cluster = Cluster(self.workdir).start()
        name = next(kv for kv in self.cluster.nodes[0].sets if kv.startswith("cluster.name="))
        self.cluster_group = f"koord-cluster-{name.split('=', 1)[1]}"
        for n in self.cluster.nodes:
            self.track(n.proc.pid)
        self.cluster.wait_settled([0, 1, 2])
        for i in range(3):
            self.node_state[i] = "up"
            self.applied[i] = [0, None]
        self.log(f"koord nodes at {self.bootstrap} (binary {conftest.KOORD_BIN}), "
                 f"upstream {UPSTREAM} in {self.kafka_dir}")
        self.wait_topics_known(names, [n.bootstrap for n in self.cluster.nodes])
        self.producer = SteadyProducer(self)
        self.producer.start()
        self.jvm_slot = Slot(self, f"chaos-java-{self.suffix}", self.topics["java-classic"])
        self.jvm = JavaMembers(self.jvm_slot, "jvm")
        self.track(self.jvm.proc.pid)
        for kind in KINDS:
            for g in range(s.groups_per_kind):
                variant = {"java-classic": ("range", "cooperative-sticky"),
                           "java-consumer": ("uniform", "range"),
                           "confluent": ("range", "cooperative-sticky"),
                           "franz": ("range", "cooperative-sticky")}[kind][g % 2]
                spec = GroupSpec(f"chaos-{kind}-{g}-{self.suffix}", kind, self.topics[kind],
                                 variant)
                self.groups[spec.gid] = spec
                for m in "ab":
                    self.start_member(spec, f"{kind}-{g}{m}")
        self.output = OutputCounts(UPSTREAM, self.streams_output, exactly_once=True)
        for i in range(s.streams_instances):
            self.start_streams(f"s{i + 1}")
        self.log("members and word count started")
        self.streams_events.wait_for(
            "the word count's instances RUNNING, the tasks split between them",
            tasks_split(list(self.streams_live_names())), timeout=180)
        self.streams_events.FAILING = ()  # from now on a death is counted and replaced
        self.log("word count running")
        self.events.wait_for("every group committed on every partition", self.all_committed,
                             timeout=180)
        self.t_ready = time.time()
        self.log(f"workload running: {len(self.groups)} groups, {len(self.kind_of)} members, "
                 f"{s.streams_instances} word count instance(s)")

    def wait_topics_known(self, topics, bootstraps):
        """Until Metadata asked of each of `bootstraps` has every topic with a leader for each
        partition. (Measured: a node's Metadata listing a topic is not enough for its server
        assignor to know it; two franz-go members joining within half a second were both
        assigned nothing, for good: koord does not rebalance a classic group when it learns
        a subscribed topic.)"""
        deadline = time.monotonic() + 120
        for bootstrap in bootstraps:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            while True:
                md = admin.list_topics(timeout=30)
                if all(t in md.topics and md.topics[t].error is None and md.topics[t].partitions
                       and all(p.leader >= 0 for p in md.topics[t].partitions.values())
                       for t in topics):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"topics not in {bootstrap}'s metadata: {topics}")
                time.sleep(POLL)  # poll interval, not a wait for an outcome

    def all_committed(self, _log):
        """True once every group has committed something on every partition."""
        best = self.events.acknowledged()
        missing = [(g, p) for g in self.groups for p in range(self.settings.partitions)
                   if (g, p) not in best]
        return None if missing else True

    def start_member(self, spec, name):
        self.events.group_of[name] = spec.gid
        self.kind_of[name] = spec.kind
        spec.names.append(name)
        if spec.kind.startswith("java"):
            self.jvm_slot.id = spec.gid
            self.jvm_slot.topic = spec.topic
            if spec.kind == "java-classic":
                self.jvm.start(name, "--commit", session_timeout_ms=MEMBER_SESSION_MS,
                               partition_assignment_strategy=spec.variant)
            else:
                self.jvm.start(name, "--commit", group_protocol="consumer",
                               group_remote_assignor=spec.variant)
        elif spec.kind == "confluent":
            # librdkafka's group debug log (each answer's error) to a file, with times.
            log = logging.getLogger(f"rdkafka.{spec.gid}.{name}")
            log.propagate = False
            log.setLevel(logging.DEBUG)
            handler = logging.FileHandler(self.workdir / f"{spec.gid}-{name}.rdkafka.log")
            handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
            log.addHandler(handler)
            m = CommittingConfluent(Slot(self, spec.gid, spec.topic), name, spec.variant,
                                    {"session.timeout.ms": MEMBER_SESSION_MS, "debug": "cgrp",
                                     "logger": log})
            m.gid = spec.gid
            self.members[name] = m
            m.start()
        else:
            # franz-member takes one seed address: each member another node's (it learns the
            # others from Metadata).
            seed = self.cluster.nodes[len(self.kind_of) % 3].bootstrap
            m = FranzMember(Slot(self, spec.gid, spec.topic, seed), name, spec.variant,
                            session_ms=MEMBER_SESSION_MS)
            self.members[name] = m
            self.track(m.proc.pid)

    def start_streams(self, slot):
        n = sum(1 for i in self.streams if i.slot == slot)
        name = slot if n == 0 else f"{slot}~{n}"
        inst = StreamsInstance(
            self.streams_events, name, self.workdir, self.bootstrap, self.app_id,
            self.streams_input, self.streams_output, self.workdir / f"{slot}-state",
            "processing.guarantee=exactly_once_v2", "replication.factor=3",
            f"consumer.session.timeout.ms={MEMBER_SESSION_MS}",
            "producer.transaction.timeout.ms=30000")
        inst.slot = slot
        self.track(inst.proc.pid)
        self.streams.append(inst)
        self.streams_live[slot] = inst
        return inst

    def streams_live_names(self):
        return [i.name for i in self.streams_live.values()]

    # the state of the system

    def node_assignment(self, i):
        """The newest (generation, shards) node i logged applying, read incrementally."""
        node = self.cluster.nodes[i]
        with self.lock:
            offset, last = self.applied[i]
            try:
                with open(node.log_path, "rb") as log:
                    log.seek(offset)
                    data = log.read()
            except OSError:
                return last
            cut = data.rfind(b"\n") + 1
            found = APPLIED.findall(data[:cut])
            if found:
                last = (int(found[-1][0]), int(found[-1][1]))
            self.applied[i] = [offset + cut, last]
            return last

    def koord_settled(self):
        """Every node up and the three agree on one generation covering every shard."""
        if any(st != "up" for st in self.node_state.values()):
            return False
        held = [self.node_assignment(i) for i in range(3)]
        if None in held or len({h[0] for h in held}) != 1:
            return False
        return sum(h[1] for h in held) == SHARDS and all(h[1] > 0 for h in held)

    def upstream_whole(self):
        """Three brokers, and every partition led with all its replicas in sync."""
        try:
            md = self.meta.list_topics(timeout=10)
        except KafkaException:
            return False
        return len(md.brokers) == 3 and all(
            pm.leader >= 0 and len(pm.isrs) == len(pm.replicas)
            for tm in md.topics.values() for pm in tm.partitions.values())

    def broker_pid(self, n):
        return int((self.kafka_dir / "kafka.pid").read_text().split()[n - 1])

    def leader_of(self, topic, key):
        """The upstream broker leading the partition of `topic` Kafka places `key` in."""
        md = self.meta.list_topics(topic, timeout=30)
        parts = md.topics[topic].partitions
        return parts[java_partition(key, len(parts))].leader

    def txn_hosts(self):
        """The brokers hosting the word count's transactions (ListTransactions)."""
        kp = KafkaAdminClient(bootstrap_servers=UPSTREAM, request_timeout_ms=15_000)
        try:
            listed = kp.list_transactions(transactional_id_pattern=re.escape(self.app_id) + ".*")
        finally:
            kp.close()
        return sorted(b for b, txns in listed.items() if txns)

    # faults

    def eligible(self, kind):
        if kind.startswith("broker"):
            return not self.broker_busy and self.upstream_whole()
        if kind.startswith("koord"):
            return not self.koord_busy and self.koord_settled()
        return not self.starving

    def chaos(self):
        s = self.settings
        self.t0 = time.time()
        self.log(f"chaos for {s.duration:.0f}s, seed {s.seed}")
        deck = []
        end = time.monotonic() + s.duration
        next_at = time.monotonic() + self.rng.uniform(*s.fault_gap)
        while True:
            pause = min(next_at, end) - time.monotonic()
            if pause > 0:
                self.done.wait(pause)  # the fault schedule
            if time.monotonic() >= end:
                break
            if not deck:
                deck = list(FAULTS)
                self.rng.shuffle(deck)
            kind = next((k for k in deck if self.eligible(k)), None)
            if kind is not None:
                deck.remove(kind)
                self.inject(kind)
                next_at = time.monotonic() + self.rng.uniform(*s.fault_gap)
            else:
                next_at = time.monotonic() + POLL  # nothing may fail now: look again soon
        self.log("chaos over: healing")

    def inject(self, kind):
        s = self.settings
        n = len(self.faults) + 1
        if kind.startswith("broker"):
            planned = self.rng.uniform(*(s.broker_stop_s if kind == "broker-stop"
                                         else s.broker_kill_s))
            pick = self.rng.random()  # seeded draws first, then the system's answers
            try:
                if kind == "broker-kill-offsets":  # the koord nodes' own group among them
                    gids = sorted(self.groups) + [self.cluster_group]
                    gid = gids[int(pick * len(gids))]
                    victim = self.leader_of("__consumer_offsets", gid)
                    target = f"broker {victim} ({gid[:24]})"
                elif kind == "broker-kill-groups":
                    gid = sorted(self.groups)[int(pick * len(self.groups))]
                    victim = self.leader_of("__koord_groups", gid)
                    target = f"broker {victim} ({gid[:24]})"
                elif kind == "broker-kill-txn":
                    hosts = self.txn_hosts()
                    if not hosts:  # no open transaction listed: the leader of a random one
                        victim = self.leader_of("__transaction_state", f"{self.app_id}-{pick}")
                    else:
                        victim = hosts[int(pick * len(hosts))]
                    target = f"broker {victim} (txns on {hosts})"
                else:
                    victim = 1 + int(pick * 3)
                    target = f"broker {victim}"
            except Exception as e:  # noqa: BLE001 - a metadata answer missing: next time
                self.log(f"fault {kind}: no victim ({type(e).__name__}: {e})")
                return
            if victim not in (1, 2, 3):
                self.log(f"fault {kind}: no leader ({victim})")
                return
            try:  # the nodes' own group (their leases) is coordinated there
                if self.leader_of("__consumer_offsets", self.cluster_group) == victim:
                    target += " [koord-cluster group's coordinator]"
            except Exception:  # noqa: BLE001 - only a note
                pass
            self.broker_busy = True
            fn = self.broker_stop if kind == "broker-stop" else self.broker_kill
            args = (victim,)
        elif kind.startswith("koord"):
            planned = self.rng.uniform(*(s.koord_kill_s if kind == "koord-kill"
                                         else s.koord_stop_s))
            victim = self.rng.randrange(3)
            target = f"node {victim} ({self.cluster.nodes[victim].bootstrap})"
            self.koord_busy = True
            fn = self.koord_kill if kind == "koord-kill" else self.koord_stop
            args = (victim,)
        else:
            planned = self.rng.uniform(*s.starve_s)
            target = f"{os.cpu_count()} busy loops"
            self.starving = True
            fn = self.starve
            args = ()
        f = Fault(n, kind, target, planned, time.time())
        self.faults.append(f)
        self.log(f"fault #{n} {kind}: {target} for {planned:.1f}s")
        t = threading.Thread(target=self.run_fault, args=(f, fn, args), daemon=True)
        self.fault_threads.append(t)
        t.start()

    def run_fault(self, f, fn, args):
        try:
            fn(f, *args)
            if f.ok is None:
                f.ok = True
        except BaseException as e:  # noqa: BLE001 - pytest.fail too: the fault's outcome
            f.ok = False
            f.note += f" FAILED: {type(e).__name__}: {str(e)[:400]}"
            self.log(f"fault #{f.n} {f.kind} failed: {e}")
        finally:
            if f.end is None:
                f.end = time.time()
            if f.kind.startswith("broker"):
                self.broker_busy = False
            elif f.kind.startswith("koord"):
                self.koord_busy = False
            else:
                self.starving = False
            self.log(f"fault #{f.n} {f.kind} over{' ' + f.note if f.note else ''}")

    def hold(self, seconds):
        """The fault's planned length (the schedule), cut short when the run is aborted."""
        self.done.wait(seconds)

    def broker_kill(self, f, n):
        kafka_sh("kill", n)
        self.hold(f.planned_s)
        kafka_sh("restart", n)  # waits until the broker answers FindCoordinator
        f.end = time.time()
        self.wait_whole(f)

    def broker_stop(self, f, n):
        pid = self.broker_pid(n)
        self.stopped_brokers.add(pid)
        try:
            self.pause(pid, f.planned_s)
        finally:
            self.stopped_brokers.discard(pid)
        f.end = time.time()
        self.wait_whole(f)

    def pause(self, pid, seconds):
        """SIGSTOP now, SIGCONT after `seconds` sent by a process of its own (the fault
        schedule), so that the victim resumes even if this driver dies meanwhile."""
        resume = subprocess.Popen(["sh", "-c", f"sleep {seconds:.2f}; kill -CONT {pid}"])
        self.track(resume.pid)
        os.kill(pid, signal.SIGSTOP)
        try:
            while resume.poll() is None and not self.done.is_set():
                self.done.wait(POLL)  # poll interval: the resumer's exit
        finally:
            os.kill(pid, signal.SIGCONT)
            if resume.poll() is None:
                resume.kill()
                resume.wait()

    def track(self, pid):
        """Every process this run starts, with its start time (so that a pid used again by
        another process is told apart), for bench/chaos.sh to kill should the driver die."""
        try:
            started = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            return
        with open(self.workdir / "pids", "a") as f:
            f.write(f"{pid} {started}\n")

    def wait_whole(self, f):
        deadline = time.monotonic() + WHOLE_TIMEOUT
        while not self.upstream_whole():
            if time.monotonic() > deadline:
                f.note += f" upstream not whole {WHOLE_TIMEOUT:.0f}s after"
                return
            time.sleep(POLL)  # poll interval, not a wait for an outcome
        f.recovered_s = time.time() - f.end

    def koord_kill(self, f, i):
        node = self.cluster.nodes[i]
        self.node_state[i] = "killed"
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait()
        self.hold(f.planned_s)
        self.restart_node(i, f)
        f.end = time.time()
        self.wait_settled(f)

    def restart_node(self, i, f=None):
        node = self.cluster.nodes[i]
        for attempt in range(3):
            try:
                node.start(port=node.port)  # waits for "groups loaded"
                self.track(node.proc.pid)
                self.node_state[i] = "up"
                return
            except FAILED as e:
                what = f"node {i} did not start (attempt {attempt + 1}): {str(e)[-1500:]}"
                self.koord_failures.append(what)
                if f is not None:
                    f.ok = False
                    f.note += f" restart attempt {attempt + 1} failed"
                self.log(what)
        raise RuntimeError(f"koord node {i} did not start in 3 attempts")

    def koord_stop(self, f, i):
        node = self.cluster.nodes[i]
        self.node_state[i] = "stopped"
        try:
            self.pause(node.proc.pid, f.planned_s)
        finally:
            self.node_state[i] = "up"
        f.end = time.time()
        self.wait_settled(f)

    def wait_settled(self, f):
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not self.koord_settled():
            if time.monotonic() > deadline:
                f.note += f" nodes not agreeing {SETTLE_TIMEOUT:.0f}s after"
                self.koord_failures.append(
                    f"fault #{f.n}: the nodes did not agree on every shard within "
                    f"{SETTLE_TIMEOUT:.0f}s: {[self.node_assignment(i) for i in range(3)]}")
                return
            time.sleep(POLL)  # poll interval, not a wait for an outcome
        f.recovered_s = time.time() - f.end

    def starve(self, f):
        """A busy loop per core, each ending on its own after the fault's length."""
        loop = ("import time\nend = time.monotonic() + float(__import__('sys').argv[1])\n"
                "while time.monotonic() < end:\n    pass\n")
        loops = [subprocess.Popen([sys.executable, "-c", loop, f"{f.planned_s:.2f}"])
                 for _ in range(os.cpu_count() or 2)]
        for p in loops:
            self.track(p.pid)
        self.busy_loops += loops
        try:
            for p in loops:
                while p.poll() is None and not self.done.is_set():
                    self.done.wait(POLL)  # poll interval: the loops' exits
        finally:
            for p in loops:
                if p.poll() is None:
                    p.kill()
                p.wait()
        f.end = time.time()

    # the checker: upstream's offsets, koord's error answers, crashed members

    def checker(self):
        kp = None
        while not self.done.is_set():
            started = time.monotonic()
            try:
                kp = kp or upstream_admin()
                self.check_upstream(kp)
            except Exception as e:  # noqa: BLE001 - upstream busy or moving: the next round
                self.log(f"upstream offsets not read: {type(e).__name__}: {str(e)[:200]}")
                close_quietly(kp)
                kp = None
            self.scrape_errors()
            self.replace_crashed()
            self.done.wait(max(0.0, self.settings.check_interval - (time.monotonic() - started)))
        close_quietly(kp)

    def upstream_offsets(self, kp):
        """{group: {partition: committed offset}} of every group and of the word count, as
        upstream's group coordinators answer OffsetFetch (kafka-python's admin: one request per
        coordinator; any error fails the whole read)."""
        specs = {gid: [KpTopicPartition(spec.topic, p) for p in range(self.settings.partitions)]
                 for gid, spec in self.groups.items()}
        specs[self.app_id] = [KpTopicPartition(self.streams_input, p)
                              for p in range(STREAMS_PARTITIONS)]
        got = kp.list_group_offsets(specs)
        return {gid: {tp.partition: om.offset for tp, om in offsets.items()}
                for gid, offsets in got.items()}

    def check_upstream(self, kp, final=False):
        """Every group's upstream offsets against what its members had been told was committed
        before the read; the word count's offsets as its progress."""
        acked = self.events.acknowledged()  # before the read
        got = self.upstream_offsets(kp)
        now = time.time()
        for (g, p), o in acked.items():
            upstream = got.get(g, {}).get(p)
            if upstream is None or upstream >= o:
                continue
            key = (g, p, o)
            if key not in self.behind_reads:
                best = self.events.best.get((g, p))
                self.behind_reads[key] = {
                    "group": g, "kind": self.groups[g].kind, "partition": p, "acknowledged": o,
                    "acknowledged_at": round(best[1] - (self.t0 or now), 2) if best else None,
                    "by": best[2] if best else None, "upstream": upstream, "read_at": now,
                    "final": final}
                self.log(f"upstream behind an acknowledged commit: {self.behind_reads[key]}")
        if final:
            self.final_offsets = got
        for p, o in got.get(self.app_id, {}).items():
            if o > self.streams_best.get(p, 0):
                self.streams_best[p] = o
                self.streams_advances[p].append((now, o))

    def scrape_errors(self):
        """koord_request_errors_total of each running node, as deltas, by the faults active."""
        now = time.time()
        for i, node in enumerate(self.cluster.nodes):
            if self.node_state.get(i) != "up":
                continue
            try:
                counts, counted = error_answers(node)
                self.scrapes["with requests_total"] += counted
            except OSError as e:
                self.scrapes["failed"] += 1
                if self.scrapes["failed"] == 1:
                    self.log(f"node {i}'s /metrics not read: {e}")
                continue
            self.scrapes["read"] += 1
            last = self.metric_last.get(i, collections.Counter())
            since = self.metric_at.get(i, self.t_ready or now)
            reset = any(counts[k] < last[k] for k in last)
            delta = counts if reset else counts - last
            self.metric_last[i], self.metric_at[i] = counts, now
            if delta:
                label = self.active_label(since, now)
                for key, n in delta.items():
                    self.errors_seen[key][label] += n

    def active_label(self, a, b):
        kinds = sorted({f.kind for f in self.faults
                        if f.start <= b and (f.end is None or f.end + 10 >= a)})
        return "+".join(kinds) if kinds else "no fault"

    def replace_crashed(self):
        """A member that crashed (an "error" event, a franz-go process gone) is counted, marked
        gone for the ownership replay, and replaced in its group; so is a word count instance
        that died or failed."""
        log = self.events.snapshot()
        for e in log:
            name = e["member"]
            if e["event"] != "error" or name not in self.kind_of or e.get("_handled"):
                continue
            e["_handled"] = True
            kind = self.kind_of[name]
            self.crashes.append((kind, name, {k: v for k, v in e.items() if k != "_handled"}))
            self.log(f"member {name} ({kind}) crashed: {e.get('error')} {e.get('message', '')}"
                     f"{e.get('log', '')}"[:600])
            self.events.add({"member": name, "event": "killed", "reason": "crashed"})
            spec = self.groups[self.events.group_of[name]]
            self.respawned[kind] += 1
            self.start_member(spec, f"{name.split('-r')[0]}-r{self.respawned[kind]}")
        for slot, inst in list(self.streams_live.items()):
            bad = [e for e in self.streams_events.snapshot()
                   if e["member"] == inst.name and e["event"] in ("error", "died")]
            if bad:
                self.crashes.append(("streams", inst.name, bad[0]))
                self.log(f"word count instance {inst.name} failed: {json.dumps(bad[0])[:600]}")
                inst.kill()
                self.respawned["streams"] += 1
                self.start_streams(slot)

    # the end

    def heal(self):
        """Every fault over, every process back (whatever failed on the way)."""
        self.done.set()
        for t in self.fault_threads:
            t.join(WHOLE_TIMEOUT + 60)
        for p in self.busy_loops:
            if p.poll() is None:
                p.kill()
                p.wait()
        for pid in list(self.stopped_brokers):
            os.kill(pid, signal.SIGCONT)
        if self.cluster is not None:
            for i, node in enumerate(self.cluster.nodes):
                if node.proc is None:
                    continue
                node.proc.send_signal(signal.SIGCONT)
                if node.proc.poll() is not None:
                    try:
                        self.restart_node(i)
                    except RuntimeError as e:
                        self.koord_failures.append(str(e))
        for n in (1, 2, 3):
            try:
                os.kill(self.broker_pid(n), 0)
            except (ProcessLookupError, ValueError, IndexError):
                kafka_sh("restart", n)

    def finish(self):
        """Heals, stops producing, and waits until every group and the word count caught up."""
        s = self.settings
        self.heal()
        self.t_end = time.time()
        self.wait_upstream_whole()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not self.koord_settled() and time.monotonic() < deadline:
            time.sleep(POLL)  # poll interval, not a wait for an outcome
        if not self.koord_settled():
            self.koord_failures.append("the nodes did not agree on every shard after the run: "
                                       f"{[self.node_assignment(i) for i in range(3)]}")
        for i, node in enumerate(self.cluster.nodes):  # for the report's evidence
            try:
                with urllib.request.urlopen(f"{node.http}/metrics", timeout=5) as resp:
                    (self.workdir / f"node{i}-metrics.txt").write_bytes(resp.read())
            except OSError:
                pass
        self.log(f"/metrics read {self.scrapes['read']} times, {self.scrapes['failed']} failed; "
                 "koord nodes agree")
        missing = self.producer.stop(120)
        self.log(f"producer stopped: {missing} records unacknowledged, "
                 f"{len(self.producer.errors)} delivery errors")
        self.ends = dict(self.producer.ends)
        checker = threading.Thread(target=self.checker_after_end, daemon=True)
        checker.start()
        try:
            self.events.wait_for("every group committed every partition to its end",
                                 self.caught_up, timeout=s.drain_timeout)
        except FAILED as e:
            self.log(str(e).splitlines()[0])
        self.t_final = time.time()
        self.log("groups caught up")
        self.expected = self.input_words()
        self.streams_exact, self.streams_problem = True, ""
        try:
            self.output.wait_for(self.expected, "the word count's output at the end",
                                 timeout=s.drain_timeout)
        except (AssertionError, FAILED) as e:
            self.streams_exact, self.streams_problem = False, str(e)[:2000]
        self.log(f"word count {'exact' if self.streams_exact else 'NOT exact'}")
        self.check_done.set()
        checker.join(60)
        kp = upstream_admin()
        try:
            self.check_upstream(kp, final=True)
        except Exception as e:  # noqa: BLE001 - reported; the final offsets stay unknown
            self.log(f"final upstream offsets not read: {type(e).__name__}: {e}")
        finally:
            close_quietly(kp)
        try:
            self.offsets_log = self.read_offsets_log()
        except KafkaException as e:
            self.log(f"__consumer_offsets not read: {e}")

    def read_offsets_log(self):
        """The groups' commit records in upstream's __consumer_offsets, read back from its
        partitions (Kafka places a group's offsets by Utils.abs(group.hashCode()) % partitions):
        {(group, partition): [(record timestamp, offset or None for a tombstone)]}, in log
        order. What upstream wrote, in the order it wrote it, whatever OffsetFetch answered."""
        md = self.meta.list_topics("__consumer_offsets", timeout=30)
        n = len(md.topics["__consumer_offsets"].partitions)
        parts = sorted({java_partition(g, n) for g in self.groups})
        c = Consumer({"bootstrap.servers": UPSTREAM, "group.id": "unused",
                      "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                      "enable.partition.eof": True})
        c.assign([TopicPartition("__consumer_offsets", p, 0) for p in parts])
        topics = {spec.topic: g for g, spec in self.groups.items()}
        out = collections.defaultdict(list)
        at_end = set()  # partitions read to their end (the last offset may be a marker)
        deadline = time.monotonic() + 120
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                key = offset_commit_key(m.key())
                if key is None or key[0] not in self.groups or topics.get(key[1]) != key[0]:
                    continue
                value = m.value()
                offset = None if value is None else struct.unpack_from(">q", value, 2)[0]
                out[(key[0], key[2])].append((m.timestamp()[1] / 1000.0, offset))
        c.close()
        return dict(out)

    def wait_upstream_whole(self):
        deadline = time.monotonic() + WHOLE_TIMEOUT
        while not self.upstream_whole():
            if time.monotonic() > deadline:
                self.log(f"upstream not whole {WHOLE_TIMEOUT:.0f}s after the run")
                return False
            time.sleep(POLL)  # poll interval, not a wait for an outcome
        return True

    def restore_upstream(self):
        """Once upstream is whole, elects the preferred leaders again: the cluster as it was
        (the gateway tier's next tests use it). After the checks: leaders moving back make
        the clients look again."""
        if self.meta is None or not self.wait_upstream_whole():
            return
        try:  # (confluent-kafka 2.16 refuses request_timeout here: SystemError)
            self.meta.elect_leaders(ElectionType.PREFERRED, None).result(timeout=90)
        except KafkaException as e:  # ELECTION_NOT_NEEDED where the preferred leader leads
            if "ELECTION_NOT_NEEDED" not in str(e):
                self.log(f"preferred leader election: {e}")

    def checker_after_end(self):
        """The checker's rounds go on while the groups drain (the word count's progress)."""
        kp = None
        while not self.check_done.is_set():
            try:
                kp = kp or upstream_admin()
                self.check_upstream(kp)
            except Exception:  # noqa: BLE001 - the next round
                close_quietly(kp)
                kp = None
            self.replace_crashed()
            self.check_done.wait(self.settings.check_interval)
        close_quietly(kp)

    def caught_up(self, _log):
        """{group: True} once every group committed every partition to the end offsets."""
        best = self.events.acknowledged()
        late = [(g, p) for g, spec in self.groups.items() for p in range(self.settings.partitions)
                if best.get((g, p), 0) < self.ends.get((spec.topic, p), 0)]
        return None if late else {g: True for g in self.groups}

    def input_words(self):
        """The counts the word count must end at: the words of every sentence in its input
        topic, read from upstream."""
        c = Consumer({"bootstrap.servers": UPSTREAM, "group.id": "unused",
                      "enable.auto.commit": False, "enable.partition.eof": True})
        c.assign([TopicPartition(self.streams_input, p, 0) for p in range(STREAMS_PARTITIONS)])
        counts, pos = collections.Counter(), {p: 0 for p in range(STREAMS_PARTITIONS)}
        at_end = set()
        deadline = time.monotonic() + 120
        while len(at_end) < STREAMS_PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                counts.update(words_of(m.value().decode()))
                pos[m.partition()] = m.offset() + 1
        c.close()
        self.input_ends = pos
        return dict(counts)

    def stop_all(self):
        """Stops every member, instance and node (those still running)."""
        self.done.set()
        self.log("stopping everything")
        for m in self.members.values():
            if isinstance(m, FranzMember):
                m.close()
            elif isinstance(m, CommittingConfluent):
                m.close()
        for m in self.members.values():
            if isinstance(m, FranzMember):
                m.stop()
            elif isinstance(m, CommittingConfluent):
                m.join(30)
        if self.jvm is not None:
            self.jvm.stop()
        for inst in self.streams_live.values():
            try:
                inst.stop()
            except (AssertionError, FAILED) as e:
                self.log(f"word count instance {inst.name} did not stop cleanly: {e}"[:800])
        for inst in self.streams:
            inst.kill()
        if self.output is not None:
            self.output.stop()
        if self.producer is not None and self.producer.producer is not None:
            self.producer.stop(10)
        if self.cluster is not None:
            for i, node in enumerate(self.cluster.nodes):
                if node.proc is None:
                    continue
                try:
                    node.stop()
                except FAILED as e:
                    self.koord_failures.append(f"node {i} on SIGTERM: {str(e)[:1500]}")
                    self.log(f"koord node {i} did not stop cleanly: {str(e)[:300]}")
        self.log("stopped")
        conftest.START_TIMEOUT = getattr(self, "saved_start_timeout", conftest.START_TIMEOUT)
        if getattr(self, "saved_java_options", None) is not None:
            os.environ["JAVA_TOOL_OPTIONS"] = self.saved_java_options
        else:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)

    # results

    def stalls(self):
        """[(kind, group, partition, start, end, seconds, fault-free seconds)], every stretch in
        which a record was there to read and the group's committed offset did not move."""
        spans = merged([(f.start, f.end or time.time()) for f in self.faults])
        out = []
        horizon = self.t_final or time.time()

        def walk(kind, gid, topic, p, series):
            series = sorted(series)
            start = self.t_ready
            # where the group stood when the workload was ready
            before = [o for t, o in series if t <= start]
            points = [(start, before[-1] if before else 0)] + [x for x in series if x[0] > start]
            for (t1, o1), (t2, _o2) in zip(points, points[1:] + [(None, None)]):
                at = self.producer.ack_time(topic, p, o1)
                if at is None:
                    continue
                a = max(t1, at)
                b = t2 if t2 is not None else horizon
                if b - a > 0:
                    out.append((kind, gid, p, a, b, b - a, (b - a) - covered(a, b, spans)))

        for gid, spec in self.groups.items():
            for p in range(self.settings.partitions):
                walk(spec.kind, gid, spec.topic, p, self.events.advances.get((gid, p), []))
        for p in range(STREAMS_PARTITIONS):
            walk("streams", self.app_id, self.streams_input, p, self.streams_advances.get(p, []))
        return out

    def overlaps(self):
        """{group: [problems]}: partitions owned twice in one generation (classic groups) or
        by two members at once (their own callbacks, in the order they happened)."""
        log = self.events.snapshot()
        out = {}
        for gid, spec in self.groups.items():
            glog = [e for e in log if self.events.group_of.get(e["member"]) == gid]
            if spec.kind == "franz":  # a process each: their clock orders them
                glog.sort(key=lambda e: e["t"])
            found = [("at once", x) for x in owners_at_once(glog)]
            if spec.kind != "java-consumer":  # KIP-848 epochs are per member
                gens = [dict(e, generation=e.get("generation") or e.get("group_generation"))
                        for e in glog]
                found += [("same generation", x) for x in generation_overlaps(gens)]
            if found:
                out[gid] = [(what, x, glog[x[0]] if what == "at once" else None)
                            for what, x in found]
        return out

    def commits_lost(self):
        """Acknowledged commits upstream went behind, from what upstream wrote: a commit record
        of __consumer_offsets (or a tombstone) below an offset a client had been told was
        committed before the record was written; and the final offsets upstream answered
        below the highest acknowledged. Returns (lost, reads): `reads` are the checker's reads
        that were behind, each marked "overwritten" when a record explains it, else "stale"
        (upstream's OffsetFetch answered an older offset for a while, as Kafka's coordinator
        does right after a leader change until the new leader's high watermark catches up).
        A record below is no loss when a client itself had that lower offset committed (its
        acknowledgement came after the record): those are `self.client_regressions`."""
        lost = []
        self.client_regressions = []
        drops = collections.defaultdict(list)  # (group, partition) -> [(time, offset)]
        lower_acks = collections.defaultdict(list)  # (group, partition) -> [(ack time, offset)]
        for key, o, _prev, _member, t in self.events.behind:
            lower_acks[key].append((t, o))
        for (g, p), records in self.offsets_log.items():
            acks = self.events.advances.get((g, p), [])
            for ts, off in records:
                value = -1 if off is None else off
                before = [o for t, o in acks if t + 0.05 < ts]
                if not before or value >= max(before):
                    continue
                drops[(g, p)].append((ts, value))
                x = {"group": g, "kind": self.groups[g].kind, "partition": p,
                     "record_offset": off, "acknowledged_before": max(before),
                     "record_at": round(ts - (self.t0 or ts), 2)}
                if any(o == value and ts - 0.05 <= t <= ts + 30 for t, o in lower_acks[(g, p)]):
                    self.client_regressions.append(x)
                else:
                    lost.append(dict(x, what="a record below an acknowledged commit"))
        best = self.events.acknowledged()
        for (g, p), o in best.items():
            final = self.final_offsets.get(g, {}).get(p)
            last = self.events.last.get((g, p))
            if final is None or final >= o:
                continue
            x = {"group": g, "kind": self.groups[g].kind, "partition": p, "upstream": final,
                 "acknowledged": o}
            if last is not None and last[0] == final:  # the client's own last commit
                self.client_regressions.append(x)
            else:
                lost.append(dict(x, what="final upstream offset below the acknowledged"))
        reads = []
        for (g, p, o), x in self.behind_reads.items():
            cause = any(t <= x["read_at"] + 0.05 and v < o for t, v in drops.get((g, p), []))
            reads.append(dict(x, cause="overwritten" if cause else "stale",
                              read_at=round(x["read_at"] - (self.t0 or 0), 2)))
        return lost, reads

    def result(self):
        s = self.settings
        lost, behind_reads = self.commits_lost()
        stalls = self.stalls()
        spans = merged([(f.start, f.end or time.time()) for f in self.faults])
        stuck = [x for x in stalls if x[6] >= s.stall_bound]
        late = {g for g, spec in self.groups.items() for p in range(s.partitions)
                if self.events.acknowledged().get((g, p), 0) < self.ends.get((spec.topic, p), 0)}
        stuck_groups = sorted({x[1] for x in stuck if x[0] != "streams"} | late)
        for f in self.faults:
            window = (f.start, (f.end or time.time()) + s.stall_bound)
            hit = [x for x in stuck if x[3] < window[1] and x[4] > window[0]]
            back = f.recovered_s is not None or f.kind == "cpu-starve"
            f.survived = bool(f.ok) and back and not hit
        longest = {}
        for x in stalls:
            if x[5] > longest.get(x[0], (0,))[0]:
                longest[x[0]] = (x[5], x)
        overlaps = self.overlaps()
        log = self.events.snapshot()
        lost_events = collections.Counter(self.kind_of.get(e["member"]) for e in log
                                          if e["event"] == "lost")
        commit_trouble = collections.Counter(
            (self.kind_of.get(e["member"]), e["event"], normalize(str(e.get("error", ""))))
            for e in log if e["event"] in ("commit_failed", "commit_retried"))
        client_errors = collections.Counter(
            (self.kind_of.get(e["member"]), normalize(str(e.get("error", ""))))
            for e in log if e["event"] == "client_error")
        return {
            "settings": {k: (str(v) if isinstance(v, Path) else v)
                         for k, v in s.__dict__.items()},
            "faults": self.faults,
            "longest_stall": {k: v[0] for k, v in longest.items()},
            "longest_stall_at": {k: v[1] for k, v in longest.items()},
            "stuck": stuck,
            "stuck_groups": stuck_groups,
            "late_groups": sorted(late),
            "commits_lost": lost,
            "behind_reads": behind_reads,
            "commits_behind": self.events.behind,
            "client_regressions": self.client_regressions,
            "overlaps": overlaps,
            "streams_exact": self.streams_exact,
            "streams_problem": self.streams_problem,
            "crashes": self.crashes,
            "respawned": dict(self.respawned),
            "koord_failures": self.koord_failures,
            "lost_events": dict(lost_events),
            "commit_trouble": commit_trouble,
            "client_errors": client_errors,
            "koord_errors": self.errors_seen,
            "producer_errors": self.producer.errors,
            "producer_longest_gap": max((g for g, _ in self.producer.gaps), default=0.0),
            "producer_stalled": max(((g - covered(a, a + g, spans), a) for g, a in
                                     self.producer.gaps), default=(0.0, None)),
            "producer_failure": self.producer.failure,
            "unknown_offsets": self.producer.unknown_offsets,
            "records": {k: sum(self.ends.get((t, p), 0) for p in range(s.partitions))
                        for k, t in self.topics.items()},
            "sentences": sum(self.input_ends.values()),
        }


# --- the report --------------------------------------------------------------------------------

def checks(r):
    """[(check, passed, detail)] of a result."""
    return [
        ("commits lost", not r["commits_lost"], len(r["commits_lost"])),
        ("groups stuck", not r["stuck_groups"], len(r["stuck_groups"])),
        ("partitions owned twice", not r["overlaps"],
         sum(len(v) for v in r["overlaps"].values())),
        ("Streams output exact", r["streams_exact"], "yes" if r["streams_exact"] else "NO"),
        ("members crashed", not r["crashes"], len(r["crashes"])),
        ("koord process failures", not r["koord_failures"], len(r["koord_failures"])),
        # Without records coming, no stall could be seen: the producer must keep going.
        ("producer kept producing", not r["producer_failure"]
         and r["producer_stalled"][0] < r["settings"]["stall_bound"],
         r["producer_failure"] or f"{r['producer_stalled'][0]:.1f}s"),
    ]


def report(run, r):
    t0 = run.t0
    lines = ["", "=" * 100, f"chaos: {r['settings']['duration']:.0f}s, seed "
             f"{r['settings']['seed']}, {len(run.groups)} groups, "
             f"{r['settings']['streams_instances']} word count instance(s); records per topic "
             f"{r['records']}, sentences {r['sentences']}", "",
             f"{'fault':<46} {'injected':>8} {'survived':>8}"]
    for kind, label in FAULTS.items():
        fs = [f for f in r["faults"] if f.kind == kind]
        lines.append(f"{label:<46} {len(fs):>8} {sum(1 for f in fs if f.survived):>8}")
    fs = r["faults"]
    lines.append(f"{'all':<46} {len(fs):>8} {sum(1 for f in fs if f.survived):>8}")
    lines += ["", f"{'client kind':<16} {'groups':>6} {'longest stall s':>16} "
              f"{'lost-partition events':>22} {'crashes':>8}"]
    crashes = collections.Counter(k for k, _, _ in r["crashes"])
    for kind in (*KINDS, "streams"):
        groups = (sum(1 for g in run.groups.values() if g.kind == kind)
                  if kind != "streams" else 1)
        stall = r["longest_stall"].get(kind)
        lines.append(f"{kind:<16} {groups:>6} {stall if stall is None else round(stall, 1):>16} "
                     f"{r['lost_events'].get(kind, 0):>22} {crashes.get(kind, 0):>8}")
    lines.append(f"{'producer':<16} {'':>6} {r['producer_longest_gap']:>16.1f}   "
                 f"(longest gap between acknowledgements; {len(r['producer_errors'])} "
                 f"delivery errors, {r['unknown_offsets']} acknowledged without an offset)")
    lines.append("")
    for name, ok, detail in checks(r):
        lines.append(f"{name:<28} {str(detail):>6}   {'ok' if ok else 'FAILED'}")
    lines += ["", "faults:"] + [f"  {f.line(t0)}{'' if f.survived else '   <- not survived'}"
                                for f in r["faults"]]
    lines += ["", "longest stall of each kind (group, partition, from, to, s, outside faults s):"]
    for kind, x in r["longest_stall_at"].items():
        lines.append(f"  {kind:<14} {x[1]} p{x[2]} {x[3] - t0:7.1f} .. {x[4] - t0:7.1f}  "
                     f"{x[5]:.1f}s ({x[6]:.1f}s outside faults; during "
                     f"{run.active_label(x[3], x[4])})")
    if r["stuck"]:
        lines.append("stuck (a stall of STALL_BOUND seconds outside any fault):")
        lines += [f"  {x[0]} {x[1]} p{x[2]} {x[3] - t0:.1f} .. {x[4] - t0:.1f} ({x[5]:.1f}s, "
                  f"{x[6]:.1f}s outside faults)" for x in r["stuck"][:20]]
    if r["late_groups"]:
        lines.append(f"not caught up at the end: {r['late_groups']}")
        acked = run.events.acknowledged()
        for g in r["late_groups"]:
            parts = range(run.settings.partitions)
            lines.append(f"  {g}: committed {[acked.get((g, p)) for p in parts]}, ends "
                         f"{[run.ends.get((run.groups[g].topic, p)) for p in parts]}, "
                         f"upstream {run.final_offsets.get(g)}")
    if r["commits_lost"]:
        lines.append("commits lost (upstream behind an acknowledged commit):")
        lines += [f"  {json.dumps(x)}" for x in r["commits_lost"][:20]]
    if r["behind_reads"]:
        lines.append(f"upstream OffsetFetch answers behind an acknowledged commit: "
                     f"{len(r['behind_reads'])} ("
                     f"{sum(1 for x in r['behind_reads'] if x['cause'] == 'stale')} stale: "
                     "no record of __consumer_offsets went behind; Kafka answered an older "
                     "offset for a while)")
        lines += [f"  {json.dumps(x)}" for x in r["behind_reads"][:10]]
    if r["commits_behind"]:
        lines.append(f"commits a client had acknowledged below an offset acknowledged before "
                     f"(the client's own doing): {len(r['commits_behind'])}; first: "
                     f"{r['commits_behind'][:3]}")
    if r["client_regressions"]:
        lines.append("upstream went behind by those clients' own commits (no loss):")
        lines += [f"  {json.dumps(x)}" for x in r["client_regressions"][:10]]
    for gid, found in r["overlaps"].items():
        lines.append(f"ownership overlaps in {gid}:")
        lines += [f"  {what}: {x} {json.dumps(e)[:300] if e else ''}" for what, x, e in found[:8]]
    if not r["streams_exact"]:
        lines.append(f"word count: {r['streams_problem']}")
    if r["crashes"]:
        lines.append("crashes:")
        lines += [f"  {k} {m}: {json.dumps(e)[:700]}" for k, m, e in r["crashes"][:20]]
    if r["koord_failures"]:
        lines.append("koord process failures:")
        lines += [f"  {x[:1500]}" for x in r["koord_failures"]]
    lines += ["", "koord's error answers (koord_request_errors_total; by the faults active "
              "within 10 s):"]
    for (api, err), by in sorted(r["koord_errors"].items(), key=lambda x: -sum(x[1].values())):
        lines.append(f"  {api:<16} {err:<34} {sum(by.values()):>6}  {dict(by)}")
    if not r["koord_errors"]:
        lines.append(f"  none: /metrics read {run.scrapes['read']} times, "
                     f"{run.scrapes['with requests_total']} of them with a koord_requests_total "
                     "series")
    lines += ["", "coordinator errors the clients were answered (their own logs; by the faults "
              "active within 10 s):"]
    seen = client_coordinator_errors(run)
    totals = collections.Counter()
    for (kind, err, _label), n in seen.items():
        totals[(kind, err)] += n
    for (kind, err), n in sorted(totals.items()):
        by = {label: c for (k, e, label), c in seen.items() if (k, e) == (kind, err)}
        lines.append(f"  {kind:<14} {err:<30} {n:>6}  {by}")
    if not totals:
        lines.append("  none")
    if r["commit_trouble"]:
        lines.append("commits failed / retried by the clients:")
        lines += [f"  {n:>6}x {k} {e}: {err}" for (k, e, err), n in
                  r["commit_trouble"].most_common(15)]
    if r["client_errors"]:
        lines.append("client errors reported by the members:")
        lines += [f"  {n:>6}x {k}: {err}" for (k, err), n in r["client_errors"].most_common(10)]
    if r["producer_errors"]:
        lines.append(f"producer delivery errors: {r['producer_errors'][:5]}")
    lines += ["", "koord's own account (its log; by the faults active within 10 s; "
              "answered=16 is NOT_COORDINATOR, 14 COORDINATOR_LOAD_IN_PROGRESS):"]
    events = koord_events(run)
    totals = collections.Counter()
    for (what, code, _label), n in events.items():
        totals[(what, code)] += n
    for (what, code), n in sorted(totals.items()):
        by = {label: c for (w, k, label), c in events.items() if (w, k) == (what, code)}
        lines.append(f"  {what:<34} {'answered=' + code if code else '':<12} {n:>5}  {by}")
    if not totals:
        lines.append("  none")
    lines += ["", "koord WARN/ERROR lines (digits as N), most frequent:"]
    lines += koord_warnings(run)
    lines += ["", "Java members' WARN/ERROR lines, most frequent:"]
    lines += frequent_lines(run.workdir.glob("*.stderr"), (" WARN ", " ERROR "))
    lines += ["", "franz-go members' error lines, most frequent:"]
    lines += frequent_lines(run.workdir.glob("*.franz.log"), ("err",))
    return "\n".join(lines)


def line_time(text):
    """Epoch seconds of a client log line's time (slf4j-simple's, or the librdkafka log's)."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%d_%H:%M:%S.%f").timestamp()
    except ValueError:
        return None


def client_coordinator_errors(run):
    """{(client kind, error, faults active then): log lines}: the coordinator errors the
    clients' own logs show they were answered (Java: failed commits, at WARN; librdkafka:
    its group debug log; franz-go: its info log, which has no times)."""
    files = [(p, "java") for p in run.workdir.glob("*.stderr")]
    files += [(p, "confluent") for p in run.workdir.glob("*.rdkafka.log")]
    files += [(p, "franz") for p in run.workdir.glob("*.franz.log")]
    out = collections.Counter()
    for path, client in files:
        patterns = [(err, re.compile(p)) for c, err, p in COORDINATOR_ERRORS if c == client]
        try:
            text = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in text:
            for err, pattern in patterns:
                m = pattern.search(line)
                if not m:
                    continue
                kind = client
                if client == "java":
                    k = re.search(r"clientId=(java-classic|java-consumer)", line)
                    kind = k.group(1) if k else "streams"
                t = line_time(m.group(1))
                out[(kind, err, run.active_label(t, t) if t else "(no time)")] += 1
                break
    return out


# koord log lines that tell how faults reached the groups: (what, pattern).
KOORD_EVENTS = [
    ("node lost its lease", "this node's lease ran out"),
    ("node dropped every shard", "no longer a member of the cluster's group: dropping every shard"),
    ("shards given up with writes held", "writes of shards given up still held upstream"),
    ("group write failed upstream", "upstream refused a group write"),
    ("__koord_groups write failed", "group records not written upstream"),
    ("answered after retrying upstream", "could not serve the group's request in time"),
]


def koord_events(run):
    """{(what, answered code or "", faults active then): count} from the nodes' logs."""
    out = collections.Counter()
    for node in run.cluster.nodes:
        try:
            text = node.log_path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in text:
            for what, needle in KOORD_EVENTS:
                if needle not in line:
                    continue
                try:
                    t = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
                    label = run.active_label(t.timestamp(), t.timestamp())
                except (ValueError, IndexError):
                    label = "(no time)"
                answered = re.search(r"answered=(\d+)", line)
                out[(what, answered.group(1) if answered else "", label)] += 1
    return out


def koord_warnings(run):
    counts = collections.Counter()
    for node in run.cluster.nodes:
        try:
            text = node.log_path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        counts.update(normalize(line) for line in text
                      if " WARN " in line or " ERROR " in line or "panicked" in line)
    return [f"  {n:>6}x {line}" for line, n in counts.most_common(20)] or ["  none"]


def frequent_lines(paths, needles, top=12):
    counts = collections.Counter()
    for path in paths:
        try:
            text = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        counts.update(normalize(line) for line in text if any(n in line for n in needles))
    return [f"  {n:>6}x {line}" for line, n in counts.most_common(top)] or ["  none"]


def run_chaos(settings):
    """The whole run; returns (result, report text). Leaves nothing running."""
    r = Run(settings)
    try:
        r.setup()
        checker = threading.Thread(target=r.checker, daemon=True)
        checker.start()
        r.chaos()
        r.finish()
        checker.join(60)
    finally:
        try:
            r.heal()
        finally:
            r.stop_all()  # what koord does on SIGTERM is part of the result
            r.restore_upstream()
    (settings.workdir / "offsets-log.json").write_text(json.dumps(
        {f"{g} {p}": v for (g, p), v in r.offsets_log.items()}))
    with open(settings.workdir / "events.jsonl", "w") as f:
        for e in r.events.snapshot() + r.streams_events.snapshot():
            f.write(json.dumps(e, default=str) + "\n")
    result = r.result()
    text = report(r, result)
    (settings.workdir / "report.txt").write_text(text + "\n")
    (settings.workdir / "result.json").write_text(json.dumps(
        {"checks": [(n, ok, str(d)) for n, ok, d in checks(result)],
         "faults": [f.__dict__ for f in result["faults"]],
         "longest_stall": result["longest_stall"],
         "commits_lost": result["commits_lost"],
         "stuck_groups": result["stuck_groups"],
         "streams_exact": result["streams_exact"]}, indent=1, default=str))
    return result, text


def main():
    workdir = Path(os.environ.get("OUT", ROOT / ".build" / "chaos")) / time.strftime(
        "run-%Y%m%d-%H%M%S")
    settings = Settings.from_env(workdir)
    if os.environ.get("KOORD_BIN"):
        # A copy: the binary may be replaced by a newer build during the run.
        workdir.mkdir(parents=True, exist_ok=True)
        copy = workdir / "koord"
        shutil.copy2(os.environ["KOORD_BIN"], copy)
        conftest.KOORD_BIN = copy
    result, text = run_chaos(settings)
    print(text, flush=True)
    print(f"\nlogs and results in {workdir}")
    sys.exit(0 if all(ok for _, ok, _ in checks(result)) else 1)


if __name__ == "__main__":
    main()
