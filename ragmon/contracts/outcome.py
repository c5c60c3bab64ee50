"""The outcome event contract, version 1: something the user did after a query (schemas/outcome.v1).

An A/B cohort is judged on what users do: open a citation, ask again, escalate to a person, mark the problem
resolved, leave feedback. Each event names the query it follows (``query_id``, as in trace.v1) and is joined to
the trace by it. ``event_id`` makes a re-sent event count once; without it the id is derived from the event's
content. ``decode_outcome`` validates one message (JSON bytes) into an ``Outcome`` or a ``Rejection`` with the
same reasons as traces. Types and validation only: no I/O.

One contract: schemas/outcome.v1 is generated from this model (``ragmon schema export``), and the model reads
JSON no more leniently than the schema does — a number is a JSON number (not ``"-1"``, not ``true``), ``time`` is
an RFC 3339 string with seconds and an offset (``TIME_PATTERN``, in the schema too; not Unix seconds), and a
``feedback`` value lies in [-1, 1] (an ``if``/``then`` in the schema). tests/unit/contracts/test_outcome.py feeds the
schema's own negative examples, and generated near-misses, to both. What a JSON Schema cannot say is refused here
only: a message over ``MAX_OUTCOME_BYTES``, a number too large to be finite, a time after the store's limit.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ragmon.contracts.decode import Rejection

SCHEMA_ID = "outcome.v1"
MAX_OUTCOME_BYTES = 64 * 1024
#: RFC 3339's date-time (section 5.6): seconds required, fraction optional, a ``Z`` or ``±hh:mm`` offset
TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
_TIME = re.compile(TIME_PATTERN)
#: feedback's scale: 1 thumbs up, -1 thumbs down, anything between for a graded score
FEEDBACK_RANGE = (-1.0, 1.0)
_FEEDBACK_SCALE = {"if": {"properties": {"kind": {"const": "feedback"}}, "required": ["kind"]},
                   "then": {"properties": {"value": {"anyOf": [
                       {"type": "number", "minimum": FEEDBACK_RANGE[0], "maximum": FEEDBACK_RANGE[1]},
                       {"type": "null"}]}}}}


class OutcomeKind(StrEnum):
    citation_opened = "citation_opened"
    reformulated = "reformulated"
    escalated = "escalated"
    resolved = "resolved"
    feedback = "feedback"


class Outcome(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, title="ragmon outcome event v1",
        json_schema_extra={"$id": "https://ragmon.dev/schemas/outcome.v1.schema.json", "allOf": [_FEEDBACK_SCALE]},
    )

    query_id: str = Field(min_length=1, max_length=256, description="The query this event follows (trace.v1 query_id).")
    kind: OutcomeKind = Field(description="citation_opened, reformulated, escalated, resolved or feedback.")
    time: AwareDatetime = Field(description="When it happened: RFC 3339 with seconds and a time zone "
                                            "(2026-12-01T09:00:00Z, 2026-12-01T10:00:00.5+01:00); not Unix seconds.",
                                json_schema_extra={"pattern": TIME_PATTERN})
    value: Annotated[float, Strict()] | None = Field(
        None, description="Optional JSON number (not a string, not a boolean): feedback's score from -1 to 1 (1 "
                          "thumbs up, -1 thumbs down), or which citation was opened.")
    event_id: str | None = Field(None, min_length=1, max_length=256,
                                 description="Unique per event, so a re-sent event counts once (derived from the "
                                             "content when absent).")

    @field_validator("time", mode="before")
    @classmethod
    def _rfc3339(cls, value: Any) -> Any:
        """A time as the schema's ``pattern`` has it, parsed here (pydantic alone also reads Unix seconds, a
        number as text, a time without seconds or with a ``+0100`` offset). A ``datetime`` built in code passes."""
        if isinstance(value, datetime):
            return value
        if not isinstance(value, str) or not _TIME.match(value):
            raise PydanticCustomError("rfc3339", "expected an RFC 3339 date-time with seconds and a time zone, "
                                      "such as 2026-12-01T09:00:00Z, got {got}", {"got": repr(value)[:40]})
        try:
            return datetime.fromisoformat(value.upper())
        except ValueError as exc:
            raise PydanticCustomError("rfc3339", "not a date-time: {why}", {"why": str(exc)}) from None

    @field_validator("value", mode="before")
    @classmethod
    def _representable(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                float(value)
            except OverflowError:
                raise ValueError("value must be a finite number") from None
        return value

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("value must be a finite number")
        return value

    @model_validator(mode="after")
    def _feedback_scale(self) -> Outcome:
        low, high = FEEDBACK_RANGE
        if self.kind == OutcomeKind.feedback and self.value is not None and not low <= self.value <= high:
            raise ValueError(f"$.value: feedback is a score from {low:g} to {high:g} (1 thumbs up, -1 thumbs "
                             f"down), got {self.value:g}")
        return self

    @property
    def identity(self) -> str:
        if self.event_id:
            return self.event_id
        doc = [self.query_id, self.kind.value, self.time.astimezone(UTC).isoformat(), self.value]
        return "derived-" + hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:24]


MAX_TIME = datetime(2106, 2, 7, tzinfo=UTC)


def decode_outcome(data: bytes, *, max_bytes: int = MAX_OUTCOME_BYTES) -> Outcome | Rejection:
    """One message → an ``Outcome``, or why not (reasons as trace.v1's: invalid_json, not_an_object, schema,
    too_large, invalid_value)."""
    if len(data) > max_bytes:
        return Rejection("too_large", f"{len(data)} bytes > {max_bytes}")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return Rejection("invalid_json", str(exc)[:200])
    if not isinstance(doc, dict):
        return Rejection("not_an_object", f"expected a JSON object, got {type(doc).__name__}")
    try:
        outcome = Outcome.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "$." + ".".join(map(str, first["loc"])) if first["loc"] else "$"
        reason = "invalid_value" if first["type"] == "value_error" else "schema"
        return Rejection(reason, f"{where}: {first['msg']}"[:300])
    if outcome.time >= MAX_TIME:
        return Rejection("invalid_value", "$.time is after 2106-02-07, the store's limit")
    return outcome


def looks_like_a_trace(data: bytes) -> bool:
    """Whether a refused message is a trace document (trace.v1) rather than an outcome event: a JSON object with
    ``trace_id`` and ``retriever`` — the usual sign of a trace file given to ``ingest --outcomes``."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and "trace_id" in doc and "retriever" in doc
