"""The drift detector on realistic simulated traffic written into the real embedded ClickHouse
(``ragmon.drift.simulation.simulate``): the per-window SQL, the corpus-relative version share, pooling and blindness,
the backtest and ``check --at``, and the CLI's JSON. Seeded: every run writes the same traces."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ragmon.config import DriftSettings
from ragmon.drift.backtest.backtest import backtest
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.simulation.draw import Shift
from ragmon.drift.simulation.simulate import ShapedSpec, insert_shaped
from ragmon.telemetry import Telemetry

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FEATURES = ["top1_score", "mean_score", "empty_shortlist_rate", "refusal_rate"]


def _settings(**kw) -> DriftSettings:
    return DriftSettings(features=kw.pop("features", FEATURES), **kw)


def test_mix_traffic_without_drift_pages_nothing_and_a_shift_does(store) -> None:
    # eight days of hourly mix variation; in the last four hours billing's scores are 10 % lower
    insert_shaped(store, ShapedSpec("mix", 150, 8, NOW, strata=("billing", "consent"), seed=3,
                                    shift=Shift(scale=0.9), drift_hours=4, drift_strata=("billing",)))
    checker = DriftChecker(store, _settings(), Telemetry(), clock=lambda: NOW - timedelta(hours=4))
    calm = checker.run_once()
    assert calm.results and not calm.persistent
    assert all(r.status == "ok" and r.pooled == 1 for r in calm.results if r.test == "window_mean")
    checker.clock = lambda: NOW
    drifted = checker.run_once()
    persistent = {(r.group.stratum, r.feature) for r in drifted.persistent}
    assert ("billing", "top1_score") in persistent and not any(s == "consent" for s, _ in persistent)


def test_stale_index_against_the_corpus_feed(store) -> None:
    """Routine updates served on time never lower newest_version_share; an index frozen for a day does, and
    the check sees it because the corpus feed names the versions it never served."""
    insert_shaped(store, ShapedSpec("doc_updates", 300, 8, NOW, strata=("billing",), seed=6,
                                    shift=Shift(stale_since=0.0), drift_hours=24))
    rows = store.query_rows(f"SELECT count() AS n FROM {store.table('corpus_versions')}")
    assert rows[0]["n"] > 0
    result = DriftChecker(store, _settings(features=["newest_version_share"]), clock=lambda: NOW).run_once()
    (r,) = [x for x in result.results if x.test == "window_rate"]
    assert r.status == "ok" and r.persistent and r.direction == "down"
    times = backtest(DriftChecker(store, _settings(features=["newest_version_share"])), NOW - timedelta(hours=36),
                     NOW)
    (f,) = times.features
    began = min(f.persistent_times)
    # the index froze 24 hours before NOW: no alarm before it, one within the day after
    assert NOW - timedelta(hours=24) < began <= NOW


def test_routine_updates_do_not_alarm(store) -> None:
    insert_shaped(store, ShapedSpec("doc_updates", 150, 8, NOW, strata=("billing",), seed=7))
    result = DriftChecker(store, _settings(features=["newest_version_share"]), clock=lambda: NOW).run_once()
    (r,) = result.results
    assert r.status == "ok" and r.current.value == pytest.approx(1.0, abs=0.005) and not r.persistent


def test_low_traffic_is_pooled_and_blindness_is_exported(store) -> None:
    insert_shaped(store, ShapedSpec("iid", 12, 8, NOW, strata=("rare",), seed=8))
    insert_shaped(store, ShapedSpec("iid", 1, 8, NOW, strata=("tiny",), seed=9, run_id="tiny"))
    telemetry = Telemetry()
    result = DriftChecker(store, _settings(features=["top1_score"]), telemetry, clock=lambda: NOW).run_once()
    rare = next(r for r in result.results if r.group.stratum == "rare" and r.test == "window_mean")
    assert rare.status == "ok" and rare.pooled == 3  # 12 an hour: three hours reach the 30 it needs
    tiny = [r for r in result.results if r.group.stratum == "tiny"]
    assert tiny and all(r.status == "insufficient_data" for r in tiny)
    value = telemetry.registry.get_sample_value
    labels = dict(retriever="hybrid@v1", variant="production", feature="top1_score")
    assert value("ragmon_drift_pooled_windows", {**labels, "stratum": "rare"}) == 3.0
    assessed = dict(retriever="hybrid@v1", variant="production", family="traces")
    assert value("ragmon_drift_last_assessed_timestamp_seconds", {**assessed, "stratum": "rare"}) == NOW.timestamp()
    # tiny has never been assessed: its clock starts at the first check that saw it, and stays there
    first = value("ragmon_drift_last_assessed_timestamp_seconds", {**assessed, "stratum": "tiny"})
    assert first == NOW.timestamp()
    checker = DriftChecker(store, _settings(features=["top1_score"]), telemetry,
                           clock=lambda: NOW + timedelta(hours=7))
    checker.run_once()
    assert value("ragmon_drift_last_assessed_timestamp_seconds", {**assessed, "stratum": "tiny"}) == first
    assert value("ragmon_drift_blind_after_seconds") == 6 * 3600


def test_cli_check_at_backtest_and_json(store, store_settings, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from typer.testing import CliRunner

    from ragmon.cli.app import app

    now = datetime.now(UTC).replace(microsecond=0)
    insert_shaped(store, ShapedSpec("mix", 100, 8, now, strata=("billing",), seed=10,
                                    shift=Shift(add=0.05), drift_hours=3))
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    monkeypatch.setenv("RAGMON_DRIFT__FEATURES", json.dumps(FEATURES))
    runner = CliRunner()
    at = runner.invoke(app, ["drift", "check", "--at", "5h", "--format", "json", "--all"])
    assert at.exit_code == 0, at.output
    rows = json.loads(at.output)
    assert rows and not any(r["persistent"] for r in rows)  # five hours ago the shift had not begun
    assert store.query_rows(f"SELECT count() AS n FROM {store.table('drift_checks')}")[0]["n"] == 0  # not stored
    now_ = runner.invoke(app, ["drift", "check", "--format", "json"])
    assert now_.exit_code == 0, now_.output
    assert {(r["stratum"], r["feature"]) for r in json.loads(now_.stdout) if r["persistent"]} >= {
        ("billing", "top1_score")}
    bt = runner.invoke(app, ["drift", "backtest", "--from", "12h", "--format", "json"])
    assert bt.exit_code == 0, bt.output
    replay = json.loads(bt.stdout)
    assert replay["checks"] == 12
    top1 = next(f for f in replay["features"] if f["feature"] == "top1_score")
    assert top1["persistent_onsets"] >= 1 and top1["assessed"] == 12
    began = datetime.fromisoformat(top1["persistent_times"][0])
    assert now - timedelta(hours=3) < began <= datetime.now(UTC)  # at the latest, the backtest's own last check
    table = runner.invoke(app, ["drift", "backtest", "--from", "12h"])
    assert table.exit_code == 0 and "persistent drift began" in table.output
    bad = runner.invoke(app, ["drift", "backtest", "--from", "1h", "--to", "2h"])
    assert bad.exit_code == 2 and "must be later" in bad.output
