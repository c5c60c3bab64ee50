"""``ragmon run`` as the operations scenario runs it: a process of its own, stopped and started again.

``Daemon.start`` launches ``python -m ragmon --config … run`` (one log file per lifetime) and waits for /readyz;
a start refused because the store's directory is still held (a read command took it while the daemon was down)
is retried, as a supervisor would, and noted. While it runs, one thread scrapes /metrics every 2 s (the
lifetime's last counters, and every rise of a write-failure counter, with the time it was seen) and another
polls /readyz every 0.5 s (when it answered 200 again after a fault). ``sigterm`` stops it and keeps the counters
it prints when it stops (``ragmon run stopped: {…}``); ``kill_9`` scrapes, reads the committed offsets, and kills
it. ``close`` stops whatever still runs. ``log_failures`` reads the failed writes and reads of the store its logs name,
with their times.
Test plumbing only: no assertions.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

from tests.support.operations.records import Lifetime, WriteFailure

ROOT = Path(__file__).resolve().parents[3]
STOP_LINE = re.compile(r"ragmon run stopped: (\{.*\})")
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (WARNING|ERROR|CRITICAL) (\S+): (.*)$")
#: a warning or error of the daemon that says a write failed (store, dead letters, offsets, labels, sessions), or a
#: role crashed
WRITE_FAILED = re.compile(r"write failed|not stored|insert into \w+ failed|commit failed|offsets stay uncommitted|"
                          r"crashed|cannot write")
#: one that says a read of the store failed (a role's query, a page's)
READ_FAILED = re.compile(r"ClickHouse query failed")
#: the metric counters that rise when a write fails, and the series of them that count failures
FAILURE_COUNTERS = ("ragmon_ingest_flush_failures_total", "ragmon_outcomes_store_retries_total",
                    "ragmon_ingest_store_retries_total")
FAILURE_SERIES = (('ragmon_drift_checks_total', 'outcome="error"'), ('ragmon_shadow_runs_total', 'outcome="error"'))


def parse_counters(text: str) -> dict[str, float]:
    """Every ``*_total`` sample of a /metrics page, keyed as ``Telemetry.counter_totals`` keys them."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        if name.endswith("_total"):
            out[name_labels] = float(value)
    return out


def failure_total(counters: dict[str, float]) -> float:
    total = sum(v for k, v in counters.items() if k.split("{", 1)[0] in FAILURE_COUNTERS)
    return total + sum(v for k, v in counters.items() for name, labels in FAILURE_SERIES
                       if k.startswith(name) and labels in k)


class Daemon:
    def __init__(self, config: Path, workdir: Path, base: str, *, bootstrap: str, group: str, topic: str,
                 failures: list[WriteFailure]):
        self.config, self.workdir, self.base = config, workdir, base
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.failures = failures
        self.lifetimes: list[Lifetime] = []
        self.ready_log: list[tuple[float, bool]] = []   # /readyz answers (time, 200?) while polled
        self.notes: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self._stop_watch = threading.Event()
        self._watchers: list[threading.Thread] = []

    # -- starting ---------------------------------------------------------------------------------------------

    def start(self, timeout: float = 180.0) -> Lifetime:
        for attempt in range(1, 6):
            life = Lifetime(len(self.lifetimes), time.time())
            life.log = str(self.workdir / f"daemon-{life.index}{'' if attempt == 1 else f'-try{attempt}'}.log")
            with open(life.log, "wb") as log:
                self.proc = subprocess.Popen([sys.executable, "-m", "ragmon", "--config", str(self.config), "run"],
                                             cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                             env=dict(os.environ, COLUMNS="300", PYTHONPATH=str(ROOT)))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None and not self._ready():
                time.sleep(0.3)
            if self.proc.poll() is None and self._ready():
                life.ready = time.time()
                self.lifetimes.append(life)
                self._watch(life)
                return life
            if self.proc.poll() is None:
                self._terminate()
                raise RuntimeError(f"ragmon run did not become ready within {timeout:.0f}s; see {life.log}")
            tail = Path(life.log).read_text(encoding="utf-8", errors="replace")[-1500:]
            self.notes.append(f"start {attempt} of lifetime {life.index} exited {self.proc.returncode}: "
                              f"{tail.strip().splitlines()[-1] if tail.strip() else '(no output)'}")
            time.sleep(3)
        raise RuntimeError(f"ragmon run would not start; last log:\n{tail}")

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.base}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def _watch(self, life: Lifetime) -> None:
        self._stop_watch = threading.Event()
        stop = self._stop_watch

        def scrape() -> None:
            last = None
            while not stop.wait(2.0):
                counters = self.scrape()
                if counters is None:
                    continue
                life.last_scrape, life.scraped_at = counters, time.time()
                total = failure_total(counters)
                if last is not None and total > last:
                    self.failures.append(WriteFailure(time.time(), "metrics", f"failure counters rose by {total - last:g}"))
                last = total

        def ready() -> None:
            while not stop.wait(0.5):
                self.ready_log.append((time.time(), self._ready()))

        self._watchers = [threading.Thread(target=f, daemon=True, name=f"ops-daemon-{f.__name__}") for f in (scrape, ready)]
        for t in self._watchers:
            t.start()

    def _unwatch(self) -> None:
        self._stop_watch.set()
        for t in self._watchers:
            t.join(10)

    def scrape(self) -> dict[str, float] | None:
        try:
            return parse_counters(httpx.get(f"{self.base}/metrics", timeout=10).text)
        except httpx.HTTPError:
            return None

    def wait_ready(self, since: float, timeout: float) -> float | None:
        """The first time at or after ``since`` /readyz answered 200 (waiting up to ``timeout`` for it)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = [t for t, ok in list(self.ready_log) if ok and t >= since]
            if seen:
                return seen[0]
            if time.monotonic() > deadline:
                return None
            if self._ready():
                return time.time()
            time.sleep(0.25)

    # -- stopping -----------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sigterm(self, how: str = "sigterm", timeout: float = 90.0) -> Lifetime:
        life = self.lifetimes[-1]
        assert self.proc is not None
        life.stopped, life.how = time.time(), how
        self.proc.send_signal(signal.SIGTERM)
        try:
            life.exit_code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.notes.append(f"lifetime {life.index} did not stop within {timeout:.0f}s of SIGTERM: killed")
            self.proc.kill()
            life.exit_code = self.proc.wait(30)
        self._unwatch()
        found = STOP_LINE.findall(Path(life.log).read_text(encoding="utf-8", errors="replace"))
        life.final = json.loads(found[-1]) if found else None
        return life

    def kill_9(self) -> Lifetime:
        life = self.lifetimes[-1]
        assert self.proc is not None
        life.committed_before_kill = self.committed()
        counters = self.scrape()
        if counters is not None:
            life.last_scrape, life.scraped_at = counters, time.time()
        life.stopped, life.how = time.time(), "kill -9"
        self.proc.send_signal(signal.SIGKILL)
        life.exit_code = self.proc.wait(30)
        self._unwatch()
        life.committed_after_kill = self.committed()
        return life

    def _terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def close(self) -> None:
        """Stop whatever still runs (the harness's clean-up, also after a failure)."""
        self._unwatch()
        self._terminate()

    # -- what it left ---------------------------------------------------------------------------------------------

    def committed(self) -> dict[int, int]:
        """The ingest group's committed offsets on the traces topic ({} when the broker cannot say)."""
        from kafka import KafkaAdminClient

        try:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        except Exception:  # noqa: BLE001 - a broker that is away: nothing to say
            return {}
        try:
            offsets = admin.list_group_offsets({self.group: None}).get(self.group, {})
            return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == self.topic and om.offset >= 0}
        except Exception:  # noqa: BLE001
            return {}
        finally:
            admin.close()

    def log_failures(self) -> tuple[list[WriteFailure], list[tuple[float, str]]]:
        """(failed writes and store reads the logs name, every other warning or error) with their times, over every
        lifetime."""
        failures, others = [], []
        for path in sorted(self.workdir.glob("daemon-*.log")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                m = LOG_LINE.match(line)
                if not m:
                    continue
                at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
                text = f"{m.group(3)} {m.group(4)}: {m.group(5)}"
                if WRITE_FAILED.search(m.group(5)):
                    failures.append(WriteFailure(at, "daemon-log", f"{path.name}: {text}"))
                elif READ_FAILED.search(m.group(5)):
                    failures.append(WriteFailure(at, "daemon-log (read)", f"{path.name}: {text}"))
                else:
                    others.append((at, f"{path.name}: {text}"))
        return failures, others

