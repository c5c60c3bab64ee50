"""`ragmon run` as a real process: every role on one HTTP port, against the real broker and its own chDB
directory. Traces produced to Kafka are stored once, sampled ones are scored, probes answer, bad roles are
refused at start-up, and SIGTERM ends it cleanly."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import make_trace

pytestmark = pytest.mark.kafka


def _config(tmp_path: Path, bootstrap: str, topic: str, **roles: bool) -> Path:
    from ragmon.review.auth import token_digest

    config = {
        "store": {"dsn": f"chdb://{tmp_path / 'chdb'}"},
        "kafka": {"bootstrap_servers": bootstrap, "topic": topic, "dead_letter_topic": f"{topic}.dlq",
                  "group_id": f"{topic}-ingest"},
        "ingest": {"flush_interval_seconds": 0.2},
        "score": {"group_id": f"{topic}-score"},
        "sampling": {"rate": 1.0},
        "drift": {"interval_seconds": 5},
        "server": {"port": 0},
        "review": {"users": [{"username": "alice", "token_sha256": token_digest("t" * 32)}]},
        "roles": {"ingest": True, "otlp": False, "score": True, "drift": True, "review": True, **roles},
    }
    path = tmp_path / "ragmon.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _start(config: Path) -> tuple[subprocess.Popen[str], str]:
    proc, line = _start_line(config)
    return proc, re.search(r"metrics (http://[\d.]+:\d+)/metrics", line).group(1)


def _start_line(config: Path) -> tuple[subprocess.Popen[str], str]:
    """``ragmon run`` started, and its start-up line with the addresses it serves."""
    proc = subprocess.Popen([sys.executable, "-m", "ragmon", "--config", str(config), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, COLUMNS="300"))
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if re.search(r"metrics (http://[\d.]+:\d+)/metrics", line):
            return proc, line
    proc.kill()
    raise AssertionError("ragmon run did not start:\n" + "".join(seen))


def _wait_for(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _metric(base: str, name: str, labels: str = "") -> float:
    """The sum of ``name``'s samples whose label set contains ``labels`` (e.g. 'outcome="ok"')."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(float(m.group(2)) for m in re.finditer(rf"^{name}(?:{{([^}}]*)}})? (\S+)$", text, re.MULTILINE)
               if labels in (m.group(1) or ""))


def test_run_all_roles_ingests_scores_and_stops_cleanly(tmp_path: Path, kafka_bootstrap: str, new_topic: Any) -> None:
    from kafka import KafkaProducer

    topic = new_topic(partitions=3)
    proc, base = _start(_config(tmp_path, kafka_bootstrap, topic))
    try:
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        for i in range(200):
            producer.send(topic, json.dumps(make_trace(trace_id=f"run-{i}")).encode(), partition=i % 3)
        producer.send(topic, b"{not json", partition=0)
        producer.flush()
        producer.close()
        _wait_for(lambda: _metric(base, "ragmon_ingest_traces_stored_total") >= 200, "200 traces stored")
        _wait_for(lambda: _metric(base, "ragmon_score_traces_scored_total") >= 200, "200 traces scored")
        _wait_for(lambda: _metric(base, "ragmon_ingest_dead_letters_total") >= 1, "the bad message dead-lettered")
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
        assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
        assert httpx.get(f"{base}/review/", timeout=10).status_code in (302, 303, 401)
        queue = httpx.get(f"{base}/review/api/v1/weeks", headers={"Authorization": "Bearer " + "t" * 32}, timeout=10)
        assert queue.status_code == 200, queue.text
        _wait_for(lambda: _metric(base, "ragmon_drift_checks_total", 'outcome="ok"') > 0, "a drift check")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert _metric_free_count(tmp_path) == 200
    # the process's own account of what it did, printed when it stops (its counters die with it)
    totals = json.loads(re.search(r"ragmon run stopped: (\{.*\})", out).group(1))
    assert totals["ragmon_ingest_traces_stored_total"] == 200
    assert totals[f'ragmon_ingest_messages_consumed_total{{topic="{topic}"}}'] == 201
    assert totals['ragmon_ingest_dead_letters_total{reason="invalid_json"}'] == 1
    assert totals["ragmon_score_traces_scored_total"] >= 200


def _metric_free_count(tmp_path: Path) -> int:
    """Traces stored, read with FINAL by a fresh process (the run process has exited and freed the chDB dir)."""
    out = subprocess.run([sys.executable, "-m", "ragmon", "store", "status"], capture_output=True, text=True,
                         env=dict(os.environ, RAGMON_STORE__DSN=f"chdb://{tmp_path / 'chdb'}", COLUMNS="200"),
                         check=True).stdout
    return int(re.search(r"│ traces\s+│ ([\d,]+)", out).group(1).replace(",", ""))


def test_run_refuses_to_start_a_role_it_cannot_run(tmp_path: Path) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"dsn": f"chdb://{tmp_path / 'chdb'}"},
        "kafka": {"bootstrap_servers": "127.0.0.1:1"},
        "server": {"port": 0},
        "roles": {"ingest": False, "otlp": False, "score": False, "drift": True, "review": True},
    }))
    result = subprocess.run([sys.executable, "-m", "ragmon", "--config", str(config), "run"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "review: review.users: no reviewers configured" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_without_kafka_takes_traces_over_otlp_http(tmp_path: Path) -> None:
    """The laptop story of docs/otlp.md: no broker, no Collector; the app's SDK exporter posts to /v1/traces."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tests.support.otel_spans import rag_spans

    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"dsn": f"chdb://{tmp_path / 'chdb'}"},
        "kafka": {"bootstrap_servers": "127.0.0.1:1"},  # unreachable: nothing may need it
        "server": {"port": 0},
        "otlp": {"port": 0, "dead_letters": str(tmp_path / "dead.jsonl")},
        "ingest": {"flush_interval_seconds": 0.2},
        "roles": {"ingest": False, "score": False, "drift": True, "review": False},
    }))
    proc, line = _start_line(config)
    try:
        endpoint = re.search(r"OTLP/HTTP (http://\S+/v1/traces)", line).group(1)
        base = re.search(r"metrics (http://[\d.]+:\d+)/metrics", line).group(1)
        assert OTLPSpanExporter(endpoint=endpoint).export(rag_spans(3, prefix="laptop")) == SpanExportResult.SUCCESS
        _wait_for(lambda: _metric(base, "ragmon_ingest_traces_stored_total") >= 3, "3 traces stored")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert _metric_free_count(tmp_path) == 3


def test_ingest_otlp_http_stores_what_it_accepted_and_keeps_what_still_assembles(tmp_path: Path) -> None:
    """``ragmon ingest --otlp-http``: at SIGTERM a finished trace is stored, one still waiting for its children stays
    in the spool for the next start (tests/integration/test_otlp_spool.py), and the summary says so."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tests.support.otel_spans import rag_spans

    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{tmp_path / 'chdb'}", RAGMON_SERVER__PORT="0", COLUMNS="300",
               RAGMON_OTLP__DEAD_LETTERS=str(tmp_path / "dead.jsonl"), RAGMON_INGEST__OTLP_SETTLE_SECONDS="60")
    proc = subprocess.Popen([sys.executable, "-m", "ragmon", "ingest", "--otlp-http", "--otlp-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()
        found = re.search(r"OTLP/HTTP on (http://\S+/v1/traces)", line)
        assert found, line
        spans = rag_spans(2, prefix="cli")
        roots = [s for s in spans if s.parent is None]
        result = OTLPSpanExporter(endpoint=found.group(1)).export([*spans[:3], roots[1]])  # trace 2: no children
        assert result.name == "SUCCESS"
        base = re.search(r"metrics on (http://[\d.]+:\d+)/metrics", line).group(1)
        _wait_for(lambda: _metric(base, "ragmon_ingest_otlp_open_traces", 'loop="otlp"') == 1 and
                  _metric(base, "ragmon_ingest_traces_stored_total") == 1, "one trace stored, one assembling")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(re.search(r"ragmon ingest stopped: (\{.*\})", err).group(1))
    assert summary["stored"] == 1 and summary["consumed"] == 1, err  # one request: one message
    assert "1 OTLP traces still assembling: their messages stay uncommitted" in err
    assert list((tmp_path / "otlp-spool" / "ragmon").glob("*.seg")), "the request is kept in the default spool"
