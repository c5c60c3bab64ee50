"""The OTLP/HTTP receiver keeps what it answered 200 for (issue 30, defect 2): ``ragmon ingest --otlp-http`` as a
subprocess with its own chDB directory and its default spool (``otlp-spool/ragmon`` beside it), killed with
``kill -9`` in each window (accepted and not written; written and not committed), its spool's tail damaged as a
crash in the middle of a write leaves it, stopped with SIGTERM while a slow trace is half there; each restart
stores every accepted trace exactly once (counted with FINAL from a fresh process). Requests are real OTLP
protobuf from the SDK's encoder, posted with a real HTTP client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.ingest_support import ROOT, count_in_subprocess, exactly_once_problems
from tests.support.collector import free_port
from tests.support.otel_spans import otlp_messages, rag_spans

PROTOBUF = {"Content-Type": "application/x-protobuf"}


class Receiver:
    """``ragmon ingest --otlp-http`` in ``workdir`` (its cwd): fixed ports, its stderr kept in a file."""

    def __init__(self, workdir: Path, name: str, **env: str):
        self.workdir, self.port, self.metrics_port = workdir, free_port(), free_port()
        self.log = workdir / f"{name}.log"
        environ = dict(os.environ, PYTHONPATH=str(ROOT), RAGMON_STORE__DSN=f"chdb://{workdir / 'chdb'}",
                       RAGMON_OTLP__DEAD_LETTERS=str(workdir / "dead.jsonl"), RAGMON_INGEST__OTLP_SETTLE_SECONDS="1")
        environ.pop("RAGMON_TEST_FAULTS", None)
        environ.update(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragmon", "ingest", "--otlp-http", "--otlp-port", str(self.port), "--port",
             str(self.metrics_port)], env=environ, cwd=workdir, stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"))
        self.until(lambda: "OTLP/HTTP on http://" in self.stderr(), 120, "listening")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def post(self, body: bytes) -> int:
        return httpx.post(self.url, content=body, headers=PROTOBUF, timeout=30).status_code

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        try:
            text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text
        except httpx.HTTPError:
            return 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in (labels or {}).items()):
                    return sample.value
        return 0.0

    def until(self, cond: Callable[[], bool], timeout: float, what: str, *, required: bool = True) -> bool:
        deadline = time.monotonic() + timeout
        while not cond():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                if required:
                    raise AssertionError(f"waiting for {what} (exit {self.proc.poll()}):\n{self.stderr()[-3000:]}")
                return False
            time.sleep(0.1)
        return True

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(30) == -signal.SIGKILL

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0, self.stderr()[-3000:]


def requests(prefix: str, traces: int, per_request: int) -> tuple[list[bytes], set[str]]:
    spans = rag_spans(traces, prefix=prefix)  # each trace: retriever, LLM, root
    ids = {format(s.context.trace_id, "032x") for s in spans}
    return otlp_messages(spans, 3 * per_request, "proto"), ids


def test_kill_9_after_answering_200_then_restart_stores_every_accepted_trace_exactly_once(tmp_path: Path):
    first, first_ids = requests("a", 100, 5)
    later, later_ids = requests("b", 50, 5)

    # 1. accepted, not written yet (a batch is written after 60 s): kill -9
    r = Receiver(tmp_path, "1-accepted", RAGMON_INGEST__FLUSH_INTERVAL_SECONDS="60")
    assert [r.post(body) for body in first] == [200] * len(first)
    r.kill()
    [segment] = (tmp_path / "otlp-spool" / "ragmon").glob("*.seg")
    with segment.open("ab") as f:  # and the crash hit a write in the middle: half a record at the tail
        f.write(b"\x00\x10\x00\x00" + os.urandom(60))

    # 2. written, not committed: kill -9 once the first batch was acknowledged by the store
    r = Receiver(tmp_path, "2-written", RAGMON_INGEST__FLUSH_INTERVAL_SECONDS="0.2",
                 RAGMON_TEST_FAULTS="after_insert=30")
    assert [r.post(body) for body in later] == [200] * len(later)
    r.until(lambda: "ragmon-fault: after_insert" in r.stderr(), 60, "the first write acknowledged", required=False)
    r.kill()

    # 3. a clean run reads again what was not committed, and stops
    r = Receiver(tmp_path, "3-clean", RAGMON_INGEST__FLUSH_INTERVAL_SECONDS="0.2")
    r.until(lambda: r.metric("ragmon_ingest_traces_stored_total") >= 150, 60, "everything stored", required=False)
    r.stop()

    result = count_in_subprocess(tmp_path / "chdb")
    assert exactly_once_problems(result, first_ids | later_ids) == []
    assert result["raw"] > result["final"], "the second run's write was made again (the fault window was hit)"
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in ("2-written", "3-clean")}
    assert f"{len(first)} request(s) accepted before the last stop and not stored yet" in logs["2-written"]
    assert "cut short or fail their checksum" in logs["2-written"] and "cut off" in logs["2-written"]
    assert "cut short" not in logs["3-clean"], "the damaged tail was cut off once"
    assert not list((tmp_path / "otlp-spool" / "ragmon").glob("*.seg")), "everything committed: the spool is empty"


def test_sigterm_with_a_slow_trace_half_there_then_restart_stores_it_whole_once_its_root_arrives(tmp_path: Path):
    slow = rag_spans(1, prefix="slow")  # retriever, LLM, root (the root ends last)
    done, done_ids = requests("done", 1, 1)
    early, root = otlp_messages(slow[:2], 10, "proto")[0], otlp_messages(slow[2:], 10, "proto")[0]

    r = Receiver(tmp_path, "1-before", RAGMON_INGEST__FLUSH_INTERVAL_SECONDS="0.2")
    assert r.post(early) == 200 and r.post(done[0]) == 200
    r.until(lambda: r.metric("ragmon_ingest_traces_stored_total") >= 1, 60, "the finished trace stored")
    r.stop()  # the slow trace's root is not there yet: its request stays in the spool

    r = Receiver(tmp_path, "2-after", RAGMON_INGEST__FLUSH_INTERVAL_SECONDS="0.2")
    assert r.post(root) == 200  # the LLM answered: the root ends
    r.until(lambda: r.metric("ragmon_ingest_traces_stored_total") >= 1, 60, "the slow trace stored")
    r.stop()

    script = ("import json; from pydantic import SecretStr; from ragmon.config import StoreSettings; "
              "from ragmon.store import ClickHouseStore; "
              f"s = ClickHouseStore.open(StoreSettings(dsn=SecretStr('chdb://{tmp_path / 'chdb'}'))); "
              "print(json.dumps(s.query_rows(f\"SELECT query_id, retrieved_chunk_ids, model_name, attributes "
              "FROM {s.table('traces')} FINAL ORDER BY query_id\"), default=str))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    rows = {row["query_id"]: row for row in json.loads(out.stdout.strip().splitlines()[-1])}
    assert sorted(rows) == ["done0", "slow0"]
    whole = rows["slow0"]
    assert whole["retrieved_chunk_ids"] == ["kb@c0", "kb@c1", "kb@c2"] and whole["model_name"] == "gen-1"
    assert "ragmon.otlp.incomplete" not in whole["attributes"], "stored whole, not the root alone"
    assert exactly_once_problems(count_in_subprocess(tmp_path / "chdb"),
                                 done_ids | {format(slow[0].context.trace_id, "032x")}) == []
    before = (tmp_path / "1-before.log").read_text()
    assert "1 OTLP traces still assembling: their messages stay uncommitted" in before
