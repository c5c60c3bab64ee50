"""Question-type coverage against chDB: the scorer stores classifications with their fingerprint, the check
compares them with a golden set per stratum and exports gauges, the CLI reports and exits, and the golden-set
export prefers the under-represented types."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest
from typer.testing import CliRunner

from ragmon.cli.app import app as cli
from ragmon.config import DEFAULT_QUESTION_TYPES
from ragmon.contracts.golden import GoldenCase
from ragmon.coverage.check import EXIT_DIVERGED, EXIT_MATCHES, check_coverage, export
from ragmon.coverage.metrics import CoverageMetrics
from ragmon.coverage.queries import types_of_traces
from ragmon.coverage.stats import DIVERGED, CoverageThresholds
from ragmon.errors import RetryableJudgeError
from ragmon.judge import HeuristicJudge
from ragmon.judge.classify import HeuristicClassifier
from ragmon.review.export import export_golden
from ragmon.review.labels import Label, save_label
from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.selection import select_week
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.pipeline import LiveScorer
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace
from tests.integration.review.support import insert_traces, week_traces

NOW = datetime.now(UTC)
FACT, AMOUNT = "how do I withdraw consent for newsletter {i}", "How much is the fee for plan {i}?"


def types(store) -> list[dict]:
    return store.query_rows(f"SELECT * FROM {store.table('question_types')} FINAL ORDER BY trace_id")


def golden(n_fact: int, n_amount: int = 0, category: str = "consent") -> list[GoldenCase]:
    cases = []
    for i in range(n_fact + n_amount):
        qtype = "single-fact" if i < n_fact else "table-number"
        cases.append(GoldenCase(id=f"g{i}", question=f"q{i}", category=category, expected_behaviour="refuse",
                                tags=["tender", qtype]))
    return cases


def traffic(n_fact: int, n_amount: int, category: str = "consent") -> list[dict]:
    return [make_trace(question=(FACT if i < n_fact else AMOUNT).format(i=i), category=category,
                       timestamp=(NOW - timedelta(hours=1, seconds=i)).isoformat())
            for i in range(n_fact + n_amount)]


def scorer(store, classifier=None, rate: float = 1.0) -> LiveScorer:
    return LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="cov", rate=rate), Telemetry(),
                      classifier=classifier or HeuristicClassifier(DEFAULT_QUESTION_TYPES))


def test_scored_traces_get_a_question_type_with_the_classifier_fingerprint_once(store):
    classifier = HeuristicClassifier(DEFAULT_QUESTION_TYPES)
    batch = traffic(20, 20)
    s = scorer(store, classifier, rate=0.5)
    s.process(batch, batch_key="cov|0|0-39")
    s.process(batch, batch_key="cov|0|0-39")  # a replayed batch: deduplicated, counted once under FINAL
    rows = types(store)
    sampled = {r["trace_id"] for r in store.query_rows(
        f"SELECT trace_id FROM {store.table('sampling_decisions')} FINAL WHERE decision = 'sampled'")}
    assert 0 < len(rows) < 40 and {r["trace_id"] for r in rows} == sampled
    assert {r["classifier_fingerprint"] for r in rows} == {classifier.fingerprint}
    by_question = {t["trace_id"]: t["question"] for t in batch}
    for r in rows:
        assert r["status"] == "ok"
        assert r["question_type"] == ("table-number" if by_question[r["trace_id"]].startswith("How much")
                                      else "single-fact")
    assert types_of_traces(store, [rows[0]["trace_id"], "missing"]) == {rows[0]["trace_id"]: rows[0]["question_type"]}


class FlakyClassifier:
    name, model, fingerprint, labels = "flaky", "", "c" * 16, ("single-fact", "other")

    def classify(self, item):
        raise RetryableJudgeError("classifier endpoint answered HTTP 503")


def test_a_failing_classifier_is_a_failed_row_and_scores_still_land(store):
    scorer(store, FlakyClassifier()).process(traffic(3, 0), batch_key="flaky")
    rows = types(store)
    assert len(rows) == 3 and {r["status"] for r in rows} == {"failed"} and {r["question_type"] for r in rows} == {""}
    assert "503" in rows[0]["error"]
    assert store.command(f"SELECT count() FROM {store.table('scores')} FINAL WHERE status = 'ok'") > 0
    result = check_coverage(store, golden(10), DEFAULT_QUESTION_TYPES, until=NOW, window=timedelta(days=1),
                            thresholds=CoverageThresholds(min_traces=1))
    assert result.fingerprint is None and result.strata[-1].traffic == 0  # failures are never counted


def test_check_names_the_new_type_and_exports_gauges(store):
    scorer(store).process(traffic(60, 60) + traffic(80, 0, category="billing"), batch_key="mix")
    cases = golden(30) + golden(20, category="billing")
    result = check_coverage(store, cases, DEFAULT_QUESTION_TYPES, until=NOW, window=timedelta(days=1),
                            thresholds=CoverageThresholds())
    by = {s.stratum: s for s in result.strata}
    assert by["consent"].status == DIVERGED and by["consent"].under_represented == ("table-number",)
    assert by["consent"].traffic == 120 and by["consent"].distance == 0.5
    assert by["billing"].status == "matches"
    assert result.exit_code == EXIT_DIVERGED and result.under_represented() == ("table-number",)
    telemetry = Telemetry()
    export(result, telemetry.use(CoverageMetrics), 1.0)
    text = generate_latest(telemetry.registry).decode()
    assert 'ragmon_golden_coverage_diverged{stratum="consent"} 1.0' in text
    assert 'ragmon_golden_coverage_diverged{stratum="billing"} 0.0' in text
    assert 'ragmon_golden_coverage_under_represented_share{question_type="table-number",stratum="consent"} 0.5' in text
    refreshed = check_coverage(store, cases + golden(0, 30), DEFAULT_QUESTION_TYPES, until=NOW,
                               window=timedelta(days=1), thresholds=CoverageThresholds())
    assert refreshed.exit_code == EXIT_MATCHES


def test_cli_report_json_and_exit_code(store, store_settings, tmp_path, monkeypatch):
    scorer(store).process(traffic(60, 60), batch_key="cli")
    path = tmp_path / "golden.json"
    path.write_text(json.dumps([c.model_dump(mode="json") for c in golden(30)]))
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    runner = CliRunner()
    r = runner.invoke(cli, ["golden", "coverage", "--golden", str(path), "--format", "json", "--since", "1d"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    consent = next(s for s in doc["strata"] if s["stratum"] == "consent")
    assert consent["status"] == "diverged" and consent["under_represented"] == ["table-number"]
    assert consent["thresholds"]["max_distance"] == 0.2 and doc["under_represented"] == ["table-number"]
    r = runner.invoke(cli, ["golden", "coverage", "--golden", str(path)], env={"COLUMNS": "200"})
    assert r.exit_code == 1 and "add cases of: table-number" in r.output
    assert runner.invoke(cli, ["golden", "coverage", "--golden", str(path), "--format", "xml"]).exit_code == 2
    assert runner.invoke(cli, ["golden", "coverage"]).exit_code == 2  # no golden set anywhere
    unknown = runner.invoke(cli, ["golden", "coverage", "--golden", str(path), "--fingerprint", "deadbeef"])
    assert unknown.exit_code == 2 and "no traffic in the window was classified with it" in unknown.output


def test_export_prefers_under_represented_types_and_tags_cases(store, tmp_path):
    review = ClickHouseReviewQueries(store)
    week, batch = week_traces(6, ["consent"], seed=7)
    for i, t in enumerate(batch):
        t["question"] = (AMOUNT if i % 3 == 0 else FACT).format(i=i)
    insert_traces(store, batch)
    scorer(store).process(batch, batch_key="export")
    select_week(review, week, 6, seed="cov", now=NOW)
    for t in batch:
        chunk = t["retrieved"][0]["chunk_id"]
        save_label(review, Label(week, t["trace_id"], "alice", NOW, answer_correct=True, grounded=True,
                                 citations_supported=True, refusal_appropriate=True, expected_behaviour="answer",
                                 add_to_golden=True, note="", relevant_chunk_ids=(chunk,)))
    out = tmp_path / "g.json"
    result = export_golden(review, out, prefer=["table-number"], limit=2,
                           question_types=lambda ids: types_of_traces(store, ids))
    assert len(result.added) == 2 and len(result.deferred) == 4
    cases = json.loads(out.read_text())
    assert [c["tags"] for c in cases] == [["from-review", "table-number"]] * 2


def test_traces_without_a_category_do_not_fail_the_check_and_can_be_compared_the_documented_way(store, tmp_path,
                                                                                               store_settings,
                                                                                               monkeypatch):
    """Traffic whose traces carry no category is the `uncategorized` stratum (docs/coverage.md): without golden
    cases of that category it is compared in `all` only and said so, not a divergence; with them (as `ragmon review
    export --golden` writes them) it is compared like any stratum."""
    scorer(store).process(traffic(60, 0) + traffic(60, 0, category=""), batch_key="uncat")
    result = check_coverage(store, golden(30), DEFAULT_QUESTION_TYPES, until=NOW, window=timedelta(days=1),
                            thresholds=CoverageThresholds())
    by = {s.stratum: s for s in result.strata}
    assert by["uncategorized"].traffic == 60 and by["uncategorized"].status == "no_category"
    assert by["all"].traffic == 120 and result.exit_code == EXIT_MATCHES
    path = tmp_path / "golden.json"
    path.write_text(json.dumps([c.model_dump(mode="json") for c in golden(30)]))
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    r = CliRunner().invoke(cli, ["golden", "coverage", "--golden", str(path)], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "60 classified traces have no category" in r.output and "'uncategorized'" in r.output
    compared = check_coverage(store, golden(30) + golden(10, category="uncategorized"), DEFAULT_QUESTION_TYPES,
                              until=NOW, window=timedelta(days=1), thresholds=CoverageThresholds())
    assert {s.stratum: s for s in compared.strata}["uncategorized"].status == "matches"


def test_the_json_keeps_a_tiny_p_value(store, store_settings, tmp_path, monkeypatch):
    """A p-value below 5e-7 is not 0.0 in the JSON: statistics keep full precision there (the table rounds)."""
    scorer(store).process(traffic(60, 60), batch_key="tiny-p")
    exact = {s.stratum: s for s in check_coverage(store, golden(30), DEFAULT_QUESTION_TYPES, until=NOW,
                                                  window=timedelta(days=1), thresholds=CoverageThresholds()).strata}
    assert 0 < exact["consent"].p_value < 5e-7
    path = tmp_path / "golden.json"
    path.write_text(json.dumps([c.model_dump(mode="json") for c in golden(30)]))
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    r = CliRunner().invoke(cli, ["golden", "coverage", "--golden", str(path), "--format", "json", "--since", "1d"])
    consent = next(s for s in json.loads(r.output)["strata"] if s["stratum"] == "consent")
    assert consent["p_value"] == exact["consent"].p_value and consent["p_value"] > 0
    assert consent["g_statistic"] == exact["consent"].g_statistic and consent["cramers_v"] == exact["consent"].cramers_v
