"""Soak benchmark: ``ragmon ingest`` into embedded chDB at a fixed offered rate, for tens of minutes.

    python3 bench/soak.py                      # 1,500 traces/s for 30 minutes (the sizing run)
    python3 bench/soak.py --long               # 2 hours: merges reach the levels days of traffic reach
    python3 bench/soak.py --minutes 8          # a quick comparison between two settings
    python3 bench/soak.py --env RAGMON_INGEST__FLUSH_INTERVAL_SECONDS=1 --json out.json

A producer thread offers bench/ingest.py's realistic traces (2–7 KB, 10–50 chunks, 4.1 KB mean) to a fresh
topic of 4 partitions at a fixed rate, keyed by query id and batched as client libraries do (``linger_ms``),
each trace dated when it is sent. ``ragmon ingest`` runs as a subprocess with a fresh chDB directory. Every
minute the benchmark prints, for that minute:

- CPU per trace from ``/proc/<pid>/task/*/stat``, split by thread: the Python side is the interpreter's
  threads (they keep the process's name: the ingest loop, kafka-python's network thread, the write thread),
  the engine is every thread chDB's ClickHouse named for its role (merges, inserts, schedule pools); the
  traces counted are those committed in that minute;
- RSS of the ingest process (``VmRSS``), and its anonymous part (``RssAnon``: heaps, caches, what the process
  really holds); the rest is file-backed, mostly the pages of chDB's 530 MB shared library that have been run
  (~170-210 MB: reclaimable by the kernel and shared by every process that maps the same file);
- active parts and the highest merge level of ``traces``, read from the part directories of the table (a part
  is active unless a part of a higher level covers its block range: ClickHouse's own rule), since the chDB
  directory is locked by the ingest process; bytes on disk of the active parts per row they hold (``count.txt``);
- (at the end) the whole chDB directory per trace: outdated parts waiting to be deleted, the other tables;
- consumer lag (log end minus committed, all partitions) and freshness: commit time minus trace time for one
  in 20 traces (a commit follows the store's acknowledgement, so an upper bound of trace → queryable).

The summary is over the steady state (the second half of the run): the sizing figures quoted in the README and
docs/ingest.md. Asserts nothing. Needs the broker (``scripts/kafka-broker start``); deletes its topics.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import ingest_cmd, ingest_env, realistic_trace  # noqa: E402 - after the root is importable

TS_MARK, ID_MARK = "1999-01-01T00:00:00.000Z", "SOAKTRACEIDXXXXXXXXXX"  # same lengths as what replaces them
PART = re.compile(r"^(?!tmp|delete_tmp)(?P<partition>.+)_(?P<min>\d+)_(?P<max>\d+)_(?P<level>\d+)(?:_\d+)?$")
CLK = os.sysconf("SC_CLK_TCK")


def templates(count: int) -> list[tuple[bytes, bytes]]:
    """Realistic traces whose timestamp and trace id are placeholders, split around them for cheap filling."""
    rng = random.Random(11)
    out = []
    for i in range(count):
        doc = json.loads(realistic_trace(i, rng))
        doc["timestamp"], doc["trace_id"] = TS_MARK, ID_MARK
        body = json.dumps(doc).encode()
        out.append((body, doc["query_id"].encode()))
    return out


class Producer(threading.Thread):
    """Offers traces at ``rate``/s: sends what is due every 10 ms, as an application's client batches them."""

    def __init__(self, bootstrap: str, topic: str, rate: float, seconds: float):
        super().__init__(daemon=True)
        self.rate, self.seconds, self.topic = rate, seconds, topic
        self.pool = templates(2_000)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262_144, acks=1,
                                      max_request_size=4_194_304)
        self.sent = 0
        self.samples: list[tuple[int, int, float]] = []  # (partition, offset, trace time) for one in 20
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def _sampled(self, when: float):
        def record(meta) -> None:
            with self.lock:
                self.samples.append((meta.partition, meta.offset, when))
        return record

    def run(self) -> None:
        start = time.time()
        while not self.stop.is_set():
            now = time.time()
            if now - start >= self.seconds:
                break
            due = int((now - start) * self.rate)
            while self.sent < due:
                body, key = self.pool[self.sent % len(self.pool)]
                when = time.time()
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when * 1000) % 1000:03d}Z"
                value = body.replace(TS_MARK.encode(), stamp.encode(), 1).replace(
                    ID_MARK.encode(), f"s{self.sent:020d}".encode(), 1)
                future = self.producer.send(self.topic, value, key=key)
                if self.sent % 20 == 0:
                    future.add_callback(self._sampled(when))
                self.sent += 1
            self.stop.wait(0.01)
        self.producer.flush()
        self.producer.close()


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of each thread of ``pid``, with its name."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            raw = (task / "stat").read_text()
        except OSError:  # the thread ended between listing and reading
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / CLK)
    return out


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of ``/proc/<pid>/status`` in MB: ``VmRSS`` (all resident), ``RssAnon``, ``RssFile``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def table_dir(chdb: Path, database: str = "ragmon", table: str = "traces") -> Path | None:
    """The directory of the table's parts: an Atomic database keeps it under store/<uuid>, found from its metadata."""
    meta = chdb / "metadata" / database / f"{table}.sql"
    if meta.exists():
        found = re.search(r"UUID '([0-9a-f-]{36})'", meta.read_text())
        if found:
            uid = found.group(1)
            return chdb / "store" / uid[:3] / uid
    plain = chdb / "data" / database / table
    return plain if plain.exists() else None


def active_parts(where: Path | None) -> list[tuple[str, int, int, int, Path]]:
    """Parts not covered by a part of a higher level over the same blocks (outdated parts wait to be deleted)."""
    if where is None or not where.exists():
        return []
    parts = []
    for d in where.iterdir():
        m = PART.match(d.name)
        if m and d.is_dir():
            parts.append((m["partition"], int(m["min"]), int(m["max"]), int(m["level"]), d))
    return [p for p in parts if not any(q is not p and q[0] == p[0] and q[1] <= p[1] and q[2] >= p[2]
                                        and q[3] >= p[3] for q in parts)]


def part_rows(part: Path) -> int:
    """Rows in a part (its count.txt); 0 while the part is being written."""
    try:
        return int((part / "count.txt").read_text())
    except (OSError, ValueError):
        return 0


def dir_bytes(path: Path) -> int:
    total = 0
    for f in path.rglob("*"):
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:
            continue
    return total


@dataclass
class Minute:
    minute: int
    traces: int
    python_us: float
    engine_us: float
    rss_mb: float
    anon_mb: float
    parts: int
    max_level: int
    bytes_per_trace: float
    rows_on_disk: int
    lag: int
    fresh_p50: float
    fresh_p99: float
    fresh_max: float
    load1: float

    @property
    def total_us(self) -> float:
        return self.python_us + self.engine_us


@dataclass
class Watch:
    """Polls the group's committed offsets; resolves sampled traces' freshness when their offset is committed."""

    admin: KafkaAdminClient
    group: str
    committed: dict[int, int] = field(default_factory=dict)
    pending: list[tuple[int, int, float]] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)

    def poll(self, producer: Producer) -> None:
        offsets = self.admin.list_group_offsets({self.group: None}).get(self.group, {})
        now = time.time()
        self.committed = {tp.partition: om.offset for tp, om in offsets.items()}
        with producer.lock:
            self.pending += producer.samples
            producer.samples = []
        keep = []
        for partition, offset, when in self.pending:
            if self.committed.get(partition, -1) > offset:
                self.fresh.append(now - when)
            else:
                keep.append((partition, offset, when))
        self.pending = keep

    def total(self) -> int:
        return sum(self.committed.values())


def pick(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:  # noqa: PLR0915 - one sequential script
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=1500.0, help="offered traces/s (default 1500)")
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to offer traces (default 30)")
    ap.add_argument("--long", action="store_true", help="the long mode: 120 minutes")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bootstrap", default=os.environ.get("RAGMON_TEST_KAFKA", "127.0.0.1:9092"))
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable for ragmon ingest, e.g. RAGMON_INGEST__FLUSH_INTERVAL_SECONDS=2")
    ap.add_argument("--json", type=Path, help="also write every minute and the summary to this file")
    args = ap.parse_args()
    # kafka-python's calls swallow a KeyboardInterrupt: stop through SystemExit, so ingest is stopped and the
    # topics deleted
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    minutes = 120.0 if args.long else args.minutes
    workdir = Path(tempfile.mkdtemp(prefix="ragmon-soak-"))
    topic = f"soak-{uuid.uuid4().hex[:8]}"
    group = f"ragmon-{topic}"
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    admin.create_topics([NewTopic(topic, args.partitions, 1)])
    chdb = workdir / "chdb"
    env = ingest_env(chdb)
    env.update(kv.split("=", 1) for kv in args.env)
    proc = subprocess.Popen(ingest_cmd(args.bootstrap, topic), env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=open(workdir / "ingest.err", "wb"))  # noqa: SIM115
    ends = KafkaConsumer(bootstrap_servers=args.bootstrap)
    tps = [TopicPartition(topic, p) for p in range(args.partitions)]
    rows: list[Minute] = []
    by_name: dict[str, float] = {}
    try:
        time.sleep(8)  # start-up: imports, chDB, migrations, joining the group (not part of the soak)
        if proc.poll() is not None:
            raise SystemExit(f"ragmon ingest exited: {(workdir / 'ingest.err').read_text()[-2000:]}")
        main_name = Path(f"/proc/{proc.pid}/comm").read_text().strip()
        print(f"soak: {args.rate:,.0f} traces/s for {minutes:g} min, topic {topic}, ingest pid {proc.pid}, "
              f"{os.cpu_count()} cores; Python threads = those named {main_name!r}; {' '.join(args.env)}", flush=True)
        print(f"{'min':>3} {'traces':>7} {'py µs':>6} {'eng µs':>6} {'tot µs':>6} {'RSS MB':>6} {'anon':>5} "
              f"{'parts':>5} "
              f"{'lvl':>3} {'B/trace':>7} {'lag':>6} {'fresh p50/p99/max s':>19} {'load':>5}", flush=True)
        producer = Producer(args.bootstrap, topic, args.rate, minutes * 60)
        watch = Watch(admin, group)
        before = thread_cpu(proc.pid)
        mark_traces, mark_fresh = 0, 0
        started = time.time()
        producer.start()
        where = None
        minute = 0
        while producer.is_alive() or watch.total() < producer.sent:
            if proc.poll() is not None:
                raise SystemExit(f"ragmon ingest exited: {(workdir / 'ingest.err').read_text()[-2000:]}")
            watch.poll(producer)
            if not producer.is_alive() and time.time() - started > minutes * 60 + 120:
                break  # the backlog did not drain in two minutes: report what was reached
            if time.time() - started < (minute + 1) * 60:
                time.sleep(0.1)
                continue
            minute += 1
            now = thread_cpu(proc.pid)
            py = eng = 0.0
            for tid, (name, cpu) in now.items():
                delta = cpu - before.get(tid, (name, 0.0))[1]
                by_name[name] = by_name.get(name, 0.0) + delta
                if name == main_name:
                    py += delta
                else:
                    eng += delta
            before = now
            stored = watch.total() - mark_traces
            mark_traces = watch.total()
            where = where or table_dir(chdb)
            parts = active_parts(where)
            size = sum(dir_bytes(p[4]) for p in parts)
            rows_on_disk = sum(part_rows(p[4]) for p in parts)
            end = ends.end_offsets(tps)
            lag = sum(end.values()) - watch.total()
            fresh = watch.fresh[mark_fresh:]
            mark_fresh = len(watch.fresh)
            row = Minute(minute, stored, py / max(stored, 1) * 1e6, eng / max(stored, 1) * 1e6, rss_mb(proc.pid),
                         rss_mb(proc.pid, "RssAnon"), len(parts), max((p[3] for p in parts), default=0),
                         size / max(rows_on_disk, 1), rows_on_disk, lag,
                         pick(fresh, 0.5), pick(fresh, 0.99), max(fresh, default=float("nan")), os.getloadavg()[0])
            rows.append(row)
            print(f"{row.minute:>3} {row.traces:>7,} {row.python_us:>6.0f} {row.engine_us:>6.0f} {row.total_us:>6.0f} "
                  f"{row.rss_mb:>6.0f} {row.anon_mb:>5.0f} {row.parts:>5} {row.max_level:>3} "
                  f"{row.bytes_per_trace:>7.0f} {row.lag:>6,} "
                  f"{row.fresh_p50:>5.2f} / {row.fresh_p99:>5.2f} / {row.fresh_max:>5.2f} {row.load1:>5.2f}",
                  flush=True)
        producer.stop.set()
        summary = summarize(rows, watch, producer.sent, args.rate, minutes, by_name)
        summary["data_dir_bytes_per_trace_end"] = round(dir_bytes(chdb) / max(watch.total(), 1))  # outdated parts too
        print(json.dumps(summary, indent=2))
        if args.json:
            args.json.write_text(json.dumps({"args": {**vars(args), "json": str(args.json)},
                                             "minutes": [asdict(r) for r in rows], "summary": summary}, indent=2))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        ends.close()
        for name in (topic, f"{topic}.dlq"):
            try:
                admin.delete_topics([name])
            except Exception:  # noqa: BLE001, S110 - the dead-letter topic exists only if a letter was sent
                pass
        admin.close()
        shutil.rmtree(workdir, ignore_errors=True)


def summarize(rows: list[Minute], watch: Watch, sent: int, rate: float, minutes: float,
              by_name: dict[str, float]) -> dict:
    """The steady state: the second half of the minutes (merges have reached their working levels by then)."""
    steady = [r for r in rows[len(rows) // 2:] if r.traces] or rows
    traces = sum(r.traces for r in steady)
    py = sum(r.python_us * r.traces for r in steady) / max(traces, 1)
    eng = sum(r.engine_us * r.traces for r in steady) / max(traces, 1)
    last = rows[-1] if rows else None
    bpt = last.bytes_per_trace if last else float("nan")
    return {
        "offered_per_s": rate, "minutes": minutes, "sent": sent, "committed": watch.total(),
        "steady_minutes": [steady[0].minute, steady[-1].minute] if steady else [],
        "cpu_us_per_trace": round(py + eng, 1), "python_us_per_trace": round(py, 1),
        "engine_us_per_trace": round(eng, 1), "traces_per_cpu_second": round(1e6 / max(py + eng, 1e-9)),
        "rss_mb_steady_min_max": [round(min(r.rss_mb for r in steady)), round(max(r.rss_mb for r in steady))],
        "rss_mb_peak_sampled": round(max(r.rss_mb for r in rows)) if rows else None,
        "anon_rss_mb_steady_min_max": [round(min(r.anon_mb for r in steady)), round(max(r.anon_mb for r in steady))],
        "rss_mb_per_hour_steady": round((steady[-1].rss_mb - steady[0].rss_mb) / max(len(steady) - 1, 1) * 60, 1),
        "parts_end": last.parts if last else None, "max_level_end": last.max_level if last else None,
        "bytes_per_trace_end": round(bpt), "rows_on_disk_end": last.rows_on_disk if last else None,
        "disk_gib_per_day_at_rate": round(bpt * rate * 86400 / 2**30, 1),
        "freshness_p50_p99_max_s": [round(pick(watch.fresh, q), 2) for q in (0.5, 0.99)]
                                   + [round(max(watch.fresh, default=0), 2)],
        "freshness_p99_worst_minute_s": round(max((r.fresh_p99 for r in rows), default=float("nan")), 2),
        "lag_max_messages": max((r.lag for r in rows), default=0),
        "load1_mean": round(statistics.mean(r.load1 for r in rows), 2) if rows else None,
        "cpu_seconds_by_thread_name": dict(sorted(((k, round(v, 1)) for k, v in by_name.items()),
                                                  key=lambda kv: -kv[1])[:15]),
    }


if __name__ == "__main__":
    main()
