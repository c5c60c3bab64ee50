"""`ragmon schema validate`: payload files checked the way ingest and the gate will, with the reason shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmon.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[2] / "schemas" / "examples"
WIDE = {"COLUMNS": "300"}  # rich folds long cells at 80 columns; keep each row on one line for the asserts


def invoke(*args: str):
    return CliRunner().invoke(app, ["schema", "validate", *args], env=WIDE)


def test_every_valid_example_passes():
    result = invoke(*(str(p) for p in sorted((EXAMPLES / "valid").glob("*.json"))))
    assert result.exit_code == 0, result.output
    assert "4 cases" in result.output  # the golden set
    assert "unknown top-level fields (kept, counted): schema_version, experiment, otel_trace_id" in result.output


@pytest.mark.parametrize("path", sorted((EXAMPLES / "invalid").glob("*.json")), ids=lambda p: p.stem)
def test_each_invalid_example_fails_with_its_reason(path: Path):
    reason = path.name.split(".")[0]
    args = ["--max-bytes", "16384", str(path)]  # the examples' test limit (schemas/examples/README.md)
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    expected = "schema" if reason == "golden-case" else reason
    [row] = [line for line in result.output.splitlines() if path.name in line]
    assert f" {expected} " in row, row


def test_jsonl_reports_line_numbers(tmp_path: Path):
    minimal = (EXAMPLES / "valid" / "trace.minimal.json").read_text(encoding="utf-8").replace("\n", "")
    sample = tmp_path / "sample.jsonl"
    sample.write_text(f'{minimal}\n{{"trace_id": 1}}\n\nnot json\n', encoding="utf-8")
    result = invoke(str(sample))
    assert result.exit_code == 1
    rows = [line for line in result.output.splitlines() if "sample.jsonl:" in line]
    assert [r.split("sample.jsonl:")[1].split()[0] for r in rows] == ["1", "2", "4"]
    assert " valid " in rows[0] and "$.trace_id" in rows[1] and "invalid_json" in rows[2]


def test_kind_can_be_forced(tmp_path: Path):
    result = invoke("--kind", "golden-case", str(EXAMPLES / "valid" / "trace.minimal.json"))
    assert result.exit_code == 1 and " golden-case " in result.output and " schema " in result.output


def test_usage_errors_exit_2(tmp_path: Path):
    assert invoke(str(tmp_path / "missing.json")).exit_code == 2
    assert invoke("--kind", "nope", str(EXAMPLES / "valid" / "trace.minimal.json")).exit_code == 2


def test_the_shipped_golden_sets_validate_as_the_gate_reads_them(tmp_path: Path):
    golden = Path(__file__).resolve().parents[2] / "examples" / "golden"
    result = invoke(str(golden / "dev.json"), str(golden / "release.json"))
    assert result.exit_code == 0, result.output
    assert "21 cases, dev set" in result.output and "12 cases, release set" in result.output
    duplicated = tmp_path / "dup.json"
    duplicated.write_text((golden / "dev.json").read_text().replace('"dev-bill-02"', '"dev-bill-01"'))
    result = invoke(str(duplicated))
    assert result.exit_code == 1 and " golden-set " in result.output and "duplicates case" in result.output
