"""Judge drift against the real chDB engine: review labels joined with stored judge scores, week by week, published
as the ``ragmon_judge_agreement_*`` gauges; a judge that stopped agreeing with reviewers in the latest week is
flagged, the same judge still agreeing is not, and another fingerprint is never pooled with it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest
from typer.testing import CliRunner

from ragmon.cli.app import app
from ragmon.config.drift import JudgeAgreementSettings
from ragmon.judge_agreement.job import JudgeAgreementJob, iso_week
from ragmon.store import ClickHouseStore
from ragmon.telemetry import Telemetry

NOW = datetime.now(UTC)
SCORE_COLUMNS = ["trace_id", "query_id", "ts", "scored_at", "retriever_name", "variant", "category", "metric",
                 "value", "status", "judge_name", "judge_fingerprint"]
LABEL_COLUMNS = ["week", "trace_id", "reviewer", "labelled_at", "grounded"]


def seed(store: ClickHouseStore, fingerprint: str, weeks_ago: int, agree: int, disagree: int,
         category: str = "billing") -> None:
    """``agree + disagree`` reviewed traces of one week, half judged faithful; the reviewer agrees on ``agree``."""
    at = NOW - timedelta(weeks=weeks_ago)
    week = iso_week(at)
    scores, labels = [], []
    for i in range(agree + disagree):
        trace = f"{fingerprint}-{week}-{category}-{i}"
        judge = i % 2
        human = judge if i < agree else 1 - judge
        scores.append([trace, trace, at, at, "hybrid", "production", category, "faithfulness", float(judge), "ok",
                       "heuristic", fingerprint])  # fmt: skip
        labels.append([week, trace, "ana", at + timedelta(days=3), human])
    store.insert_rows("scores", scores, SCORE_COLUMNS)
    store.insert_rows("review_labels", labels, LABEL_COLUMNS)


def test_the_week_a_judge_stops_agreeing_is_flagged_and_exported(store: ClickHouseStore) -> None:
    for weeks_ago in (5, 4, 3, 2):  # calibrated at kappa 0.84, then one ordinary week
        seed(store, "fp-drifting", weeks_ago, 46, 4)
        seed(store, "fp-steady", weeks_ago, 46, 4)
    seed(store, "fp-drifting", 1, 30, 20)  # kappa 0.2 in the latest week
    seed(store, "fp-steady", 1, 44, 6)  # kappa 0.76: within noise
    telemetry = Telemetry()
    job = JudgeAgreementJob(store, JudgeAgreementSettings(calibration_weeks=3, min_pairs=20), telemetry)
    trends = {(t.fingerprint, t.stratum): t for t in job.run_once()}
    drifting, steady = trends[("fp-drifting", "billing")], trends[("fp-steady", "billing")]
    assert drifting.low and not steady.low
    assert drifting.calibrated.n == 150 and drifting.latest.week == iso_week(NOW - timedelta(weeks=1))
    assert [w.week for w in drifting.weeks] == [iso_week(NOW - timedelta(weeks=w)) for w in (2, 1)]

    def gauge(name: str, fp: str, stratum: str = "billing") -> float | None:
        return telemetry.registry.get_sample_value(name, {"fingerprint": fp, "label": "grounded", "stratum": stratum})

    assert gauge("ragmon_judge_agreement_kappa", "fp-drifting") == drifting.latest.kappa
    assert abs(gauge("ragmon_judge_agreement_kappa", "fp-drifting") - 0.2) < 1e-9
    assert abs(gauge("ragmon_judge_agreement_calibrated_kappa", "fp-drifting", "ALL") - 0.84) < 1e-9
    assert gauge("ragmon_judge_agreement_pairs", "fp-steady") == 50
    kappa, calibrated, margin = (gauge(f"ragmon_judge_agreement_{n}", "fp-drifting")
                                 for n in ("kappa", "calibrated_kappa", "drop_interval"))  # fmt: skip
    assert calibrated - kappa > margin  # what RagmonJudgeAgreementLow evaluates
    kappa, calibrated, margin = (gauge(f"ragmon_judge_agreement_{n}", "fp-steady")
                                 for n in ("kappa", "calibrated_kappa", "drop_interval"))  # fmt: skip
    assert calibrated - kappa < margin


def test_no_labels_no_series(store: ClickHouseStore) -> None:
    telemetry = Telemetry()
    assert JudgeAgreementJob(store, JudgeAgreementSettings(), telemetry).run_once() == []
    assert b"ragmon_judge_agreement_kappa{" not in generate_latest(telemetry.registry)


def test_the_command_prints_the_weekly_series_and_gates_on_low(store: ClickHouseStore, store_settings) -> None:
    for weeks_ago in (4, 3, 2):
        seed(store, "fp-drifting", weeks_ago, 46, 4)
    seed(store, "fp-drifting", 1, 30, 20)
    env = {"RAGMON_STORE__DSN": store_settings.dsn.get_secret_value(),
           "RAGMON_STORE__DATABASE": store_settings.database,
           "RAGMON_DRIFT__JUDGE_AGREEMENT__CALIBRATION_WEEKS": "3", "COLUMNS": "250", "RAGMON_CONFIG": None}
    runner = CliRunner()
    out = runner.invoke(app, ["drift", "judge-agreement", "--format", "json"], env=env)
    assert out.exit_code == 0, out.output
    cells = {(c["fingerprint"], c["stratum"]): c for c in json.loads(out.stdout)}
    cell = cells[("fp-drifting", "billing")]
    assert cell["low"] and cell["calibrated"]["n"] == 150 and [w["n"] for w in cell["weeks"]] == [50]
    gated = runner.invoke(app, ["drift", "judge-agreement", "--fail-when-low"], env=env)
    assert gated.exit_code == 1 and "LOW" in gated.stdout


def test_a_stratum_with_too_few_label_pairs_says_so_instead_of_a_dash(store: ClickHouseStore, store_settings) -> None:
    for weeks_ago in (4, 3, 2, 1):
        seed(store, "fp", weeks_ago, 46, 4)
        seed(store, "fp", weeks_ago, 5, 1, category="consent")  # six label pairs a week: too few for a kappa
    env = {"RAGMON_STORE__DSN": store_settings.dsn.get_secret_value(),
           "RAGMON_STORE__DATABASE": store_settings.database,
           "RAGMON_DRIFT__JUDGE_AGREEMENT__CALIBRATION_WEEKS": "3", "COLUMNS": "300", "RAGMON_CONFIG": None}
    table = CliRunner().invoke(app, ["drift", "judge-agreement"], env=env)
    assert table.exit_code == 0, table.output
    consent = next(line for line in table.stdout.splitlines() if "consent" in line)
    assert "fewer than 20" in consent and " ok " not in consent
    cells = {c["stratum"]: c for c in json.loads(CliRunner().invoke(
        app, ["drift", "judge-agreement", "--format", "json"], env=env).stdout)}
    assert "fewer than 20" in cells["consent"]["no_verdict"] and cells["billing"]["no_verdict"] is None
