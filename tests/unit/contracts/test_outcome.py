"""The outcome.v1 contract: the loader (``decode_outcome``, what ``ragmon ingest --outcomes`` runs) and
schemas/outcome.v1 are one contract — the schema's own examples, valid and invalid, and generated near-misses get
the same answer from both — plus hostile bytes and identity."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ragmon.contracts.decode import Rejection
from ragmon.contracts.outcome import Outcome, decode_outcome

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
EXAMPLES = SCHEMAS / "examples" / "outcome"
SCHEMA = json.loads((SCHEMAS / "outcome.v1.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
#: as most validators run by default: formats are annotations, not checked
PLAIN = jsonschema.Draft202012Validator(SCHEMA)


@pytest.mark.parametrize("path", sorted((EXAMPLES / "valid").glob("*.json")), ids=lambda p: p.name)
def test_valid_examples(path: Path) -> None:
    assert isinstance(decode_outcome(path.read_bytes()), Outcome)
    VALIDATOR.validate(json.loads(path.read_bytes()))


@pytest.mark.parametrize("path", sorted((EXAMPLES / "invalid").glob("*.json")), ids=lambda p: p.name)
def test_invalid_examples(path: Path) -> None:
    """Each negative example of the schema is refused by the schema and by the loader, with the reason its name
    gives (the ``time`` pattern makes a naive or malformed time a schema error without a format plugin)."""
    result = decode_outcome(path.read_bytes())
    assert isinstance(result, Rejection) and result.reason == path.name.split(".")[0], result
    assert not VALIDATOR.is_valid(json.loads(path.read_bytes()))
    assert not PLAIN.is_valid(json.loads(path.read_bytes())), "refused only with format checking"


def test_the_examples_cover_the_loose_readings_of_a_lax_parser() -> None:
    """The values a lax parser would coerce (a number as text, a boolean, Unix seconds) have negative examples."""
    values = [json.loads(p.read_bytes()) for p in (EXAMPLES / "invalid").glob("*.json")]
    assert {"-1", True} <= {v.get("value") for v in values}
    assert any(isinstance(v.get("time"), int) for v in values) and any(v.get("time") == "1764842400" for v in values)
    assert any(v.get("kind") == "feedback" and v.get("value") == -7 for v in values)


# documents near the contract's edges: every field right, wrong in a way a lax parser forgives, or missing
_TIMES = st.sampled_from(["2026-12-01T09:00:00Z", "2026-12-01T09:00:00.5+01:00", "2026-12-01t09:00:00z",
                          "2026-12-01T09:00:00", "2026-12-01 09:00:00Z", "2026-12-01T09:00Z", "1764842400",
                          "2026-12-01T09:00:00+0100", "2026-12-01", "2026-13-01T09:00:00Z", "", "now"]) \
    | st.integers(0, 2_000_000_000) | st.floats(0, 2e9) | st.none()
_VALUES = st.sampled_from([1, -1, 0, 0.5, -0.25, 1.5, -7, 3, 1e6, "1", "-1", True, False, None, [1], {}])
_KINDS = st.sampled_from(["citation_opened", "reformulated", "escalated", "resolved", "feedback", "Feedback", "",
                          1, None])
_IDS = st.sampled_from(["q1", "", "x" * 257, 7, None])
_MISSING = object()


@pytest.mark.slow
@given(st.fixed_dictionaries({"query_id": _IDS | st.just(_MISSING), "kind": _KINDS | st.just(_MISSING),
                              "time": _TIMES | st.just(_MISSING), "value": _VALUES | st.just(_MISSING),
                              "event_id": _IDS | st.just(_MISSING),
                              "extra": st.just(_MISSING) | st.just("x")}))
@settings(max_examples=600, deadline=None)
def test_the_loader_and_the_schema_give_the_same_answer(fields: dict) -> None:
    doc = {k: v for k, v in fields.items() if v is not _MISSING}
    accepted = isinstance(decode_outcome(json.dumps(doc).encode()), Outcome)
    assert accepted == VALIDATOR.is_valid(doc), (doc, decode_outcome(json.dumps(doc).encode()))


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
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=5),
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
    assume(kind != "feedback" or value is None or -1 <= value <= 1)
    outcome = Outcome(query_id=query_id, kind=kind, time=time, value=value)
    decoded = decode_outcome(outcome.model_dump_json().encode())
    if time.year < 2106:
        assert decoded == outcome


def test_a_missing_outcome_topic_names_the_outcome_setting(caplog) -> None:
    from ragmon.stream.source import warn_if_topic_missing

    class NoTopics:
        def partitions_for_topic(self, topic: str) -> set[int]:
            return set()

    with caplog.at_level("WARNING", logger="ragmon.stream.source"):
        warn_if_topic_missing(NoTopics(), "rag.outcomes", "b:9092", "ab.outcomes_topic (RAGMON_AB__OUTCOMES_TOPIC)")
        warn_if_topic_missing(NoTopics(), "rag.traces", "b:9092")
    first, second = (r.getMessage() for r in caplog.records)
    assert "check ab.outcomes_topic (RAGMON_AB__OUTCOMES_TOPIC)" in first and "kafka.topic" not in first
    assert "check kafka.topic (RAGMON_KAFKA__TOPIC, --topic)" in second
