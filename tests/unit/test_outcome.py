"""The outcome.v1 contract: examples against the model and the JSON Schema, hostile bytes, identity."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.contracts.decode import Rejection
from ragmon.contracts.outcome import Outcome, decode_outcome

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
EXAMPLES = SCHEMAS / "examples" / "outcome"
VALIDATOR = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "outcome.v1.schema.json").read_text()),
                                            format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize("path", sorted((EXAMPLES / "valid").glob("*.json")), ids=lambda p: p.name)
def test_valid_examples(path: Path) -> None:
    assert isinstance(decode_outcome(path.read_bytes()), Outcome)
    VALIDATOR.validate(json.loads(path.read_bytes()))


@pytest.mark.parametrize("path", sorted((EXAMPLES / "invalid").glob("*.json")), ids=lambda p: p.name)
def test_invalid_examples(path: Path) -> None:
    result = decode_outcome(path.read_bytes())
    assert isinstance(result, Rejection) and result.reason == path.name.split(".")[0], result
    if path.name != "schema.naive-time.json":  # JSON Schema's date-time format is not checked without a plugin
        assert not VALIDATOR.is_valid(json.loads(path.read_bytes()))


def test_reasons_and_identity() -> None:
    assert decode_outcome(b"{").reason == "invalid_json"
    assert decode_outcome(b"[1]").reason == "not_an_object"
    assert decode_outcome(b"x" * 70_000).reason == "too_large"
    nan = b'{"query_id": "q", "kind": "feedback", "time": "2026-12-01T09:00:00Z", "value": NaN}'
    assert decode_outcome(nan).reason == "invalid_value"
    far = b'{"query_id": "q", "kind": "resolved", "time": "2200-01-01T00:00:00Z"}'
    assert decode_outcome(far).reason == "invalid_value"
    a = decode_outcome(b'{"query_id": "q", "kind": "resolved", "time": "2026-12-01T09:00:00Z"}')
    b = decode_outcome(b'{"query_id": "q", "kind": "resolved", "time": "2026-12-01T10:00:00+01:00"}')
    c = decode_outcome(b'{"query_id": "q", "kind": "resolved", "time": "2026-12-01T09:00:01Z"}')
    assert a.identity == b.identity != c.identity  # the same instant in another zone is the same event
    assert decode_outcome(b'{"query_id": "q", "kind": "resolved", "time": "2026-12-01T09:00:00Z", '
                          b'"event_id": "e1"}').identity == "e1"


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
def test_hostile_bytes_never_raise(data: bytes) -> None:
    assert isinstance(decode_outcome(data), Outcome | Rejection)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                    max_leaves=20))
@settings(max_examples=300, deadline=None)
def test_hostile_json_never_raises(doc: object) -> None:
    assert isinstance(decode_outcome(json.dumps(doc).encode()), Outcome | Rejection)


@given(st.text(min_size=1, max_size=50), st.sampled_from(["citation_opened", "reformulated", "escalated", "resolved",
                                                          "feedback"]),
       st.datetimes(timezones=st.just(__import__("datetime").UTC)),
       st.none() | st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=200, deadline=None)
def test_decode_of_encode(query_id: str, kind: str, time, value) -> None:
    outcome = Outcome(query_id=query_id, kind=kind, time=time, value=value)
    decoded = decode_outcome(outcome.model_dump_json().encode())
    if time.year < 2106:
        assert decoded == outcome


def test_a_missing_outcome_topic_names_the_outcome_setting(caplog) -> None:
    from ragmon.ingest.source import warn_if_topic_missing

    class NoTopics:
        def partitions_for_topic(self, topic: str) -> set[int]:
            return set()

    with caplog.at_level("WARNING", logger="ragmon.ingest"):
        warn_if_topic_missing(NoTopics(), "rag.outcomes", "b:9092", "ab.outcomes_topic (RAGMON_AB__OUTCOMES_TOPIC)")
        warn_if_topic_missing(NoTopics(), "rag.traces", "b:9092")
    first, second = (r.getMessage() for r in caplog.records)
    assert "check ab.outcomes_topic (RAGMON_AB__OUTCOMES_TOPIC)" in first and "kafka.topic" not in first
    assert "check kafka.topic (RAGMON_KAFKA__TOPIC, --topic)" in second
