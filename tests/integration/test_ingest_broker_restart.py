"""A Kafka broker restart under a running ``ragmon ingest``: every valid trace stored exactly once (FINAL).

The test runs its OWN single-node broker through ``scripts/kafka-broker`` on 127.0.0.1:19192 (controller
19193), with its state under ``tmp_path``, so the shared broker on 9092 is never touched. ``ragmon ingest``
runs as a subprocess with its own chDB directory; the count is made with FINAL from a fresh process.

The broker goes away twice while ingest is running: first stopped with SIGTERM (``scripts/kafka-broker
stop``), then killed with SIGKILL. Each time it is taken down right after ingest announced an acknowledged
insert whose offsets are not committed yet (the test-only ``RAGMON_TEST_FAULTS`` hook holds ingest in that
window for 0.3 s), while the test's producer holds messages it cannot deliver yet (idempotent producer,
unlimited retries). The broker comes back on its data (``scripts/kafka-broker restart``), the held messages
are delivered, more are produced, and the test waits until ingest has committed up to the log end.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from tests.conftest import make_trace
from tests.integration.ingest_support import (
    ROOT,
    committed,
    count_in_subprocess,
    exactly_once_problems,
    forget_admin,
    ingest_cmd,
    ingest_env,
    traces,
    wait_for,
)
from tests.support.broker import Broker
from tests.support.missing import missing

pytestmark = pytest.mark.kafka

PORT, CONTROLLER_PORT = 19192, 19193
PARTITIONS = 3
# what ingest's log says when it lost the broker (kafka-python's connection and coordinator warnings, ragmon's)
OUTAGE_SIGNS = ("Connection lost", "Connection failed", "socket disconnected", "Marking the coordinator dead",
                "commit failed", "Kafka poll failed", "Bootstrap connection")


class Ingest:
    """``ragmon ingest`` as a subprocess; a thread collects its stderr lines."""

    def __init__(self, cmd: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def mark(self) -> int:
        return len(self.lines)

    def log(self) -> str:
        return "".join(self.lines)

    def wait_line(self, match: Callable[[str], bool], since: int, timeout: float, what: str) -> str:
        found: list[str] = []

        def seen() -> bool:
            assert self.proc.poll() is None, f"ingest exited (rc={self.proc.returncode}):\n{self.log()[-3000:]}"
            found.extend(line for line in self.lines[since:] if match(line))
            return bool(found)

        wait_for(seen, timeout, what)
        return found[0]

    def stop(self, timeout: float) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self._reader.join(10)


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """Committed offsets; {} while the group coordinator is not available yet (fresh or restarted broker)."""
    try:
        return committed(bootstrap, group)
    except KafkaError:
        return {}


def _invalid(tag: str) -> list[bytes]:
    """One of each kind the decoder rejects: not JSON, schema violation, non-finite score."""
    nan = make_trace(trace_id=f"nan-{tag}", retrieved=[{"chunk_id": "c", "score": float("nan"), "rank": 1}])
    return [b"{truncated " + tag.encode(), json.dumps({"trace_id": f"x-{tag}"}).encode(), json.dumps(nan).encode()]


def test_broker_restart_sigterm_and_kill_9_under_running_ingest_stores_each_trace_exactly_once(tmp_path):
    if shutil.which("java") is None:
        message = "Java is needed to run a test broker (scripts/setup-system installs it)"
        missing(message)
    broker = Broker(tmp_path / "kafka", PORT, CONTROLLER_PORT)
    assert not broker.answers(), (
        f"something already answers on 127.0.0.1:{PORT}; this test needs the port for a broker of its own "
        f"(a leftover? RAGMON_KAFKA_PORT={PORT} RAGMON_KAFKA_STATE=<its state dir> scripts/kafka-broker stop)")
    started = time.monotonic()
    topic, group = "rag.traces.restart", "ragmon-restart-test"
    ingest: Ingest | None = None
    producer: KafkaProducer | None = None
    try:
        broker.script("start")
        pids = [broker.pid()]
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
        admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}}, timeout_ms=15000,
                            wait_for_metadata=True)
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5, delivery_timeout_ms=120_000, reconnect_backoff_max_ms=500)
        sent: list[tuple[bytes, Any]] = []  # (value, future) in send order

        def send(values: list[bytes]) -> None:
            for v in values:
                sent.append((v, producer.send(topic, v, partition=len(sent) % PARTITIONS)))

        # after_insert=0.3: after each acknowledged insert ingest waits 0.3 s before committing
        cmd = ingest_cmd(topic, group, broker.bootstrap)
        cmd[cmd.index("--max-batch-rows") + 1] = "300"
        cmd[cmd.index("--flush-interval-seconds") + 1] = "0.3"
        ingest = Ingest(cmd, ingest_env(tmp_path / "chdb", "after_insert=0.3"))

        invalid_first, invalid_last = _invalid("first"), _invalid("last")
        first, ids_first = traces("first", 600)
        send(invalid_first + first)  # one invalid message at offset 0 of each partition
        producer.flush(30)
        # the dead letters are acknowledged before any outage (their offsets are committed): dead letters are
        # at-least-once, a letter in flight when the broker dies may be produced twice; valid traces may not
        wait_for(lambda: all(_committed(broker.bootstrap, group).get(p, 0) >= 1 for p in range(PARTITIONS)), 90,
                 "ingest to dead-letter the first invalid messages and commit past them")

        outages = []
        middle: set[str] = set()
        for kind in ("sigterm", "kill -9"):
            tag = kind.replace(" ", "")
            pre, ids_pre = traces(f"pre-{tag}", 300)
            mark = ingest.mark()
            send(pre)
            producer.flush(30)
            stored = ingest.wait_line(lambda line: line.startswith("ragmon-fault: after_insert"), mark, 60,
                                      f"an acknowledged, not yet committed insert before the {kind} outage")
            before = _committed(broker.bootstrap, group)
            mark = ingest.mark()
            down = time.monotonic()
            if kind == "sigterm":
                broker.script("stop")
            else:
                broker.kill_9()
            assert not broker.answers()
            held, ids_held = traces(f"held-{tag}", 300)
            send(held)  # the producer holds these until the broker is back
            middle |= ids_pre | ids_held
            sign = ingest.wait_line(lambda line: any(s in line for s in OUTAGE_SIGNS), mark, 30,
                                    f"ingest to notice the {kind} outage")
            assert not any(f.is_done for _, f in sent[-len(held):]), "the producer holds them while the broker is down"
            broker.script("restart")
            pids.append(broker.pid())
            up, mark = time.monotonic(), ingest.mark()
            producer.flush(60)
            ingest.wait_line(lambda line: line.startswith("ragmon-fault: after_insert"), mark, 60,
                             f"ingest to store again after the {kind} restart")
            outages.append(f"{kind}: taken down after `{stored.split(' token=')[0].strip()}` with {before} committed; "
                           f"broker down {up - down:.1f}s; ingest stored again {time.monotonic() - up:.1f}s after "
                           f"the restart; first sign in ingest's log: {sign.strip()[24:]}")

        last, ids_last = traces("last", 300)
        send(last + invalid_last)
        producer.flush(30)
        # every message was acknowledged by the broker, and exactly once (idempotent producer)
        where = [future.get(timeout=1) for _, future in sent]
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = {tp.partition: off for tp, off in consumer.end_offsets(parts).items()}
        consumer.close()
        assert sum(ends.values()) == len(sent), "the log holds each produced message once"
        wait_for(lambda: _committed(broker.bootstrap, group) == ends, 90, f"ingest to commit up to the log end {ends}")
        rc = ingest.stop(60)
        assert rc == 0, ingest.log()[-3000:]

        expected = ids_first | middle | ids_last
        result = count_in_subprocess(tmp_path / "chdb")
        assert exactly_once_problems(result, expected) == []
        assert result["final"] == len(expected) == 2100

        invalid = invalid_first + invalid_last
        dlq = KafkaConsumer(f"{topic}.dlq", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        letters: list[Any] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # read until nothing more arrives once the expected count is reached
            batch = [m for ms in dlq.poll(timeout_ms=1000).values() for m in ms]
            letters += batch
            if not batch and len(letters) >= len(invalid):
                break
        dlq.close()
        want = sorted((m.partition, m.offset) for (v, _), m in zip(sent, where, strict=True) if v in invalid)
        got = sorted((int(dict(m.headers)["ragmon.source.partition"]), int(dict(m.headers)["ragmon.source.offset"]))
                     for m in letters)
        assert got == want, "each invalid message dead-lettered exactly once"
        assert len(set(pids)) == 3, f"the broker really restarted twice: pids {pids}"
        print(f"broker restart test: {len(expected)} valid + {len(invalid)} invalid produced; {result['raw']} rows "
              f"on disk, {result['final']} under FINAL; {len(letters)} dead letters; broker pids {pids}; "
              f"{time.monotonic() - started:.1f}s")
        print("\n".join(outages))
        print(ingest.log().splitlines()[-1])
    finally:
        if ingest is not None and ingest.proc.poll() is None:
            ingest.stop(30)
        if ingest is not None:
            (tmp_path / "ingest.log").write_text(ingest.log())
        if producer is not None:
            producer.close(timeout=5)
        forget_admin(broker.bootstrap)
        broker.script("stop", check=False)  # never leave this test's broker running
