"""The drift time-travel commands tell the truth (issue 31, item 4), against the real embedded ClickHouse:

* one field name for the stratum across the drift JSON outputs (``stratum``);
* read commands apply the daemon's drift settings (recorded with each stored check), not the CLI's defaults;
* a backtest replays each time with only what existed then, and agrees with ``drift check --at`` check for check;
* an alarm already active at ``--from`` says since when;
* a range where nothing could be assessed is said loudly and is not exit 0;
* blindness is per feature family.

Data is generated seeded (the same traces every run) at fixed times, so every verdict is the same every run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from typer.testing import CliRunner

from ragmon.config import DriftSettings
from ragmon.drift.backtest.backtest import BacktestResult, backtest
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.simulation.simulate import ShapedSpec, insert_shaped
from ragmon.drift.simulation.synthetic import SyntheticSpec, insert_synthetic
from ragmon.telemetry import Telemetry

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def cli(store, store_settings, monkeypatch: pytest.MonkeyPatch):
    """Run ``ragmon`` against the test's store, with no configuration of its own (the CLI's defaults)."""
    from ragmon.cli.app import app

    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, list(args))
    return run


def _week_of_traffic(store, *, shift: float = 0.0, strata: tuple[str, ...] = ("billing",)) -> None:
    """Seven days of the same hour, then the current hour (``NOW`` − 1 h … ``NOW``) with ``shift``."""
    start = NOW - timedelta(hours=1)
    for day in range(1, 8):
        insert_synthetic(store, SyntheticSpec(200, start - timedelta(days=day), NOW - timedelta(days=day),
                                              strata=strata, seed=day))
    insert_synthetic(store, SyntheticSpec(600, start, NOW, shift=shift, strata=strata, seed=0, run_id="cur"))


def test_every_drift_json_output_names_the_stratum_stratum(store, cli) -> None:
    _week_of_traffic(store, shift=0.3)
    settings = DriftSettings(features=["top1_score"])
    DriftChecker(store, settings, clock=lambda: NOW).run_once()
    at = cli("drift", "check", "--at", NOW.isoformat(), "--all", "--format", "json")
    report = cli("drift", "report", "--format", "json")
    replay = cli("drift", "backtest", "--from", (NOW - timedelta(hours=2)).isoformat(), "--to", NOW.isoformat(),
                 "--format", "json", "--all")
    for result in (at, report, replay):
        assert result.exit_code == 0, result.output
    rows = [*json.loads(at.stdout), *json.loads(report.stdout), *json.loads(replay.stdout)["features"]]
    assert rows and all(r["stratum"] == "billing" and "category" not in r for r in rows), rows[0]


#: a daemon configured as the demo configures its own (``ragmon.demo.run.demo_settings``): windows of several hours
#: against the days before them, not the hour against the same hour of the last seven days
DAEMON = DriftSettings(features=["top1_score", "mean_score", "empty_shortlist_rate"], min_samples=100,
                       windows={"current_seconds": 3 * 3600, "reference": "trailing", "reference_days": 2,
                                "same_hours": False})


def _three_days_with_an_incident(store) -> None:
    """Three days of 60 traces an hour in billing and consent; billing's scores drop by 0.1 in the last three
    hours."""
    incident = NOW - timedelta(hours=3)
    for seed, stratum in enumerate(("billing", "consent")):
        insert_synthetic(store, SyntheticSpec(60 * 69, NOW - timedelta(hours=72), incident, strata=(stratum,),
                                              seed=seed + 1, run_id=f"bg-{stratum}"))
        insert_synthetic(store, SyntheticSpec(60 * 3, incident, NOW, shift=-0.1 if stratum == "billing" else 0.0,
                                              strata=(stratum,), seed=seed + 11, run_id=f"inc-{stratum}"))


def _verdicts(rows: list[dict]) -> set[tuple]:
    return {(r["stratum"], r["feature"], r["test"], r["status"], bool(r["drifted"]), bool(r["persistent"]))
            for r in rows}


def test_read_commands_apply_the_daemons_drift_settings(store, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _three_days_with_an_incident(store)
    daemon = DriftChecker(store, DAEMON, clock=lambda: NOW).run_once()
    assert {(r.group.stratum, r.feature) for r in daemon.persistent} >= {("billing", "top1_score")}
    stored = cli("drift", "report", "--format", "json")
    assert stored.exit_code == 0, stored.output
    # the CLI has no configuration of its own: it applies the windows, features and minimum samples the daemon's
    # stored check ran with, and so finds what the daemon found
    again = cli("drift", "check", "--at", NOW.isoformat(), "--all", "--format", "json")
    assert again.exit_code == 0, again.output
    assert _verdicts(json.loads(again.stdout)) == _verdicts(json.loads(stored.stdout))
    assert f"drift settings of the check stored at {NOW:%Y-%m-%d %H:%M} UTC" in again.stderr
    replay = cli("drift", "backtest", "--from", (NOW - timedelta(hours=12)).isoformat(), "--to", NOW.isoformat(),
                 "--format", "json")
    assert replay.exit_code == 0, replay.output
    result = json.loads(replay.stdout)
    assert result["window_seconds"] == 3 * 3600 and result["checks"] == 4
    top1 = next(f for f in result["features"] if (f["stratum"], f["feature"]) == ("billing", "top1_score"))
    assert top1["persistent_times"] == [NOW.isoformat()]
    # a drift setting the command's own configuration sets explicitly wins, and is named
    monkeypatch.setenv("RAGMON_DRIFT__MIN_SAMPLES", "100000")
    own = cli("drift", "check", "--at", NOW.isoformat(), "--all", "--format", "json")
    assert {r["status"] for r in json.loads(own.stdout)} == {"insufficient_data"}
    assert "drift.min_samples" in own.stderr


def _hours(store, rng, start: datetime, hours: int, *, n: int, question: str | None = None, level: float = 0.7,
           stratum: str = "billing") -> None:
    """``n`` traces in each of ``hours`` hours from ``start``: every trace asks a question of its own (never asked
    again), or all ask ``question``; scores around ``level``."""
    count = n * hours
    offsets = (np.repeat(np.arange(hours), n) + rng.random(count)) * 3600
    tops = rng.normal(level, 0.05, count)
    scores = [sorted((t - 0.03 * np.arange(5) + rng.normal(0, 0.01, 5)).tolist(), reverse=True) for t in tops]
    ids = [f"{question or 'own'}-{stratum}-{start.timestamp():.0f}-{i}" for i in range(count)]
    store.insert_columns("traces", {
        "trace_id": ids, "query_id": ids, "ts": [start + timedelta(seconds=float(o)) for o in offsets],
        "retriever_name": ["hybrid"] * count, "retriever_version": ["v1"] * count, "variant": ["production"] * count,
        "category": [stratum] * count, "question": [question or f"question {i}" for i in ids],
        "retrieved_chunk_ids": [[f"d{j}@c" for j in range(5)]] * count,
        "retrieved_doc_ids": [[f"d{j}" for j in range(5)]] * count,
        "retrieved_doc_versions": [["v1"] * 5] * count, "retrieved_scores": scores,
        "retrieved_ranks": [[1, 2, 3, 4, 5]] * count, "behaviour": ["answer"] * count,
        "latency_total_ms": [800.0] * count, "cost_usd": [0.001] * count, "ingested_at": [datetime.now(UTC)] * count,
    })


def _drifted(result: BacktestResult) -> set[tuple[str, str, datetime]]:
    return {(f.group.stratum, f.feature, t) for f in result.features for t in f.drift_times}


def test_a_backtest_judges_each_time_with_only_what_existed_then(store) -> None:
    """A question first asked in the hour before ``NOW`` (scoring as everyone does) is asked every hour of the next
    day and scores high from then on. The check at ``NOW`` cannot know that: its reference has no level for the
    question, so its traces count as served, and nothing drifted. A backtest that reaches into the next day must
    not use the question's later level either (it did: the levels were the last replayed check's, so the question's
    traces at ``NOW`` looked 0.3 low, and mean_score drifted at ``NOW`` only when ``--to`` was a day later)."""
    rng = np.random.default_rng(31)
    _hours(store, rng, NOW - timedelta(days=8), 8 * 24 + 24, n=60)  # every hour: questions asked once
    _hours(store, rng, NOW - timedelta(hours=1), 1, n=40, question="how do refunds work")
    _hours(store, rng, NOW, 24, n=40, question="how do refunds work", level=1.0)
    checker = DriftChecker(store, DriftSettings(features=["mean_score"]))
    then = checker.evaluate(NOW)
    assert not then.drifted and all(r.status == "ok" for r in then.results)
    short = backtest(checker, NOW - timedelta(hours=2), NOW)
    long = backtest(checker, NOW - timedelta(hours=2), NOW + timedelta(hours=6))
    assert ("billing", "mean_score", NOW) not in _drifted(long)
    assert _drifted(short) == {d for d in _drifted(long) if d[2] <= NOW}
    # check for check, the replay is drift check --at
    times = [NOW - timedelta(hours=2) + timedelta(hours=h) for h in range(1, 9)]
    evaluated = {(r.group.stratum, r.feature, t) for t in times for r in checker.evaluate(t).drifted}
    assert _drifted(long) == evaluated


def _persistent_onset(store, checker: DriftChecker, began: datetime) -> datetime:
    """A week of 200 traces an hour in billing whose scores drop by 0.1 from ``began`` to ``NOW``; the check where
    persistent drift began, as a backtest from before ``began`` finds it."""
    insert_synthetic(store, SyntheticSpec(200 * (8 * 24 - 6), NOW - timedelta(days=8), began, strata=("billing",),
                                          seed=5, run_id="bg"))
    insert_synthetic(store, SyntheticSpec(200 * 6, began, NOW, shift=-0.1, strata=("billing",), seed=6, run_id="inc"))
    (f,) = backtest(checker, began - timedelta(hours=2), NOW).features
    assert f.persistent_onsets == 1
    return f.persistent_times[0]


def test_an_alarm_active_at_from_says_since_when(store, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    began = NOW - timedelta(hours=6)
    checker = DriftChecker(store, DriftSettings(features=["top1_score"]))
    onset = _persistent_onset(store, checker, began)
    assert began < onset <= began + timedelta(hours=2)
    (f,) = backtest(checker, onset + timedelta(hours=2), NOW).features
    # persistent at the range's first check, and already at the check before it: not an onset in the range
    assert f.persistent_onsets == 0 and f.persistent_times == []
    assert f.active_at_start and f.active_since == onset and f.active_since_before is None
    monkeypatch.setenv("RAGMON_DRIFT__FEATURES", '["top1_score"]')
    table = cli("drift", "backtest", "--from", (onset + timedelta(hours=2)).isoformat(), "--to", NOW.isoformat())
    assert table.exit_code == 0, table.output
    assert f"already active at --from, since {onset:%m-%d %H:%M}" in table.stdout
    assert ("persistent drift began 0 times" in table.stdout
            and "1 persistent alarms were already active" in table.stdout)
    # looking back at most three checks (drift.sequential.lookback_windows): it was persistent at all three, so it
    # began at the earliest of them or before, and says so
    bounded = DriftChecker(store, DriftSettings(features=["top1_score"], sequential={"lookback_windows": 3}))
    first = onset + timedelta(hours=4)
    (g,) = backtest(bounded, first - timedelta(hours=1), NOW).features
    assert g.active_at_start and g.active_since is None and g.active_since_before == first - timedelta(hours=3)


def test_a_range_where_nothing_could_be_assessed_says_so_and_is_not_exit_0(store, cli,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    insert_synthetic(store, SyntheticSpec(2 * 24, NOW - timedelta(days=2), NOW, strata=("billing",), seed=9))
    monkeypatch.setenv("RAGMON_DRIFT__FEATURES", '["top1_score", "empty_shortlist_rate"]')
    args = ("drift", "backtest", "--from", (NOW - timedelta(hours=6)).isoformat(), "--to", NOW.isoformat())
    table = cli(*args)
    assert table.exit_code == 4, table.output
    assert "NOTHING ASSESSED" in table.stderr and "nothing could be assessed" in table.stdout
    assert "declared drift" not in table.stdout and "would have alarmed" not in table.stdout
    replay = cli(*args, "--format", "json")
    assert replay.exit_code == 4
    result = json.loads(replay.stdout)
    assert result["nothing_assessed"] and result["assessed"] == 0 and result["not_assessed"] == 6 * 2


def test_a_check_that_assessed_nothing_says_so_and_fails_as_a_gate_without_evidence(store, cli) -> None:
    insert_synthetic(store, SyntheticSpec(2 * 24, NOW - timedelta(days=2), NOW, strata=("billing",), seed=9))
    DriftChecker(store, DriftSettings(features=["top1_score"]), clock=lambda: NOW).run_once()
    at = cli("drift", "check", "--at", NOW.isoformat(), "--fail-on-drift")
    assert at.exit_code == 4, at.output
    assert "NOTHING ASSESSED" in at.stderr and "0 drifted" in at.stdout


def _blind(telemetry: Telemetry, stratum: str, at: datetime) -> set[str]:
    """The feature families of ``stratum`` RagmonDriftBlind fires for at ``at``: last assessed longer than
    ``ragmon_drift_blind_after_seconds`` ago ('' for a series without a family)."""
    after = telemetry.registry.get_sample_value("ragmon_drift_blind_after_seconds")
    return {s.labels.get("family", "") for m in telemetry.registry.collect()
            if m.name == "ragmon_drift_last_assessed_timestamp_seconds" for s in m.samples
            if s.labels["stratum"] == stratum and at.timestamp() - s.value > after}


def test_a_stratum_whose_trace_features_cannot_be_assessed_is_blind_whatever_its_chunks_say(store) -> None:
    """One trace an hour: the trace features (scores, rates) are never assessed, but newest_version_share counts
    the five chunks of each trace and is assessed pooled over six hours. Blindness is per feature family: the
    trace features are blind after drift.blind_after_seconds; the chunks' verdict does not hide it."""
    later = NOW + timedelta(hours=7)
    insert_shaped(store, ShapedSpec("iid", 1, 8, later, strata=("tiny",), seed=9, run_id="tiny"))
    telemetry = Telemetry()
    settings = DriftSettings(features=["top1_score", "empty_shortlist_rate", "newest_version_share"])
    first = DriftChecker(store, settings, telemetry, clock=lambda: NOW).run_once()
    assert {r.feature for r in first.results if r.assessed} == {"newest_version_share"}
    DriftChecker(store, settings, telemetry, clock=lambda: later).run_once()
    assert _blind(telemetry, "tiny", later) == {"traces"}
