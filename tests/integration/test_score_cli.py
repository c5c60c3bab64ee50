"""`ragmon score` and `ragmon calibrate` through the CLI: a store backfill, a Kafka topic, labelled files.

Commands that open a store run in a subprocess with their own chDB directory (one per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmon.cli.app import app
from ragmon.sampling.sampler import ScoreSampler
from tests.conftest import make_trace

SUPPORTED = "Consent can be withdrawn at any time. It applies to future messages."
UNSUPPORTED = "Consent is permanent. Refunds take ninety days to arrive."

SEED = """
import json, sys
from datetime import UTC, datetime
from pydantic import SecretStr
from ragmon.config import StoreSettings
from ragmon.contracts.decode import decode_trace
from ragmon.store import ClickHouseStore, TraceColumns
store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(sys.argv[1])))
docs, labels = json.load(open(sys.argv[2]))
store.insert_columns("traces", TraceColumns().extend(decode_trace(json.dumps(d).encode()).trace for d in docs).columns)
now = datetime.now(UTC)
store.insert_rows("review_labels", [[l["trace_id"], "ana", now, l["grounded"], "2026-W49"] for l in labels],
                  ["trace_id", "reviewer", "labelled_at", "grounded", "week"])
"""

COUNT = """
import json, sys
from pydantic import SecretStr
from ragmon.config import StoreSettings
from ragmon.store import ClickHouseStore
store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(sys.argv[1])))
q = lambda sql: store.query_rows(sql)
print(json.dumps({
  "decisions": q("SELECT decision, count() AS n FROM ragmon.sampling_decisions FINAL GROUP BY decision"),
  "scored": q("SELECT count(DISTINCT trace_id) AS n, groupUniqArray(judge_fingerprint) AS fps FROM ragmon.scores FINAL "
              "WHERE status = 'ok'"),
}, default=str))
"""


def ragmon(args: list[str], dsn: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "RAGMON_STORE__DSN": dsn, "COLUMNS": "200", **env}
    return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True, timeout=timeout,
                          env=environment)


def py(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def labelled(n: int, *, agree: bool = True) -> list[dict]:
    items = []
    for i in range(n):
        supported = i % 2 == 0
        human = supported if (agree or i % 4 < 2) else not supported
        items.append({"trace": make_trace(answer=SUPPORTED if supported else UNSUPPORTED, citations=[],
                                          category=["consent", "billing"][i % 2 if i < n // 2 else 0]),
                      "labels": {"grounded": human}, "reviewer": "ana"})
    return items


def test_calibrate_labelled_traces_file_gate(tmp_path: Path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.jsonl"
    good.write_text(json.dumps(labelled(24)))
    bad.write_text("\n".join(json.dumps(x) for x in labelled(24, agree=False)))
    runner = CliRunner()
    ok = runner.invoke(app, ["calibrate", "--labels", str(good), "--min-kappa", "0.6"], env={"COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output
    assert "PASS" in ok.output and "1.000" in ok.output
    failed = runner.invoke(app, ["calibrate", "--labels", str(bad), "--min-kappa", "0.6"], env={"COLUMNS": "200"})
    assert failed.exit_code == 1, failed.output
    assert "FAIL" in failed.output and "disagreements on grounded" in failed.output


def test_calibrate_judged_pairs_csv_json_output(tmp_path: Path):
    f = tmp_path / "pairs.csv"
    f.write_text("trace_id,label,human,judge,category,judge_fingerprint\n"
                 + "".join(f"t{i},grounded,{i % 2},{(i // 2) % 2 if i < 8 else i % 2},c,fp1\n" for i in range(20)))
    out = CliRunner().invoke(app, ["calibrate", "--labels", str(f), "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    cell = next(c for c in data[0]["cells"] if c["stratum"] == "*")
    assert data[0]["fingerprint"] == "fp1" and cell["n"] == 20 and cell["observed"] == pytest.approx(0.8)


@pytest.mark.parametrize("content, message", [
    ('[{"trace_id": "t1", "label": "grounded", "human": "maybe", "judge": 1}]', "item 1: human"),
    ('[{"trace_id": "t1", "label": "vibes", "human": 1, "judge": 1}]', "not one of"),
    ('[{"trace": {"trace_id": "x"}, "labels": {"grounded": true}}]', "not a valid trace.v1"),
    ("{broken", "not valid JSON"),
])
def test_calibrate_malformed_file_exit_2(tmp_path: Path, content: str, message: str):
    f = tmp_path / "labels.json"
    f.write_text(content)
    out = subprocess.run([sys.executable, "-m", "ragmon", "calibrate", "--labels", str(f)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_score_from_store_then_calibrate_and_report(tmp_path: Path):
    dsn = f"chdb://{tmp_path / 'chdb'}"
    docs = [x["trace"] for x in labelled(30)]
    labels = [{"trace_id": d["trace_id"], "grounded": int(d["answer"] == SUPPORTED)} for d in docs[:20]]
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps([docs, labels]))
    py(SEED, dsn, str(seed))

    out = ragmon(["score", "--from-store", "--since", "1h", "--until", "now", "--rate", "1"], dsn)
    assert out.returncode == 0, out.stderr
    assert "scored 30" in out.stdout and "faithfulness" in out.stdout
    counts = json.loads(py(COUNT, dsn))
    assert counts["scored"][0]["n"] == 30 and len(counts["scored"][0]["fps"]) == 1

    cal = ragmon(["calibrate", "--min-kappa", "0.6"], dsn)
    assert cal.returncode == 0, cal.stdout + cal.stderr
    assert counts["scored"][0]["fps"][0] in cal.stdout and "PASS" in cal.stdout

    # --rejudge: the configured judge judges the labelled traces now; nothing is written
    rejudged = ragmon(["calibrate", "--rejudge", "--format", "json"], dsn,
                      RAGMON_JUDGE__KIND="heuristic")
    assert rejudged.returncode == 0, rejudged.stderr
    [result] = json.loads(rejudged.stdout)
    assert result["fingerprint"] == counts["scored"][0]["fps"][0] and result["cells"][0]["n"] == 20
    assert json.loads(py(COUNT, dsn))["scored"][0]["n"] == 30

    report = ragmon(["score", "report", "--since", "1d"], dsn)
    assert report.returncode == 0 and "fingerprint" in report.stdout and "citation_recall" in report.stdout

    bad = ragmon(["score", "--from-store", "--since", "yesterday-ish"], dsn)
    assert bad.returncode == 2 and "is not a time" in bad.stderr


@pytest.mark.kafka
def test_score_consumes_a_kafka_topic(tmp_path: Path, kafka_bootstrap: str, new_topic):
    from kafka import KafkaProducer

    topic = new_topic(partitions=3)
    docs = [make_trace(query_id=f"q-{i}") for i in range(60)]
    docs.append({"not": "a trace"})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for d in docs:
        producer.send(topic, json.dumps(d).encode())
    producer.flush()
    producer.close()

    dsn = f"chdb://{tmp_path / 'chdb'}"
    out = ragmon(["score", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--group-id", f"g-{topic}",
                  "--rate", "0.5", "--exit-when-idle", "4", "--port", "0"], dsn)
    assert out.returncode == 0, out.stderr
    sampler = ScoreSampler(salt="ragmon-score-v1", rate=0.5)
    expected = sum(sampler.decide(d["query_id"]).sampled for d in docs[:60])
    counts = json.loads(py(COUNT, dsn))
    decisions = {r["decision"]: r["n"] for r in counts["decisions"]}
    assert decisions == {"sampled": expected, "not_sampled": 60 - expected}
    assert counts["scored"][0]["n"] == expected

    # offsets were committed: a second run of the same group finds nothing new
    again = ragmon(["score", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--group-id", f"g-{topic}",
                    "--rate", "0.5", "--exit-when-idle", "3", "--port", "0"], dsn)
    assert again.returncode == 0 and "decisions: none" in again.stdout


def test_score_from_store_with_the_openai_judge(tmp_path: Path):
    from tests.integration.test_openai_judge import good
    from tests.support.openai_server import FakeOpenAI, ok, status

    dsn = f"chdb://{tmp_path / 'chdb'}"
    docs = [make_trace() for _ in range(6)]
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps([docs, []]))
    py(SEED, dsn, str(seed))
    calls = {"n": 0}

    def responder(request):
        calls["n"] += 1
        return status(503, "overloaded") if calls["n"] <= 2 else ok(good(), prompt_tokens=1000, completion_tokens=100)

    with FakeOpenAI(responder=responder) as srv:
        out = ragmon(["score", "--from-store", "--since", "1h", "--rate", "1", "--judge", "openai"], dsn,
                     RAGMON_JUDGE__BASE_URL=srv.base_url, RAGMON_JUDGE__API_KEY="sk-cli-secret",
                     RAGMON_JUDGE__BACKOFF_INITIAL_SECONDS="0.01", RAGMON_JUDGE__INPUT_USD_PER_MILLION_TOKENS="1",
                     RAGMON_JUDGE__OUTPUT_USD_PER_MILLION_TOKENS="10")
    assert out.returncode == 0, out.stderr
    # identical content: the first trace is judged (after two 503s), the other five come from the cache
    assert "scored 6, failed 0" in out.stdout and "$0.0020" in out.stdout
    assert calls["n"] == 3 and "sk-cli-secret" not in out.stdout + out.stderr


def test_only_failed_scores_again_just_the_traces_a_judge_outage_failed(tmp_path: Path):
    """After an outage that outlasted the judge's retries, `--from-store --only-failed` judges again only the traces
    recorded as failed (by this judge's fingerprint), and their new rows replace the failed ones."""
    from tests.integration.test_openai_judge import good
    from tests.support.openai_server import FakeOpenAI, ok, status

    dsn = f"chdb://{tmp_path / 'chdb'}"
    docs = [make_trace(question=f"{'OUTAGE ' if i < 2 else ''}How do refunds work, case {i}?") for i in range(6)]
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps([docs, []]))
    py(SEED, dsn, str(seed))
    judge = {"RAGMON_JUDGE__API_KEY": "sk-x", "RAGMON_JUDGE__MAX_ATTEMPTS": "1", "RAGMON_SCORE__JUDGE_ATTEMPTS": "1",
             "RAGMON_JUDGE__BACKOFF_INITIAL_SECONDS": "0.01"}
    asked: list[str] = []

    def outage(request):
        text = json.dumps(request)
        asked.append(text)
        return status(500, "down") if "OUTAGE" in text else ok(good())

    with FakeOpenAI(responder=outage) as srv:
        first = ragmon(["score", "--from-store", "--since", "1h", "--rate", "1", "--judge", "openai"], dsn,
                       RAGMON_JUDGE__BASE_URL=srv.base_url, **judge)
    assert first.returncode == 0, first.stderr
    assert "scored 4, failed 2" in first.stdout and len(asked) == 6

    asked.clear()
    with FakeOpenAI(responder=lambda request: (asked.append(json.dumps(request)), ok(good()))[1]) as srv:
        again = ragmon(["score", "--from-store", "--only-failed", "--since", "1h", "--rate", "1", "--judge", "openai"],
                       dsn, RAGMON_JUDGE__BASE_URL=srv.base_url, **judge)
    assert again.returncode == 0, again.stderr
    assert len(asked) == 2 and all("OUTAGE" in a for a in asked)  # only the failed two were judged again
    assert "scored 2, failed 0" in again.stdout
    counts = json.loads(py(COUNT, dsn))
    assert counts["scored"][0]["n"] == 6  # every trace now has ok scores: the failed rows were replaced

    with FakeOpenAI(responder=lambda request: (asked.append("x"), ok(good()))[1]) as srv:
        none = ragmon(["score", "--from-store", "--only-failed", "--since", "1h", "--judge", "openai"], dsn,
                      RAGMON_JUDGE__BASE_URL=srv.base_url, **judge)
    assert none.returncode == 0 and "nothing to score again" in none.stderr and len(asked) == 2

    misuse = ragmon(["score", "--only-failed"], dsn)
    assert misuse.returncode == 2 and "--from-store" in misuse.stderr
