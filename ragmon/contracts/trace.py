"""The trace contract, version 1: one message describes one user query, end to end.

This module is the single source of truth for the trace: the JSON Schema in ``schemas/trace.v1.schema.json``
is generated from it (``ragmon schema export``) and the fast hot-path decoder in ``decode.py`` is checked
against it by tests. It holds types only: no I/O.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_ID = "trace.v1"

Identifier = Annotated[str, Field(min_length=1, max_length=256)]
Label = Annotated[str, Field(max_length=256)]
#: counts and positions are stored as UInt32; larger values would fail the whole insert batch
UINT32_MAX = 4_294_967_295
#: RFC 3339 date-time with an offset ('t', ' ' and a lower-case 'z' tolerated, up to 9 fraction digits).
#: Both decoders enforce this grammar so they agree on what a timestamp is.
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII)
NonNegativeMs = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Variant(StrEnum):
    production = "production"
    shadow = "shadow"
    canary = "canary"


class Behaviour(StrEnum):
    answer = "answer"
    refuse = "refuse"
    clarify = "clarify"
    route = "route"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Retriever(_Strict):
    name: Identifier = Field(description="Retriever name, stable across versions (e.g. 'hybrid-bm25-e5').")
    version: Label = Field("",
                           description="Retriever version: code plus embedding model; drift is tracked per version.")
    variant: Variant = Field(
        Variant.production,
        strict=False,  # lax for enums only means their string values are accepted from Python dicts too
        description="'production' answers users; 'shadow' runs on the same query without answering; 'canary' "
        "is a small live slice. Shadow twins share the production trace's query_id.",
    )
    parameters: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Retrieval parameters in force (k, fusion weights, reranker…), so a change is attributable.",
    )


class RetrievedChunk(_Strict):
    chunk_id: Identifier = Field(description="Chunk identifier, as used in golden-set reference passages.")
    doc_id: Label = Field("", description="Parent document; used for unique-document and duplicate counts.")
    doc_version: Label = Field("", description="Version of the parent document; stale versions signal index lag.")
    score: float | None = Field(
        description="Retriever score as emitted (finite), or null when the retriever gives none (stored without a "
        "score and left out of the score features). Distributions of these are drift-checked."
    )
    rank: int = Field(ge=1, le=UINT32_MAX, description="1-based rank before truncation to the context.")
    text: str | None = Field(
        None, max_length=200_000, description="Chunk text. Untrusted data: never rendered or prompted as instructions."
    )
    tenant: Label | None = Field(None, description="Tenant owning the chunk, for permission-leak checks.")

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("score must be a finite number")
        return v


class Context(_Strict):
    chunk_ids: list[Identifier] = Field(
        default_factory=list, description="Chunks actually passed to the model, in prompt order (after truncation)."
    )
    tokens: int | None = Field(None, ge=0, le=UINT32_MAX, description="Token count of the assembled context.")


class Citation(_Strict):
    sentence: int = Field(ge=0, le=UINT32_MAX,
                          description="0-based index of the answer sentence that carries the citation.")
    chunk_id: Identifier = Field(description="The chunk cited as support.")
    quote: str | None = Field(
        None, max_length=20_000, description="Quoted evidence; verified in code to occur in the cited chunk."
    )


class Model(_Strict):
    name: Label = Field("", description="Generator model name.")
    version: Label = Field("", description="Generator model version or snapshot date.")


class Prompt(_Strict):
    id: Label = Field("", description="Prompt template identifier.")
    version: Label = Field("", description="Prompt template version.")


class Tokens(_Strict):
    prompt: int = Field(0, ge=0, le=UINT32_MAX, description="Prompt (input) tokens of the generation call.")
    completion: int = Field(0, ge=0, le=UINT32_MAX, description="Completion (output) tokens of the generation call.")


class Feedback(_Strict):
    rating: int | None = Field(None, ge=-1, le=1, description="User feedback: -1 thumbs down, 0 neutral, 1 thumbs up.")
    comment: str | None = Field(None, max_length=10_000, description="Free-text user feedback.")


class Trace(_Strict):
    """One user query: question, ranked retrieval, context, answer, citations, versions, cost."""

    model_config = ConfigDict(
        extra="allow",  # producers evolve: unknown top-level fields are accepted (and counted by the decoder)
        strict=True,
        frozen=True,
        title="ragmon trace v1",
        json_schema_extra={"$id": "https://ragmon.dev/schemas/trace.v1.schema.json"},
    )

    trace_id: Identifier = Field(description="Unique per message; the storage key that makes re-delivery idempotent.")
    query_id: Identifier = Field(
        description="Shared by a production trace and its shadow twins; sampling hashes it so twins are sampled "
                    "together."
    )
    timestamp: datetime = Field(strict=False, description="When the query was received, RFC 3339 with a time zone.")
    retriever: Retriever = Field(description="Which retriever produced the ranking.")
    corpus_snapshot: Label = Field(
        "", description="Corpus snapshot the index was built from; without it corpus drift looks like failures."
    )
    index_version: Label = Field("", description="Search index build identifier.")
    question: str = Field(max_length=100_000, description="The user's question, verbatim (redacted before storage).")
    category: Label = Field("", description="The stratum (e.g. 'billing'); reports are per stratum. Empty if unknown.")
    tags: list[Label] = Field(default_factory=list, max_length=100, description="Free-form tags (question type etc.).")
    tenant: Label = Field("", description="Tenant of the asking user, for permission-leak checks.")
    user_scope: list[Label] = Field(
        default_factory=list, max_length=100, description="Permission scopes of the asking user."
    )
    retrieved: list[RetrievedChunk] = Field(
        default_factory=list, max_length=1000, description="Ranked retrieval results before truncation."
    )
    context: Context = Field(default_factory=Context, description="What was actually passed to the model.")
    answer: str = Field("", max_length=200_000, description="The generated answer (redacted before storage).")
    behaviour: Behaviour = Field(Behaviour.answer, strict=False,
                                 description="What the system did: answer, refuse, clarify or route.")
    citations: list[Citation] = Field(default_factory=list, max_length=1000, description="Citations in the answer.")
    model: Model = Field(default_factory=Model, description="Generator model.")
    prompt: Prompt = Field(default_factory=Prompt, description="Prompt template.")
    latency_ms: dict[Label, NonNegativeMs] = Field(
        default_factory=dict,
        description="Latency per stage in milliseconds (e.g. retrieve, rerank, generate, total). "
        "'total' is derived as the sum of stages when absent.",
    )
    tokens: Tokens = Field(default_factory=Tokens, description="Generation token counts.")
    cost_usd: float = Field(0.0, ge=0, allow_inf_nan=False, description="Cost of serving this query in US dollars.")
    error: str = Field("", max_length=10_000, description="Error message if the query failed; empty on success.")
    feedback: Feedback | None = Field(None, description="Optional user feedback. Never used to choose review samples.")
    attributes: dict[Label, str] = Field(
        default_factory=dict, description="Free-form string attributes for everything else."
    )

    @field_validator("latency_ms")
    @classmethod
    def _latency_finite(cls, v: dict[str, float]) -> dict[str, float]:
        for stage, ms in v.items():
            if not math.isfinite(ms) or ms < 0:
                raise ValueError(f"latency_ms[{stage!r}] must be a finite non-negative number")
        if "total" not in v and not math.isfinite(sum(v.values())):
            raise ValueError("the stages add up past the largest float; the stored total is their sum")
        return v

    @field_validator("timestamp", mode="before")
    @classmethod
    def _rfc3339(cls, v: object) -> object:
        # the field is parsed in lax mode (a before-validator hands the inner one a Python str, which strict
        # mode refuses), so only a datetime or an RFC 3339 string may pass: no Unix seconds, no bare dates
        if isinstance(v, str) and not RFC3339.fullmatch(v):
            raise ValueError(rfc3339_problem(v))
        if not isinstance(v, str | datetime):
            raise ValueError("timestamp must be an RFC 3339 string, e.g. '2026-04-01T12:00:00Z'")
        return v

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("timestamp needs a time zone (e.g. '2026-04-01T12:00:00Z')")
        return v


def rfc3339_problem(text: str) -> str:
    """Why ``text`` is not an RFC 3339 timestamp with a time zone (shared by both decoders)."""
    if RFC3339.fullmatch(text + "Z"):
        return "timestamp needs a time zone (e.g. '2026-04-01T12:00:00Z')"
    return "timestamp must be RFC 3339 with seconds and a time zone, e.g. '2026-04-01T12:00:00Z'"
