"""The learner assignor over the wire (learner-spec.md sections 7, 11 and 13): the seed trace
R1-R4 played by five learner-capable members against koord, then the same scale-up in
ready-gated mode, then a restart of koord in the middle of a learning phase.

Each member is a learner-client process (proto-tests/learner-client, built beside koord by
`cargo build --release --workspace`): one classic consumer-group member that joins with protocol
`learner`, gives up marked tasks at each join (seed mode), "restores" a learning task for
--restore-ms and rejoins when it is ready. It prints one JSON line per completed generation
("event": "sync": assigned, learning, marks, revoked) and one per JoinGroup it sends ("join":
owned, revoked, ...), each stamped with the wall clock. Partitions are integers here (one
topic): T1..T5 of the spec are partitions 0..4 of topic `learn`.

Readiness is ordered by the test, not by timing: members that learn run with --ready-gate, so a
learning task is ready only once its restore time has passed *and* the test wrote `ready` to the
member's stdin. Every wait is on the members' output lines, with generous deadlines.

Members are ordered by member id, and koord's member ids are `<client.id>-<uuid>`, so client
ids S1..S5 order the members as the spec's S1..S5.

koord-only (learner settings, restarts): skipped with KOORD_BOOTSTRAP.
"""

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import groups_util
from conftest import KOORD_BIN

LEARNER_BIN = Path(os.environ.get("LEARNER_CLIENT_BIN", KOORD_BIN.parent / "learner-client"))
TOPIC = "learn"
GROUP = "learners"
TIMEOUT = 60.0  # seconds any one expected state may take
HEARTBEAT_MS = 200
SESSION_TIMEOUT_MS = 10_000
STOP_TIMEOUT = 15.0

# S1..S3 start together inside the initial rebalance delay, so the group's first generation has
# all three (with fewer, the next joins would be planned through learners, not the spec's start).
SETTINGS = (f"topics={TOPIC}:5", "group.initial.rebalance.delay.ms=2000",
            "group.min.session.timeout.ms=1000")

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KOORD_BOOTSTRAP")),
    reason="koord-only: learner settings and restarts need the koord this test starts")

# The spec's section 7, T1..T5 = 0..4: member -> (assigned, revoked, learning, marks).
R0 = {"S1": ([0, 1], [], [], []), "S2": ([2, 3], [], [], []), "S3": ([4], [], [], [])}
R1 = {"S1": ([0, 1], [], [], [0]), "S2": ([2, 3], [], [], []), "S3": ([4], [], [], []),
      "S4": ([], [], [0], [])}
R2 = {"S1": ([0, 1], [], [], [0]), "S2": ([2, 3], [], [], [2]), "S3": ([4], [], [], []),
      "S4": ([], [], [0], []), "S5": ([], [], [2], [])}
R3 = {"S1": ([1], [0], [], []), "S2": ([2, 3], [], [], [2]), "S3": ([4], [], [], []),
      "S4": ([0], [], [], []), "S5": ([], [], [2], [])}
R4 = {"S1": ([1], [], [], []), "S2": ([3], [2], [], []), "S3": ([4], [], [], []),
      "S4": ([0], [], [], []), "S5": ([2], [], [], [])}
BALANCED = {"S1": [1], "S2": [3], "S3": [4], "S4": [0], "S5": [2]}


class Events(groups_util.Events):
    """Every output line of a test's members in arrival order; a member's "fatal" line or exit
    fails a wait at once."""

    FAILING = ("fatal", "died")
    TIMEOUT = TIMEOUT

    def __init__(self, diagnostics=lambda: ""):
        super().__init__()
        self._diagnostics = diagnostics  # appended to failure messages (members' stderr)

    def summary(self, last=60):
        log = self.snapshot()
        lines = [f"last {min(last, len(log))} of {len(log)} member events:"]
        lines += [f"  {json.dumps(e)}" for e in log[-last:]]
        lines.append(self._diagnostics())
        return "\n".join(lines)


class Learners:
    """learner-client processes of one group against one koord."""

    def __init__(self, bootstrap, workdir, mode):
        if not LEARNER_BIN.exists():
            pytest.fail(f"{LEARNER_BIN} not found: `cargo build --release --workspace` "
                        "(scripts/test.sh) or set LEARNER_CLIENT_BIN")
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.mode = mode
        self.events = Events(self.stderr_tails)
        self.procs = {}
        self.threads = []

    def start(self, name, restore_ms=0, gated=False):
        cmd = [str(LEARNER_BIN), "--bootstrap", self.bootstrap, "--group", GROUP,
               "--topic", TOPIC, "--client-id", name, "--mode", self.mode,
               "--restore-ms", str(restore_ms), "--heartbeat-ms", str(HEARTBEAT_MS),
               "--session-timeout-ms", str(SESSION_TIMEOUT_MS)]
        if gated:
            cmd.append("--ready-gate")
        err = open(self.workdir / f"{name}.stderr", "wb")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        err.close()
        self.procs[name] = proc
        t = threading.Thread(target=self._read, args=(name, proc), daemon=True)
        t.start()
        self.threads.append(t)

    def _read(self, name, proc):
        for line in proc.stdout:
            try:
                self.events.add(json.loads(line))
            except ValueError:
                self.events.add({"event": "garbage", "client": name, "line": line.decode()})
        code = proc.wait()
        if code not in (0, -signal.SIGTERM):
            self.events.add({"event": "died", "client": name, "code": code})

    def ready(self, name):
        """Opens `name`'s readiness gate."""
        self.procs[name].stdin.write(b"ready\n")
        self.procs[name].stdin.flush()

    def leave(self, name):
        """Tells `name` to leave: it joins with leaving=true and exits once it holds nothing."""
        self.procs[name].stdin.write(b"leave\n")
        self.procs[name].stdin.flush()

    def stderr_tails(self, lines=25):
        out = []
        for name in self.procs:
            try:
                text = (self.workdir / f"{name}.stderr").read_text(errors="replace")
            except OSError:
                continue
            out.append(f"--- {name} stderr ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self):
        """SIGTERM every member (it leaves the group), then waits for them all."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        stuck = []
        for name, p in self.procs.items():
            try:
                p.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                stuck.append(name)
        for t in self.threads:
            t.join(timeout=5)
        assert not stuck, f"learner-clients ignored SIGTERM: {stuck}"

    # --- views of the output -----------------------------------------------------------------

    def syncs(self, log=None):
        return [e for e in (log if log is not None else self.events.snapshot())
                if e["event"] == "sync"]

    def generation(self, log, gen, names):
        """{name: sync event of generation gen} once every one of `names` has one, else None."""
        got = {e["client"]: e for e in log if e["event"] == "sync" and e["generation"] == gen}
        return got if all(n in got for n in names) else None

    def wait_generation(self, what, names, trigger, after):
        """Waits for `trigger`'s first generation after `after`, then for every one of `names`
        to complete that same generation; returns (gen, {name: sync event})."""
        gen = self.events.wait_for(
            f"{what}: a generation of {trigger} after {after}",
            lambda log: next((e["generation"] for e in log if e["event"] == "sync"
                              and e["client"] == trigger and e["generation"] > after), None))
        syncs = self.events.wait_for(f"{what}: generation {gen} completed by {names}",
                                     lambda log: self.generation(log, gen, names))
        return gen, syncs


@pytest.fixture
def learners(koord, tmp_path):
    """Factory: `learners(mode, *settings)` starts a koord with the learner settings and returns
    (koord, Learners); the members are stopped before koord."""
    made = []

    def make(mode, *extra):
        k = koord(*SETTINGS, f"learner.mode={mode}", *extra)
        group = Learners(k.bootstrap, tmp_path, mode)
        made.append(group)
        return k, group

    yield make
    for group in made:
        group.stop()


def fmt(syncs):
    return "\n".join(
        f"  {n}: gen {e['generation']} assigned {e['assigned']} revoked {e['revoked']} "
        f"learning {e['learning']} marks {e['marks']}" for n, e in sorted(syncs.items()))


def check_round(name, syncs, expected, group):
    got = {n: (e["assigned"], e["revoked"], e["learning"], e["marks"]) for n, e in syncs.items()}
    want = {n: tuple(v) for n, v in expected.items()}
    assert got == want, (f"{name}: members' generation differs from learner-spec.md 7\n"
                         f"got:\n{fmt(syncs)}\nwant (assigned, revoked, learning, marks):\n"
                         + "\n".join(f"  {n}: {v}" for n, v in sorted(want.items()))
                         + f"\n{group.events.summary()}")


def check_one_owner_at_a_time(group):
    """No partition held by two members at once, on the members' own timeline: a member holds
    its assignment from its "sync" line (stamped after the response arrived) until its next
    "join" (stamped before the request is sent: it holds `owned` from then), "lost" or "exit".
    Also per generation: assignments are disjoint and no member learns what it holds."""
    log = sorted(group.events.snapshot(), key=lambda e: e["ts_us"])
    held = {}
    for e in log:
        kind = e["event"]
        if kind == "sync":
            held[e["client"]] = set(e["assigned"])
        elif kind == "join":
            held[e["client"]] = set(e["owned"])
        elif kind in ("lost", "exit"):
            held[e["client"]] = set()
        else:
            continue
        owners = {}
        for member, parts in held.items():
            for p in parts:
                owners.setdefault(p, []).append(member)
        double = {p: ms for p, ms in owners.items() if len(ms) > 1}
        assert not double, (f"partitions held by two members at once after {e}: {double}\n"
                            f"{group.events.summary()}")
    by_gen = {}
    for e in group.syncs(log):
        by_gen.setdefault(e["generation"], []).append(e)
        assert not set(e["assigned"]) & set(e["learning"]), f"learning what it holds: {e}"
    for gen, syncs in by_gen.items():
        seen = {}
        for e in syncs:
            for p in e["assigned"]:
                assert p not in seen, (f"generation {gen}: partition {p} assigned to "
                                       f"{seen[p]} and {e['client']}")
                seen[p] = e["client"]


def check_generations(group, first, names_from):
    """Every member completed exactly the generations first.. since it started, one per round:
    no rebalance beyond the trace's."""
    got = {}
    for e in group.syncs():
        got.setdefault(e["client"], []).append(e["generation"])
    last = max(g for gens in got.values() for g in gens)
    want = {n: list(range(start, last + 1)) for n, start in names_from.items()}
    assert got == want, (f"generations completed per member (from {first}): got {got}, want "
                         f"{want}\n{group.events.summary()}")


def start_initial(group):
    """S1, S2, S3 together: one first generation, S1[T1,T2], S2[T3,T4], S3[T5]."""
    for n in ("S1", "S2", "S3"):
        group.start(n)
    names = ["S1", "S2", "S3"]

    def settled(log):
        latest = {}
        for e in log:
            if e["event"] == "sync":
                latest[e["client"]] = e
        if set(latest) != set(names) or len({e["generation"] for e in latest.values()}) != 1:
            return None
        return latest if all(latest[n]["assigned"] == R0[n][0] for n in names) else None

    syncs = group.events.wait_for("S1[T1,T2], S2[T3,T4], S3[T5]", settled)
    check_round("R0", syncs, R0, group)
    return syncs["S1"]["generation"]


def test_seed_trace_over_the_wire(learners):
    """learner-spec.md section 7, R1-R4, every member's every generation exactly."""
    _, group = learners("seed")
    g0 = start_initial(group)

    group.start("S4", restore_ms=3000, gated=True)
    g1, r1 = group.wait_generation("R1 (S4 joins)", list(R1), "S4", g0)
    check_round("R1", r1, R1, group)

    group.start("S5", restore_ms=6000, gated=True)
    g2, r2 = group.wait_generation("R2 (S5 joins, S4 not ready)", list(R2), "S5", g1)
    check_round("R2", r2, R2, group)

    group.ready("S4")
    g3, r3 = group.wait_generation("R3 (S4 ready)", list(R3), "S4", g2)
    check_round("R3", r3, R3, group)

    group.ready("S5")
    g4, r4 = group.wait_generation("R4 (S5 ready)", list(R4), "S5", g3)
    check_round("R4", r4, R4, group)
    assert all(e["probe_ms"] == -1 for e in r4.values()), f"R4 has no follow-up: {fmt(r4)}"

    assert [g1, g2, g3, g4] == [g0 + 1, g0 + 2, g0 + 3, g0 + 4], (
        f"one rebalance per round: generations {[g0, g1, g2, g3, g4]}")
    check_generations(group, g0, {"S1": g0, "S2": g0, "S3": g0, "S4": g1, "S5": g2})
    check_one_owner_at_a_time(group)
    # The ready learners joined once each to report readiness: their JoinGroups say so.
    joins = [e for e in group.events.snapshot() if e["event"] == "join"]
    assert any(e["client"] == "S4" and e["ready"] == [0] for e in joins)
    assert any(e["client"] == "S5" and e["ready"] == [2] for e in joins)


def test_ready_gated_scale_up(learners):
    """The same scale-up in ready-gated mode: the owners never see marks and never give a task
    up at a join; a task moves only once its learner is ready (revoked in one generation,
    granted in the next), never on two members; the end state is the seed trace's."""
    _, group = learners("ready-gated")
    g0 = start_initial(group)

    group.start("S4", restore_ms=3000, gated=True)
    g1, r1 = group.wait_generation("S4 joins", ["S1", "S2", "S3", "S4"], "S4", g0)
    assert r1["S4"]["learning"] == [0] and r1["S4"]["assigned"] == [], fmt(r1)
    assert r1["S1"]["assigned"] == [0, 1], fmt(r1)

    group.start("S5", restore_ms=6000, gated=True)
    _, r2 = group.wait_generation("S5 joins", list(R2), "S5", g1)
    assert r2["S5"]["learning"] == [2] and r2["S4"]["learning"] == [0], fmt(r2)
    assert r2["S2"]["assigned"] == [2, 3], fmt(r2)

    group.ready("S4")
    group.events.wait_for("T1 on S4", lambda log: True if any(
        e["event"] == "sync" and e["client"] == "S4" and e["assigned"] == [0] for e in log)
        else None)
    group.ready("S5")

    def balanced(log):
        latest = {}
        for e in log:
            if e["event"] == "sync":
                latest[e["client"]] = e
        if len({e["generation"] for e in latest.values()}) != 1:
            return None
        ok = all(latest[n]["assigned"] == parts and not latest[n]["learning"]
                 for n, parts in BALANCED.items())
        return latest if ok else None

    group.events.wait_for("S1[T2], S2[T4], S3[T5], S4[T1], S5[T3], nobody learning", balanced)
    log = group.events.snapshot()
    marked = [e for e in group.syncs(log) if e["marks"]]
    assert not marked, f"ready-gated owners saw marks: {marked}"
    gave_up = [e for e in log if e["event"] == "join" and e["revoked"]]
    assert not gave_up, f"ready-gated members gave tasks up at a join: {gave_up}"
    taken = [(e["client"], e["taken"]) for e in group.syncs(log) if e["taken"]]
    assert sorted(taken) == [("S1", [0]), ("S2", [2])], (
        f"each task is revoked once by koord, from its owner: {taken}")
    check_one_owner_at_a_time(group)


def test_restart_keeps_learners_and_marks(learners, tmp_path):
    """koord restarts while S4 learns T1 (marked on S1): the group goes on in the same
    generation, and when S4 is ready T1 moves to it, so koord kept the learner and the mark."""
    server, group = learners("seed")
    g0 = start_initial(group)
    group.start("S4", restore_ms=3000, gated=True)
    g1, r1 = group.wait_generation("R1 (S4 joins)", list(R1), "S4", g0)
    check_round("R1", r1, R1, group)
    ids = {n: e["member_id"] for n, e in r1.items()}

    before = len(group.events)
    server.restart()
    # Every member's connection broke; each is back once one of its heartbeats is answered
    # (possibly before restart() returned: it waits for koord to load its groups).
    group.events.wait_for(
        "every member heartbeating the restarted koord",
        lambda log: True if {e["client"] for e in log[before:]
                             if e["event"] == "reconnected"} >= set(R1) else None)

    group.ready("S4")
    g2, r2 = group.wait_generation("S4 ready after the restart", list(R1), "S4", g1)
    want = {"S1": ([1], [0], [], []), "S2": ([2, 3], [], [], []), "S3": ([4], [], [], []),
            "S4": ([0], [], [], [])}
    check_round("S4 ready after the restart", r2, want, group)
    assert g2 == g1 + 1, f"the restarted koord went on from generation {g1}, not to {g2}"
    log = group.events.snapshot()
    after = log[before:]
    lost = [e for e in after if e["event"] == "lost" or (
        e["event"] == "response_error"
        and e["error"] in ("UnknownMemberId", "IllegalGeneration", "FencedInstanceId"))]
    assert not lost, f"members lost their membership across the restart: {lost}"
    assert {n: e["member_id"] for n, e in r2.items()} == ids
    early = [e for e in group.syncs(after) if e["generation"] != g2]
    assert not early, f"generations completed between the restart and S4's readiness: {early}"
    check_one_owner_at_a_time(group)


def test_scale_down_drains_through_learners(learners):
    """learner-spec.md 7, scale-down: S2 leaves (leaving=true) and keeps processing T3 and T4
    while they are learned, T3 by S1 and T4 by S3 (the drain, step 4a: the first member below
    Q); once both learners are ready the tasks move, S2 holds nothing and exits, and no task was
    ever on two members."""
    _, group = learners("seed")
    group.start("S1", restore_ms=500, gated=True)
    group.start("S2")
    group.start("S3", restore_ms=500, gated=True)
    names = ["S1", "S2", "S3"]

    def latest_of(log, who):
        latest = {}
        for e in log:
            if e["event"] == "sync" and e["client"] in who:
                latest[e["client"]] = e
        return latest if set(latest) == set(who) else None

    def layout(who, want, **extra):
        def check(log):
            latest = latest_of(log, who)
            if latest is None or len({e["generation"] for e in latest.values()}) != 1:
                return None
            ok = all(latest[n]["assigned"] == want[n] and all(
                latest[n][k] == v.get(n, []) for k, v in extra.items()) for n in who)
            return latest if ok else None
        return check

    group.events.wait_for("S1[T1,T2], S2[T3,T4], S3[T5]",
                          layout(names, {"S1": [0, 1], "S2": [2, 3], "S3": [4]}))
    group.leave("S2")
    drain = group.events.wait_for(
        "S2 leaving: T3 learned by S1, T4 by S3, S2 still holding both (marked)",
        layout(names, {"S1": [0, 1], "S2": [2, 3], "S3": [4]},
               learning={"S1": [2], "S3": [3]}, marks={"S2": [2, 3]}))
    assert any(e["event"] == "join" and e["client"] == "S2" and e["leaving"]
               for e in group.events.snapshot())
    group.ready("S1")
    group.ready("S3")
    group.events.wait_for("S2 gone; S1[T1,T2,T3], S3[T4,T5]",
                          lambda log: layout(["S1", "S3"], {"S1": [0, 1, 2], "S3": [3, 4]},
                                             learning={})(log)
                          if any(e["event"] == "exit" and e["client"] == "S2" for e in log)
                          else None)
    s2 = [e for e in group.syncs() if e["client"] == "S2"]
    assert s2[-1]["assigned"] == [] and s2[-1]["generation"] > drain["S2"]["generation"]
    check_one_owner_at_a_time(group)
