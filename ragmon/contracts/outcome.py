"""The outcome event contract, version 1: something the user did after a query (schemas/outcome.v1).

An A/B cohort is judged on what users do: open a citation, ask again, escalate to a person, mark the problem
resolved, leave feedback. Each event names the query it follows (``query_id``, as in trace.v1) and is joined to
the trace by it. ``event_id`` makes a re-sent event count once; without it the id is derived from the event's
content. ``decode_outcome`` validates one message (JSON bytes) into an ``Outcome`` or a ``Rejection`` with the
same reasons as traces. Types and validation only: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragmon.contracts.decode import Rejection

SCHEMA_ID = "outcome.v1"
MAX_OUTCOME_BYTES = 64 * 1024


class OutcomeKind(StrEnum):
    citation_opened = "citation_opened"
    reformulated = "reformulated"
    escalated = "escalated"
    resolved = "resolved"
    feedback = "feedback"


class Outcome(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, title="ragmon outcome event v1",
        json_schema_extra={"$id": "https://ragmon.dev/schemas/outcome.v1.schema.json"},
    )

    query_id: str = Field(min_length=1, max_length=256, description="The query this event follows (trace.v1 query_id).")
    kind: OutcomeKind = Field(description="citation_opened, reformulated, escalated, resolved or feedback.")
    time: AwareDatetime = Field(description="When it happened, RFC 3339 with a time zone.")
    value: float | None = Field(None, description="Optional number: feedback's score (e.g. 1 thumbs up, -1 thumbs "
                                                   "down), or which citation was opened.")
    event_id: str | None = Field(None, min_length=1, max_length=256,
                                 description="Unique per event, so a re-sent event counts once (derived from the "
                                             "content when absent).")

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("value must be a finite number")
        return value

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
