"""franz-go (the Go client, pkg/kgo) consumer groups on the coordinator's defaults.

franz-go reads JoinGroup v9's SkipAssignment as Apache Kafka means it (KIP-814, a static leader
replaced while the group is Stable): the leader computes its own plan anyway and rejoins
whenever the assignment SyncGroup hands it differs from that plan. koord used to set the flag
for every leader of a group it assigns on the server, its default, and a franz-go group then
rebalanced forever (issue 24). This is that group, for each of franz-go's balancers: a
12-partition topic, 50,000 records produced in three batches, one before each membership change,
and a group of franz-member processes (franz/main.go) scaling 3 -> 5 -> 3 while consuming. It
checks that

- every settled state has each partition owned by exactly one member (the members' own
  callbacks, then DescribeGroups: Stable with those assignments), balanced;
- no step takes more than groups_util.MAX_GENERATIONS_PER_CHANGE generations per member that
  joined or left (the generations the members report; the wait fails at once past it), and no
  member ever rejoined because its SyncGroup assignment differed from its own plan (franz-go's
  log says so when it does);
- every one of the 50,000 offsets was consumed by some member (at least once), across the
  commits and hand-overs of three rebalances; no member lost its partitions or failed.

koord runs on its defaults (group.assignor=uniform: it assigns on the server) with only the
quick-rebalance settings every group test uses. With KOORD_BOOTSTRAP=HOST:PORT the same test runs
against that server (scripts/test.sh runs it against Apache Kafka 4.4, where the leader assigns),
proving the expectations are Kafka's. Every wait is on the members' events, with a deadline.
"""

import os
import re

import pytest

from groups_util import Group, scale_3_5_3

GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
EXTERNAL_BOOTSTRAP = os.environ.get("KOORD_BOOTSTRAP")
PARTITIONS = 12
RECORDS = 50_000
# What franz-go logs when the assignment it synced differs from the plan it computed itself.
OLD_PLAN_REJOIN = "reassigned old plan"
CONSUME_TIMEOUT = 60.0  # seconds to consume what is left once the group is back to 3 members


@pytest.fixture
def group(tmp_path, request):
    if EXTERNAL_BOOTSTRAP:
        bootstrap = EXTERNAL_BOOTSTRAP
    else:
        bootstrap = request.getfixturevalue("koord")(*GROUP_SETTINGS).bootstrap
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    g = Group(bootstrap, tmp_path, partitions=PARTITIONS, name=name)
    yield g
    g.shutdown()


def unseen(log, produced):
    """{partition: offsets no member reported consuming}, given {partition: records}."""
    seen = {p: set() for p in produced}
    for e in log:
        if e["event"] == "records":
            for p, first, last, count in e["ranges"]:
                assert count == last - first + 1, f"a gap in a poll of partition {p}: {e}"
                seen[p].update(range(first, last + 1))
    return {p: sorted(set(range(n)) - seen[p]) for p, n in produced.items()
            if len(seen[p]) < n or not seen[p] <= set(range(n))}


@pytest.mark.parametrize("balancer", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_franz_go_group_scales_while_consuming(group, balancer):
    """A franz-go group with `balancer` scales 3 -> 5 -> 3 while consuming 50,000 records: one
    owner per partition once settled, a bounded number of generations per change, no rejoin
    over a SyncGroup assignment that differs from the leader's plan, every offset consumed."""
    batches = [RECORDS // 3, RECORDS // 3, RECORDS - 2 * (RECORDS // 3)]
    produced = {p: 0 for p in range(PARTITIONS)}

    def produce(step):
        # Each batch's record i goes to partition i % 12: the per-partition counts add up.
        for p, n in group.produce(batches[step]).items():
            produced[p] += n

    scale_3_5_3(group, lambda name: group.franz(name, balancer), before_change=produce)
    assert sum(produced.values()) == RECORDS

    group.events.wait_for(f"all {RECORDS} offsets consumed",
                          lambda log: None if unseen(log, produced) else True,
                          timeout=CONSUME_TIMEOUT)
    group.check_history()
    rejoins = {name: m.log_lines(OLD_PLAN_REJOIN) for name, m in group.members.items()}
    rejoins = {name: lines for name, lines in rejoins.items() if lines}
    assert not rejoins, f"franz-go members rejoined over the leader's own plan: {rejoins}"
