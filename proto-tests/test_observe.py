"""Observability (issue 21) with real clients: what /metrics says after a scripted scenario,
parsed with Prometheus' own text parser, and the status page rendered by a real headless
Chromium while a group rebalances from 3 to 5 members.

Every step waits on events (members' callbacks, DescribeGroups, the rendered DOM), with a
deadline; nothing passes because of a sleep.
"""

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from html.parser import HTMLParser

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port
from groups_util import SETTLE_TIMEOUT, Group

GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")


def scrape(koord):
    """{(sample name, frozenset of labels): value} of one /metrics scrape."""
    with urllib.request.urlopen(f"{koord.http}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples, name, **labels):
    """Sum of `name` over every label set that includes `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


@pytest.fixture
def server(koord):
    return koord(*GROUP_SETTINGS)


@pytest.fixture
def group(server, tmp_path, request):
    g = Group(server.bootstrap, tmp_path, name=request.node.name.replace("_", "-"))
    yield g
    g.shutdown()


def test_metrics_after_a_group_forms_rebalances_twice_and_commits(server, group):
    """p1 forms the group alone, p2 and then p3 join (two rebalances), the members close, and
    5 offsets are committed: the scrape shows 3 completed rebalances (one per generation the
    members saw), 3 members of 1 Stable group while they run, and 5 offset commits."""
    group.kafka_python("p1", "range")
    one = group.wait_settled(["p1"], {12}, what="p1 alone")
    group.kafka_python("p2", "range")
    two = group.wait_settled(["p1", "p2"], {6}, after=one.generation, what="p2 joined")
    group.kafka_python("p3", "range")
    three = group.wait_settled(["p1", "p2", "p3"], {4}, after=two.generation, what="p3 joined")
    # Each join was one generation: the scenario is exactly "forms, rebalances twice".
    assert (one.generation, two.generation, three.generation) == (1, 2, 3)

    m = scrape(server)
    assert value(m, "koord_group_rebalances_total", kind="classic") == 3
    assert value(m, "koord_group_rebalance_duration_seconds_count", kind="classic") == 3
    assert value(m, "koord_group_count", kind="classic") == 1
    assert value(m, "koord_classic_group_count", state="Stable") == 1
    assert value(m, "koord_classic_group_count", state="PreparingRebalance") == 0
    assert value(m, "koord_group_members", kind="classic") == 3
    assert value(m, "koord_offset_commits_total") == 0
    # Each member joined (JoinGroup), and p1, p2 were sent back to join by a heartbeat.
    assert total(m, "koord_requests_total", api="JoinGroup") >= 3
    assert total(m, "koord_requests_total", api="SyncGroup") >= 6
    assert total(m, "koord_requests_total", api="Heartbeat") >= 1
    assert total(m, "koord_request_errors_total", api="Heartbeat",
                 error="REBALANCE_IN_PROGRESS") >= 2
    assert total(m, "koord_request_duration_seconds_count", api="JoinGroup") == \
        total(m, "koord_requests_total", api="JoinGroup")
    assert value(m, "koord_connections") >= 3
    # The group record of each generation was written through the store.
    assert value(m, "koord_store_write_batches_total") >= 3
    assert value(m, "koord_store_sync_duration_seconds_count") == \
        value(m, "koord_store_write_batches_total")

    group.close("p1", "p2", "p3")
    committer = Consumer({"bootstrap.servers": group.bootstrap, "group.id": group.id,
                          "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(group.topic, p, 10 + p) for p in range(5)],
                         asynchronous=False)
    finally:
        committer.close()

    m = scrape(server)
    assert value(m, "koord_offset_commits_total") == 5
    assert value(m, "koord_group_rebalances_total", kind="classic") == 3
    assert value(m, "koord_classic_group_count", state="Empty") == 1
    assert value(m, "koord_group_members", kind="classic") == 0
    assert value(m, "koord_store_loading") == 0


class Dom(HTMLParser):
    """The elements of a page that carry a class, with their attributes and text."""

    def __init__(self, html):
        super().__init__()
        self.elements = []  # (class, attrs, [text]) in document order
        self._open = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        entry = (attrs.get("class"), attrs, [])
        self.elements.append(entry)
        if tag not in ("meta", "br", "rect", "line", "input", "img"):
            self._open.append(entry)

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        for _, _, text in self._open:
            text.append(data)

    def text(self, entry):
        return "".join(entry[2])


def page(chromium, url):
    """The DOM of `url` as headless Chromium rendered it."""
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                          "--dump-dom", url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "<html" in out.stdout, out.stdout[:500]
    return out.stdout


def shown(html, group_id):
    """What the page shows of one group: {member id: [partition labels]} and, per rebalance
    (epoch), its moves {partition label: arrow text}."""
    dom = Dom(html)
    members, moves, epoch, inside = {}, {}, None, False
    for cls, attrs, _ in dom.elements:
        if cls == "group":
            inside = attrs.get("data-group") == group_id
        if not inside:
            continue
        if cls == "member":
            members[attrs["data-member"]] = []
            current = attrs["data-member"]
        elif cls == "partition":
            members[current].append(dom.text((cls, attrs, _)))
        elif cls == "rebalance":
            epoch = int(attrs["data-epoch"])
            moves[epoch] = {}
        elif cls == "move":
            moves[epoch][attrs["data-partition"]] = dom.text((cls, attrs, _))
    return members, moves


def test_status_page_in_headless_chromium_while_3_members_become_5(server, group):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium not installed (scripts/test.sh installs Debian's package)"
    url = f"{server.http}/"
    for name in ("c1", "c2", "c3"):
        group.kafka_python(name, "range")
    three = group.wait_settled(["c1", "c2", "c3"], {4}, what="3 members")

    # Scale out, and load the page while the group rebalances.
    for name in ("c4", "c5"):
        group.kafka_python(name, "range")
    during = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                               "--dump-dom", url], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    five = group.wait_settled(["c1", "c2", "c3", "c4", "c5"], {2, 3}, after=three.generation,
                              what="5 members")
    out, _ = during.communicate(timeout=60)
    assert during.returncode == 0 and f'data-group="{group.id}"' in out

    want = {five.member_ids[n]: sorted(f"{group.topic}-{p}" for p in five.owned[n])
            for n in five.owned}
    before = {p: three.member_ids[n] for n in three.owned for p in three.owned[n]}
    after = {p: five.member_ids[n] for n in five.owned for p in five.owned[n]}
    moved = {f"{group.topic}-{p}": (before[p], after[p]) for p in after if before[p] != after[p]}
    assert moved, "scaling 3 to 5 moves partitions"

    # The page reloads itself; wait until the rendered DOM shows the settled group.
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        members, rebalances = shown(page(chromium, url), group.id)
        got = {m: sorted(ps) for m, ps in members.items()}
        later = {p: text for e, ms in rebalances.items() if e > three.generation
                 for p, text in ms.items()}
        if got == want and set(moved) <= set(later):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"page shows {got} with moves {later}; want {want} and moves of "
                        f"{sorted(moved)}")
    # Every moved partition names its old and new owner; the last arrow of each is the move
    # to its current owner.
    for p, (old, new) in moved.items():
        arrows = [ms[p] for e, ms in sorted(rebalances.items()) if e > three.generation and p in ms]
        assert arrows[-1].endswith(f"\u2192 {new}"), (p, arrows)
        assert any(a.startswith(f"{p}: {old}") for a in arrows), (p, arrows)


def test_a_prometheus_server_scrapes_koord(server, tmp_path):
    """Debian's Prometheus, started here, scrapes koord's /metrics: the target is up and a
    koord series can be queried back from Prometheus."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus not installed (scripts/test.sh installs Debian's package)"
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: koord
    static_configs:
      - targets: ["127.0.0.1:{server.http_port}"]
""")
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([binary, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            up = query(port, 'up{job="koord"}')
            loading = query(port, "koord_store_loading")
            if up == ["1"] and loading == ["0"]:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"Prometheus did not scrape koord: up={up}, "
                            f"koord_store_loading={loading}\n"
                            + (tmp_path / "prometheus.log").read_text()[-3000:])
            time.sleep(0.2)  # poll interval of the query, not a wait for an outcome
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def query(port, promql):
    """The values of an instant query, [] until Prometheus answers one."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
    except OSError:
        return []
    return [v["value"][1] for v in body.get("data", {}).get("result", [])]


def test_a_java_consumers_own_metrics_show_beside_its_member(koord, tmp_path):
    """KIP-714: a Java 4.4 consumer (metrics push is on by default) asks koord what to push and
    pushes it; its lag, poll and commit metrics then show on /metrics labelled with its group
    and member id, and on the status page's JSON beside that member."""
    server = koord(*GROUP_SETTINGS, "telemetry.push.interval.ms=500")
    g = Group(server.bootstrap, tmp_path, name="telemetry", partitions=2)
    try:
        g.produce(20)
        g.java().start("j1", "--commit")
        settled = g.wait_settled(["j1"], {2}, what="j1 alone")
        member = settled.member_ids["j1"]
        deadline = time.monotonic() + 60
        while True:
            m = scrape(server)
            pushed = {(dict(ls)["name"], dict(ls).get("member_id")): v
                      for (n, ls), v in m.items()
                      if n == "koord_client_metric" and dict(ls).get("group_id") == g.id}
            if any(name.startswith("org.apache.kafka.consumer.fetch.manager.records.lag")
                   for name, _ in pushed) and any(
                    name.startswith("org.apache.kafka.consumer.coordinator.commit")
                    for name, _ in pushed):
                break
            assert time.monotonic() < deadline, f"no pushed metrics of {g.id}: {sorted(pushed)}"
            time.sleep(0.2)
        members = {mid for _, mid in pushed}
        assert members == {member}, pushed
        member_id = member
        with urllib.request.urlopen(f"{server.http}/api/groups/{g.id}", timeout=10) as r:
            snapshot = json.loads(r.read())
        (row,) = [m for m in snapshot["members"] if m["member_id"] == member_id]
        names = [name for name, _ in row["client_metrics"]]
        assert any(n.startswith("consumer.fetch.manager.records.lag") for n in names), names
    finally:
        g.shutdown()
