"""The ``process`` section: shutdown grace and liveness limits, and the deprecated ``ingest.shutdown_grace_seconds``
that still works (with a warning) and always reads the same as ``process.shutdown_grace_seconds``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragmon.config import Settings, load_settings
from ragmon.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
OLD_ENV, NEW_ENV = "RAGMON_INGEST__SHUTDOWN_GRACE_SECONDS", "RAGMON_PROCESS__SHUTDOWN_GRACE_SECONDS"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("RAGMON_"):
            monkeypatch.delenv(name)


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragmon.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def graces(settings: Settings) -> tuple[float, float]:
    return settings.process.shutdown_grace_seconds, settings.ingest.shutdown_grace_seconds


def deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ragmon.config" and r.levelno == logging.WARNING]


def test_defaults(caplog: pytest.LogCaptureFixture):
    settings = load_settings()
    assert graces(settings) == (20.0, 20.0)
    assert settings.process.score_liveness_seconds == 120.0
    assert settings.process.ingest_liveness_seconds is None
    assert deprecations(caplog) == []


@pytest.mark.parametrize(("configured", "query_timeout", "limit"), [
    (None, 60.0, 120.0),   # the default: twice the store's query timeout…
    (None, 10.0, 60.0),    # …but never below a minute
    (45.0, 600.0, 45.0),   # a configured limit wins
])
def test_ingest_liveness_limit(configured: float | None, query_timeout: float, limit: float):
    settings = Settings(process={"ingest_liveness_seconds": configured}, store={"query_timeout_seconds": query_timeout})
    assert settings.process.ingest_liveness_limit(settings.store.query_timeout_seconds) == limit


def test_the_new_key_sets_both_names_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = config_file(tmp_path, "process:\n  shutdown_grace_seconds: 45\n  score_liveness_seconds: 300\n"
                                 "  ingest_liveness_seconds: 90\n")
    settings = load_settings(path)
    assert graces(settings) == (45.0, 45.0)
    assert (settings.process.score_liveness_seconds, settings.process.ingest_liveness_seconds) == (300.0, 90.0)
    assert deprecations(caplog) == []


def test_the_old_key_is_carried_over_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    settings = load_settings(config_file(tmp_path, "ingest:\n  shutdown_grace_seconds: 7\n"))
    assert graces(settings) == (7.0, 7.0)
    [warning] = deprecations(caplog)
    assert "ingest.shutdown_grace_seconds is deprecated" in warning and "process.shutdown_grace_seconds" in warning
    assert "\n" not in warning


def test_both_keys_agreeing_is_accepted_with_the_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = config_file(tmp_path, "ingest:\n  shutdown_grace_seconds: 9\nprocess:\n  shutdown_grace_seconds: 9\n")
    assert graces(load_settings(path)) == (9.0, 9.0)
    assert len(deprecations(caplog)) == 1


def test_both_keys_differing_is_one_problem_naming_both(tmp_path: Path):
    path = config_file(tmp_path, "ingest:\n  shutdown_grace_seconds: 7\nprocess:\n  shutdown_grace_seconds: 9\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    [line] = info.value.problems
    assert "ingest.shutdown_grace_seconds (7.0)" in line and "process.shutdown_grace_seconds (9.0)" in line
    assert str(path) in line and "\n" not in line


def test_the_new_environment_variable(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setenv(NEW_ENV, "33")
    assert graces(load_settings()) == (33.0, 33.0)
    assert deprecations(caplog) == []


def test_the_old_environment_variable(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setenv(OLD_ENV, "11")
    assert graces(load_settings()) == (11.0, 11.0)
    assert len(deprecations(caplog)) == 1


def test_the_old_variable_against_the_new_key_in_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(OLD_ENV, "11")
    with pytest.raises(ConfigError) as info:
        load_settings(config_file(tmp_path, "process:\n  shutdown_grace_seconds: 30\n"))
    [line] = info.value.problems
    assert "ingest.shutdown_grace_seconds (11.0)" in line and "process.shutdown_grace_seconds (30.0)" in line


def test_the_old_key_keeps_its_limits(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(OLD_ENV, "0")
    with pytest.raises(ConfigError) as info:
        load_settings()
    [line] = info.value.problems
    assert line.startswith("ingest.shutdown_grace_seconds:") and OLD_ENV in line


@pytest.mark.parametrize(("field", "value"), [("shutdown_grace_seconds", "601"), ("score_liveness_seconds", "0"),
                                              ("ingest_liveness_seconds", "-1")])
def test_process_limits_are_checked(monkeypatch: pytest.MonkeyPatch, field: str, value: str):
    monkeypatch.setenv(f"RAGMON_PROCESS__{field.upper()}", value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    [line] = info.value.problems
    assert line.startswith(f"process.{field}:") and f"RAGMON_PROCESS__{field.upper()}" in line


def test_settings_built_in_code_carry_the_old_key_too():
    assert graces(Settings(ingest={"shutdown_grace_seconds": 5})) == (5.0, 5.0)
    assert graces(Settings(process={"shutdown_grace_seconds": 6})) == (6.0, 6.0)


def run_ragmon(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGMON_")}
    return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True, timeout=60,
                          env={**clean, "PYTHONPATH": str(ROOT), **env})


def test_the_command_line_prints_the_deprecation_as_one_line():
    result = run_ragmon("config", "show", env={OLD_ENV: "7"})
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "deprecated" in line and "process.shutdown_grace_seconds" in line
    shown = yaml.safe_load(result.stdout)
    assert shown["process"]["shutdown_grace_seconds"] == shown["ingest"]["shutdown_grace_seconds"] == 7.0


def test_the_command_line_refuses_a_conflict_with_exit_2():
    result = run_ragmon("config", "check", env={OLD_ENV: "7", NEW_ENV: "9"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[0] == "error: invalid configuration"
    assert "ingest.shutdown_grace_seconds (7.0)" in result.stderr and "Traceback" not in result.stderr
