"""``ragmon drift explain`` against the real embedded ClickHouse (issue 32, item 1): on an incident of known cause
it names the cause and its segment first, over the windows the stored check compared, and hostile segment values
stay text.

Traffic is ``ragmon.drift.simulation.incidents``: the current hour and the same hour of the seven days before,
seeded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from typer.testing import CliRunner

from ragmon.config import DriftSettings
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.explain.explain_run import parse_group, run_explain
from ragmon.drift.simulation.incidents import Incident, Traffic, insert

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GROUP = "hybrid@v1/production/billing"


@pytest.fixture
def cli(store, store_settings, monkeypatch: pytest.MonkeyPatch):
    from ragmon.cli.app import app

    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def _week(store, incident: Incident | None, *, stratum: str = "billing", tenant: str | None = None,
          per_window: int = 400) -> None:
    traffic = Traffic(np.random.default_rng(11))
    for day in range(7, -1, -1):
        cols = traffic.window(per_window, NOW - timedelta(hours=1, days=day), 3600, incident if day == 0 else None)
        if tenant is not None and day == 0:  # a producer-sent value that carries the incident
            cols["tenant"] = [tenant if v != "idx-2026-11-30" else t
                              for v, t in zip(cols["index_version"], cols["tenant"], strict=True)]
        insert(store, cols, retriever="hybrid@v1", variant="production", stratum=stratum, run_id=f"{stratum}-{day}")


def test_a_stale_index_is_named_first_with_its_version(store, cli) -> None:
    _week(store, Incident("stale_index", 0.35, 0.12))
    DriftChecker(store, DriftSettings(features=["top1_score"]), clock=lambda: NOW).run_once()
    out = cli("drift", "explain", "--group", GROUP, "--feature", "top1_score", "--format", "json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["checked_at"].startswith("2026-12-01T12:00")  # the stored check's time, not now
    assert report["check_id"]
    assert (report["n_reference"], report["n_current"]) == (7 * 400, 400)  # the same hour of seven days, not more
    first = report["dimensions"][0]
    assert first["dimension"] == "index_version"
    assert first["top_segments"][0]["value"] == "idx-2026-09-14"
    assert first["top_segments"][0]["weight_reference"] == 0
    assert first["top_segments"][0]["explained"]["low"] > 0.6
    assert report["delta"]["high"] < 0
    mix, within = first["mix"]["estimate"], first["within"]["estimate"]
    assert mix + within == pytest.approx(report["delta"]["estimate"], abs=1e-9)
    table = cli("drift", "explain", "--group", GROUP)
    assert table.exit_code == 0, table.output
    assert "index_version" in table.stdout and "idx-2026-09-14" in table.stdout


def test_traffic_outside_the_checks_windows_is_not_read(store) -> None:
    _week(store, None)
    # another hour of the day with a different index version: the check compares the same hour only
    traffic = Traffic(np.random.default_rng(5))
    cols = traffic.window(300, NOW - timedelta(hours=5, days=1), 3600, Incident("stale_index", 1.0, 0.2))
    insert(store, cols, retriever="hybrid@v1", variant="production", stratum="billing", run_id="other-hour")
    result = run_explain(store, DriftSettings(features=["top1_score"]), parse_group(GROUP), "top1_score", NOW,
                         now=NOW)
    index = next(d for d in result.explanation.dimensions if d.dimension == "index_version")
    assert [s.value for s in index.segments] == ["idx-2026-11-30"]
    assert result.explanation.n_reference == 7 * 400 and result.check is None


def test_hostile_segment_values_stay_text(store, cli) -> None:
    hostile = "[bold red]x[/] <script>alert(1)</script> '; DROP TABLE traces --"
    _week(store, Incident("stale_index", 0.4, 0.15), stratum="it's", tenant=hostile)
    out = cli("drift", "explain", "--group", "hybrid@v1/production/it's", "--at", NOW.isoformat(), "--format", "json")
    assert out.exit_code == 0, out.output
    tenants = next(d for d in json.loads(out.stdout)["dimensions"] if d["dimension"] == "tenant")
    assert hostile in [s["value"] for s in tenants["top_segments"]]
    table = cli("drift", "explain", "--group", "hybrid@v1/production/it's", "--at", NOW.isoformat())
    assert table.exit_code == 0, table.output
    assert "[bold red]x[/]" in table.stdout  # printed as sent, not read as markup
    assert store.query_rows(f"SELECT count() AS n FROM {store.table('traces')}")[0]["n"] == 8 * 400


def test_bad_input_says_what_to_do(store, cli) -> None:
    bad = cli("drift", "explain", "--group", "hybrid/production/billing")
    assert bad.exit_code != 0 and "retriever@version/variant/stratum" in bad.output
    judge = cli("drift", "explain", "--group", GROUP, "--feature", "faithfulness")
    assert judge.exit_code != 0 and "decomposes features of the traces" in judge.output
    empty = cli("drift", "explain", "--group", GROUP, "--at", NOW.isoformat())
    assert empty.exit_code != 0 and "nothing to explain" in empty.output
