"""The learner assignor with unmodified Java consumers (group.assignor=learner, kafka-clients 4.4).

Three Java members share a 12-partition topic (4 each); a fourth joins. koord first plans the
partitions the newcomer should get as learners on it: the newcomer is given nothing and nobody
loses anything. `learner.warmup.ms` later koord itself starts a rebalance (the clients would not
rejoin by themselves) and the partitions move: with cooperative-sticky clients in two
generations (the owner is told to give a partition up, revokes it and rejoins; the next
generation grants it), with eager (range) clients in one. At most `learner.max.learners` (2)
partitions are on their way at once, so koord plans the newcomer's 3 partitions in two rounds
(koord's log). A round may take more generations than that: an owner whose SyncGroup comes after
another member's rejoin gets REBALANCE_IN_PROGRESS and hears of its revocation a generation
later, as with Kafka.

Checked from the members' own rebalance callbacks (each event carries the JVM's clock, ts_ms):
the newcomer gets nothing in its first generation, and its callback showing a partition comes at
least the warm-up after that generation formed (koord's log says when); then it
takes its share (every partition one owner, loads within one of each other); an old member only
ever gives partitions up, never gets one back or a new one, and what it gave up went to the
newcomer; no partition is held by two members at once, nor given to two in one generation; and
cooperative members see revoked exactly what they give up.

The three first members are warm before the newcomer starts: an owner that got a partition
cold (here: the first assignment) less than `learner.warmup.ms` ago is still restoring it, and
koord moves such a partition without a learner (learner-spec.md 6.5 step 3a; issue 26). The cold
start itself is the last test: three members joining one after another settle as they would
with `uniform`, two generations after the last join, without learners.

All members run in one JVM, so that their events are one ordered stream (owners_at_once).
koord-only: skipped with KOORD_BOOTSTRAP.
"""

import datetime
import os
import re
import time

import pytest

from groups_util import Group, check_cooperative, owners_at_once

WARMUP_MS = 2000
MAX_LEARNERS = 2
PARTITIONS = 12
OLD = ["m1", "m2", "m3"]
NEW = "m4"
# A short initial delay so that the three first members form the group's first generation
# together (if one came late it would be a learner too, and the start would take warm-ups).
SETTINGS = ("group.initial.rebalance.delay.ms=500", "group.min.session.timeout.ms=1000",
            "group.assignor=learner", f"learner.warmup.ms={WARMUP_MS}",
            f"learner.max.learners={MAX_LEARNERS}")

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KOORD_BOOTSTRAP")),
    reason="koord-only: needs koord started with group.assignor=learner")


@pytest.fixture
def learner_group(koord, tmp_path, request):
    """A koord with the learner assignor for unmodified clients, and a Group on a fresh
    12-partition topic there."""
    k = koord(*SETTINGS)
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    group = Group(k.bootstrap, tmp_path, partitions=PARTITIONS, name=name)
    group.koord = k
    yield group
    group.shutdown()


def assignments(log, member):
    """The member's "assigned" events, in order."""
    return [e for e in log if e["member"] == member and e["event"] == "assigned"]


GENERATION_LINE = re.compile(r"^(\S+Z) .*new generation generation=(\d+) ")


def generations_formed(k):
    """When koord formed each generation of the group, by its log: {generation: epoch ms}
    (the test's only group; the wall clock the JVM's ts_ms also reads)."""
    formed = {}
    for line in k.log_path.read_text(errors="replace").splitlines():
        if m := GENERATION_LINE.match(line):
            at = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
            formed[int(m.group(2))] = at.timestamp() * 1000
    return formed


ASSIGNMENT_LINE = re.compile(r" assignment: (.*) generation=(\d+) assignor=")
LEARNER_ADDED = re.compile(r"learner added: (\S+) learns \S+-(\d+) from ")


def learners_planned(k, member):
    """The learners koord planned on `member` (its name, the prefix of its member id), by its
    log: {partition: [generations that planned it]}."""
    planned = {}
    for line in k.log_path.read_text(errors="replace").splitlines():
        if m := ASSIGNMENT_LINE.search(line):
            for who, p in LEARNER_ADDED.findall(m.group(1)):
                if who.startswith(member + "-"):
                    planned.setdefault(int(p), []).append(int(m.group(2)))
    return planned


def check_learner_scale_up(group, before, after, since, cooperative):
    """The checks of the module docstring, between the settled states `before` (3 members) and
    `after` (4 members); `since` is the log index at which the newcomer was started."""
    log = group.events.snapshot()
    summary = group.events.summary()
    step = log[since:]

    # The newcomer: nothing in its first generation, nothing before the warm-up has elapsed.
    mine = assignments(step, NEW)
    assert mine, f"{NEW} was never assigned\n{summary}"
    first = mine[0]
    assert first["assignment"] == [], (
        f"{NEW} got {first['assignment']} in its first generation {first['generation']}, "
        f"before any warm-up\n{summary}")
    # It only ever gains (eager members also see everything revoked at each join, so this looks
    # at assignments only), at most max.learners partitions at a time.
    gains = []  # its "assigned" events that gave it something
    prev = set()
    for e in mine:
        held = set(e["assignment"])
        assert prev <= held, f"{NEW} lost {sorted(prev - held)} by {e}\n{summary}"
        assert len(held - prev) <= MAX_LEARNERS, (
            f"{NEW} got {sorted(held - prev)} at once, more than learner.max.learners="
            f"{MAX_LEARNERS}: {e}\n{summary}")
        if held - prev:
            gains.append(e)
        prev = held
    assert prev == set(after.owned[NEW]), summary
    if cooperative:
        lost = [e for e in step if e["member"] == NEW and e["event"] in ("revoked", "lost")
                and e["partitions"]]
        assert not lost, f"{NEW} gave partitions up: {lost}\n{summary}"
    # Rounds, by koord's log: each partition's learner on the newcomer is planned once, at most
    # max.learners per round, the first round in its first generation, the next when a round is
    # granted. (How many generations the grants take is up to the clients: an owner whose
    # SyncGroup comes after another member's rejoin hears of its revocation a generation late,
    # as with Kafka.)
    formed = generations_formed(group.koord)
    planned = learners_planned(group.koord, NEW)
    assert sorted(planned) == sorted(prev), (
        f"learners planned on {NEW} (partition: generations) {planned}, it holds {sorted(prev)}")
    rounds = {}
    for p, gens in planned.items():
        assert len(gens) == 1, f"the learner of {p} on {NEW} was planned at generations {gens}"
        rounds.setdefault(gens[0], []).append(p)
    assert len(rounds) == -(-len(prev) // MAX_LEARNERS) and all(
        len(ps) <= MAX_LEARNERS for ps in rounds.values()), (
        f"{NEW}'s learners were planned in rounds {rounds} (generation: partitions), want "
        f"rounds of {MAX_LEARNERS}\n{summary}")
    assert min(rounds) == first["generation"], (rounds, first)
    # Timing: koord plans a learner when a generation forms, before the newcomer hears of that
    # generation (its callback can come tens of ms later), so the warm-up is measured from the
    # formation of the planning generation (koord's log; one machine, one wall clock) to the
    # newcomer's own callback that first shows the partition.
    for p, [g] in planned.items():
        assert g in formed, f"no 'new generation generation={g}' in koord's log"
        e = next(e for e in gains if p in e["assignment"])
        waited = e["ts_ms"] - formed[g]
        assert waited >= WARMUP_MS, (
            f"{NEW} got {p} at generation {e['generation']}, {waited:.0f} ms after generation "
            f"{g} planned its learner; the warm-up is {WARMUP_MS} ms\n{summary}")

    # Its share: every partition one owner, balanced.
    owner = {}
    for m, parts in after.owned.items():
        for p in parts:
            assert p not in owner, f"partition {p} owned by {owner[p]} and {m}: {after.owned}"
            owner[p] = m
    assert sorted(owner) == list(range(PARTITIONS)), after.owned
    loads = [len(parts) for parts in after.owned.values()]
    assert max(loads) - min(loads) <= 1, f"unbalanced: {after.owned}"
    assert len(after.owned[NEW]) == PARTITIONS // 4, after.owned

    # Old members only give up, and only what the newcomer got; never take one back.
    given = set()
    for m in OLD:
        b, a = set(before.owned[m]), set(after.owned[m])
        assert a <= b, f"{m} owned {sorted(b)}, then {sorted(a)}: it got new ones\n{summary}"
        given |= b - a
        held_before = b
        for e in assignments(step, m):
            held = set(e["assignment"])
            assert held <= held_before, (
                f"{m} was given {sorted(held - held_before)} back or anew at {e}\n{summary}")
            held_before = held
    assert given == set(after.owned[NEW]), (
        f"old members gave up {sorted(given)}, the newcomer holds {sorted(after.owned[NEW])}\n"
        f"before: { {m: sorted(p) for m, p in before.owned.items()} }\n"
        f"after:  { {m: sorted(p) for m, p in after.owned.items()} }")

    # Safety over the whole log.
    group.check_history()
    overlaps = owners_at_once(log)
    assert not overlaps, f"(event index, partition, member, other holder): {overlaps}\n{summary}"
    if cooperative:
        check_cooperative(group, before, after)
    return gains


def wait_warm(k, generation, warmup_ms):
    """Returns once the owners of `generation` are warm: `warmup_ms` after koord formed it (its
    log; the plan that gave them their partitions ran before that line), no member having got
    a partition cold since. A precondition of the scenario (the clock is what makes an owner
    warm), not an outcome: there is nothing to wait for but the time."""
    formed = generations_formed(k)
    assert generation in formed, f"no 'new generation generation={generation}' in koord's log"
    left = formed[generation] + warmup_ms - time.time() * 1000
    if left > 0:
        time.sleep(left / 1000)


def scale_up(group, assignor):
    """m1..m3 settle with 4 partitions each and warm up; m4 joins and, after the warm-ups,
    settles with its share. Returns (before, after, log index at m4's start)."""
    jvm = group.java()
    for m in OLD:
        jvm.start(m, partition_assignment_strategy=assignor)
    before = group.wait_settled(OLD, {PARTITIONS // 3}, what="3 members")
    assert group.protocol() == "learner"
    wait_warm(group.koord, before.generation, WARMUP_MS)
    since = len(group.events)
    jvm.start(NEW, partition_assignment_strategy=assignor)
    # Two rounds of (warm-up + one or two generations): generous, no tight upper bound.
    after = group.wait_settled(OLD + [NEW], {PARTITIONS // 4}, after=before.generation,
                               what=f"{NEW} took its share after the warm-ups")
    return before, after, since


def test_learner_cooperative_java_newcomer_waits_for_warm_up(learner_group):
    """Cooperative-sticky Java members: the newcomer is given no partition until its warm-up
    elapsed, then takes its share, and no other member loses a partition that stays with it.
    Each move costs two generations (revoke, then grant)."""
    group = learner_group
    before, after, since = scale_up(group, "cooperative-sticky")
    gains = check_learner_scale_up(group, before, after, since, cooperative=True)
    # Revoke before grant: every partition the newcomer got was revoked by its owner in an
    # earlier generation than the one granting it.
    log = group.events.snapshot()[since:]
    revoked_at = {}
    for e in log:
        if e["event"] == "revoked" and e["member"] in OLD:
            for p in e["partitions"]:
                revoked_at.setdefault(p, e["generation"])
    prev = set()
    for e in gains:
        for p in set(e["assignment"]) - prev:
            assert p in revoked_at and revoked_at[p] < e["generation"], (
                f"{NEW} got {p} at generation {e['generation']}, revoked at "
                f"{revoked_at.get(p)}\n{group.events.summary()}")
        prev = set(e["assignment"])


def test_learner_eager_java_newcomer_waits_for_warm_up(learner_group):
    """Eager (range) Java members: the newcomer is given no partition until its warm-up
    elapsed; then the moves of a round happen in one generation (eager members give
    everything up at each join, so nothing waits for a revocation)."""
    group = learner_group
    before, after, since = scale_up(group, "range")
    gains = check_learner_scale_up(group, before, after, since, cooperative=False)
    # One generation per move: what the newcomer got at generation g, an old member still had
    # in its assignment of generation g - 1.
    log = group.events.snapshot()[since:]
    prev = set()
    for e in gains:
        g = e["generation"]
        for p in set(e["assignment"]) - prev:
            owners = [m for m in OLD if p in set(last_assignment(log, m, g))]
            assert owners, (f"{NEW} got {p} at generation {g}, but no old member had it in the "
                            f"generation before\n{group.events.summary()}")
        prev = set(e["assignment"])


def last_assignment(log, member, generation):
    """The member's assignment in the last generation before `generation` that it took part in
    (a member whose SyncGroup comes after another member's rejoin has none in that one)."""
    held = [e["assignment"] for e in assignments(log, member) if e["generation"] < generation]
    return held[-1] if held else []


# The cold start of issue 26: a warm-up long enough that the three members, started one after
# another, all join while the first one is still cold (however busy the machine).
COLD_WARMUP_MS = 30_000
COLD_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
                 "group.assignor=learner", f"learner.warmup.ms={COLD_WARMUP_MS}",
                 f"learner.max.learners={MAX_LEARNERS}")


def test_learner_cooperative_java_cold_start_settles_like_uniform(koord, tmp_path):
    """Cooperative-sticky Java members under group.assignor=learner, no initial delay, started
    one after another on an empty group (each once the previous one has its first assignment:
    a join apart, a few hundred milliseconds). The first takes every partition, cold; the next
    ones get theirs without learners: the group is balanced within two generations of the last
    member's first one (a revoke and a grant, as with uniform), koord planned no learner, and no
    partition ever had two owners. Asserted on the members' generations and ownership."""
    k = koord(*COLD_SETTINGS)
    group = Group(k.bootstrap, tmp_path, partitions=PARTITIONS, name="cold-start")
    try:
        jvm = group.java()
        members = ["c1", "c2", "c3"]
        firsts = {}
        for m in members:
            since = len(group.events)
            jvm.start(m, partition_assignment_strategy="cooperative-sticky")
            firsts[m] = group.wait_event(f"{m}'s first assignment", [m], "assigned", since)[m]
        assert len(firsts["c1"]["assignment"]) == PARTITIONS, firsts["c1"]
        last_join = firsts["c3"]["generation"]
        after = group.wait_settled(members, {PARTITIONS // 3}, what="3 members balanced",
                                   max_generation=last_join + 2)
        assert group.protocol() == "learner"
        summary = group.events.summary()
        assert after.generation <= last_join + 2, (
            f"balanced at generation {after.generation}, the last member joined at "
            f"{last_join}\n{summary}")
        # No learner: every move was direct (step 3a), nothing waited for a warm-up.
        log = k.log_path.read_text(errors="replace")
        assert "learner added" not in log, [l for l in log.splitlines() if "learner added" in l]
        assert "owner cold" in log, "koord's log names the cold moves"
        # Every partition one owner, balanced; never two owners at once.
        owner = {}
        for m, parts in after.owned.items():
            for p in parts:
                assert p not in owner, f"partition {p} owned by {owner[p]} and {m}"
                owner[p] = m
        assert sorted(owner) == list(range(PARTITIONS)), after.owned
        group.check_history()
        overlaps = owners_at_once(group.events.snapshot())
        assert not overlaps, f"(event index, partition, member, other holder): {overlaps}\n{summary}"
    finally:
        group.shutdown()

