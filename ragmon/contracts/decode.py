"""Hot-path decoding of trace messages: bytes → ``DecodedTrace`` or ``Rejection``.

The pydantic models in ``trace.py`` are the contract; pydantic costs ~190 µs per 3 KB trace, too slow for
the ingest loop, so this module mirrors them as msgspec structs (~20 µs). Tests check that both accept and
reject the same inputs. ``decode_trace`` never raises: every failure is a ``Rejection`` with a
machine-readable ``reason`` and a human-readable ``detail`` naming the field.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from ragmon.contracts.trace import RFC3339, UINT32_MAX, Trace, rfc3339_problem

#: messages larger than this are rejected before parsing (configurable per call)
DEFAULT_MAX_BYTES = 1_048_576
#: a UTF-8 byte-order mark: JSON must not start with one (RFC 8259, 8.1) but some tools write it; it is ignored
BOM = b"\xef\xbb\xbf"

REASONS = ("invalid_json", "not_an_object", "schema", "too_large", "non_finite_score", "invalid_value")

Identifier = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Label = Annotated[str, msgspec.Meta(max_length=256)]
Count = Annotated[int, msgspec.Meta(ge=0, le=UINT32_MAX)]

# Every struct below is declared ``gc=False``: the cyclic garbage collector does not track its instances.
# Decoded JSON cannot form a reference cycle, reference counting frees these objects, and not tracking the
# ~40 structs of each trace keeps collections cheap while a batch is alive (bench/decode.py).


class Retriever(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    name: Identifier
    version: Label = ""
    variant: Literal["production", "shadow", "canary"] = "production"
    parameters: dict[str, str | int | float | bool] = {}


class RetrievedChunk(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    chunk_id: Identifier
    score: float | None  # required, null when the retriever gives no score
    rank: Annotated[int, msgspec.Meta(ge=1, le=UINT32_MAX)]
    doc_id: Label = ""
    doc_version: Label = ""
    text: Annotated[str, msgspec.Meta(max_length=200_000)] | None = None
    tenant: Label | None = None


class Context(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    chunk_ids: list[Identifier] = []
    tokens: Count | None = None


class Citation(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    sentence: Count
    chunk_id: Identifier
    quote: Annotated[str, msgspec.Meta(max_length=20_000)] | None = None


class Model(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    name: Label = ""
    version: Label = ""


class Prompt(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    id: Label = ""
    version: Label = ""


class Tokens(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    prompt: Count = 0
    completion: Count = 0


class Feedback(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    rating: Annotated[int, msgspec.Meta(ge=-1, le=1)] | None = None
    comment: Annotated[str, msgspec.Meta(max_length=10_000)] | None = None


class FastTrace(msgspec.Struct, frozen=True, gc=False):
    """Mirror of ``ragmon.contracts.trace.Trace`` for the hot path (unknown top-level fields ignored)."""

    trace_id: Identifier
    query_id: Identifier
    timestamp: datetime
    retriever: Retriever
    question: Annotated[str, msgspec.Meta(max_length=100_000)]
    corpus_snapshot: Label = ""
    index_version: Label = ""
    category: Label = ""
    tags: Annotated[list[Label], msgspec.Meta(max_length=100)] = []
    tenant: Label = ""
    user_scope: Annotated[list[Label], msgspec.Meta(max_length=100)] = []
    retrieved: Annotated[list[RetrievedChunk], msgspec.Meta(max_length=1000)] = []
    context: Context = Context()
    answer: Annotated[str, msgspec.Meta(max_length=200_000)] = ""
    behaviour: Literal["answer", "refuse", "clarify", "route"] = "answer"
    citations: Annotated[list[Citation], msgspec.Meta(max_length=1000)] = []
    model: Model = Model()
    prompt: Prompt = Prompt()
    latency_ms: dict[Label, float] = {}
    tokens: Tokens = Tokens()
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    error: Annotated[str, msgspec.Meta(max_length=10_000)] = ""
    feedback: Feedback | None = None
    attributes: dict[Label, str] = {}


KNOWN_FIELDS = frozenset(FastTrace.__struct_fields__)
assert KNOWN_FIELDS == frozenset(Trace.model_fields), "FastTrace must mirror Trace field for field"


# DecodedTrace and Rejection are built once per message: msgspec structs cost ~0.1 µs to build, a frozen
# dataclass ~0.6 µs (its __init__ goes through object.__setattr__ for every field)


class DecodedTrace(msgspec.Struct, frozen=True, gc=False):
    """A valid trace plus what the decoder noticed about it."""

    trace: FastTrace
    unknown_fields: tuple[str, ...]
    size_bytes: int


class Rejection(msgspec.Struct, frozen=True, gc=False):
    """Why a message is not a valid trace. ``reason`` is one of ``REASONS``; ``detail`` names the field."""

    reason: str
    detail: str


_decoder = msgspec.json.Decoder()
_typed = msgspec.json.Decoder(FastTrace)
#: the contract's top-level keys, values skipped unparsed, any other key refused: the raw timestamp for the
#: RFC 3339 check, and proof that there is no unknown field, without building a dict (~1–3 µs less per trace)
_top = msgspec.json.Decoder(msgspec.defstruct(
    "_TopLevel", [(name, msgspec.Raw, msgspec.Raw()) for name in FastTrace.__struct_fields__],
    forbid_unknown_fields=True, gc=False,
))
#: top-level keys only, values skipped unparsed: names the unknown fields when ``_top`` refused one
_keys = msgspec.json.Decoder(dict[str, msgspec.Raw])


def decode_trace(data: bytes | None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> DecodedTrace | Rejection:
    """Decode one message. Never raises; returns a ``Rejection`` for anything that is not a valid trace."""
    try:
        if not data:  # a Kafka tombstone (None) or an empty record
            return Rejection("invalid_json", "the message is empty; expected a JSON trace object")
        size = len(data)
        if size > max_bytes:
            return Rejection("too_large", f"message is {size} bytes, over the limit of {max_bytes}")
        try:
            # Valid traces (nearly all traffic) take one typed pass plus a key scan: about 20% faster than
            # parse-then-convert (bench/decode.py). Anything the typed pass refuses is decoded again the slow
            # way, which classifies the failure (and keeps "last duplicate key wins", as pydantic does).
            trace = _typed.decode(data)
        except msgspec.DecodeError:  # ValidationError is a DecodeError
            if data.startswith(BOM):  # rare: checked only once the fast pass failed
                result = decode_trace(data[len(BOM):], max_bytes=max_bytes)
                return msgspec.structs.replace(result, size_bytes=size) if isinstance(result, DecodedTrace) else result
            return _decode_slowly(data, size)
        except RecursionError:
            return Rejection("invalid_json", "the JSON is nested too deeply to be a trace")
        try:
            stamp, unknown = _top.decode(data).timestamp, ()
        except msgspec.DecodeError:  # the typed pass accepted it: an unknown field, or a key that is not UTF-8
            try:                       # (the typed pass skips unknown keys without reading them)
                fields = _keys.decode(data)
            except msgspec.DecodeError as exc:
                return Rejection("invalid_json", f"{exc} (an object key is not UTF-8)"[:500])
            stamp, unknown = fields["timestamp"], tuple(k for k in fields if k not in KNOWN_FIELDS)
        timestamp = _decoder.decode(stamp)
        problem = _semantic_problem(trace, timestamp)
        if problem is not None:
            return problem
        return DecodedTrace(_truncated_to_microseconds(trace, timestamp), unknown, size)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"; anything odd is a rejection
        return Rejection("invalid_value", f"{type(exc).__name__}: {exc}"[:500])


def _decode_slowly(data: bytes, size: int) -> DecodedTrace | Rejection:
    """Parse to Python objects, then convert: slower, but says exactly what is wrong."""
    try:
        raw = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        return _classify_unparseable(data, exc)
    except RecursionError:
        return Rejection("invalid_json", "the JSON is nested too deeply to be a trace")
    if not isinstance(raw, dict):
        return Rejection("not_an_object", f"top level is a JSON {type(raw).__name__}, expected an object")
    try:
        trace = msgspec.convert(raw, FastTrace)
    except msgspec.ValidationError as exc:
        stamp = raw.get("timestamp")
        if isinstance(stamp, str) and _LEAP_SECOND.fullmatch(stamp):
            return Rejection("schema", f"$.timestamp {stamp!r} is a leap second, which ragmon cannot store: times "
                             "are UTC without leap seconds (as in ClickHouse and POSIX time); send 23:59:59.999 "
                             "or your clock's smeared time")
        return Rejection("schema", _jsonpath_detail(str(exc)))
    problem = _semantic_problem(trace, raw["timestamp"])
    if problem is not None:
        return problem
    trace = _truncated_to_microseconds(trace, raw["timestamp"])
    return DecodedTrace(trace, tuple(k for k in raw if k not in KNOWN_FIELDS), size)


_SUBMICRO = re.compile(r"\.(\d{7,})")
_LEAP_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:60(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def _truncated_to_microseconds(trace: FastTrace, timestamp: str) -> FastTrace:
    """msgspec rounds fraction digits past the microsecond, pydantic (the contract) cuts them off: a time of
    ``23:59:59.9999999Z`` must stay on its day (and year), so such a timestamp is read again, cut to 6 digits."""
    match = _SUBMICRO.search(timestamp)
    if match is None:  # nearly every trace: at most microseconds
        return trace
    cut = timestamp[:match.start(1)] + match.group(1)[:6] + timestamp[match.end(1):]
    return msgspec.structs.replace(trace, timestamp=datetime.fromisoformat(cut))


def to_model(trace: FastTrace) -> Trace:
    """Convert a decoded hot-path trace into the pydantic contract model (slow; off the hot path)."""
    return Trace.model_validate_json(msgspec.json.encode(trace))


def _semantic_problem(trace: FastTrace, timestamp: str) -> Rejection | None:
    """Checks msgspec's type system cannot express: finiteness, time zones, the RFC 3339 grammar."""
    # Scores are finite here: msgspec's JSON decoder refuses numbers outside the float range ("Number out of
    # range"), and NaN and Infinity are not JSON; _classify_unparseable names both
    # (tests/unit/contracts/test_decode.py).
    for stage, ms in trace.latency_ms.items():
        if not math.isfinite(ms) or ms < 0:
            return Rejection("invalid_value", f"$.latency_ms[{stage!r}] is {ms}; expected a finite number >= 0")
    if "total" not in trace.latency_ms and not math.isfinite(sum(trace.latency_ms.values())):
        # the stored total is their sum: it must be a number too
        return Rejection("invalid_value", "$.latency_ms: the stages add up past the largest float; expected "
                         "milliseconds")
    if not math.isfinite(trace.cost_usd):
        return Rejection("invalid_value", f"$.cost_usd is {trace.cost_usd}; expected a finite number >= 0")
    if trace.timestamp.tzinfo is None:
        return Rejection("schema", "$.timestamp has no time zone; use RFC 3339, e.g. 2026-04-01T12:00:00Z")
    if not RFC3339.fullmatch(timestamp):  # msgspec also takes e.g. '+0100' offsets; the contract does not
        return Rejection("schema", f"$.timestamp: {rfc3339_problem(timestamp)}")
    return None


def _classify_unparseable(data: bytes, exc: msgspec.DecodeError) -> Rejection:
    """Tell non-finite numbers (NaN, Infinity, 1e999: not JSON, but some producers emit them) from garbage."""
    try:
        lenient = json.loads(data)
    except (ValueError, RecursionError):
        return Rejection("invalid_json", str(exc)[:500])
    path = _first_non_finite(lenient, "$")
    if path is not None:
        reason = "non_finite_score" if path.endswith(".score") else "invalid_value"
        return Rejection(reason, f"{path} is not a finite number")
    return Rejection("invalid_json", str(exc)[:500])


def _first_non_finite(value: object, path: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        for k, v in value.items():
            found = _first_non_finite(v, f"{path}.{k}")
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def _jsonpath_detail(message: str) -> str:
    # msgspec says e.g. "Expected `float`, got `str` - at `$.retrieved[0].score`"; keep it, it names the field
    return message[:500]
