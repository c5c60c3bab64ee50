"""Hypothesis fuzzing of the hot-path decoder, and its agreement with the pydantic contract.

``decode_trace`` must never raise, must return a ``DecodedTrace`` or a ``Rejection`` whose reason is one of
``REASONS``, and must accept exactly what ``Trace.model_validate_json`` accepts (the pydantic model is the
contract; the msgspec mirror is only faster).
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragmon.contracts import DecodedTrace, Rejection, Trace, decode_trace
from ragmon.contracts.decode import BOM, KNOWN_FIELDS, REASONS, FastTrace, to_model
from ragmon.contracts.trace import UINT32_MAX
from tests.conftest import make_trace

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BIG = 10**9  # a max_bytes that never triggers, to compare the decoders on content alone

# -- strategies for valid trace documents -------------------------------------------------------------------

labels = st.text(max_size=24)
identifiers = st.text(min_size=1, max_size=40)
finite = st.floats(allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0, allow_nan=False, allow_infinity=False)
#: stage latencies of a valid trace: up to 4 of them must add up to a finite total (tested on its own below)
stage_ms = st.floats(min_value=0, max_value=1e300, allow_nan=False)
counts = st.integers(min_value=0, max_value=UINT32_MAX)
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda m: timezone(timedelta(minutes=m))
)
aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC) | offsets
)


def rfc3339(dt: datetime) -> str:
    # isoformat gives '+00:00' for UTC; producers also send 'Z', both are RFC 3339
    return dt.isoformat().replace("+00:00", "Z") if dt.microsecond % 2 else dt.isoformat()


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


retriever_docs = st.fixed_dictionaries(
    {"name": identifiers},
    optional={
        "version": labels,
        "variant": st.sampled_from(["production", "shadow", "canary"]),
        "parameters": st.dictionaries(labels, st.text(max_size=10) | st.integers() | finite | st.booleans(),
                                      max_size=4),
    },
)
chunk_docs = st.fixed_dictionaries(
    {"chunk_id": identifiers, "score": finite, "rank": st.integers(min_value=1, max_value=UINT32_MAX)},
    optional={
        "doc_id": labels,
        "doc_version": labels,
        "text": st.none() | st.text(max_size=200),
        "tenant": st.none() | labels,
    },
)
trace_docs = st.fixed_dictionaries(
    {
        "trace_id": identifiers,
        "query_id": identifiers,
        "timestamp": aware_datetimes.map(rfc3339),
        "retriever": retriever_docs,
        "question": st.text(max_size=200),
    },
    optional={
        "corpus_snapshot": labels,
        "index_version": labels,
        "category": labels,
        "tags": st.lists(labels, max_size=5),
        "tenant": labels,
        "user_scope": st.lists(labels, max_size=5),
        "retrieved": st.lists(chunk_docs, max_size=6),
        "context": _optional(chunk_ids=st.lists(identifiers, max_size=5), tokens=st.none() | counts),
        "answer": st.text(max_size=200),
        "behaviour": st.sampled_from(["answer", "refuse", "clarify", "route"]),
        "citations": st.lists(
            st.fixed_dictionaries({"sentence": counts, "chunk_id": identifiers},
                                  optional={"quote": st.none() | st.text(max_size=50)}),
            max_size=4,
        ),
        "model": _optional(name=labels, version=labels),
        "prompt": _optional(id=labels, version=labels),
        "latency_ms": st.dictionaries(labels, stage_ms, max_size=4),
        "tokens": _optional(prompt=counts, completion=counts),
        "cost_usd": non_negative,
        "error": st.text(max_size=50),
        "feedback": st.none() | _optional(rating=st.none() | st.integers(-1, 1),
                                          comment=st.none() | st.text(max_size=50)),
        "attributes": st.dictionaries(labels, st.text(max_size=20), max_size=4),
    },
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, 2**32, 2**63, 2**64, -(2**63) - 1, 10**400, 1.0, -0.0, 1e308, 5e-324])
    | finite
    | st.text(max_size=30)
    | st.sampled_from(["", "x" * 257, "2026-12-01T10:00:00", "2026-12-01T10:00:00Z", "NaN", "1", "true", "production"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def encode(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


# -- helpers --------------------------------------------------------------------------------------------------


def fast_accepts(raw: bytes) -> bool:
    result = decode_trace(raw, max_bytes=BIG)
    assert isinstance(result, DecodedTrace | Rejection), type(result)
    if isinstance(result, Rejection):
        assert result.reason in REASONS, result
        assert result.detail
    return isinstance(result, DecodedTrace)


def model_accepts(raw: bytes) -> bool:
    try:  # the contract ignores a leading byte-order mark (docs/trace-contract.md); the decoder strips it
        Trace.model_validate_json(raw.removeprefix(BOM))
    except ValidationError:
        return False
    return True


def assert_agree(raw: bytes) -> None:
    fast, model = fast_accepts(raw), model_accepts(raw)
    assert fast == model, (
        f"decoders disagree: fast={'accept' if fast else decode_trace(raw, max_bytes=BIG)}, "
        f"model={'accept' if model else 'reject'} on {raw[:400]!r}"
    )


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in a JSON document (dict keys and list indexes), outermost first."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            found.append((*prefix, k))
            found.extend(paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found.append((*prefix, i))
            found.extend(paths(v, (*prefix, i)))
    return found


def parent_of(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def mutated_traces(draw: st.DrawFn) -> tuple[dict[str, Any], str, tuple]:
    """A valid trace with one random change: a value replaced, a field deleted or an extra field added."""
    doc = copy.deepcopy(draw(trace_docs))
    locations = paths(doc)
    path = draw(st.sampled_from(locations))
    op = draw(st.sampled_from(["replace", "delete", "add"]))
    parent = parent_of(doc, path)
    if op == "replace":
        parent[path[-1]] = draw(json_values)
    elif op == "delete":
        if isinstance(parent, list):
            parent.pop(path[-1])
        else:
            del parent[path[-1]]
    else:
        target = parent if isinstance(parent, dict) else doc
        target[draw(st.text(min_size=1, max_size=12))] = draw(json_values)
    return doc, op, path


# -- never raises ----------------------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=4096))
@example(b"")
@example(b"\xff\xfe{")
@example(b"{" * 100_000)
@example(b"[" * 10_000 + b"]" * 10_000)
@example(b'{"trace_id": "\\ud800"}')
@example(b"NaN")
def test_arbitrary_bytes_never_raise(raw: bytes):
    assert_agree(raw)


@FUZZ
@given(json_values)
def test_arbitrary_json_values_never_raise(value: Any):
    raw = encode(value)
    result = decode_trace(raw)
    if not isinstance(value, dict):
        assert isinstance(result, Rejection) and result.reason == "not_an_object"
    assert_agree(raw)


@pytest.mark.slow
@FUZZ
@given(trace_docs, st.data())
def test_byte_mutations_of_valid_traces_never_raise(doc: dict[str, Any], data: st.DataObject):
    raw = bytearray(encode(doc))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        if op == "flip":
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "delete":
            del raw[i]
        else:
            raw.insert(i, data.draw(st.integers(0, 255)))
    assert_agree(bytes(raw))


# -- agreement with the contract -------------------------------------------------------------------------------


@FUZZ
@given(trace_docs)
def test_generated_valid_traces_are_accepted_by_both(doc: dict[str, Any]):
    raw = encode(doc)
    result = decode_trace(raw, max_bytes=BIG)
    assert isinstance(result, DecodedTrace), result
    model = Trace.model_validate_json(raw)
    assert result.unknown_fields == ()
    assert to_model(result.trace) == model


@pytest.mark.slow
@FUZZ
@given(mutated_traces())
def test_decoders_agree_on_near_valid_traces(mutation: tuple[dict[str, Any], str, tuple]):
    doc, _, _ = mutation
    assert_agree(encode(doc))


@pytest.mark.slow
@FUZZ
@given(mutated_traces())
def test_rejection_detail_names_the_field(mutation: tuple[dict[str, Any], str, tuple]):
    doc, op, path = mutation
    result = decode_trace(encode(doc))
    assume(isinstance(result, Rejection))
    # the top-level field that was changed is named (nested problems are named by their full path)
    top = str(path[0]) if op != "add" or len(path) > 1 else None
    if top is not None and top in KNOWN_FIELDS:
        assert top in result.detail, (op, path, result)


@settings(max_examples=100, deadline=None)
@given(trace_docs, st.sampled_from(["timestamp", "retriever", "question", "trace_id", "query_id"]))
def test_missing_required_field_is_a_schema_rejection(doc: dict[str, Any], field: str):
    del doc[field]
    result = decode_trace(encode(doc))
    assert isinstance(result, Rejection) and result.reason == "schema"
    assert field in result.detail
    assert not model_accepts(encode(doc))


@settings(max_examples=100, deadline=None)
@given(trace_docs, st.sampled_from(sorted(KNOWN_FIELDS)), json_values)
def test_wrong_types_in_any_field_agree(doc: dict[str, Any], field: str, value: Any):
    doc[field] = value
    assert_agree(encode(doc))


NESTED_FIELDS = {
    "retriever.name": lambda d, v: d["retriever"].__setitem__("name", v),
    "retriever.variant": lambda d, v: d["retriever"].__setitem__("variant", v),
    "retriever.parameters.k": lambda d, v: d["retriever"].__setitem__("parameters", {"k": v}),
    "retrieved[0].score": lambda d, v: d.__setitem__("retrieved", [{"chunk_id": "c", "score": v, "rank": 1}]),
    "retrieved[0].rank": lambda d, v: d.__setitem__("retrieved", [{"chunk_id": "c", "score": 1.0, "rank": v}]),
    "retrieved[0].text": lambda d, v: d.__setitem__("retrieved", [{"chunk_id": "c", "score": 1.0, "rank": 1,
                                                                    "text": v}]),
    "context.tokens": lambda d, v: d.__setitem__("context", {"tokens": v}),
    "context.chunk_ids": lambda d, v: d.__setitem__("context", {"chunk_ids": v}),
    "citations[0].sentence": lambda d, v: d.__setitem__("citations", [{"sentence": v, "chunk_id": "c"}]),
    "tokens.prompt": lambda d, v: d.__setitem__("tokens", {"prompt": v}),
    "latency_ms.total": lambda d, v: d.__setitem__("latency_ms", {"total": v}),
    "feedback.rating": lambda d, v: d.__setitem__("feedback", {"rating": v}),
    "attributes.k": lambda d, v: d.__setitem__("attributes", {"k": v}),
    "cost_usd": lambda d, v: d.__setitem__("cost_usd", v),
    "timestamp": lambda d, v: d.__setitem__("timestamp", v),
}
numbers = (
    st.integers()
    | st.integers(min_value=UINT32_MAX - 2, max_value=UINT32_MAX + 2)
    | st.integers(min_value=-2, max_value=2)
    | st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**308, 10**309, 10**400])
    | st.floats(allow_nan=False, allow_infinity=False)
)


@FUZZ
@given(trace_docs, st.sampled_from(sorted(NESTED_FIELDS)), numbers | json_values)
def test_wrong_values_in_nested_fields_agree(doc: dict[str, Any], field: str, value: Any):
    NESTED_FIELDS[field](doc, value)
    assert_agree(encode(doc))


@pytest.mark.slow
@FUZZ
@given(mutated_traces())
def test_model_validate_of_a_parsed_dict_agrees_with_model_validate_json(mutation: tuple[dict[str, Any], str, tuple]):
    """Callers that already hold a parsed document (labels files, exports) get the same verdict as from bytes."""
    doc, _, _ = mutation
    raw = encode(doc)
    try:
        from_dict: Trace | None = Trace.model_validate(json.loads(raw))
    except ValidationError:
        from_dict = None
    assert (from_dict is not None) == model_accepts(raw)
    if from_dict is not None:
        assert from_dict == Trace.model_validate_json(raw)


# -- round trips, unknown fields, size ------------------------------------------------------------------------


@FUZZ
@given(trace_docs)
def test_decode_encode_round_trip(doc: dict[str, Any]):
    first = decode_trace(encode(doc))
    assert isinstance(first, DecodedTrace)
    again = decode_trace(msgspec.json.encode(first.trace))
    assert isinstance(again, DecodedTrace)
    assert again.trace == first.trace
    model = Trace.model_validate_json(encode(doc))
    assert Trace.model_validate_json(model.model_dump_json()) == model


@pytest.mark.slow
@FUZZ
@given(trace_docs, st.dictionaries(st.text(min_size=1, max_size=20), json_values, min_size=1, max_size=4))
def test_unknown_top_level_fields_are_accepted_and_reported(doc: dict[str, Any], extra: dict[str, Any]):
    extra = {k: v for k, v in extra.items() if k not in KNOWN_FIELDS}
    assume(extra)
    raw = encode({**doc, **extra})
    result = decode_trace(raw)
    assert isinstance(result, DecodedTrace), result
    assert sorted(result.unknown_fields) == sorted(extra)
    assert set(Trace.model_validate_json(raw).model_extra or {}) == set(extra)


@settings(max_examples=100, deadline=None)
@given(trace_docs)
def test_oversize_is_rejected_before_parsing(doc: dict[str, Any]):
    raw = encode(doc)
    assert isinstance(decode_trace(raw, max_bytes=len(raw)), DecodedTrace)
    result = decode_trace(raw, max_bytes=len(raw) - 1)
    assert isinstance(result, Rejection) and result.reason == "too_large"
    assert str(len(raw)) in result.detail and str(len(raw) - 1) in result.detail
    # an oversize message is rejected even when it is not JSON at all
    garbage = decode_trace(b"\x00" * 2_000_000)
    assert isinstance(garbage, Rejection) and garbage.reason == "too_large"


# -- non-finite numbers (not JSON, but some producers write them) --------------------------------------------


@settings(max_examples=100, deadline=None)
@given(trace_docs, st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]))
def test_non_finite_scores_are_named(doc: dict[str, Any], literal: str):
    doc["retrieved"] = [{"chunk_id": "c1", "score": 0.5, "rank": 1}, {"chunk_id": "c2", "score": 123.0, "rank": 2}]
    raw = encode(doc).replace(b"123.0", literal.encode())
    result = decode_trace(raw)
    assert isinstance(result, Rejection) and result.reason == "non_finite_score", result
    assert "$.retrieved[1].score" in result.detail
    assert not model_accepts(raw)


@settings(max_examples=50, deadline=None)
@given(trace_docs, st.sampled_from(["cost_usd", "latency_ms"]), st.sampled_from(["NaN", "Infinity", "1e999"]))
def test_other_non_finite_numbers_are_invalid_values(doc: dict[str, Any], field: str, literal: str):
    doc[field] = {"total": 777.0} if field == "latency_ms" else 777.0
    raw = encode(doc).replace(b"777.0", literal.encode())
    result = decode_trace(raw)
    assert isinstance(result, Rejection) and result.reason == "invalid_value", result
    assert field in result.detail
    assert not model_accepts(raw)


def test_empty_and_null_messages_are_invalid_json():
    for data in (None, b"", bytearray()):
        result = decode_trace(data)
        assert isinstance(result, Rejection) and result.reason == "invalid_json" and "empty" in result.detail


def test_negative_latency_names_the_stage():
    doc = {"trace_id": "t", "query_id": "q", "timestamp": "2026-12-01T10:00:00Z", "retriever": {"name": "r"},
           "question": "?", "latency_ms": {"retrieve": 3.0, "rerank": -0.5}}
    result = decode_trace(encode(doc))
    assert isinstance(result, Rejection) and result.reason == "invalid_value"
    assert "rerank" in result.detail
    assert not model_accepts(encode(doc))


def test_stages_adding_up_past_the_float_range_are_rejected_by_both():
    # each stage is finite; their sum, stored as the total, would be inf (written as null, stored as 0)
    doc = {"trace_id": "t", "query_id": "q", "timestamp": "2026-12-01T10:00:00Z", "retriever": {"name": "r"},
           "question": "?", "latency_ms": {"retrieve": 1e308, "generate": 1e308}}
    result = decode_trace(encode(doc))
    assert isinstance(result, Rejection) and result.reason == "invalid_value" and "add up" in result.detail
    assert not model_accepts(encode(doc))
    doc["latency_ms"]["total"] = 5.0  # a total given by the producer is stored as is
    assert isinstance(decode_trace(encode(doc)), DecodedTrace) and model_accepts(encode(doc))


@pytest.mark.parametrize("stamp", ["2026-12-31T23:59:59.9999999Z", "2026-06-01T10:00:00.123456789+02:00",
                                   "2026-06-01T10:00:00.5Z"])
def test_fraction_digits_past_the_microsecond_are_cut_off_as_pydantic_does(stamp: str):
    # rounding would move 23:59:59.9999999 into the next day (and year): a different partition and stratum window
    doc = {"trace_id": "t", "query_id": "q", "timestamp": stamp, "retriever": {"name": "r"}, "question": "?"}
    result = decode_trace(encode(doc))
    assert isinstance(result, DecodedTrace)
    assert result.trace.timestamp == Trace.model_validate_json(encode(doc)).timestamp
    assert result.trace.timestamp.year == int(stamp[:4])


def test_timestamps_outside_rfc3339_are_rejected_by_both():
    base = {"trace_id": "t", "query_id": "q", "retriever": {"name": "r"}, "question": "?"}
    for accepted in ("2026-12-01T10:00:00Z", "2026-12-01T10:00:00.123456789+05:30", "2026-12-01t10:00:00z",
                     "2026-12-01 10:00:00-01:00"):
        assert fast_accepts(encode({**base, "timestamp": accepted})), accepted
        assert model_accepts(encode({**base, "timestamp": accepted})), accepted
    for rejected in ("2026-12-01T10:00:00", "2026-12-01", "2026-12-01T10:00Z", "2026-12-01T10:00:00+0100",
                     "2026-12-01T10:00:00,5Z", "2026-13-01T10:00:00Z", "2026-02-30T10:00:00Z",
                     "2026-12-01T24:00:00Z", "2026-12-01T10:00:60Z", "\u0662026-12-01T10:00:00Z", 1764583200):
        raw = encode({**base, "timestamp": rejected})
        result = decode_trace(raw)
        assert isinstance(result, Rejection) and result.reason == "schema", (rejected, result)
        assert "timestamp" in result.detail
        assert not model_accepts(raw), rejected


def test_naive_timestamp_detail_says_what_to_do():
    doc = {"trace_id": "t", "query_id": "q", "timestamp": "2026-12-01T10:00:00", "retriever": {"name": "r"},
           "question": "?"}
    result = decode_trace(encode(doc))
    assert isinstance(result, Rejection) and "time zone" in result.detail


def test_decoded_numbers_are_finite_and_in_range():
    doc = {"trace_id": "t", "query_id": "q", "timestamp": "2026-12-01T10:00:00Z", "retriever": {"name": "r"},
           "question": "?", "retrieved": [{"chunk_id": "c", "score": 10**300, "rank": UINT32_MAX}]}
    result = decode_trace(encode(doc))
    assert isinstance(result, DecodedTrace)
    assert math.isfinite(result.trace.retrieved[0].score)
    doc["retrieved"][0]["rank"] = UINT32_MAX + 1  # would not fit the UInt32 column and fail a whole batch
    assert not fast_accepts(encode(doc)) and not model_accepts(encode(doc))


def test_fast_trace_mirrors_the_model_field_for_field():
    assert set(FastTrace.__struct_fields__) == set(Trace.model_fields) == KNOWN_FIELDS


@pytest.mark.parametrize("with_unknown", [False, True])
def test_a_repeated_timestamp_key_is_checked_by_its_last_value_as_pydantic_reads_it(with_unknown: bool):
    """The raw timestamp comes from a separate scan of the top-level keys (with or without unknown fields):
    it must be the value the typed pass and pydantic keep, the last one."""
    good = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = json.dumps({k: v for k, v in make_trace().items() if k != "timestamp"})[1:-1]
    extra = '"not_in_the_contract": 1, ' if with_unknown else ""
    accepted = f'{{"timestamp": "2026-01-01T00:00:00+0100", {extra}{body}, "timestamp": "{good}"}}'.encode()
    refused = f'{{"timestamp": "{good}", {extra}{body}, "timestamp": "2026-01-01T00:00:00+0100"}}'.encode()
    assert isinstance(decode_trace(accepted), DecodedTrace)
    Trace.model_validate_json(accepted)
    rejection = decode_trace(refused)
    assert isinstance(rejection, Rejection) and rejection.reason == "schema", rejection
    with pytest.raises(ValidationError):
        Trace.model_validate_json(refused)


# -- what the contract was silent on (docs/trace-contract.md, "Edge cases") ----------------------------------------


def test_a_duplicate_key_takes_its_last_value_as_the_contract_model_does():
    raw = encode(make_trace(trace_id="first")).replace(b'"trace_id": "first"',
                                                       b'"trace_id": "first", "trace_id": "last"')
    nested = encode(make_trace()).replace(b'"name": "hybrid"', b'"name": "hybrid", "name": "other"')
    assert decode_trace(raw).trace.trace_id == Trace.model_validate_json(raw).trace_id == "last"
    assert decode_trace(nested).trace.retriever.name == Trace.model_validate_json(nested).retriever.name == "other"


def test_a_leading_byte_order_mark_is_ignored():
    raw = encode(make_trace(trace_id="bom"))
    result = decode_trace(BOM + raw)
    assert isinstance(result, DecodedTrace) and result.trace == decode_trace(raw).trace
    assert result.size_bytes == len(raw) + 3
    assert isinstance(decode_trace(raw + BOM), Rejection), "only at the start"


def test_a_leap_second_is_rejected_saying_why():
    for stamp in ("2016-12-31T23:59:60Z", "2016-12-31T23:59:60.250+00:00"):
        result = decode_trace(encode(make_trace(timestamp=stamp)))
        assert isinstance(result, Rejection) and result.reason == "schema" and "leap second" in result.detail
        assert not model_accepts(encode(make_trace(timestamp=stamp)))


def test_an_object_key_that_is_not_utf8_is_invalid_json_anywhere():
    raw = encode(make_trace())
    for bad in (b'{"\xff\xfe": 1, ' + raw[1:], raw.replace(b'"answer"', b'"answ\xff"'),
                raw.replace(b'"doc_id"', b'"doc\xc3"', 1)):
        result = decode_trace(bad)
        assert isinstance(result, Rejection) and result.reason == "invalid_json", result
