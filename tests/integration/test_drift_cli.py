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
    rows = [*json.loads(at.output), *json.loads(report.output), *json.loads(replay.output)["features"]]
    assert rows and all(r["stratum"] == "billing" and "category" not in r for r in rows), rows[0]
