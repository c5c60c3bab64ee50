"""The drift role's schedule (injected clock and wait), failure and recovery, the reports, and the CLI —
all against the real embedded ClickHouse."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from typer.testing import CliRunner

from ragmon.config import DriftSettings
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.report import html_report, load_check, terminal_table
from ragmon.drift.check.schedule import DriftRole
from ragmon.drift.simulation.synthetic import SyntheticSpec, insert_synthetic
from ragmon.telemetry import Telemetry
from tests.support.clocks import ManualClock

NOW = datetime.now(UTC).replace(second=0, microsecond=0)


def _traffic(store, *, shift: float = 0.0, strata: tuple[str, ...] = ("billing",)) -> None:
    start = NOW - timedelta(hours=1)
    for day in range(1, 8):
        insert_synthetic(store, SyntheticSpec(200, start - timedelta(days=day), NOW - timedelta(days=day),
                                              strata=strata, seed=day))
    insert_synthetic(store, SyntheticSpec(600, start, NOW, shift=shift, strata=strata, seed=0, run_id="cur"))


def test_role_runs_on_schedule_and_survives_a_failing_check(store) -> None:
    _traffic(store)
    clock = ManualClock(NOW)
    telemetry = Telemetry()
    checker = DriftChecker(store, DriftSettings(features=["top1_score"]), telemetry, clock=clock)
    stop = threading.Event()
    seen: list[datetime] = []

    def on_result(result) -> None:
        seen.append(result.checked_at)
        if len(seen) == 1:  # break the store: the next check must fail, be counted, and not end the loop
            store.command(f"RENAME TABLE {store.table('traces')} TO {store.table('traces_away')}")
        if len(seen) == 2:
            stop.set()

    role = DriftRole(checker, 600, wait=clock.wait, on_result=on_result)

    def heal_after_failure(stop_event: threading.Event, seconds: float) -> bool:
        if role.last_error and store.query_rows(f"EXISTS TABLE {store.table('traces_away')}")[0]["result"]:
            store.command(f"RENAME TABLE {store.table('traces_away')} TO {store.table('traces')}")
        return clock.wait(stop_event, seconds)

    role.wait = heal_after_failure
    role.run(stop)
    assert seen == [NOW, NOW + timedelta(seconds=1200)]  # slot 2 failed, slot 3 succeeded
    assert role.checks_run == 3 and role.last_error is None
    assert clock.waits == [600, 600]
    assert telemetry.registry.get_sample_value("ragmon_drift_checks_total", {"outcome": "error"}) == 1
    assert telemetry.registry.get_sample_value("ragmon_drift_checks_total", {"outcome": "ok"}) == 2
    ok, detail = role.liveness()
    assert ok, detail
    clock.now += timedelta(hours=1)
    assert role.liveness()[0] is False


def test_the_last_check_gauge_holds_the_role_start_until_a_check_completes(store) -> None:
    # RagmonDriftCheckStale ignores 0 (a process without the drift role) and fires on an old timestamp: a role
    # whose checks all fail must therefore export its start time, not 0
    telemetry = Telemetry()
    gauge = "ragmon_drift_last_check_timestamp_seconds"
    checker = DriftChecker(store, DriftSettings(features=["top1_score"]), telemetry, clock=ManualClock(NOW))
    assert telemetry.registry.get_sample_value(gauge) == 0
    store.command(f"RENAME TABLE {store.table('traces')} TO {store.table('traces_away')}")  # every check fails
    role = DriftRole(checker, 600, wait=lambda stop, seconds: True)  # one slot, then stop
    role.run(threading.Event())
    assert role.last_error is not None and role.last_success is None
    assert telemetry.registry.get_sample_value(gauge) == NOW.timestamp()


def test_reports_escape_hostile_names(store) -> None:
    hostile = "<script>alert(1)</script>[bold red]x"
    _traffic(store, shift=0.3, strata=(hostile,))
    result = DriftChecker(store, DriftSettings(features=["top1_score", "empty_shortlist_rate"]),
                          clock=lambda: NOW).run_once()
    assert result.drifted
    rows = load_check(store)
    assert rows[0]["check_id"] == result.check_id and rows[0]["drifted"] == 1
    page = html_report(rows)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<svg") == 1  # one drifted feature (two tests) → one overlaid histogram
    from rich.console import Console

    console = Console(record=True, width=160)
    console.print(terminal_table(rows))
    text = console.export_text()
    assert "[bold red]x" in text and "DRIFT" in text


def test_cli_check_and_report(store, store_settings, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragmon.cli.app import app

    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    runner = CliRunner()
    empty = runner.invoke(app, ["drift", "report"])
    assert empty.exit_code == 2 and "run `ragmon drift check` first" in empty.output
    wrong = runner.invoke(app, ["drift", "simulate", "--retriever", "no-version"])
    assert wrong.exit_code == 2 and "name@version" in wrong.output
    negative = runner.invoke(app, ["drift", "simulate", "--current", "-5"])
    assert negative.exit_code == 2 and "must be between 0 and 10,000,000" in negative.output
    sim = runner.invoke(app, ["drift", "simulate", "--reference-per-day", "200", "--current", "600", "--shift", "0.3",
                              "--strata", "billing"])
    assert sim.exit_code == 0, sim.output
    assert "inserted 2,000 synthetic traces" in sim.output
    checked = runner.invoke(app, ["drift", "check", "--fail-on-drift"])
    assert checked.exit_code == 1, checked.output
    assert "drifted" in checked.output
    page = tmp_path / "drift.html"
    shown = runner.invoke(app, ["drift", "report", "--html", str(page)])
    assert shown.exit_code == 0, shown.output
    assert "top1_score" in page.read_text() and "<svg" in page.read_text()
    bad = runner.invoke(app, ["drift", "report", "--html", str(tmp_path / "no" / "such" / "dir.html")])
    assert bad.exit_code == 2 and "does not exist; create it first" in bad.output
    n = np.asarray(store.query_rows(f"SELECT count() AS n FROM {store.table('drift_checks')}")[0]["n"])
    assert int(n) > 0
