"""Outcome events into chDB from a real Kafka topic and from a file, with the trace guarantees; and
`ragmon ab compare` on stored traces and outcomes."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmon.ab.compare import HOLD, REJECT, AbOptions, Arm, compare
from ragmon.cli.app import app as cli
from ragmon.config import AbSettings
from ragmon.errors import RetryableStoreError
from ragmon.outcomes.loop import OutcomeLoop
from ragmon.stream.dead_letter import InMemoryDeadLetterSink, KafkaDeadLetterSink
from ragmon.stream.source import InMemoryTraceSource, KafkaTraceSource
from tests.conftest import make_trace
from tests.integration.ingest_support import committed, kafka_settings, produce, read_topic
from tests.integration.review.support import insert_traces

NOW = datetime.now(UTC).replace(microsecond=0)
BAD = [b'{"query_id": "q", "kind": "clicked_ad", "time": "2026-12-01T09:00:00Z"}', b"{not json", b"[]",
       b'{"query_id": "q", "kind": "resolved", "time": "2026-12-01T09:00:00"}', b"\xff\xfe"]


def event(i: int, kind: str = "resolved", **kw) -> dict:
    return {"query_id": f"q{i}", "kind": kind, "time": (NOW - timedelta(minutes=i)).isoformat(), **kw}


def count(store) -> int:
    return int(store.command(f"SELECT count() FROM {store.table('outcomes')} FINAL"))


@pytest.mark.kafka
def test_kafka_topic_stored_once_dead_letters_with_reasons_committed_after_write(store, kafka_bootstrap, new_topic):
    topic = new_topic(3)
    values = [json.dumps(event(i, ["resolved", "citation_opened", "feedback"][i % 3], value=1)).encode()
              for i in range(300)]
    values[::61] = BAD  # five malformed events between valid neighbours
    produce(kafka_bootstrap, topic, values)
    valid = len(values) - len(BAD)

    def run(group: str) -> OutcomeLoop:
        ks = kafka_settings(kafka_bootstrap, topic, group)
        loop = OutcomeLoop(KafkaTraceSource(ks), store, KafkaDeadLetterSink(ks),
                           AbSettings(max_batch_events=100, flush_interval_seconds=0.2))
        try:
            loop.run(threading.Event(), until=lambda: loop.stats.consumed >= len(values) and loop.idle())
        finally:
            loop.source.close()
            loop.sink.close()
        return loop

    first = run("outcomes-a")
    assert first.stats.stored == valid and count(store) == valid
    assert sum(first.stats.dead_letters.values()) == len(BAD)
    assert sum(committed(kafka_bootstrap, "outcomes-a").values()) == len(values)
    letters = read_topic(kafka_bootstrap, f"{topic}.dlq")
    reasons = sorted(dict(m.headers)["ragmon.reason"].decode() for m in letters)
    assert reasons == sorted(["schema", "invalid_json", "not_an_object", "schema", "invalid_json"])
    # a second group replays the whole topic: every event is stored once as read with FINAL
    run("outcomes-b")
    assert count(store) == valid


class FlakyStore:
    """The real store behind inserts that fail twice (the second after the rows landed: an ack lost)."""

    def __init__(self, store, source):
        self.store, self.source, self.calls, self.committed_at_failure = store, source, 0, []
        self.table, self.query_rows = store.table, store.query_rows  # reads go straight to the store

    def insert_columns(self, table, columns, *, dedup_token=None):
        self.calls += 1
        if self.calls == 2:
            self.store.insert_columns(table, columns, dedup_token=dedup_token)
        if self.calls <= 2:
            self.committed_at_failure.append(dict(self.source.committed))
            raise RetryableStoreError("store down (test)")
        return self.store.insert_columns(table, columns, dedup_token=dedup_token)


def test_store_outage_pauses_commits_nothing_then_stores_once(store):
    source = InMemoryTraceSource()
    source.append("outcomes", 0, [json.dumps(event(i)).encode() for i in range(50)] + [BAD[1]])
    flaky = FlakyStore(store, source)
    sink = InMemoryDeadLetterSink()
    loop = OutcomeLoop(source, flaky, sink, AbSettings(max_batch_events=1000, flush_interval_seconds=0.05),
                       max_backoff_seconds=0.05)
    loop.run(threading.Event(), until=lambda: loop.stats.consumed >= 51 and loop.idle())
    assert flaky.committed_at_failure == [{}, {}]  # nothing committed while the write failed
    assert source.committed == {("outcomes", 0): 51} and count(store) == 50 and loop.stats.retries == 2
    # the rows the lost acknowledgement left behind are this batch's own, not re-deliveries
    assert loop.stats.stored == 50 and loop.stats.already_stored == 0
    assert [d.reason for d in sink.letters] == ["invalid_json"]


def test_file_input_through_the_cli_twice_stores_once(store, store_settings, tmp_path: Path, monkeypatch):
    lines = tmp_path / "outcomes.jsonl"
    lines.write_text("\n".join([json.dumps(event(i, "escalated")) for i in range(20)] + [BAD[0].decode()]) + "\n")
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    letters = tmp_path / "dlq.jsonl"
    for _ in range(2):
        r = CliRunner().invoke(cli, ["ingest", "--outcomes", "--file", str(lines), "--dead-letter-file", str(letters)])
        assert r.exit_code == 0, r.output
    assert count(store) == 20
    dead = [json.loads(x) for x in letters.read_text().splitlines()]
    assert len(dead) == 2 and {d["reason"] for d in dead} == {"schema"}


def _arm(n: int, version: str, variant: str, category: str, start: datetime, *, reformulate_every: int,
         via_session: bool = False) -> tuple[list[dict], list[dict]]:
    traces, events = [], []
    for i in range(n):
        qid = f"{version}-{category}-{i}"
        ts = start + timedelta(seconds=30 * i)
        session = f"s-{qid}"
        trace = make_trace(query_id=qid, category=category, timestamp=ts.isoformat(),
                           retriever={"name": "hybrid", "version": version, "variant": variant},
                           attributes={"session.id": session})
        traces.append(trace)
        events.append({"query_id": qid, "kind": "resolved", "time": (ts + timedelta(seconds=20)).isoformat()})
        if i % reformulate_every == 0:
            if via_session:  # the same session asks again 10 s later: derived reformulation
                traces.append(make_trace(query_id=qid + "-again", category="other", timestamp=(ts + timedelta(
                    seconds=10)).isoformat(), retriever={"name": "web", "version": "x", "variant": "production"},
                    attributes={"session.id": session}))
            else:
                events.append({"query_id": qid, "kind": "reformulated",
                               "time": (ts + timedelta(seconds=5)).isoformat()})
        # an event long after the join's bounded wait never counts
        events.append({"query_id": qid, "kind": "escalated", "time": (ts + timedelta(hours=3)).isoformat()})
    return traces, events


def test_ab_compare_rejects_a_cohort_that_reformulates_more_and_holds_a_small_one(store, store_settings, monkeypatch):
    start = NOW - timedelta(hours=6)
    parts = [
        _arm(400, "v1", "production", "billing", start, reformulate_every=10),               # 10 %
        _arm(300, "v2", "canary", "billing", start, reformulate_every=3, via_session=True),  # 33 %, via sessions
        _arm(400, "v1", "production", "consent", start, reformulate_every=10),
        _arm(30, "v2", "canary", "consent", start, reformulate_every=10),                    # too small a cohort
    ]
    insert_traces(store, [t for traces, _ in parts for t in traces])
    source = InMemoryTraceSource()
    source.append("o", 0, [json.dumps(e).encode() for _, events in parts for e in events])
    loop = OutcomeLoop(source, store, InMemoryDeadLetterSink(), AbSettings(flush_interval_seconds=0.05))
    loop.run(threading.Event(), until=lambda: source.lag() == {("o", 0): 0} and loop.idle())

    options = AbOptions(Arm.parse("hybrid@v1", "production"), Arm.parse("hybrid@v2", "canary"), start, NOW,
                        join_wait_seconds=1800, reformulation_seconds=60, min_per_arm=100)
    result = compare(store, options)
    by = {s.stratum: s for s in result.strata}
    billing = {m.name: m for m in by["billing"].measures}
    # the baseline is compared over the cohort's span only: its first 300 traces (30 s apart), not all 400
    assert by["billing"].n_baseline == 300 and by["billing"].n_candidate == 300
    assert (result.cohort[1] - result.cohort[0]).total_seconds() == 30 * 299 and result.empty_arms == ()
    assert billing["reformulated"].delta.baseline == pytest.approx(0.1)
    assert billing["reformulated"].delta.candidate == pytest.approx(100 / 300)
    assert billing["reformulated"].status == "harm" and by["billing"].decision == REJECT
    assert billing["escalated"].delta.candidate == 0.0  # 3 h later: outside the bounded wait
    assert billing["resolved"].delta.baseline == 1.0 and billing["resolved"].status == "ok"
    assert by["consent"].decision == HOLD and "cohort too small" in by["consent"].reasons[0]
    assert result.decision == REJECT and result.exit_code == 1 and result.too_small == ("consent",)

    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    monkeypatch.setenv("RAGMON_AB__REFORMULATION_SECONDS", "60")
    monkeypatch.setenv("RAGMON_AB__MIN_PER_ARM", "100")
    r = CliRunner().invoke(cli, ["ab", "compare", "--baseline", "hybrid@v1", "--candidate", "hybrid@v2",
                                 "--since", "7h", "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["decision"] == "reject" and doc["too_small"] == ["consent"]
    r = CliRunner().invoke(cli, ["ab", "compare", "--baseline", "hybrid@v1", "--candidate", "hybrid@v2",
                                 "--since", "7h"], env={"COLUMNS": "220"})
    assert r.exit_code == 1 and "cohort is still too small in consent" in r.output
    assert CliRunner().invoke(cli, ["ab", "compare", "--baseline", "hybrid@v1", "--candidate", "hybrid@v1",
                                    "--candidate-variant", "production"]).exit_code == 2
    assert CliRunner().invoke(cli, ["ab", "compare", "--baseline", "hybrid@",
                                    "--candidate", "hybrid@v2"]).exit_code == 2
    typo = CliRunner().invoke(cli, ["ab", "compare", "--baseline", "hybrid@v1", "--candidate", "hybird@v2",
                                    "--since", "7h"], env={"COLUMNS": "300"})
    assert typo.exit_code == 4 and "no traces at all for hybird@v2 (canary)" in typo.output


@pytest.mark.kafka
def test_cli_kafka_outcomes_use_the_topic_flags_and_exit_when_idle(kafka_bootstrap, new_topic, tmp_path: Path):
    """`ragmon ingest --outcomes` from Kafka as its own process (a daemon: signals, /metrics, its own chDB)."""
    import os
    import subprocess
    import sys

    topic = new_topic(2)
    values = [json.dumps(event(i, "citation_opened")).encode() for i in range(40)] + [BAD[0]]
    produce(kafka_bootstrap, topic, values, partitions=2)
    stats, chdb = tmp_path / "stats.json", tmp_path / "chdb"
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-m", "ragmon", "ingest", "--outcomes", "--bootstrap-servers", kafka_bootstrap,
                        "--topic", topic, "--group-id", f"{topic}-g", "--dead-letter-topic", f"{topic}.dlq", "--port",
                        "0", "--exit-when-idle", "2", "--stats-json", str(stats)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert f"ragmon ingest --outcomes: {topic} @ {kafka_bootstrap}" in r.stderr and "/metrics" in r.stderr
    assert json.loads(stats.read_text())["stored"] == 40
    assert sum(committed(kafka_bootstrap, f"{topic}-g").values()) == len(values)
    assert [dict(m.headers)["ragmon.reason"].decode()
            for m in read_topic(kafka_bootstrap, f"{topic}.dlq")] == ["schema"]
    counted = subprocess.run([sys.executable, "-c", (
        "from pydantic import SecretStr; from ragmon.config import StoreSettings; from ragmon.store import "
        f"ClickHouseStore; s = ClickHouseStore.open(StoreSettings(dsn=SecretStr('chdb://{chdb}'))); "
        "print(s.command(f\"SELECT count() FROM {s.table('outcomes')} FINAL\"))")],
        capture_output=True, text=True, timeout=120, env=env)
    assert counted.returncode == 0, counted.stderr
    assert int(counted.stdout.strip().splitlines()[-1]) == 40


@pytest.mark.kafka
def test_run_with_the_outcomes_role_stores_events_and_exports_their_counts(store, kafka_bootstrap, new_topic):
    import httpx

    from ragmon.config import KafkaSettings, ProcessSettings, RolesSettings, ServerSettings, Settings
    from ragmon.process import build_process

    topic = new_topic(1)
    off = {r: False for r in RolesSettings.model_fields}
    settings = Settings(
        roles={**off, "outcomes": True}, server=ServerSettings(port=0),
        kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, session_timeout_ms=6000),
        ab=AbSettings(outcomes_topic=topic, outcomes_group_id=f"{topic}-g", outcomes_dead_letter_topic=f"{topic}.dlq",
                      flush_interval_seconds=0.2),
        process=ProcessSettings(shutdown_grace_seconds=10))
    process = build_process(settings, store=store)
    assert process.role_names == ["outcomes"]
    port = process.serve()
    process.daemon.start()
    try:
        produce(kafka_bootstrap, topic, [json.dumps(event(i)).encode() for i in range(25)] + [BAD[1]], partitions=1)
        deadline = datetime.now(UTC) + timedelta(seconds=60)
        stats = process.service("outcomes").stats
        while (stats.stored < 25 or not stats.dead_letters) and datetime.now(UTC) < deadline:
            threading.Event().wait(0.2)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz").json()
        health = httpx.get(f"http://127.0.0.1:{port}/healthz")
    finally:
        assert process.daemon.stop() == []
        process.stop_server()
    assert count(store) == 25
    assert "ragmon_outcomes_stored_total 25.0" in metrics
    assert 'ragmon_outcomes_dead_letters_total{reason="invalid_json"} 1.0' in metrics
    assert health.status_code == 200 and "outcomes" in json.dumps(ready)


def test_outcome_topics_that_collide_with_the_traces_topics_are_refused():
    from ragmon.config import Settings
    from ragmon.errors import ConfigError
    from ragmon.outcomes.role import check

    with pytest.raises(ConfigError) as err:
        check(Settings(ab=AbSettings(outcomes_topic="rag.traces", outcomes_group_id="ragmon-ingest",
                                     outcomes_dead_letter_topic="rag.traces")))
    text = "\n".join(err.value.problems)
    assert "ab.outcomes_dead_letter_topic" in text and "ab.outcomes_topic" in text and "ab.outcomes_group_id" in text


def _cli_env(monkeypatch, store_settings) -> None:
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)


def _summary(output: str) -> dict:
    line = next(x for x in output.splitlines() if x.startswith("ragmon ingest --outcomes: {"))
    return json.loads(line.split(": ", 1)[1])


def test_loading_the_same_file_again_reports_nothing_new(store, store_settings, tmp_path: Path, monkeypatch):
    """The second load stores nothing new, and its summary says so instead of 'stored' every line again."""
    lines = tmp_path / "outcomes.jsonl"
    events = [event(i, "resolved") for i in range(20)] + [event(0, "resolved")]  # the last one repeats the first
    lines.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    _cli_env(monkeypatch, store_settings)
    first = CliRunner().invoke(cli, ["ingest", "--outcomes", "--file", str(lines)])
    assert first.exit_code == 0, first.output
    assert _summary(first.output) == {**_summary(first.output), "stored": 20, "already_stored": 1}
    again = CliRunner().invoke(cli, ["ingest", "--outcomes", "--file", str(lines)])
    assert again.exit_code == 0, again.output
    summary = _summary(again.output)
    assert summary["stored"] == 0 and summary["already_stored"] == 21 and summary["consumed"] == 21
    assert count(store) == 20


def test_a_file_of_traces_given_to_outcomes_fails_and_says_what_it_is(store_settings, tmp_path: Path, monkeypatch):
    traces = tmp_path / "traces.jsonl"
    traces.write_text("\n".join(json.dumps(make_trace()) for _ in range(5)) + "\n")
    _cli_env(monkeypatch, store_settings)
    r = CliRunner().invoke(cli, ["ingest", "--outcomes", "--file", str(traces), "--dead-letter-file",
                                 str(tmp_path / "dlq.jsonl")])
    assert r.exit_code == 2, r.output
    assert "none of the 5 lines" in r.output and "traces (trace.v1)" in r.output and "without --outcomes" in r.output


def test_what_the_schema_refuses_the_cli_refuses(store, store_settings, tmp_path: Path, monkeypatch):
    """The issue's line: a feedback value as text and a time in Unix seconds is dead-lettered, never stored."""
    _cli_env(monkeypatch, store_settings)
    lines = tmp_path / "loose.jsonl"
    lines.write_text('{"query_id":"q","kind":"feedback","time":1764842400,"value":"-1"}\n')
    r = CliRunner().invoke(cli, ["ingest", "--outcomes", "--file", str(lines)])
    assert '"reason": "schema"' in r.output and count(store) == 0
    assert r.exit_code == 2 and "none of the 1 lines" in r.output
