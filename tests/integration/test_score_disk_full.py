"""`ragmon score` on a Kafka topic while the store's disk is full: it waits and writes once there is room (issue 30).

A full disk is a condition that passes (ClickHouse NOT_ENOUGH_SPACE, code 243, or the embedded store's write guard
refusing below its headroom): the scorer keeps the batch it could not write, commits nothing of it, pauses fetching,
says so on /readyz, and writes the batch again after a backoff. Before, the error was taken as permanent and the
score role ended (the daemon's supervisor restarting it into the same error: a crash loop).

Real broker, real chDB on a real 32 MiB tmpfs filled with ``dd``. Needs root to mount the tmpfs: skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragmon.sampling.sampler import ScoreSampler
from tests.conftest import make_trace
from tests.support.cli_process import CliProcess
from tests.support.collector import free_port
from tests.support.missing import missing

ROOT = Path(__file__).resolve().parents[2]

COUNT = """
import json, sys
from pydantic import SecretStr
from ragmon.config import StoreSettings
from ragmon.store import ClickHouseStore
store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(sys.argv[1])))
print(json.dumps(store.query_rows(
    "SELECT count() AS rows, uniqExact(trace_id) AS traces FROM ragmon.scores FINAL WHERE status = 'ok'")[0]))
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(where)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        missing(f"a full disk needs a size-limited tmpfs, and mounting one needs root: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_score_waits_out_a_full_disk_then_stores_every_sampled_trace_once(small_disk, kafka_bootstrap, new_topic):
    from kafka import KafkaProducer

    chdb = small_disk / "chdb"
    dsn = f"chdb://{chdb}"
    env = dict(os.environ, RAGMON_STORE__DSN=dsn, PYTHONPATH=str(ROOT))
    migrated = subprocess.run([sys.executable, "-m", "ragmon", "store", "migrate"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr

    topic = new_topic(partitions=2)
    docs = [make_trace(query_id=f"q-{i}") for i in range(40)]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for d in docs:
        producer.send(topic, json.dumps(d).encode())
    producer.flush()
    producer.close()
    expected = sum(ScoreSampler(salt="ragmon-score-v1", rate=0.5).decide(d["query_id"]).sampled for d in docs)

    filler = small_disk / "filler"  # dd stops at ENOSPC: every free block taken
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, check=False)
    assert os.statvfs(small_disk).f_bavail == 0

    port = free_port()
    scorer = CliProcess(["score", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--group-id",
                         f"g-{topic}", "--rate", "0.5", "--exit-when-idle", "3", "--port", str(port)],
                        {"RAGMON_STORE__DSN": dsn})
    try:
        failed = scorer.wait_for("score write failed")
        assert "NOT_ENOUGH_SPACE" in failed, failed
        scorer.wait_for("score write failed", times=2)  # tried again after a backoff: still running
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert ready.status_code == 503 and "writes failing" in ready.text, ready.text

        filler.unlink()  # room again: the kept batch is written, then the rest, then the idle exit
        rc = scorer.wait()
    finally:
        scorer.kill()
    assert rc == 0, "\n".join(scorer.lines[-40:])
    assert "score writes succeed again" in "\n".join(scorer.lines)
    count = subprocess.run([sys.executable, "-c", COUNT, dsn], env=env, cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert count.returncode == 0, count.stderr
    assert json.loads(count.stdout)["traces"] == expected > 0, count.stdout
