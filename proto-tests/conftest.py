"""Real clients against the real koord binary, on 127.0.0.1.

`koord` starts a koord process on a free loopback port with its own data dir and stops it with
SIGTERM at teardown, asserting a clean exit (graceful shutdown is a feature). A failing test shows
the tail of every koord log that was open during it. `java(...)` runs one step of the Java client
(java/src/main/java/koord/tests/Client.java) and returns its JSON lines. scripts/test.sh builds
koord, the venv and the Java classes; run it once before running pytest by hand.
"""

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KOORD_BIN = Path(os.environ.get("KOORD_BIN", ROOT / "target" / "release" / "koord"))
JAVA_DIR = HERE / "java"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0

# koord processes running right now; their logs are attached to a failing test's report.
_running = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Koord:
    """One koord process. `sets` are `--set KEY=VALUE` overrides, e.g. "topics=t:3"."""

    def __init__(self, workdir: Path, sets=()):
        self.workdir = workdir
        self.sets = list(sets)
        self.log_path = workdir / "koord.log"
        self.proc = None
        self.port = None
        # The HTTP listener (/metrics, /readyz, the status page): a free port of its own unless
        # the test names one, so that parallel koords do not fight over the default.
        self.http_port = None
        if not any(kv.startswith("http.listen=") for kv in self.sets):
            self.http_port = free_port()
            self.sets.append(f"http.listen=127.0.0.1:{self.http_port}")

    @property
    def http(self):
        """Base URL of the HTTP listener."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def requests_by_version(self, api):
        """{version: count} of the requests of `api` this koord answered, from its /metrics."""
        with urllib.request.urlopen(f"{self.http}/metrics", timeout=10) as r:
            text = r.read().decode()
        pattern = rf'^koord_requests_total{{api="{api}",version="(\d+)"}} (\S+)$'
        return {int(v): float(n) for v, n in re.findall(pattern, text, re.M)}

    def start(self, port=None):
        """Starts koord on a free port, or on `port` (a restart: no retry on another port)."""
        if not KOORD_BIN.exists():
            pytest.fail(f"{KOORD_BIN} not found: build it (scripts/test.sh) or set KOORD_BIN")
        self.workdir.mkdir(parents=True, exist_ok=True)
        # A port picked free can be taken before koord binds it: then koord exits and we retry.
        for _ in range(1 if port else 3):
            self.port = port or free_port()
            cmd = [str(KOORD_BIN), "--listen", self.bootstrap,
                   "--data-dir", str(self.workdir / "data")]
            for kv in self.sets:
                cmd += ["--set", kv]
            with open(self.log_path, "ab") as log:
                log_start = log.tell()  # this run's log begins here (a restart appends)
                log.write(f"$ {' '.join(cmd)}\n".encode())
                log.flush()
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
            if self._wait_accepting(log_start):
                _running.append(self)
                return self
            if "cannot listen" not in self.log_tail():
                break
        self.proc.kill()
        self.proc.wait()
        pytest.fail(f"koord did not start accepting on {self.bootstrap}\n{self.log_tail()}")

    def restart(self):
        """SIGTERM (koord must exit 0), then the same binary on the same port with the same data
        dir and settings, waited for until it has loaded the stored groups."""
        self.stop()
        return self.start(port=self.port)

    def _wait_accepting(self, log_start=0):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                # Until the stored groups are loaded, group requests get
                # COORDINATOR_LOAD_IN_PROGRESS; raw-protocol tests expect a loaded koord.
                with open(self.log_path, "rb") as log:
                    log.seek(log_start)
                    if b"groups loaded" in log.read():
                        return True
                time.sleep(0.02)  # poll interval, not a wait for an outcome
            except OSError:
                time.sleep(0.02)  # poll interval, not a wait for an outcome
        return False

    def stop(self):
        """SIGTERM, then assert koord shut down by itself with exit code 0."""
        if self in _running:
            _running.remove(self)
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            assert code in (None, 0), f"koord died early with {code}\n{self.log_tail()}"
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"koord ignored SIGTERM for {STOP_TIMEOUT}s\n{self.log_tail()}")
        assert code == 0, f"koord exited {code} on SIGTERM\n{self.log_tail()}"

    def log_tail(self, lines=60):
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no koord log)"
        return f"--- last {lines} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])


@pytest.fixture
def koord(tmp_path):
    """Factory: `koord("topics=t:3", ...)` starts a koord and returns it; all stop at teardown."""
    started = []

    def start(*sets):
        k = Koord(tmp_path / f"koord{len(started)}", sets)
        started.append(k)
        return k.start()

    yield start
    errors = []
    for k in started:
        try:
            k.stop()
        except BaseException as e:  # stop the others too, then report
            errors.append(str(e))
    assert not errors, "\n".join(errors)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for k in _running:
            report.sections.append((f"koord log ({k.bootstrap})", k.log_tail()))


def run(cmd, timeout=60, **kw):
    """Runs a client command; fails the test with its stderr on a non-zero exit."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if p.returncode != 0:
        pytest.fail(f"{cmd[0]} exited {p.returncode}: {' '.join(map(str, cmd))[:300]}\n"
                    f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-3000:]}")
    return p


def java(*args, timeout=120, check=True):
    """Runs one step of the Java client; returns its stdout as a list of JSON values."""
    cp_file = JAVA_DIR / "target" / "classpath.txt"
    if not cp_file.exists():
        pytest.fail(f"{cp_file} missing: run scripts/test.sh (it builds proto-tests/java)")
    cp = f"{JAVA_DIR / 'target' / 'classes'}:{cp_file.read_text().strip()}"
    cmd = ["java", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
           "-cp", cp, "koord.tests.Client", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if check and p.returncode != 0:
        pytest.fail(f"java Client {' '.join(map(str, args))} exited {p.returncode}: "
                    f"{lines[-1] if lines else p.stdout[-1000:]}\nstderr: {p.stderr[-3000:]}")
    return lines
