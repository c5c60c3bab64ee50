"""`ragmon drift features` shows the significance level the configuration applies, not a default nobody uses."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ragmon.cli.app import app

ENV = {"RAGMON_CONFIG": None, "RAGMON_DRIFT__ALPHA": None, "COLUMNS": "200", "NO_COLOR": "1"}


def _features(*options: str, json_output: bool = False, env: dict[str, str | None] | None = None) -> str:
    output = ["--format", "json"] if json_output else []
    result = CliRunner().invoke(app, [*options, "drift", "features", *output], env={**ENV, **(env or {})})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_default_alpha_is_shown_for_every_feature_and_test() -> None:
    doc = json.loads(_features(json_output=True))
    assert doc["alpha"] == 0.016
    assert {f["alpha"] for f in doc["features"]} == {0.016}
    assert {t["alpha"] for t in doc["tests"]} == {0.016}


def test_the_configured_alpha_and_a_feature_override_are_shown(tmp_path: Path) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("drift:\n  alpha: 0.01\n  overrides:\n    latency_ms:\n      threshold: 0.001\n",
                      encoding="utf-8")
    doc = json.loads(_features("-c", str(config), json_output=True))
    alphas = {f["feature"]: f["alpha"] for f in doc["features"]}
    assert alphas.pop("latency_ms") == 0.001
    assert set(alphas.values()) == {0.01} and doc["alpha"] == 0.01
    table = _features("-c", str(config), env={"RAGMON_DRIFT__ALPHA": "0.02"})
    assert "drift.alpha = 0.02 for every test" in table
    latency = next(line for line in table.splitlines() if "latency_ms" in line)
    assert "0.001" in latency
