"""`ragmon config reference`: the Markdown page generated from the settings models, and its --check."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from ragmon.cli import config_reference
from ragmon.cli.app import app
from ragmon.config import Settings

ROOT = Path(__file__).resolve().parents[3]
CHECKED_IN = ROOT / "docs" / "configuration.md"


def test_checked_in_reference_matches_the_models():
    assert config_reference.check(CHECKED_IN) is None, "run `ragmon config reference` and commit docs/configuration.md"


def test_every_setting_is_listed_with_its_environment_variable():
    text = config_reference.render()
    for section, info in Settings.model_fields.items():
        assert f"\n## `{section}`\n" in text
        for name, field in info.annotation.model_fields.items():
            env = f"RAGMON_{section.upper()}__{name.upper()}"
            [row] = [line for line in text.splitlines() if line.startswith(f"| `{name}` |") and env in line]
            assert (field.description or "")[:30].replace("|", "\\|") in row


def test_defaults_and_limits_are_rendered():
    text = config_reference.render()
    assert "| `port` | integer (≥ 0, ≤ 65 535) | `9108` | `RAGMON_SERVER__PORT` |" in text
    assert "`\"chdb://./.ragmon/clickhouse\"`" in text


def test_secret_values_never_reach_the_page(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_KAFKA__SASL_PASSWORD", "sasl-s3cr3t")
    monkeypatch.setenv("RAGMON_STORE__DSN", "http://u:dsn-s3cr3t@h:8123/db")
    text = config_reference.render()
    assert "s3cr3t" not in text


def test_table_cells_cannot_be_broken_by_descriptions():
    class Odd(BaseModel):
        sep: str = Field("a|b", description="pipes | and\nnewlines\n\nstay in one cell")

    class OddSettings(BaseModel):
        odd: Odd = Field(default_factory=Odd, description="Odd section.")

    rows = [line for line in config_reference.render(OddSettings).splitlines() if line.startswith("| `sep`")]
    assert rows == ["| `sep` | string | `\"a\\|b\"` | `RAGMON_ODD__SEP` | pipes \\| and newlines stay in one cell |"]


def test_cli_writes_and_checks(tmp_path: Path):
    target = tmp_path / "docs" / "configuration.md"
    runner = CliRunner()
    result = runner.invoke(app, ["config", "reference", "--check", "--output", str(target)])
    assert result.exit_code == 1 and "missing" in result.output
    assert runner.invoke(app, ["config", "reference", "--output", str(target)]).exit_code == 0
    assert target.read_text(encoding="utf-8") == config_reference.render()
    assert runner.invoke(app, ["config", "reference", "--check", "--output", str(target)]).exit_code == 0
    target.write_text(target.read_text(encoding="utf-8").replace("RAGMON_SERVER__PORT", "RAGMON_PORT"),
                      encoding="utf-8")
    result = runner.invoke(app, ["config", "reference", "--check", "--output", str(target)])
    assert result.exit_code == 1 and "differs" in result.output


def test_reference_does_not_need_a_valid_configuration(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAGMON_SERVER__PORT", "not-a-port")
    result = CliRunner().invoke(app, ["config", "reference", "--output", "-"])
    assert result.exit_code == 0 and result.output.startswith("# Configuration reference")
