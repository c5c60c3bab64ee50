"""Ingest benchmark against the real broker: bare kafka-python consume vs ``ragmon ingest`` into chDB.

    python3 bench/ingest.py [--n 80000] [--bootstrap 127.0.0.1:9092] [--rate 1000] [--seconds 10]

1. produces N realistic traces (2–6 KB, 10–50 retrieved chunks) to a fresh topic, and N/2 to a second one;
2. (a) a bare kafka-python loop that only consumes the N messages: the client's own limit;
3. (b) ``ragmon ingest`` as a subprocess with a fresh embedded ClickHouse (chDB) directory, end to end
   (decode, redact, batch, insert, commit), on N and on N/2 traces: traces/s between the first message read
   and the last acknowledged write, and the peak RSS of the process (``wait4``), to show RSS is flat in N;
4. where the time goes, each part alone on the same traces: (c) the Python side of ``ragmon ingest``
   (the Kafka source, decoding, redaction, batching into JSON lines; nothing written) and (d) the embedded
   engine alone (a subprocess inserting the already-built batches); b can be no faster than the slower of them;
5. CPU per trace, two ways: the process CPU (all threads) between the first message read and the last
   acknowledged write, as the ingest process records it (``--stats-json``); and user+sys seconds of the whole
   process (``wait4``) minus those of a run on an empty topic (this one also counts chDB's background merges
   during the idle wait, and varies by tens of µs between runs). Less sensitive to other load on the machine
   than the wall-clock rates;
6. freshness: a fresh ingest process, traces offered at a fixed rate; produce→committed latency per trace,
   read by polling the group's committed offsets (a commit follows the store's acknowledgement, so this is an
   upper bound of produce→queryable).

Prints a table; asserts nothing (targets are in docs/ingest.md). Needs ``scripts/kafka-broker start``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.timing import best_of  # noqa: E402 - after the repo root is importable
from ragmon.config import KafkaSettings  # noqa: E402
from ragmon.contracts.decode import decode_trace  # noqa: E402

console = Console()
WORDS = ("consent policy refund invoice account password reset billing contract privacy data retention "
         "customer support escalation warranty shipping delivery return exchange subscription").split()


def realistic_trace(i: int, rng: random.Random) -> bytes:
    n_chunks = rng.randint(10, 50)
    chunk_words = rng.randint(1, 3)
    retrieved = [{
        "chunk_id": f"d{rng.randint(0, 9999)}@c{c}", "doc_id": f"d{c}",
        "score": round(1.0 - c * 0.015 - rng.random() * 0.01, 4), "rank": c + 1,
        "text": " ".join(rng.choices(WORDS, k=chunk_words)),
    } for c in range(n_chunks)]
    trace = {
        "trace_id": f"b-{i}-{uuid.uuid4().hex[:8]}", "query_id": f"q-{i}",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "retriever": {"name": "hybrid", "version": "v3", "variant": "production", "parameters": {"k": n_chunks}},
        "corpus_snapshot": "2026-11-01", "index_version": "idx-42",
        "question": "How do I " + " ".join(rng.choices(WORDS, k=12)) + "?",
        "category": rng.choice(["billing", "account", "privacy", "shipping"]),
        "retrieved": retrieved,
        "context": {"chunk_ids": [r["chunk_id"] for r in retrieved[:5]], "tokens": 900},
        "answer": " ".join(rng.choices(WORDS, k=40)),
        "citations": [{"sentence": 0, "chunk_id": retrieved[0]["chunk_id"], "quote": retrieved[0]["text"][:40]}],
        "model": {"name": "gen-model", "version": "2026-10"}, "prompt": {"id": "answer", "version": "3"},
        "latency_ms": {"retrieve": 40.0 + rng.random() * 20, "generate": 600.0 + rng.random() * 300},
        "tokens": {"prompt": 900, "completion": 80}, "cost_usd": 0.0012,
        "attributes": {"app": "bench"},
    }
    return json.dumps(trace).encode()


def make_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-ingest-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()
    return name


def produce(bootstrap: str, topic: str, n: int, seed: int) -> tuple[int, float]:
    rng = random.Random(seed)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1_048_576, acks=1)
    total = 0
    started = time.perf_counter()
    for i in range(n):
        value = realistic_trace(i, rng)
        total += len(value)
        producer.send(topic, value)
    producer.flush()
    producer.close()
    return total, time.perf_counter() - started


def bare_consume(bootstrap: str, topic: str, n: int) -> float:
    fetch = KafkaSettings()  # the fetch sizes ragmon ingest uses by default (also the client's fastest here)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"bare-{uuid.uuid4().hex[:6]}",
                             enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=5000,
                             fetch_max_bytes=fetch.fetch_max_bytes,
                             max_partition_fetch_bytes=fetch.max_partition_fetch_bytes)
    seen = 0
    first = None
    while seen < n:
        batches = consumer.poll(timeout_ms=1000)
        for records in batches.values():
            if first is None:
                first = time.perf_counter()
            for r in records:
                seen += len(r.value) > 0
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.close()
    return n / elapsed


def ingest_env(chdb: Path) -> dict[str, str]:
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", PYTHONPATH=str(ROOT))
    env.pop("RAGMON_TEST_FAULTS", None)
    return env


def ingest_cmd(bootstrap: str, topic: str, *extra: str, group: str | None = None) -> list[str]:
    return [sys.executable, "-c", "from ragmon.cli.app import main; main()", "ingest", "--topic", topic,
            "--bootstrap-servers", bootstrap, "--group-id", group or f"ragmon-{topic}", "--dead-letter-topic",
            f"{topic}.dlq", "--port", "0", "--log-level", "WARNING", *extra]


def run_ingest(bootstrap: str, topic: str, workdir: Path) -> dict:
    """ragmon ingest until idle; traces/s from the first message to the last acknowledged write; peak RSS."""
    run = uuid.uuid4().hex[:8]  # a fresh group and data directory: every run reads the whole topic
    chdb = workdir / f"chdb-{topic}-{run}"
    stats = workdir / f"stats-{topic}-{run}.json"
    proc = subprocess.Popen(ingest_cmd(bootstrap, topic, "--exit-when-idle", "1.5", "--stats-json", str(stats),
                                       group=f"ragmon-{topic}-{run}"),
                            env=ingest_env(chdb), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        raise SystemExit(f"ragmon ingest failed ({status}):\n{err[-2000:]}")
    shutil.rmtree(chdb, ignore_errors=True)
    s = json.loads(stats.read_text())
    if s["stored"]:
        s["rate"] = s["stored"] / max(1e-9, s["last_write_at"] - s["first_data_at"])
    s["max_rss_mb"] = usage.ru_maxrss / 1024
    s["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    return s


def python_side(bootstrap: str, topic: str, n: int) -> dict:
    """(c) ``ragmon ingest`` without the store: its Kafka source, decoding, redaction and batching, same defaults."""
    from ragmon.config import IngestSettings, KafkaSettings
    from ragmon.daemon import tune_gc
    from ragmon.pipeline.batcher import Batch, BatchLimits, BatchStep
    from ragmon.pipeline.intake import Intake
    from ragmon.pipeline.metrics import IngestMetrics
    from ragmon.pipeline.offsets import OffsetLedger
    from ragmon.stream.source import KafkaTraceSource
    from ragmon.telemetry import Telemetry

    settings = IngestSettings()
    source = KafkaTraceSource(KafkaSettings(bootstrap_servers=bootstrap, topic=topic,
                                            group_id=f"python-side-{uuid.uuid4().hex[:6]}"))
    intake = Intake(settings, Telemetry().use(IngestMetrics), OffsetLedger(), input_format="auto", retention_days=90,
                    clock=time.monotonic)
    limits = BatchLimits(settings.max_batch_rows, settings.max_batch_bytes, settings.flush_interval_seconds)

    class Release:
        """Stands in for the write step: a full batch is dropped, its obligations closed; nothing is written."""

        def submit(self, batch: Batch) -> bool:
            batch.release()
            return True

    batches = BatchStep(limits, Release(), time.monotonic)
    tune_gc()  # as the daemon does
    seen, first, first_cpu = 0, 0.0, 0.0
    while seen < n:
        msgs = source.poll(1.0, KafkaSettings().max_poll_records)
        if msgs and not seen:
            first, first_cpu = time.perf_counter(), time.process_time()
        batches.submit(intake.handle(msgs))
        seen += len(msgs)
    elapsed, cpu = time.perf_counter() - first, time.process_time() - first_cpu
    stored = len(batches.batch)
    source.close()
    return {"rate": n / elapsed, "cpu_per_trace": cpu / n, "last_batch": stored}


ENGINE_ONLY = """
import json, random, resource, sys, time
sys.path.insert(0, {root!r})
from bench.ingest import realistic_trace
from ragmon.config import IngestSettings, StoreSettings
from ragmon.contracts.decode import decode_trace
from ragmon.store.clickhouse import ClickHouseStore
from ragmon.store.trace_json import TraceRows
from ragmon.store.trace_rows import SourcePosition
limits = IngestSettings()
rng = random.Random(1)
batches, rows, size = [], TraceRows(), 0
for i in range({n}):
    value = realistic_trace(i, rng)
    rows.add(decode_trace(value).trace, SourcePosition("bench", 0, i), size_bytes=len(value))
    size += len(value)
    if len(rows) >= limits.max_batch_rows or size >= limits.max_batch_bytes:
        batches.append(rows)
        rows, size = TraceRows(), 0
batches.append(rows)
store = ClickHouseStore.open(StoreSettings(dsn="chdb://" + {chdb!r}))
wall, cpu = time.perf_counter(), time.process_time()
for k, b in enumerate(batches):
    store.insert_trace_rows(b, dedup_token=f"engine-{{k}}")
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({{"rate": {n} / wall, "cpu_per_trace": cpu / {n}, "batches": len(batches)}}))
"""


def engine_side(n: int, workdir: Path) -> dict:
    """(d) the embedded engine alone: the same kind of traces, already built into ingest-sized batches."""
    code = ENGINE_ONLY.format(root=str(ROOT), n=n, chdb=str(workdir / "chdb-engine-only"))
    out = subprocess.run([sys.executable, "-c", code], env=ingest_env(workdir / "unused"), cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"engine-only run failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values: list[float], fmt: str, unit: str = "") -> str:
    """One value as is; several as 'median (min–max)'."""
    if len(values) == 1:
        return fmt.format(values[0]) + unit
    return (f"{fmt.format(statistics.median(values))}{unit} "
            f"({fmt.format(min(values))}–{fmt.format(max(values))})")


def runs_note(repeat: int) -> str:
    return f", {repeat} runs" if repeat > 1 else ""


def freshness(bootstrap: str, rate: float, seconds: float, workdir: Path) -> dict:
    topic = make_topic(bootstrap, 4)
    group = f"ragmon-{topic}"
    proc = subprocess.Popen(ingest_cmd(bootstrap, topic), env=ingest_env(workdir / "chdb-fresh"), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    committed: dict[int, list[tuple[float, int]]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            now = time.time()
            for tp, om in admin.list_group_offsets({group: None}).get(group, {}).items():
                series = committed.setdefault(tp.partition, [])
                if not series or series[-1][1] != om.offset:
                    series.append((now, om.offset))
            time.sleep(0.02)

    time.sleep(6)  # start-up: imports, chDB, joining the group (not part of freshness)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rng = random.Random(3)
    n = int(rate * seconds)
    values = [realistic_trace(i, rng) for i in range(n)]  # made beforehand: the offered rate is the producer's
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, acks=1)
    sent: list[tuple[float, object]] = []
    start = time.time()
    for i, value in enumerate(values):
        due = start + i / rate
        delay = due - time.time()
        if delay > 0.002:
            time.sleep(delay)
        t = time.time()
        sent.append((t, producer.send(topic, value)))
    producer.flush()
    meta = [(t, f.get(timeout=30)) for t, f in sent]
    deadline = time.time() + 30
    while time.time() < deadline:
        done = all(any(o > m.offset for _, o in committed.get(m.partition, [])) for _, m in meta[-50:])
        if done:
            break
        time.sleep(0.1)
    stop.set()
    watcher.join()
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    admin.close()
    lat = []
    for t, m in meta:
        when = next((ct for ct, off in committed.get(m.partition, []) if off > m.offset), None)
        if when is not None:
            lat.append(when - t)
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa: E731
    return {"offered": rate, "sent": n, "measured": len(lat), "p50": pick(0.50), "p99": pick(0.99),
            "max": lat[-1] if lat else float("nan"), "achieved_rate": n / (time.time() - start)}


def reference_ms() -> float:
    """A fixed CPU-bound workload (decode and re-encode 2,000 traces), best of 5, in ms: this machine's speed
    of the moment. The host's load moves every figure here by 10-30 %; runs are comparable when this is."""
    rng = random.Random(7)
    docs = [realistic_trace(i, rng) for i in range(2_000)]
    return best_of(5, lambda: [json.dumps(json.loads(d)) for d in docs if decode_trace(d)]) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=80_000, help="traces for the throughput runs (default 80000)")
    ap.add_argument("--bootstrap", default=os.environ.get("RAGMON_TEST_KAFKA", "127.0.0.1:9092"))
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=float, default=1000.0, help="offered traces/s for freshness (default 1000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of the freshness run (default 10)")
    ap.add_argument("--repeat", type=int, default=1, choices=range(1, 11), metavar="1..10",
                    help="run (a) and (b) this many times, alternately, and print median (min–max) (default 1)")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ragmon-bench-"))
    speed = [reference_ms()]
    try:
        big, small = make_topic(args.bootstrap, args.partitions), make_topic(args.bootstrap, args.partitions)
        with console.status(f"producing {args.n:,} + {args.n // 2:,} traces"):
            total, prod_s = produce(args.bootstrap, big, args.n, 1)
            produce(args.bootstrap, small, args.n // 2, 2)
        console.print(f"produced {args.n:,} traces, mean {total / args.n / 1024:.1f} KB, in {prod_s:.1f}s")
        bares, fulls = [], []
        for i in range(args.repeat):
            with console.status(f"(a) bare kafka-python consume, run {i + 1}/{args.repeat}"):
                bares.append(bare_consume(args.bootstrap, big, args.n))
            with console.status(f"(b) ragmon ingest (N), run {i + 1}/{args.repeat}"):
                fulls.append(run_ingest(args.bootstrap, big, workdir))
        with console.status("(c) the Python side alone"):
            py_side = python_side(args.bootstrap, big, args.n)
        with console.status("(d) the embedded engine alone"):
            engine = engine_side(args.n, workdir)
        with console.status("ragmon ingest (N/2)"):
            half = run_ingest(args.bootstrap, small, workdir)
        with console.status("ragmon ingest on an empty topic (start-up CPU, subtracted below)"):
            empty = run_ingest(args.bootstrap, make_topic(args.bootstrap, args.partitions), workdir)
        with console.status(f"freshness at {args.rate:.0f} traces/s for {args.seconds:.0f}s"):
            fresh = freshness(args.bootstrap, args.rate, args.seconds, workdir)
        speed.append(reference_ms())
        table = Table(title=f"ragmon ingest benchmark ({os.cpu_count()} cores, N={args.n:,}, "
                            f"{args.partitions} partitions, mean trace {total / args.n / 1024:.1f} KB)")
        table.add_column("measure")
        table.add_column("value", justify="right")
        bare = statistics.median(bares)
        full = fulls[0]
        table.add_row(f"(a) bare kafka-python consume{runs_note(args.repeat)}", spread(bares, "{:,.0f}", " traces/s"))
        table.add_row(f"(b) ragmon ingest → chDB, end to end{runs_note(args.repeat)}",
                      spread([f["rate"] for f in fulls], "{:,.0f}", " traces/s"))
        table.add_row("ratio b/a (target ≥ 0.70), per pair of runs",
                      spread([f["rate"] / a for f, a in zip(fulls, bares, strict=True)], "{:.2f}"))
        table.add_row("(c) Python side alone: source, decode, redact, batch (no store)",
                      f"{py_side['rate']:,.0f} traces/s, {py_side['cpu_per_trace'] * 1e6:,.0f} µs CPU per trace")
        table.add_row("(d) embedded engine alone: insert the built batches (merges included)",
                      f"{engine['rate']:,.0f} traces/s, {engine['cpu_per_trace'] * 1e6:,.0f} µs CPU per trace")
        table.add_row("ceiling of b/a set by the slower part, min(c, d)/a",
                      f"{min(py_side['rate'], engine['rate']) / bare:.2f}")
        cores = os.cpu_count() or 1
        table.add_row("(b) per core: wall rate / cores", spread([f["rate"] / cores for f in fulls], "{:,.0f}",
                                                                " traces/s/core"))
        active = [(f["last_write_cpu"] - f["first_data_cpu"]) / f["stored"] for f in fulls]
        table.add_row("(b) CPU per trace, first message → last write (target ≥ 10,000 per CPU-second)",
                      spread([a * 1e6 for a in active], "{:,.0f}", " µs") + " = "
                      + spread([1 / a for a in active], "{:,.0f}", " traces per CPU-second"))
        cpu_per_trace = (full["cpu_seconds"] - empty["cpu_seconds"]) / full["stored"]
        table.add_row("(b) CPU per trace, whole process, start-up subtracted",
                      f"{cpu_per_trace * 1e6:,.0f} µs = {1 / cpu_per_trace:,.0f} traces per CPU-second")
        table.add_row("stored / batches", f"{full['stored']:,} / {full['batches']}")
        table.add_row(f"peak RSS, N={args.n:,}", spread([f["max_rss_mb"] for f in fulls], "{:.0f}", " MB"))
        table.add_row(f"peak RSS, N={args.n // 2:,}", f"{half['max_rss_mb']:.0f} MB")
        table.add_row(f"freshness p50 / p99 / max at {fresh['offered']:.0f}/s offered "
                      f"({fresh['achieved_rate']:.0f}/s achieved, {fresh['measured']:,} traces)",
                      f"{fresh['p50']:.2f} / {fresh['p99']:.2f} / {fresh['max']:.2f} s")
        table.add_row("machine speed: reference workload at start / end (lower is faster)",
                      f"{speed[0]:.0f} / {speed[1]:.0f} ms")
        console.print(table)
        console.print("freshness = produce → offsets committed (after the store acknowledged): an upper bound "
                      "of produce → queryable; ingest.flush_interval_seconds=1.0 (default)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
