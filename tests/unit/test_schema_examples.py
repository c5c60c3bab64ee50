"""Every payload in schemas/examples/ is checked against the models, the fast decoder and the JSON Schemas.

Naming: ``valid/<kind>.<what>.json`` with kind ``trace``, ``golden-case`` or ``golden-set``;
``invalid/<reason>.<what>.json`` for traces, where reason is one of the decoder's ``REASONS``;
``invalid/golden-case.<what>.json`` for golden cases. A file that fits none of these fails the suite.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError
from typer.testing import CliRunner

from ragmon.cli.app import app
from ragmon.contracts import DecodedTrace, GoldenCase, GoldenSet, Rejection, Trace, decode_trace
from ragmon.contracts.decode import REASONS

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
EXAMPLES = SCHEMAS / "examples"
#: examples are decoded with this limit so that the too_large example stays small enough to check in
MAX_BYTES = 16_384

#: invalid examples whose problem the JSON Schema cannot express, and why
JSON_SCHEMA_BLIND = {
    "too_large.long-answer": "message size is not a schema property",
    "golden-case.answer-without-passages": "a cross-field rule (model validator)",
    "golden-case.grade-for-unlisted-chunk": "a cross-field rule (model validator)",
}


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


TRACE_SCHEMA = _validator("trace.v1.schema.json")
GOLDEN_SCHEMA = _validator("golden-case.v1.schema.json")


def _files(kind: str) -> list[Path]:
    return sorted((EXAMPLES / kind).glob("*.json"))


def _ids(path: Path) -> str:
    return path.stem


VALID = _files("valid")
INVALID = _files("invalid")


def _strict_json(raw: bytes) -> object:
    """JSON as the standard defines it: NaN/Infinity literals are not JSON."""

    def refuse(literal: str) -> float:
        raise ValueError(f"{literal} is not JSON")

    return json.loads(raw, parse_constant=refuse)


def test_every_example_is_classified():
    assert VALID and INVALID
    for path in VALID:
        assert path.name.split(".")[0] in ("trace", "golden-case", "golden-set"), path.name
    for path in INVALID:
        head = path.name.split(".")[0]
        assert head in REASONS or head == "golden-case", f"{path.name}: unknown reason {head!r}"
    covered = {p.name.split(".")[0] for p in INVALID}
    for reason in ("invalid_json", "not_an_object", "schema", "too_large", "non_finite_score", "invalid_value"):
        assert reason in covered, f"no invalid example for {reason}"


@pytest.mark.parametrize("path", [p for p in VALID if p.name.startswith("trace.")], ids=_ids)
def test_valid_trace(path: Path):
    raw = path.read_bytes()
    assert len(raw) <= MAX_BYTES
    decoded = decode_trace(raw, max_bytes=MAX_BYTES)
    assert isinstance(decoded, DecodedTrace), decoded
    model = Trace.model_validate_json(raw)
    TRACE_SCHEMA.validate(_strict_json(raw))
    # the fast path and the contract agree on the content, not just on "valid"
    document = json.loads(raw)
    assert decoded.trace.trace_id == model.trace_id == document["trace_id"]
    assert decoded.trace.timestamp == model.timestamp
    assert [c.score for c in decoded.trace.retrieved] == [c.score for c in model.retrieved]
    known = set(Trace.model_fields)
    assert set(decoded.unknown_fields) == set(document) - known
    assert set(model.model_extra or {}) == set(document) - known


def test_unknown_top_level_fields_are_reported():
    raw = (EXAMPLES / "valid" / "trace.unknown-top-level-fields.json").read_bytes()
    decoded = decode_trace(raw)
    assert isinstance(decoded, DecodedTrace)
    assert sorted(decoded.unknown_fields) == ["experiment", "otel_trace_id", "schema_version"]


def test_shadow_twin_shares_the_query_id_of_its_production_trace():
    production = Trace.model_validate_json((EXAMPLES / "valid" / "trace.answer-with-citations.json").read_bytes())
    shadow = Trace.model_validate_json((EXAMPLES / "valid" / "trace.shadow-twin.json").read_bytes())
    assert shadow.query_id == production.query_id and shadow.trace_id != production.trace_id
    assert (production.retriever.variant, shadow.retriever.variant) == ("production", "shadow")


@pytest.mark.parametrize("path", [p for p in VALID if p.name.startswith("golden-case.")], ids=_ids)
def test_valid_golden_case(path: Path):
    raw = path.read_bytes()
    case = GoldenCase.model_validate_json(raw)
    GOLDEN_SCHEMA.validate(_strict_json(raw))
    assert case.relevant_chunks() <= set(case.relevance())


@pytest.mark.parametrize("path", [p for p in VALID if p.name.startswith("golden-set.")], ids=_ids)
def test_valid_golden_set(path: Path):
    raw = path.read_bytes()
    cases = GoldenSet.validate_json(raw)
    assert len({c.id for c in cases}) == len(cases), "ids in a golden set are unique"
    for item in _strict_json(raw):
        GOLDEN_SCHEMA.validate(item)


def test_seed_case_keeps_its_meaning():
    case = GoldenCase.model_validate_json((EXAMPLES / "valid" / "golden-case.seed.json").read_bytes())
    assert case.id == "gs-0142" and case.expected_behaviour == "answer"
    # a listed chunk without an explicit grade answers the question
    assert case.relevance() == {"policy-privacy@2026-03-11#c41": 3}
    assert case.adjudication.reviewers == ["ap", "sd"] and str(case.added) == "2026-04-02"


def test_graded_relevance_case():
    case = GoldenCase.model_validate_json((EXAMPLES / "valid" / "golden-case.graded-relevance.json").read_bytes())
    assert case.relevance() == {
        "policy-retention@2026-01-15#c12": 3,
        "policy-retention@2026-01-15#c13": 1,
        "policy-privacy@2026-03-11#c55": 2,
    }
    assert not case.adjudication.agreed


@pytest.mark.parametrize("path", [p for p in INVALID if p.name.split(".")[0] in REASONS], ids=_ids)
def test_invalid_trace_is_rejected_with_its_reason(path: Path):
    expected = path.name.split(".")[0]
    raw = path.read_bytes()
    rejection = decode_trace(raw, max_bytes=MAX_BYTES)
    assert isinstance(rejection, Rejection), f"{path.name} was accepted"
    assert rejection.reason == expected, rejection
    assert rejection.detail
    if expected == "too_large":
        # a well-formed trace, just over the (test) limit: the model has no size limit of its own
        Trace.model_validate_json(raw)
        assert isinstance(decode_trace(raw, max_bytes=len(raw)), DecodedTrace)
        return
    with pytest.raises(ValidationError):
        Trace.model_validate_json(raw)
    _check_json_schema_rejects(path, raw, TRACE_SCHEMA)


def test_rejection_details_name_the_field():
    def detail(name: str) -> str:
        result = decode_trace((EXAMPLES / "invalid" / name).read_bytes(), max_bytes=MAX_BYTES)
        assert isinstance(result, Rejection)
        return result.detail

    assert "$.retrieved[0].rank" in detail("schema.rank-is-a-string.json")
    assert "trace_id" in detail("schema.missing-trace-id.json")
    assert "timestamp" in detail("schema.naive-timestamp.json")
    assert "$.retrieved[1].score" in detail("non_finite_score.1e999.json")
    assert "$.retrieved[0].score" in detail("non_finite_score.nan.json")
    assert "retrieve" in detail("invalid_value.negative-latency.json")
    assert "cost_usd" in detail("invalid_value.infinite-cost.json")
    assert "temperature" in detail("schema.unknown-nested-field.json")


@pytest.mark.parametrize("path", [p for p in INVALID if p.name.startswith("golden-case.")], ids=_ids)
def test_invalid_golden_case_is_rejected(path: Path):
    raw = path.read_bytes()
    with pytest.raises(ValidationError):
        GoldenCase.model_validate_json(raw)
    with pytest.raises(ValidationError):
        GoldenSet.validate_json(b"[" + raw + b"]")
    _check_json_schema_rejects(path, raw, GOLDEN_SCHEMA)


def _check_json_schema_rejects(path: Path, raw: bytes, validator: Draft202012Validator) -> None:
    if path.stem in JSON_SCHEMA_BLIND:
        assert validator.is_valid(json.loads(raw)), f"{path.name}: JSON_SCHEMA_BLIND is out of date"
        return
    try:
        document = _strict_json(raw)
    except ValueError:
        return  # not JSON at all (or NaN/Infinity literals): nothing for a JSON Schema validator to see
    if isinstance(document, dict):
        non_finite = [v for v in _numbers(document) if not math.isfinite(v)]
        if non_finite:  # 1e999 parses as inf in Python; JSON Schema has no notion of finiteness
            return
    assert not validator.is_valid(document), f"{path.name} passes the JSON Schema"


def _numbers(value: object):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)


# -- ragmon schema check -------------------------------------------------------------------------------------


def test_schema_check_passes_on_the_checked_in_files():
    result = CliRunner().invoke(app, ["schema", "check", "--dir", str(SCHEMAS)])
    assert result.exit_code == 0, result.output
    assert "match the models" in result.output


def test_schema_check_fails_when_a_file_is_altered(tmp_path: Path):
    for name in ("trace.v1.schema.json", "golden-case.v1.schema.json", "outcome.v1.schema.json"):
        shutil.copy(SCHEMAS / name, tmp_path / name)
    assert CliRunner().invoke(app, ["schema", "check", "--dir", str(tmp_path)]).exit_code == 0

    altered = json.loads((tmp_path / "trace.v1.schema.json").read_text(encoding="utf-8"))
    altered["required"].remove("question")
    (tmp_path / "trace.v1.schema.json").write_text(json.dumps(altered, indent=2) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["schema", "check", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "trace.v1.schema.json" in result.output and "differs" in result.output

    (tmp_path / "golden-case.v1.schema.json").unlink()
    result = CliRunner().invoke(app, ["schema", "check", "--dir", str(tmp_path)])
    assert result.exit_code == 1 and "missing" in result.output


def test_schema_export_then_check_round_trips(tmp_path: Path):
    assert CliRunner().invoke(app, ["schema", "export", "--dir", str(tmp_path)]).exit_code == 0
    assert CliRunner().invoke(app, ["schema", "check", "--dir", str(tmp_path)]).exit_code == 0
    for name in ("trace.v1.schema.json", "golden-case.v1.schema.json"):
        assert (tmp_path / name).read_bytes() == (SCHEMAS / name).read_bytes()
