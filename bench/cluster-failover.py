"""bench/cluster.sh's clients: raw Kafka protocol over asyncio, following FindCoordinator.

  failover  commit an offset for each of G groups, probe each group every ~50 ms with an
            OffsetFetch at its coordinator (FindCoordinator again on any bootstrap address when
            the coordinator is gone or says NOT_COORDINATOR), kill -9 the victim, and report per
            group the time from the kill to the first OffsetFetch sent after it that returned the
            committed offset with no error
  load      classic group members (JoinGroup v2, SyncGroup v0, Heartbeat v0, each member on a
            connection of its own to the coordinator FindCoordinator named), heartbeating every
            --heartbeat-ms; once every group is Stable, a --duration window: per koord node the
            groups it serves and the Heartbeats it answered (its /metrics) and its CPU seconds
            (/proc/PID/stat), and the heartbeats the clients saw answered per coordinator
  wait-isr  wait until every partition of __consumer_offsets has its full ISR (upstream Kafka)

koord-load does not serve here: it sends every request to --bootstrap, one address, and never
connects to the coordinator FindCoordinator names, so with several koord nodes the groups of the
other nodes' shards would get NOT_COORDINATOR.

Run with proto-tests/.venv/bin/python (confluent-kafka, for wait-isr).
"""
import argparse
import asyncio
import json
import os
import random
import signal
import struct
import sys
import time
import urllib.request

NONE, NOT_COORDINATOR, LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 0, 16, 14, 15
REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION = 27, 25, 22
FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13


def s16(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def b32(b):
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


class R:
    """A response body cursor."""

    def __init__(self, data):
        self.d, self.o = data, 0

    def i16(self):
        v = struct.unpack_from(">h", self.d, self.o)[0]
        self.o += 2
        return v

    def i32(self):
        v = struct.unpack_from(">i", self.d, self.o)[0]
        self.o += 4
        return v

    def i64(self):
        v = struct.unpack_from(">q", self.d, self.o)[0]
        self.o += 8
        return v

    def str(self):
        n = self.i16()
        if n < 0:
            return None
        v = self.d[self.o:self.o + n].decode()
        self.o += n
        return v

    def bytes(self):
        n = self.i32()
        if n < 0:
            return None
        v = self.d[self.o:self.o + n]
        self.o += n
        return v


class Conn:
    """One pipelined connection: requests matched to responses by correlation id."""

    def __init__(self, addr):
        self.addr = addr
        self.corr = 0
        self.waiting = {}
        self.closed = False

    async def open(self, timeout=1.0):
        host, port = self.addr.rsplit(":", 1)
        self.r, self.w = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
        self.task = asyncio.ensure_future(self.read())
        return self

    async def read(self):
        try:
            while True:
                n = struct.unpack(">i", await self.r.readexactly(4))[0]
                data = await self.r.readexactly(n)
                corr = struct.unpack_from(">i", data)[0]
                fut = self.waiting.pop(corr, None)
                if fut is not None and not fut.done():
                    fut.set_result(data[4:])
        except Exception:
            pass
        self.close()

    def close(self):
        if self.closed:
            return
        self.closed = True
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("closed"))
        self.waiting.clear()
        task = getattr(self, "task", None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        try:
            self.w.close()
        except Exception:
            pass

    async def call(self, key, version, body, timeout):
        if self.closed:
            raise ConnectionError("closed")
        self.corr += 1
        corr = self.corr
        fut = asyncio.get_running_loop().create_future()
        self.waiting[corr] = fut
        head = struct.pack(">hhi", key, version, corr) + s16("koord-bench")
        msg = head + body
        self.w.write(struct.pack(">i", len(msg)) + msg)
        try:
            return R(await asyncio.wait_for(fut, timeout))
        except asyncio.TimeoutError:
            self.waiting.pop(corr, None)
            self.close()  # a hung peer: look again, as a client does after request.timeout.ms
            raise


class Finder:
    """FindCoordinator v0 on the bootstrap addresses, in turn, one connection each."""

    def __init__(self, bootstrap, timeout):
        self.bootstrap = bootstrap
        self.conns = {}
        self.timeout = timeout
        self.next = random.randrange(len(bootstrap))

    async def find(self, group):
        for _ in range(len(self.bootstrap)):
            addr = self.bootstrap[self.next % len(self.bootstrap)]
            self.next += 1
            try:
                c = self.conns.get(addr)
                if c is None or c.closed:
                    c = self.conns[addr] = await Conn(addr).open(self.timeout)
                r = await c.call(FIND_COORDINATOR, 0, s16(group), self.timeout)
                err, _node, host, port = r.i16(), r.i32(), r.str(), r.i32()
                if err == NONE:
                    return f"{host}:{port}"
            except (OSError, asyncio.TimeoutError, ConnectionError, struct.error):
                pass
        return None


def offset_commit(group, topic, offset):
    return (s16(group) + struct.pack(">i", -1) + s16("") + struct.pack(">q", -1)
            + struct.pack(">i", 1) + s16(topic) + struct.pack(">i", 1)
            + struct.pack(">iq", 0, offset) + s16(""))


def offset_fetch(group, topic):  # v3
    return s16(group) + struct.pack(">i", 1) + s16(topic) + struct.pack(">ii", 1, 0)


def fetched(r):
    """OffsetFetch v3: (error, offset of partition 0)."""
    r.i32()
    offset, perr = -1, NONE
    for _ in range(r.i32()):
        r.str()
        for _ in range(r.i32()):
            r.i32()
            offset = r.i64()
            r.str()
            perr = r.i16()
    err = r.i16()
    return (err or perr), offset


class Prober:
    """One group's probe: its coordinator's address and a connection to it."""

    def __init__(self, group, offset, finder, conns, timeout):
        self.group, self.offset, self.finder, self.conns = group, offset, finder, conns
        self.coord = None
        self.timeout = timeout

    async def conn(self):
        if self.coord is None:
            self.coord = await self.finder.find(self.group)
            if self.coord is None:
                raise ConnectionError("no coordinator")
        c = self.conns.get(self.coord)
        if c is None or c.closed:
            c = self.conns[self.coord] = await Conn(self.coord).open(self.timeout)
        return c

    async def op(self, key, version, body):
        try:
            c = await self.conn()
            return await c.call(key, version, body, self.timeout)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            self.coord = None
            raise

    async def commit(self, topic):
        while True:
            try:
                r = await self.op(OFFSET_COMMIT, 2, offset_commit(self.group, topic, self.offset))
                r.i32()
                r.str()
                r.i32()
                r.i32()
                err = r.i16()
                if err == NONE:
                    return
                if err == NOT_COORDINATOR:
                    self.coord = None
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass
            await asyncio.sleep(0.1)

    async def fetch(self, topic):
        """(ok, error name) of one OffsetFetch at the coordinator."""
        try:
            r = await self.op(OFFSET_FETCH, 3, offset_fetch(self.group, topic))
        except (OSError, asyncio.TimeoutError, ConnectionError) as e:
            return False, type(e).__name__
        err, offset = fetched(r)
        if err in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
            self.coord = None
        if err != NONE:
            return False, f"error {err}"
        if offset != self.offset:
            return False, f"offset {offset}"
        return True, None


async def failover(a):
    bootstrap = a.bootstrap.split(",")
    pids = dict(kv.split("=") for kv in a.pids.split(","))
    groups = [f"{a.prefix}-{i}" for i in range(a.groups)]
    if a.upstream:
        create_topic(a.upstream, a.topic)
    finder = Finder(bootstrap, a.timeout)
    conns = {}
    probers = [Prober(g, 1000 + i, finder, conns, a.timeout) for i, g in enumerate(groups)]
    await asyncio.gather(*(p.commit(a.topic) for p in probers))
    # Every group answers with its offset, and where from.
    deadline = time.monotonic() + 60
    for p in probers:
        while not (await p.fetch(a.topic))[0]:
            if time.monotonic() > deadline:
                sys.exit(f"cluster-failover.py: {p.group} does not answer before the kill")
            await asyncio.sleep(0.1)
    served = {}
    for p in probers:
        served.setdefault(p.coord, []).append(p.group)
    if a.victim == "most":
        victim = max(served, key=lambda k: len(served[k]))
    else:
        victim = a.victim
    mine = set(served.get(victim, []))
    if not mine:
        sys.exit(f"cluster-failover.py: {victim} serves none of the groups: {served}")
    state = {"kill": None, "back": {}, "errors": {}, "gap": {}, "last_ok": {}}

    async def probe(p):
        while True:
            sent = time.monotonic()
            ok, err = await p.fetch(a.topic)
            now = time.monotonic()
            kill = state["kill"]
            if ok:
                if kill is not None and sent >= kill:
                    state["back"].setdefault(p.group, now - kill)
                    last = state["last_ok"].get(p.group, kill)
                    state["gap"][p.group] = max(state["gap"].get(p.group, 0.0), now - max(last, kill))
                state["last_ok"][p.group] = now
            elif kill is not None:
                state["errors"][err] = state["errors"].get(err, 0) + 1
            await asyncio.sleep(max(0.0, a.interval - (time.monotonic() - sent)))

    tasks = [asyncio.ensure_future(probe(p)) for p in probers]
    await asyncio.sleep(1.0)
    state["kill"] = time.monotonic()
    os.kill(int(pids[victim]), signal.SIGKILL)
    deadline = state["kill"] + a.max_wait
    while time.monotonic() < deadline:
        if all(g in state["back"] for g in groups):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)  # the others' gaps settle
    for t in tasks:
        t.cancel()
    missing = sorted(g for g in groups if g not in state["back"])
    victim_back = [state["back"].get(g, float("inf")) for g in mine]
    others = [state["gap"].get(g, 0.0) for g in groups if g not in mine]
    print(json.dumps({
        "victim": victim, "victim_groups": len(mine),
        "served": {k: len(v) for k, v in served.items()},
        "failover_s": max(victim_back), "first_back_s": min(victim_back),
        "others_max_gap_s": max(others) if others else 0.0,
        "missing": missing, "errors": state["errors"],
    }))
    sys.stdout.flush()
    os._exit(0)  # the probes' connections: no orderly close needed


def join_body(group, member_id, topic, session_ms, rebalance_ms):  # v2
    sub = struct.pack(">h", 0) + struct.pack(">i", 1) + s16(topic) + b32(None)
    return (s16(group) + struct.pack(">ii", session_ms, rebalance_ms) + s16(member_id)
            + s16("consumer") + struct.pack(">i", 1) + s16("range") + b32(sub))


EMPTY_ASSIGNMENT = struct.pack(">h", 0) + struct.pack(">i", 0) + b32(None)


class Load:
    def __init__(self, a):
        self.a = a
        self.bootstrap = a.bootstrap.split(",")
        self.last_join = time.monotonic()
        self.beating = set()  # members past SyncGroup
        self.window = False
        self.stopping = False  # the end: leave (Python 3.11's wait_for can swallow a cancel)
        self.hb = {}  # coordinator -> heartbeats answered in the window
        self.fail = {}
        self.group_coord = {}

    async def member(self, group, idx):
        a = self.a
        finder = Finder(self.bootstrap, 5.0)
        member_id, conn, coord = "", None, None
        key = (group, idx)
        while not self.stopping:
            try:
                if conn is None or conn.closed:
                    coord = await finder.find(group)
                    if coord is None:
                        await asyncio.sleep(0.2)
                        continue
                    conn = await Conn(coord).open(5.0)
                self.beating.discard(key)
                self.last_join = time.monotonic()
                r = await conn.call(JOIN_GROUP, 2, join_body(
                    group, member_id, a.topic, a.session_ms, 60000), 70.0)
                r.i32()
                err, gen, _proto, leader, mid = r.i16(), r.i32(), r.str(), r.str(), r.str()
                members = []
                for _ in range(r.i32()):
                    members.append(r.str())
                    r.bytes()
                if err == UNKNOWN_MEMBER_ID:
                    member_id = ""
                    continue
                if err in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
                    conn.close()
                    continue
                if err != NONE:
                    await asyncio.sleep(0.1)
                    continue
                member_id = mid
                assignments = b""
                n = 0
                if leader == mid:
                    for m in members:
                        assignments += s16(m) + b32(EMPTY_ASSIGNMENT)
                        n += 1
                body = (s16(group) + struct.pack(">i", gen) + s16(member_id)
                        + struct.pack(">i", n) + assignments)
                r = await conn.call(SYNC_GROUP, 0, body, 70.0)
                err = r.i16()
                if err != NONE:
                    if err == UNKNOWN_MEMBER_ID:
                        member_id = ""
                    if err in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
                        conn.close()
                    continue
                self.beating.add(key)
                self.group_coord[group] = coord
                hb = s16(group) + struct.pack(">i", gen) + s16(member_id)
                while not self.stopping:
                    await asyncio.sleep(a.heartbeat_ms / 1000 * random.uniform(0.9, 1.1))
                    r = await conn.call(HEARTBEAT, 0, hb, 10.0)
                    err = r.i16()
                    if err == NONE:
                        if self.window:
                            self.hb[coord] = self.hb.get(coord, 0) + 1
                        continue
                    if self.window:
                        self.fail[err] = self.fail.get(err, 0) + 1
                    if err == UNKNOWN_MEMBER_ID:
                        member_id = ""
                    if err in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
                        conn.close()
                    break
                if self.stopping:
                    raise asyncio.CancelledError
            except asyncio.CancelledError:
                if conn is not None and not conn.closed and member_id:
                    body = s16(group) + struct.pack(">i", 1) + s16(member_id) + s16(None)
                    try:
                        await conn.call(LEAVE_GROUP, 3, body, 2.0)
                    except Exception:
                        pass
                    conn.close()
                return
            except (OSError, asyncio.TimeoutError, ConnectionError, struct.error):
                if self.window:
                    self.fail["io"] = self.fail.get("io", 0) + 1
                if conn is not None:
                    conn.close()
                await asyncio.sleep(0.2)


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metrics(http):
    """(Stable classic groups, Heartbeat requests answered) from a koord node's /metrics."""
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=5).read().decode()
    groups = hb = 0.0
    for line in text.splitlines():
        if line.startswith('koord_classic_group_count{state="Stable"}'):
            groups = float(line.split()[-1])
        elif line.startswith("koord_requests_total{") and 'api="Heartbeat"' in line:
            hb += float(line.split()[-1])
    return groups, hb


async def load(a):
    nodes = []  # (addr, pid, http)
    for spec in a.nodes.split(","):
        addr, pid, http = spec.split("=")
        nodes.append((addr, int(pid), http))
    prefix = a.prefix
    groups = [f"{prefix}-{i}" for i in range(a.groups)]
    create_topic(a.upstream, a.topic)
    ld = Load(a)
    tasks = []
    for g in groups:
        for m in range(a.members):
            tasks.append(asyncio.ensure_future(ld.member(g, m)))
        await asyncio.sleep(0.002)
    want = a.groups * a.members
    deadline = time.monotonic() + a.join_timeout
    while not (len(ld.beating) == want and time.monotonic() - ld.last_join > 3.0):
        if time.monotonic() > deadline:
            sys.exit(f"cluster-failover.py: {len(ld.beating)} of {want} members Stable after "
                     f"{a.join_timeout} s")
        await asyncio.sleep(0.2)
    before = {addr: (cpu_s(pid), metrics(http)) for addr, pid, http in nodes}
    me0 = cpu_s(os.getpid())
    t0 = time.monotonic()
    ld.window = True
    await asyncio.sleep(a.duration)
    ld.window = False
    window = time.monotonic() - t0
    after = {addr: (cpu_s(pid), metrics(http)) for addr, pid, http in nodes}
    me1 = cpu_s(os.getpid())
    ld.stopping = True
    for t in tasks:
        t.cancel()
    await asyncio.wait(tasks, timeout=5)  # LeaveGroup: the next run counts only its own groups
    out = {"nodes": [], "window_s": window, "client_cpu_s": me1 - me0, "failures": ld.fail,
           "groups": a.groups, "members": a.members, "stable_at_end": len(ld.beating)}
    for addr, _pid, _http in nodes:
        (c0, (_g0, h0)), (c1, (g1, h1)) = before[addr], after[addr]
        out["nodes"].append({
            "addr": addr, "groups_metric": g1, "heartbeats_metric": h1 - h0, "cpu_s": c1 - c0,
            "groups_client": sum(1 for v in ld.group_coord.values() if v == addr),
            "heartbeats_client": ld.hb.get(addr, 0)})
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)


def create_topic(upstream, topic):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": upstream})
    if topic in admin.list_topics(timeout=10).topics:
        return
    for f in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        try:
            f.result(30)
        except Exception as e:  # created meanwhile
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def wait_isr(a):
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    deadline = time.time() + a.max_wait
    while time.time() < deadline:
        try:
            md = admin.list_topics(topic="__consumer_offsets", timeout=5)
            parts = md.topics["__consumer_offsets"].partitions.values()
            if parts and all(len(p.isrs) == len(p.replicas) and p.leader >= 0 for p in parts):
                return
        except Exception:
            pass
        time.sleep(0.5)
    sys.exit("cluster-failover.py: __consumer_offsets is still under-replicated")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("failover")
    f.add_argument("--bootstrap", required=True)
    f.add_argument("--pids", required=True, help="addr=pid,... of the processes that may be killed")
    f.add_argument("--victim", default="most", help="an address, or most: the one serving most groups")
    f.add_argument("--prefix", required=True)
    f.add_argument("--groups", type=int, default=50)
    f.add_argument("--topic", default="bench-cluster")
    f.add_argument("--upstream", default="", help="create --topic there first")
    f.add_argument("--interval", type=float, default=0.05)
    f.add_argument("--timeout", type=float, default=1.0)
    f.add_argument("--max-wait", type=float, default=90.0)
    lo = sub.add_parser("load")
    lo.add_argument("--bootstrap", required=True)
    lo.add_argument("--nodes", required=True, help="addr=pid=http,... of the koord nodes")
    lo.add_argument("--prefix", required=True)
    lo.add_argument("--groups", type=int, default=300)
    lo.add_argument("--members", type=int, default=5)
    lo.add_argument("--heartbeat-ms", type=int, default=500)
    lo.add_argument("--session-ms", type=int, default=30000)
    lo.add_argument("--duration", type=float, default=20.0)
    lo.add_argument("--join-timeout", type=float, default=180.0)
    lo.add_argument("--topic", default="bench-cluster-load")
    lo.add_argument("--upstream", required=True)
    w = sub.add_parser("wait-isr")
    w.add_argument("--bootstrap", required=True)
    w.add_argument("--max-wait", type=float, default=120.0)
    a = ap.parse_args()
    if a.cmd == "failover":
        asyncio.run(failover(a))
    elif a.cmd == "load":
        asyncio.run(load(a))
    else:
        wait_isr(a)


if __name__ == "__main__":
    main()
