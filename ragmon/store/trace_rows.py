"""The ``traces`` table layout: decoded traces → columnar batches, and stored rows → trace documents.

``TraceColumns`` appends decoded traces straight into per-column lists (no per-row dicts), which is what a
clickhouse-connect columnar insert wants. The ingest loop batches ``TraceRows`` (``trace_json.py``, JSON lines
that ClickHouse maps) instead; ``TraceColumns`` is the layout those rows must equal, and it serves columnar
inserts (a ClickHouse server, test fixtures). ``row_to_trace`` rebuilds a trace.v1 document from a stored row
for the judge, the review UI and exports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from ragmon.contracts.decode import FastTrace
from ragmon.metrics.permissions import LeakRule

_NAN = float("nan")

TRACE_COLUMNS = (
    "trace_id", "query_id", "ts", "retriever_name", "retriever_version", "variant", "retriever_params",
    "corpus_snapshot", "index_version", "question", "category", "tags", "tenant", "user_scope",
    "retrieved_chunk_ids", "retrieved_doc_ids", "retrieved_doc_versions", "retrieved_scores", "retrieved_ranks",
    "retrieved_texts", "retrieved_tenants", "context_chunk_ids", "context_tokens", "answer", "behaviour",
    "citation_sentences", "citation_chunk_ids", "citation_quotes", "model_name", "model_version", "prompt_id",
    "prompt_version", "latency_ms", "latency_total_ms", "tokens_prompt", "tokens_completion", "cost_usd", "error",
    "feedback_rating", "feedback_comment", "attributes", "source_topic", "source_partition", "source_offset",
    "ingested_at", "permission_leaks",
)  # fmt: skip

#: the columns ``row_to_trace`` needs, for SELECTs
SELECT_TRACE_COLUMNS = ", ".join(c for c in TRACE_COLUMNS if c not in ("source_topic", "source_partition",
                                                                          "source_offset", "ingested_at",
                                                                          "permission_leaks"))


class SourcePosition(msgspec.Struct, frozen=True, gc=False):
    """Where a trace came from (for lineage and the dedup token). A msgspec struct: one is built per trace."""

    topic: str = ""
    partition: int = -1
    offset: int = -1


#: the position of a trace that was not read from a topic (fixtures, columnar inserts)
_NOWHERE = SourcePosition()


#: the trace attribute numbering the versions of an OTLP trace rebuilt with late spans (2, 3, …)
VERSION_ATTRIBUTE = "ragmon.otlp.version"


def row_version(attributes: dict[str, str]) -> int:
    """How many milliseconds a row's ``ingested_at`` (the ReplacingMergeTree's version) is moved past its batch's
    time: ``ragmon.otlp.version`` - 1, so a later version of a trace wins under FINAL even when it is written in the
    same batch as the version it replaces. 0 for every other trace."""
    v = attributes.get(VERSION_ATTRIBUTE)
    return int(v) - 1 if v is not None and v.isdigit() and 1 <= len(v) <= 6 and v != "0" else 0


def total_latency(latency_ms: dict[str, float]) -> float:
    """'total' when the producer sent it, else the sum of the stages."""
    total = latency_ms.get("total")
    return float(total) if total is not None else float(sum(latency_ms.values()))


def count_leaks(rule: LeakRule, t: FastTrace) -> int:
    """``t``'s permission leaks under ``rule`` (``permission_leaks``), over the ranking as received."""
    user = t.tenant
    if not user:
        return 0
    owners = {x.tenant for x in t.retrieved}  # a set comprehension: ~3x cheaper than all() over a generator
    owners.discard(user)
    owners.discard(None)
    owners.discard("")
    if not owners or owners <= rule.shared_tenants:
        return 0  # the hot path's usual answer, without building the ranking's lists
    return rule.count(user, [x.chunk_id for x in t.retrieved], [x.tenant for x in t.retrieved])


class TraceColumns:
    """A columnar batch of traces for one insert. Not thread-safe; one per batch. ``leak_rule`` counts each
    trace's ``permission_leaks`` (default: no shared tenant, as ``ingest.shared_tenants`` defaults)."""

    __slots__ = ("columns", "bytes", "leak_rule")

    def __init__(self, leak_rule: LeakRule | None = None) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in TRACE_COLUMNS}
        self.bytes = 0
        self.leak_rule = leak_rule or LeakRule()

    def __len__(self) -> int:
        return len(self.columns["trace_id"])

    def add(self, t: FastTrace, source: SourcePosition = _NOWHERE, *, size_bytes: int = 0,
            ingested_at: datetime | None = None, retriever_params: str | None = None,
            permission_leaks: int | None = None) -> None:
        """Append one trace. ``retriever_params`` is the rendered parameters when ``t`` does not carry them
        (a trace read back from a ``TraceRows`` line), ``permission_leaks`` the count already made for it."""
        c = self.columns
        retrieved = sorted(t.retrieved, key=lambda r: r.rank) if _unsorted(t.retrieved) else t.retrieved
        r = t.retriever
        c["trace_id"].append(t.trace_id)
        c["query_id"].append(t.query_id)
        c["ts"].append(t.timestamp)
        c["retriever_name"].append(r.name)
        c["retriever_version"].append(r.version)
        c["variant"].append(r.variant)
        if retriever_params is None:
            retriever_params = json.dumps(r.parameters, sort_keys=True) if r.parameters else ""
        c["retriever_params"].append(retriever_params)
        c["corpus_snapshot"].append(t.corpus_snapshot)
        c["index_version"].append(t.index_version)
        c["question"].append(t.question)
        c["category"].append(t.category)
        c["tags"].append(t.tags)
        c["tenant"].append(t.tenant)
        c["user_scope"].append(t.user_scope)
        c["retrieved_chunk_ids"].append([x.chunk_id for x in retrieved])
        c["retrieved_doc_ids"].append([x.doc_id for x in retrieved])
        c["retrieved_doc_versions"].append([x.doc_version for x in retrieved])
        c["retrieved_scores"].append([_NAN if x.score is None else x.score for x in retrieved])
        c["retrieved_ranks"].append([x.rank for x in retrieved])
        c["retrieved_texts"].append([x.text or "" for x in retrieved])
        c["retrieved_tenants"].append([x.tenant or "" for x in retrieved])
        c["context_chunk_ids"].append(t.context.chunk_ids)
        c["context_tokens"].append(t.context.tokens)
        c["answer"].append(t.answer)
        c["behaviour"].append(t.behaviour)
        c["citation_sentences"].append([x.sentence for x in t.citations])
        c["citation_chunk_ids"].append([x.chunk_id for x in t.citations])
        c["citation_quotes"].append([x.quote or "" for x in t.citations])
        c["model_name"].append(t.model.name)
        c["model_version"].append(t.model.version)
        c["prompt_id"].append(t.prompt.id)
        c["prompt_version"].append(t.prompt.version)
        c["latency_ms"].append(t.latency_ms)
        c["latency_total_ms"].append(total_latency(t.latency_ms))
        c["tokens_prompt"].append(t.tokens.prompt)
        c["tokens_completion"].append(t.tokens.completion)
        c["cost_usd"].append(t.cost_usd)
        c["error"].append(t.error)
        c["feedback_rating"].append(t.feedback.rating if t.feedback else None)
        c["feedback_comment"].append((t.feedback.comment or "") if t.feedback else "")
        c["attributes"].append(t.attributes)
        c["source_topic"].append(source.topic)
        c["source_partition"].append(source.partition)
        c["source_offset"].append(source.offset)
        version = row_version(t.attributes)
        at = ingested_at or datetime.now(UTC)
        c["ingested_at"].append(at + timedelta(milliseconds=version) if version else at)
        c["permission_leaks"].append(count_leaks(self.leak_rule, t) if permission_leaks is None else permission_leaks)
        self.bytes += size_bytes

    def extend(self, traces: Iterable[FastTrace]) -> TraceColumns:
        now = datetime.now(UTC)
        for t in traces:
            self.add(t, ingested_at=now)
        return self


def _score(value: float) -> float | None:
    """A stored score; NaN is how a chunk without one is stored (a valid score is finite)."""
    return None if math.isnan(value) else value


def _unsorted(retrieved: list[Any]) -> bool:
    return any(retrieved[i].rank > retrieved[i + 1].rank for i in range(len(retrieved) - 1))


def _at(values: Any, i: int, default: Any) -> Any:
    return values[i] if i < len(values) else default


def row_to_trace(row: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a trace.v1 document (plain data) from a ``traces`` row selected with ``SELECT_TRACE_COLUMNS``."""
    ts = row["ts"]
    if isinstance(ts, datetime) and ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    n = len(row["retrieved_chunk_ids"])
    # the arrays are parallel when ingest wrote the row; a row written another way (SQL, a simulator) may have
    # shorter ones: a missing value reads as absent, never as an error on a page
    retrieved = [
        {
            "chunk_id": row["retrieved_chunk_ids"][i],
            "doc_id": _at(row["retrieved_doc_ids"], i, ""),
            "doc_version": _at(row["retrieved_doc_versions"], i, ""),
            "score": _score(_at(row["retrieved_scores"], i, math.nan)),
            "rank": _at(row["retrieved_ranks"], i, i + 1),
            "text": _at(row["retrieved_texts"], i, "") or None,
            "tenant": _at(row["retrieved_tenants"], i, "") or None,
        }
        for i in range(n)
    ]
    # a citation is its sentence and its chunk id: as many citations as the shorter of those arrays (one without
    # either says nothing to show); a missing quote reads as none
    sentences, cited, quotes = row["citation_sentences"], row["citation_chunk_ids"], row["citation_quotes"]
    citations = [{"sentence": sentences[i], "chunk_id": cited[i], "quote": _at(quotes, i, "") or None}
                 for i in range(min(len(sentences), len(cited)))]
    feedback = None
    if row.get("feedback_rating") is not None or row.get("feedback_comment"):
        feedback = {"rating": row.get("feedback_rating"), "comment": row.get("feedback_comment") or None}
    return {
        "trace_id": row["trace_id"],
        "query_id": row["query_id"],
        "timestamp": ts.isoformat() if isinstance(ts, datetime) else str(ts),
        "retriever": {
            "name": row["retriever_name"],
            "version": row["retriever_version"],
            "variant": row["variant"],
            "parameters": json.loads(row["retriever_params"]) if row["retriever_params"] else {},
        },
        "corpus_snapshot": row["corpus_snapshot"],
        "index_version": row["index_version"],
        "question": row["question"],
        "category": row["category"],
        "tags": list(row["tags"]),
        "tenant": row["tenant"],
        "user_scope": list(row["user_scope"]),
        "retrieved": retrieved,
        "context": {"chunk_ids": list(row["context_chunk_ids"]), "tokens": row["context_tokens"]},
        "answer": row["answer"],
        "behaviour": row["behaviour"],
        "citations": citations,
        "model": {"name": row["model_name"], "version": row["model_version"]},
        "prompt": {"id": row["prompt_id"], "version": row["prompt_version"]},
        "latency_ms": dict(row["latency_ms"]),
        "tokens": {"prompt": row["tokens_prompt"], "completion": row["tokens_completion"]},
        "cost_usd": row["cost_usd"],
        "error": row["error"],
        "feedback": feedback,
        "attributes": dict(row["attributes"]),
    }
