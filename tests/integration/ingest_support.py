"""Helpers shared by the ingest delivery tests: produce traces, run ``ragmon ingest`` as a subprocess with its
own chDB directory, read committed offsets, and count what was stored with FINAL from a fresh process.

Owns only test plumbing; no assertions about ragmon's behaviour live here except ``exactly_once_problems``,
the one check every delivery test applies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from ragmon.config import IngestSettings, KafkaSettings
from ragmon.pipeline.loop import IngestPipeline
from ragmon.pipeline.writer import StoreTraceWriter
from ragmon.stream.dead_letter import KafkaDeadLetterSink
from ragmon.stream.source import KafkaTraceSource
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace

ROOT = Path(__file__).resolve().parents[2]


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 3) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    for i, v in enumerate(values):
        producer.send(topic, v, partition=i % partitions)
    producer.flush()
    producer.close()


def kafka_settings(bootstrap: str, topic: str, group: str, **kw: Any) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=bootstrap, topic=topic, group_id=group, dead_letter_topic=f"{topic}.dlq",
                         session_timeout_ms=6000, **kw)


class Running:
    """A pipeline on a real broker and the real store, in a thread."""

    def __init__(self, store: Any, ks: KafkaSettings, **ingest: Any):
        self.telemetry = Telemetry()
        base = {"flush_interval_seconds": 0.3, "max_batch_rows": 500, "store_retry_max_seconds": 0.5}
        base.update(ingest)
        self.pipeline = IngestPipeline(KafkaTraceSource(ks), StoreTraceWriter(store), KafkaDeadLetterSink(ks),
                                       IngestSettings(**base), self.telemetry)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.pipeline.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.telemetry.registry.get_sample_value(name, labels or {}) or 0.0

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the ingest loop did not stop"


def stored_ids(store: Any, final: bool = True) -> list[str]:
    return [r[0] for r in store.query(
        f"SELECT trace_id FROM {store.table('traces')} {'FINAL' if final else ''}").result_rows]


def read_topic(bootstrap: str, topic: str, timeout_ms: int = 5000) -> list[Any]:
    """Every record of ``topic`` from the start (the consumer stops after ``timeout_ms`` without a record)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=timeout_ms)
    try:
        return list(consumer)
    finally:
        consumer.close()


def traces(prefix: str, n: int) -> tuple[list[bytes], set[str]]:
    ids = [f"{prefix}-{i}" for i in range(n)]
    return [json.dumps(make_trace(trace_id=t)).encode() for t in ids], set(ids)


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


_ADMINS: dict[str, KafkaAdminClient] = {}


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets, {partition: offset}, read from the broker."""
    admin = _ADMINS.get(bootstrap)
    if admin is None:
        admin = _ADMINS[bootstrap] = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="ragmon-test-offsets")
    offsets = admin.list_group_offsets({group: None}).get(group, {})
    return {tp.partition: om.offset for tp, om in offsets.items() if om.offset >= 0}


def forget_admin(bootstrap: str) -> None:
    """Close the admin client ``committed`` keeps for ``bootstrap`` (a broker the test is about to remove)."""
    admin = _ADMINS.pop(bootstrap, None)
    if admin is not None:
        admin.close()


def ingest_cmd(topic: str, group: str, bootstrap: str) -> list[str]:
    return [sys.executable, "-c", "from ragmon.cli.app import main; main()", "ingest", "--topic", topic, "--group-id",
            group, "--bootstrap-servers", bootstrap, "--dead-letter-topic", f"{topic}.dlq", "--port", "0",
            "--max-batch-rows", "400", "--flush-interval-seconds", "0.5"]


def ingest_env(chdb: Path, faults: str = "") -> dict[str, str]:
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", RAGMON_KAFKA__SESSION_TIMEOUT_MS="6000",
               PYTHONPATH=str(ROOT))
    env.pop("RAGMON_TEST_FAULTS", None)
    if faults:
        env["RAGMON_TEST_FAULTS"] = faults
    return env


def count_in_subprocess(chdb: Path) -> dict[str, Any]:
    script = (
        "import json; from pydantic import SecretStr; from ragmon.config import StoreSettings; "
        "from ragmon.store import ClickHouseStore; "
        f"s = ClickHouseStore.open(StoreSettings(dsn=SecretStr('chdb://{chdb}'))); t = s.table('traces'); "
        "print(json.dumps({'final': int(s.command(f'SELECT count() FROM {t} FINAL')), "
        "'raw': int(s.command(f'SELECT count() FROM {t}')), "
        "'ids': [r[0] for r in s.query(f'SELECT trace_id FROM {t} FINAL').result_rows], "
        "'positions': [list(r) for r in s.query(f'SELECT source_partition, source_offset FROM {t} "
        "FINAL').result_rows]}))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def exactly_once_problems(result: dict[str, Any], expected: set[str]) -> list[str]:
    """The check: every expected trace stored exactly once (as read with FINAL), nothing else."""
    problems = []
    ids = result["ids"]
    if len(ids) != len(set(ids)):
        problems.append(f"{len(ids) - len(set(ids))} trace ids appear more than once under FINAL")
    missing, extra = expected - set(ids), set(ids) - expected
    if missing:
        problems.append(f"{len(missing)} traces missing, e.g. {sorted(missing)[:3]}")
    if extra:
        problems.append(f"{len(extra)} unexpected traces, e.g. {sorted(extra)[:3]}")
    return problems
