"""The learner effect, measured (issue 19): see bench/streams-learner.sh for what and how.

One function per phase; every wait is on an event of the instances' JSON lines (deadlines only
bound a failure). Writes everything to OUT (one directory per system) and prints the table.
"""

import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / ".build" / "streams-learner"))
JAVA_DIR = ROOT / "proto-tests" / "java"
KOORD = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "koord"

STATE_MB = float(os.environ.get("STATE_MB", "200"))
VALUE_BYTES = int(os.environ.get("VALUE_BYTES", "1000"))
PARTITIONS = int(os.environ.get("PARTITIONS", "6"))
RATE = int(os.environ.get("RATE", "600"))          # records/s over all partitions, steady phase
WARM_S = float(os.environ.get("WARM_S", "10"))      # steady processing before the 3rd starts
CAP_S = float(os.environ.get("CAP_S", "120"))       # longest wait for balance after it starts
SETTLE_S = float(os.environ.get("SETTLE_S", "10"))  # steady processing once balanced
CATCHUP_S = float(os.environ.get("CATCHUP_S", "900"))

# name: (server, server settings, group.protocol, extra Streams properties)
SYSTEMS = {
    "koord-learner": ("koord", [], "streams", []),
    "koord-sticky": ("koord", ["group.streams.assignor=sticky"], "streams", []),
    "kafka-streams": ("kafka", [], "streams", []),
    "kafka-classic": ("kafka", [], "classic", []),
    # not in the default run: classic with the shortest probing interval Streams accepts
    "kafka-classic-probe60s": ("kafka", [], "classic", ["probing.rebalance.interval.ms=60000"]),
}
DEFAULT_SYSTEMS = ["koord-learner", "koord-sticky", "kafka-streams", "kafka-classic"]


def log(msg):
    print(f"streams-learner: {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, kind, settings, d):
        self.kind, self.dir = kind, d
        self.proc = None
        if kind == "koord":
            port = free_port()
            data = d / "koord-data"
            self.log_path = d / "koord.log"
            args = [str(KOORD), "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)]
            for s in settings:
                args += ["--set", s]
            self.proc = subprocess.Popen(args, stdout=open(self.log_path, "w"),
                                         stderr=subprocess.STDOUT)
            deadline = time.time() + 60
            while "groups loaded" not in self.log_path.read_text(errors="replace"):
                if self.proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"koord did not start: {self.log_path}")
                time.sleep(0.05)
            self.bootstrap = f"127.0.0.1:{port}"
        else:
            env = dict(os.environ, KAFKA_DIR=str(ROOT / ".build" / "kafka-streams-learner"))
            self.env = env
            self.bootstrap = subprocess.run([str(ROOT / "scripts" / "kafka.sh"), "start"],
                                            env=env, check=True, capture_output=True,
                                            text=True).stdout.strip()
            self.log_path = None

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            subprocess.run([str(ROOT / "scripts" / "kafka.sh"), "stop"], env=self.env,
                           capture_output=True)


class Instance:
    """One StreamsLearnerBench JVM; its JSON lines are parsed by a reader thread."""

    def __init__(self, name, d, bootstrap, app_id, topic, protocol, extra, events,
                 deferred=False):
        self.name = name
        cp = f"{JAVA_DIR}/target/classes:{(JAVA_DIR / 'target' / 'classpath.txt').read_text().strip()}"
        self.out_path = d / f"{name}.jsonl"
        self.err = open(d / f"{name}.log", "w")
        self.launched_ms = int(time.time() * 1000)
        self.proc = subprocess.Popen(
            ["java", "-XX:+UseSerialGC", "-Xmx512m",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
             "-cp", cp, "koord.tests.StreamsLearnerBench", bootstrap, app_id, topic,
             str(d / f"{name}-state"), f"group.protocol={protocol}", *extra],
            stdout=subprocess.PIPE, stderr=self.err, text=True,
            stdin=subprocess.PIPE if deferred else subprocess.DEVNULL,
            env=dict(os.environ, START_ON_STDIN="1") if deferred else None)
        self.events = events
        self.out = open(self.out_path, "w")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.out.write(line)
            try:
                e = json.loads(line)
            except ValueError:
                continue
            e["member"] = self.name
            self.events.add(e)
        self.out.flush()

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.thread.join(5)
        self.out.close()


class Events:
    def __init__(self):
        self.lock = threading.Lock()
        self.progress = []   # (first, last, member, task, offset, latency)
        self.marks = {}      # (member, "ready"/"start") -> ts_ms
        self.tasks = {}      # member -> latest active set
        self.errors = []

    def add(self, e):
        with self.lock:
            if e["event"] == "progress":
                self.progress.append((e["first"], e["last"], e["member"], e["task"], e["offset"],
                                      e["latency"]))
            elif e["event"] in ("ready", "start"):
                self.marks[(e["member"], e["event"])] = e["ts_ms"]
            elif e["event"] == "tasks":
                self.tasks[e["member"]] = frozenset(e["active"])
            elif e["event"] == "error":
                self.errors.append(e)
                log(f"ERROR from {e['member']}: {e}")

    def snapshot(self):
        with self.lock:
            return list(self.progress), dict(self.tasks)


def wait_for(what, cond, timeout, instances):
    deadline = time.time() + timeout
    while True:
        r = cond()
        if r:
            return r
        for i in instances:
            if i.proc.poll() is not None:
                raise SystemExit(f"instance {i.name} exited while waiting for {what}")
        if time.time() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def all_tasks():
    return frozenset(f"0_{p}" for p in range(PARTITIONS))


def current_owners(progress, since_ms):
    """task -> the member that processed it last, among samples after since_ms."""
    owners = {}
    for first, last, member, task, _, _ in progress:
        if last >= since_ms:
            owners[task] = member
    return owners


def balanced(owners, members):
    per = {m: 0 for m in members}
    for t, m in owners.items():
        per[m] = per.get(m, 0) + 1
    share = PARTITIONS / len(members)
    return (set(owners) == all_tasks() and
            all(int(share) <= c <= -(-PARTITIONS // len(members)) for c in per.values()))


class SteadyProducer(threading.Thread):
    """RATE records/s, round robin over the partitions, overwriting preloaded keys."""

    def __init__(self, bootstrap, topic, keys_per_partition):
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
        self.topic, self.kpp = topic, keys_per_partition
        self.stop_flag = threading.Event()
        self.sent = 0

    def run(self):
        value = b"s" * VALUE_BYTES
        start = time.time()
        i = 0
        while not self.stop_flag.is_set():
            due = int((time.time() - start) * RATE)
            while i < due:
                part = i % PARTITIONS
                key = random.randrange(self.kpp) * PARTITIONS + part
                self.p.produce(self.topic, value=value, key=f"k{key:09d}".encode(),
                               partition=part)
                i += 1
            self.p.poll(0)
            time.sleep(0.005)
        self.p.flush(10)
        self.sent = i


def preload(bootstrap, topic):
    total = int(STATE_MB * 1_000_000 / VALUE_BYTES)
    kpp = max(1, total // PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "acks": 1, "queue.buffering.max.kbytes": 262144})
    value = b"v" * VALUE_BYTES
    t0 = time.time()
    for k in range(kpp * PARTITIONS):
        while True:
            try:
                p.produce(topic, value=value, key=f"k{k:09d}".encode(), partition=k % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        if k % 10000 == 0:
            p.poll(0)
    p.flush(300)
    log(f"preloaded {kpp * PARTITIONS} records of {VALUE_BYTES} B "
        f"({kpp * PARTITIONS * VALUE_BYTES / 1e6:.0f} MB) in {time.time() - t0:.1f} s")
    return kpp


def end_offsets(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "streams-learner-probe"})
    ends = {}
    for part in range(PARTITIONS):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        ends[f"0_{part}"] = hi
    c.close()
    return ends


def run_system(name):
    kind, settings, protocol, extra = SYSTEMS[name]
    d = OUT / name
    subprocess.run(["rm", "-rf", str(d)], check=True)
    d.mkdir(parents=True)
    log(f"{name}: starting {kind} {' '.join(settings)}")
    server = Server(kind, settings, d)
    instances = []
    producer = None
    events = Events()
    try:
        bootstrap = server.bootstrap
        app_id = f"learner-bench-{name}"
        topic = f"{app_id}-input"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            f.result(timeout=30)

        def start(member, deferred=False):
            instances.append(Instance(member, d, bootstrap, app_id, topic, protocol, extra,
                                      events, deferred))

        start("s1")
        start("s2")
        wait_for("s1 and s2 each with active tasks",
                 lambda: (lambda t: t.get("s1") and t.get("s2")
                          and (t["s1"] | t["s2"]) == all_tasks())(events.snapshot()[1]),
                 180, instances)
        log(f"{name}: s1 and s2 running; preloading {STATE_MB:g} MB")
        kpp = preload(bootstrap, topic)
        ends = end_offsets(bootstrap, topic)
        producer = SteadyProducer(bootstrap, topic, kpp)
        producer.start()
        t_caught = time.time()
        # s3's JVM starts now and waits, warm, for its KafkaStreams.start() at t3.
        start("s3", deferred=True)

        def caught_up():
            progress, _ = events.snapshot()
            seen = {}
            for _, _, _, task, off, _ in progress:
                seen[task] = max(seen.get(task, -1), off)
            return all(seen.get(t, -1) >= ends[t] - 1 for t in all_tasks())

        wait_for("s1 and s2 through the preload", caught_up, CATCHUP_S, instances)
        log(f"{name}: preload processed {time.time() - t_caught:.1f} s after it was produced")
        wait_for("s1 and s2 balanced", lambda: balanced(
            current_owners(events.snapshot()[0], int(time.time() * 1000) - 1000), ["s1", "s2"]),
            120, instances)
        def steady():
            now = int(time.time() * 1000)
            recent = [(task, lat) for first, _, _, task, _, lat in events.snapshot()[0]
                      if first >= now - 1000]
            return ({t for t, _ in recent} == all_tasks()
                    and max(lat for _, lat in recent) < 2000)

        # the steady records produced while the preload was processed are behind: wait until
        # every task is processed within 2 s of production, so WARM_S is a quiet baseline
        wait_for("s1 and s2 keeping up with the steady rate", steady, 300, instances)
        wait_for("s3's JVM ready", lambda: ("s3", "ready") in events.marks, 120, instances)
        time.sleep(WARM_S)
        instances[-1].go()
        t3 = wait_for("s3 started", lambda: events.marks.get(("s3", "start")), 30, instances)
        log(f"{name}: s3 started (KafkaStreams.start())")
        t_bal = None
        deadline = time.time() + CAP_S
        while time.time() < deadline:
            now = int(time.time() * 1000)
            if balanced(current_owners(events.snapshot()[0], now - 1000), ["s1", "s2", "s3"]):
                t_bal = now
                break
            for i in instances:
                if i.proc.poll() is not None:
                    raise SystemExit(f"instance {i.name} exited")
            time.sleep(0.2)
        log(f"{name}: " + (f"balanced {(t_bal - t3) / 1000:.1f} s after s3 started"
                           if t_bal else f"not balanced within {CAP_S:g} s"))
        time.sleep(SETTLE_S)
        t_end = int(time.time() * 1000)
        producer.stop_flag.set()
        producer.join(30)
    finally:
        for i in instances:
            i.kill()
        if producer is not None:
            producer.stop_flag.set()
        server.stop()
    progress, _ = events.snapshot()
    result = analyse(name, progress, t3, t_end, t_bal, events.errors)
    if server.log_path is not None:
        text = server.log_path.read_text(errors="replace")
        result["koord_log"] = [line for line in text.splitlines()
                               if "warm-up" in line or "learner" in line.lower()][:200]
    (d / "result.json").write_text(json.dumps(result, indent=1))
    return result


def analyse(name, progress, t3, t_end, t_bal, errors):
    """Per task, the longest time in [t3, t_end] with no record of it processed anywhere;
    the time until balanced: when every task's final owner started processing it (from the
    samples, so that it is the same measure for every system)."""
    by_task = {}
    lat = {}
    lat_base = {}
    for first, last, member, task, _, latency in progress:
        by_task.setdefault(task, []).append((first, last, member))
        if t3 <= first <= t_end:
            lat[task] = max(lat.get(task, 0), latency)
        elif t3 - WARM_S * 1000 <= first < t3:
            lat_base[task] = max(lat_base.get(task, 0), latency)
    gaps = {}
    base = {}
    for task in sorted(all_tasks()):
        samples = sorted(by_task.get(task, []))
        prev_last = None
        worst = 0
        worst_base = 0
        for first, last, _ in samples:
            if prev_last is not None:
                if first >= t3 and first <= t_end:
                    worst = max(worst, first - max(prev_last, t3))
                elif first < t3 and first >= t3 - WARM_S * 1000:
                    worst_base = max(worst_base, first - prev_last)
            prev_last = last if prev_last is None else max(prev_last, last)
        if prev_last is not None:
            worst = max(worst, t_end - max(prev_last, t3))
        gaps[task] = worst
        base[task] = worst_base
    # when did each task's final owner start it (its last run of consecutive samples)
    final_start = {}
    final_owner = {}
    for task, samples in by_task.items():
        samples = sorted(s for s in samples if s[0] <= t_end)
        owner = samples[-1][2]
        start = samples[-1][0]
        for first, _, member in reversed(samples):
            if member != owner:
                break
            start = first
        final_start[task], final_owner[task] = start, owner
    owners = {}
    for task, m in final_owner.items():
        owners.setdefault(m, []).append(task)
    moved = sorted(t for t in final_start if final_start[t] > t3)
    bal = (max(final_start[t] for t in moved) - t3) / 1000 if (t_bal and moved) else None
    vals = sorted(gaps.values())
    lats = sorted(lat.get(t, 0) for t in all_tasks())
    return {
        "system": name,
        "gaps_ms": gaps,
        "baseline_gaps_ms": base,
        "gap_p50_ms": pct(vals, 50), "gap_p99_ms": pct(vals, 99), "gap_max_ms": vals[-1],
        "baseline_max_ms": max(base.values()),
        "latency_ms": lat,
        "latency_p50_ms": pct(lats, 50), "latency_max_ms": lats[-1],
        "baseline_latency_max_ms": max(lat_base.values(), default=0),
        "balanced_s": bal,
        "balanced_detected_s": (t_bal - t3) / 1000 if t_bal else None,
        "final_owners": {m: sorted(ts) for m, ts in owners.items()},
        "moved": moved,
        "window_s": (t_end - t3) / 1000,
        "errors": errors,
    }


def pct(sorted_vals, p):
    """Nearest-rank percentile."""
    k = max(0, min(len(sorted_vals) - 1, -(-p * len(sorted_vals) // 100) - 1))
    return sorted_vals[k]


def table(results):
    lines = ["| system | per-task max gap p50 | p99 | max | time until balanced | "
             "tasks on s3 at the end | per-task max latency p50 | max | "
             "baseline (WARM_S s before s3): max gap, max latency |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "failed" in r:
            lines.append(f"| {r['system']} | failed: {r['failed']} |")
            continue
        bal = (f"{r['balanced_s']:.1f} s" if r["balanced_s"] is not None
               else f"not within {CAP_S:g} s")
        lines.append(f"| {r['system']} | {r['gap_p50_ms'] / 1000:.2f} s | "
                     f"{r['gap_p99_ms'] / 1000:.2f} s | {r['gap_max_ms'] / 1000:.2f} s | {bal} | "
                     f"{', '.join(r['final_owners'].get('s3', [])) or '-'} | "
                     f"{r['latency_p50_ms'] / 1000:.2f} s | {r['latency_max_ms'] / 1000:.2f} s | "
                     f"{r['baseline_max_ms'] / 1000:.2f} s, "
                     f"{r['baseline_latency_max_ms'] / 1000:.2f} s |")
    return "\n".join(lines)


def main():
    names = sys.argv[1:] or DEFAULT_SYSTEMS
    for n in names:
        if n not in SYSTEMS:
            raise SystemExit(f"unknown system {n}: one of {', '.join(SYSTEMS)}")
    OUT.mkdir(parents=True, exist_ok=True)
    log(f"state {STATE_MB:g} MB ({VALUE_BYTES} B values), {PARTITIONS} partitions, "
        f"{RATE} records/s steady, systems {' '.join(names)}")
    results = []
    for n in names:
        try:
            r = run_system(n)
        except (SystemExit, Exception) as e:  # one system failing does not hide the others
            log(f"{n}: FAILED: {e}")
            results.append({"system": n, "failed": str(e)})
            continue
        results.append(r)
        print(table([r]).splitlines()[-1], file=sys.stderr, flush=True)
        if r.get("koord_log") is not None:
            planned = sum("warm-up planned" in line for line in r["koord_log"])
            promoted = sum("warm-up promoted" in line for line in r["koord_log"])
            log(f"{n}: koord log: {planned} warm-up planned, {promoted} warm-up promoted")
    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
