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

import pytest
from typer.testing import CliRunner

from ragmon.config import DriftSettings
from ragmon.drift.check import DriftChecker
from ragmon.drift.synthetic import SyntheticSpec, insert_synthetic

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
