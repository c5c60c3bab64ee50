"""ragmon traces itself: spans over OTLP/HTTP to a local receiver (real socket, real protobuf), only when the
standard OpenTelemetry environment asks for it, with counts and names but never trace text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ragmon.tracing import tracing_enabled
from tests.integration.ingest_support import ROOT, ingest_cmd, ingest_env, produce, traces
from tests.support.openai_server import FakeOpenAI, ok
from tests.support.otlp_receiver import OtlpReceiver

CLIENT, PRODUCER = 3, 4  # SpanKind values in OTLP
RAGMON = [sys.executable, "-c", "from ragmon.cli.app import main; main()"]


def traced_env(endpoint: str, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """A subprocess environment (``base``, else this one with the repo on PYTHONPATH) that exports spans."""
    env = dict(base if base is not None else dict(os.environ, PYTHONPATH=str(ROOT)),
               OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, **extra)
    env.pop("OTEL_SDK_DISABLED", None)
    return env


def run_process(args: list[str], env: dict[str, str], cwd: Path,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("env", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
])
def test_tracing_is_on_only_when_an_endpoint_is_set_and_the_sdk_is_not_disabled(env: dict[str, str], on: bool):
    assert tracing_enabled(env) is on


def test_ingest_exports_one_span_per_batch_write_dead_letter_produce_and_commit(
        kafka_bootstrap: str, new_topic, tmp_path: Path):
    topic = new_topic(partitions=3)
    values, ids = traces(f"span-{uuid.uuid4().hex[:6]}", 60)
    secret_question = "What is the PIN of account 4711-SECRET?"
    values[0] = json.dumps({**json.loads(values[0]), "question": secret_question}).encode()
    bad = [b"{not json", json.dumps({"trace_id": "x"}).encode()]
    produce(kafka_bootstrap, topic, values + bad)
    with OtlpReceiver() as rx:
        env = traced_env(rx.endpoint, ingest_env(tmp_path / "chdb"),
                         OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
        out = run_process([*ingest_cmd(topic, f"g-{topic}", kafka_bootstrap), "--exit-when-idle", "1.5"], env, ROOT,
                          timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
    inserts = rx.named("ragmon.ingest.insert")
    assert inserts and sum(s.attributes["ragmon.batch.traces"] for s in inserts) == len(ids)
    assert {s.kind for s in inserts} == {CLIENT}
    assert {s.attributes["db.system.name"] for s in inserts} == {"clickhouse"}
    assert {s.attributes["db.collection.name"] for s in inserts} == {"traces"}
    letters = rx.named("ragmon.ingest.dead_letters")
    assert sum(s.attributes["messaging.batch.message_count"] for s in letters) == 2
    assert {s.kind for s in letters} == {PRODUCER}
    assert {r for s in letters for r in s.attributes["ragmon.dead_letter.reasons"]} == {"invalid_json", "schema"}
    assert rx.named("ragmon.ingest.commit")
    resource = inserts[0].resource
    assert resource["service.name"] == "ragmon" and resource["ragmon.command"] == "ingest"
    assert resource["deployment.environment"] == "test"  # OTEL_RESOURCE_ATTRIBUTES is honoured
    assert all(s.status_code != 2 for s in rx.spans)  # nothing failed
    dumped = json.dumps([s.attributes for s in rx.spans])
    assert "4711-SECRET" not in dumped and "span-" not in dumped  # no trace text, no trace ids in spans


def test_service_name_from_the_environment_wins(kafka_bootstrap: str, new_topic, tmp_path: Path):
    topic = new_topic(partitions=1)
    values, _ = traces(f"name-{uuid.uuid4().hex[:6]}", 5)
    produce(kafka_bootstrap, topic, values, partitions=1)
    with OtlpReceiver() as rx:
        env = traced_env(rx.endpoint, ingest_env(tmp_path / "chdb"), OTEL_SERVICE_NAME="ragmon-eu-west")
        out = run_process([*ingest_cmd(topic, f"g-{topic}", kafka_bootstrap), "--exit-when-idle", "1.0"], env, ROOT,
                          timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
    assert {s.resource["service.name"] for s in rx.spans} == {"ragmon-eu-west"}


JUDGE_SCRIPT = """
import sys
from pydantic import SecretStr
from ragmon.tracing import setup_tracing
from ragmon.judge import JudgeInput
from ragmon.judge.openai import OpenAIJudge
from tests.conftest import make_trace
assert setup_tracing("score")
judge = OpenAIJudge(base_url=sys.argv[1], model="judge-model", model_version="2026-01",
                    api_key=SecretStr("sk-test-secret"), backoff_initial_seconds=0.01, backoff_max_seconds=0.05)
judge.assess(JudgeInput.of(make_trace(question="Where is the SECRET-PROMPT-TEXT?")))
"""


def test_a_judge_call_is_a_genai_client_span_with_tokens_and_without_the_prompt():
    from tests.integration.test_openai_judge import good

    with OtlpReceiver() as rx, FakeOpenAI([ok(good(), prompt_tokens=1000, completion_tokens=200)]) as srv:
        out = run_process([sys.executable, "-c", JUDGE_SCRIPT, srv.base_url], traced_env(rx.endpoint), ROOT)
        assert out.returncode == 0, out.stderr[-2000:]
    [call] = rx.named("chat judge-model")
    assert call.kind == CLIENT
    a = call.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"], a["gen_ai.request.model"]) == (
        "chat", "openai", "judge-model")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"], a["ragmon.judge.attempts"]) == (
        1000, 200, 1)
    assert a["server.address"] == "127.0.0.1"
    assert "SECRET-PROMPT-TEXT" not in json.dumps(a) and "sk-test-secret" not in json.dumps(a)


def test_a_gate_run_is_one_span_with_its_case_count(tmp_path: Path):
    with OtlpReceiver() as rx:
        out = run_process([*RAGMON, "gate", str(ROOT / "examples/golden/dev.json"), "--retriever",
                           "examples.retriever:search",
                   "--k", "3", "--depth", "8", "--min-coverage", "0.7", "--min-mrr", "0.6"],
                  traced_env(rx.endpoint), tmp_path)
        assert out.returncode == 1, out.stderr[-2000:]  # the README's example: 'returns' misses its threshold
    [run] = rx.named("ragmon.gate.run")
    cases = len(json.loads((ROOT / "examples/golden/dev.json").read_text())["cases"])
    assert run.attributes["ragmon.gate.cases"] == cases and run.attributes["ragmon.gate.k"] == 3
    assert run.resource["ragmon.command"] == "gate"


def test_a_drift_check_is_one_span_with_its_result_counts(tmp_path: Path):
    with OtlpReceiver() as rx:
        out = run_process([*RAGMON, "drift", "check"],
                  traced_env(rx.endpoint, RAGMON_STORE__DSN=f"chdb://{tmp_path / 'chdb'}"), tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
    [check] = rx.named("ragmon.drift.check.check")
    assert (check.attributes["ragmon.drift.results"], check.attributes["ragmon.drift.drifted"]) == (0, 0)
    assert check.resource["ragmon.command"] == "drift"


def test_live_scoring_is_one_span_per_batch(kafka_bootstrap: str, new_topic, tmp_path: Path):
    topic = new_topic(partitions=1)
    values, ids = traces(f"score-{uuid.uuid4().hex[:6]}", 20)
    produce(kafka_bootstrap, topic, values, partitions=1)
    env = ingest_env(tmp_path / "chdb")
    out = run_process([*ingest_cmd(topic, f"g-{topic}", kafka_bootstrap), "--exit-when-idle", "1.0"], env, ROOT,
                      timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    with OtlpReceiver() as rx:
        out = run_process([*RAGMON, "score", "--from-store", "--judge", "heuristic", "--rate", "1"],
                  traced_env(rx.endpoint, env), ROOT, timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
    batches = rx.named("ragmon.score.batch")
    assert sum(s.attributes["ragmon.batch.traces"] for s in batches) == len(ids)
    assert sum(s.attributes["ragmon.score.scored"] for s in batches) == len(ids)
    assert {s.attributes["ragmon.judge.name"] for s in batches} == {"heuristic"}
    assert {s.resource["ragmon.command"] for s in batches} == {"score"}


def test_a_collector_that_is_down_does_not_change_what_a_command_does(tmp_path: Path):
    """Spans are diagnostics: with nothing listening at the endpoint the command still does its work and exits 0
    (the export gives up after EXPORT_TIMEOUT_SECONDS and says so on stderr)."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = traced_env(f"http://127.0.0.1:{port}", RAGMON_STORE__DSN=f"chdb://{tmp_path / 'chdb'}")
    env.pop("OTEL_EXPORTER_OTLP_TIMEOUT", None)
    out = run_process([*RAGMON, "drift", "check"], env, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "0 tests, 0 drifted" in out.stdout
    assert "Failed to export spans" in out.stderr
