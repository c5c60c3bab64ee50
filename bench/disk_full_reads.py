"""Reproduces a finding of the operations test (issue 30): after the embedded store's disk was full, reads of a
table can fail (ClickHouse ``CANNOT_READ_ALL_DATA``: "Cannot read all marks from file …/skp_idx_idx_ts.cmrk4,
marks expected 1 … marks read 0", or "Empty marks file") for the rest of the process's life, although the disk is
free again, writes succeed and /readyz answers 200; at the next start the engine detaches the broken parts
(``broken-on-start_…``) and their rows are gone: acknowledged writes, whose offsets were committed, lost.

    sudo python3 bench/disk_full_reads.py [--cycles 8] [--workdir DIR]

``ragmon run`` with ingest and score (the heuristic judge, every trace sampled: ~900 score rows/s) on a broker of
its own, its store on a 400 MiB tmpfs; 100 native traces/s. Each cycle: 10 s of reads, the disk filled with a
ballast file for 10 s (reads go on), freed. A read is ``SELECT count(), avg(value), uniqExact(trace_id) FROM
scores FINAL`` over the last two hours, through the daemon's read API, once a second. Prints when reads started
failing and whether they recovered; then restarts the daemon (SIGTERM), reads again, and compares the traces
stored with the traces that have scores (every trace is sampled: they should be equal) and lists the parts the
engine detached. Needs root (mount) and Java. Asserts nothing.

Seen 2026-12-05 (chDB as pinned by the project, 2 cores): reads failing in 4 of 7 runs of 8 cycles (from the 3rd,
4th or 5th cycle on, every read after, until the restart), 1 of 4 with 3 cycles of 20 s, and in 2 of 7 runs of
the operations scenario (tests/system, bench/operations.py). In the one failing run where the restart was checked:
20,920 traces stored, 15,790 with scores (5,130 traces' scores lost), and detached at the restart as
broken-on-start: scores 202612_2_168_83 (the part the failing reads named), traces 202612_35_44_1,
sampling_decisions 202612_414_419_2, question_types 202612_1_410_185. In the scenario run where it happened before
a kill -9, 910 of 2,260 traces sent were missing from the store afterwards (853 native ones, offsets committed).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.broker import Broker  # noqa: E402
from tests.support.operations.disk import Disk  # noqa: E402
from tests.support.operations.scenario import free_port  # noqa: E402
from tests.support.producers import realistic_trace  # noqa: E402

QUERY = ("SELECT count(), avg(value), uniqExact(trace_id) FROM ragmon.scores FINAL "
         "WHERE ts > now() - INTERVAL 2 HOUR")
DETACHED = "SELECT table, name, reason FROM system.detached_parts WHERE database = 'ragmon'"


def start(config: Path, workdir: Path, log: str, base: str) -> subprocess.Popen[bytes]:
    with (workdir / log).open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ragmon", "--config", str(config), "run"], stdout=out,
                                stderr=subprocess.STDOUT, cwd=workdir)
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"ragmon run exited {proc.returncode}; see {workdir / log}")
        time.sleep(0.3)


def read(store_dir: Path, sql: str = QUERY) -> tuple[int, str]:
    announced = json.loads((store_dir / "ragmon-read-api.json").read_text())
    r = httpx.post(f"{announced['url']}/api/v1/store/read", json={"op": "query", "sql": sql}, timeout=60,
                   headers={"Authorization": f"Bearer {announced['token']}"})
    return r.status_code, r.text[:600]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragmon-disk-full-"))
    workdir.mkdir(parents=True, exist_ok=True)
    broker = Broker(workdir / "kafka", free_port(), free_port())
    disk = Disk(workdir / "disk", 400).open()
    proc: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    try:
        from kafka import KafkaAdminClient, KafkaProducer

        broker.script("start")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics({"t": {"num_partitions": 3, "replication_factor": 1}})
        admin.close()
        port = free_port()
        config = workdir / "ragmon.yaml"
        config.write_text(yaml.safe_dump({
            "store": {"dsn": f"chdb://{disk.path / 'chdb'}"}, "server": {"port": port}, "sampling": {"rate": 1.0},
            "kafka": {"bootstrap_servers": broker.bootstrap, "topic": "t", "dead_letter_topic": "t.dlq",
                      "group_id": "g", "session_timeout_ms": 6000},
            "ingest": {"flush_interval_seconds": 0.5},
            "roles": {"ingest": True, "otlp": False, "outcomes": False, "score": True, "drift": False,
                      "review": False, "shadow": False}}))
        base = f"http://127.0.0.1:{port}"
        proc = start(config, workdir, "daemon.log", base)

        def produce() -> None:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=50)
            rng, i = random.Random(1), 0
            while not stop.is_set():
                for _ in range(10):
                    producer.send("t", json.dumps(realistic_trace(i, rng, trace_id=f"r-{i}")).encode())
                    i += 1
                time.sleep(0.1)
            producer.flush()
            producer.close()

        threading.Thread(target=produce, daemon=True).start()
        t0, last, failed, reads = time.time(), None, 0, 0

        def phase(name: str, seconds: int) -> None:
            nonlocal last, failed, reads
            for _ in range(seconds):
                code, text = read(disk.path / "chdb")
                reads += 1
                state = "ok" if code == 200 else f"FAILED ({code}): {text[:200]}"
                failed += code != 200
                if state != last:
                    print(f"{time.time() - t0:6.1f}s [{name}] reads {state}", flush=True)
                    last = state
                time.sleep(1)

        for cycle in range(1, args.cycles + 1):
            phase(f"cycle {cycle}, disk free", 10)
            print(f"{time.time() - t0:6.1f}s [cycle {cycle}] disk filled: {disk.fill()}", flush=True)
            phase(f"cycle {cycle}, disk full", 10)
            disk.free()
        phase("after, disk free", 40)
        print(f"{failed} of {reads} reads failed", flush=True)
        stop.set()
        time.sleep(3)
        proc.terminate()
        proc.wait(60)
        proc = start(config, workdir, "daemon-restarted.log", base)
        print(f"after a restart: {read(disk.path / 'chdb')}", flush=True)
        print("traces stored, and traces with scores: " + str(read(disk.path / "chdb", (
            "SELECT (SELECT uniqExact(trace_id) FROM ragmon.traces FINAL), "
            "(SELECT uniqExact(trace_id) FROM ragmon.scores FINAL)"))), flush=True)
        print(f"parts detached at the restart: {read(disk.path / 'chdb', DETACHED)}", flush=True)
    finally:
        stop.set()
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        disk.close()
        broker.script("stop", check=False)


if __name__ == "__main__":
    main()
