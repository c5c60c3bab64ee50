"""The ingest hot path's batch format: validated traces as compact JSON rows that ClickHouse maps into ``traces``.

``TraceRows`` re-encodes each decoded (and redacted) trace with msgspec (one C call) as one JSON array per line
(ClickHouse's ``JSONCompactEachRow``): the trace's fields by position, nested records (retriever, chunks,
citations, …) as arrays too, followed by what is not in the document: the two derived columns whose exact
values come from Python (``retriever_params`` is ``json.dumps(sort_keys=True)``, ``latency_total_ms`` a
left-to-right float sum), the lineage (topic/partition/offset) and the trace's permission leaks, counted here
with the batch's ``LeakRule`` (``leaks`` totals them per retriever, variant and stratum for the counter). ClickHouse parses the lines into
``TRACE_JSON_STRUCTURE`` and maps them to the table with ``TRACE_JSON_SELECT`` (retrieved chunks sorted by rank,
stably): no per-column Python lists, no Native serialization in Python. The rows stored are identical to
``TraceColumns``' (tests/integration/test_trace_json.py).

Why arrays rather than objects: ClickHouse parses a batch of positional rows in ~12 µs per 4 KB trace against
~20 µs for the same data with keys, whose every chunk is an object of seven keys; building the tuples costs
Python ~2 µs (docs/ingest.md, "Where the time goes"). Why re-encode rather than insert the message bytes as
received: the encoded row is canonical (every field present with the contract's defaults, no duplicate or
unknown keys, redaction applied), so nothing msgspec accepted can be read differently, or refused, by
ClickHouse's parser.

This module builds data and SQL text only; ``ClickHouseStore.insert_trace_rows`` runs it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, NamedTuple

import msgspec

from ragmon.contracts.decode import FastTrace
from ragmon.metrics.permissions import LeakRule
from ragmon.store.trace_rows import SourcePosition, TraceColumns, count_leaks, row_version, total_latency

#: the shape ClickHouse parses each line into (``input``/``file`` structure), by position; ``TraceRows.add``
#: writes the fields in this order. ``retriever.parameters`` is not in it: it travels pre-rendered as
#: ``retriever_params``. The optional texts (chunk text and tenant, citation quote, feedback comment) are
#: stored as '' when absent, so they are read as String: a JSON null becomes '' (``input_format_null_as_default``),
#: with no null map to build
TRACE_JSON_STRUCTURE = (
    "trace Tuple(trace_id String, query_id String, timestamp String, "
    "retriever Tuple(name String, version String, variant String), corpus_snapshot String, index_version String, "
    "question String, category String, tags Array(String), tenant String, user_scope Array(String), "
    "retrieved Array(Tuple(chunk_id String, score Nullable(Float64), rank UInt32, doc_id String, doc_version String, "
    "text String, tenant String)), context Tuple(chunk_ids Array(String), tokens Nullable(UInt32)), "
    "answer String, behaviour String, citations Array(Tuple(sentence UInt32, chunk_id String, quote String)), "
    "model Tuple(name String, version String), prompt Tuple(id String, version String), latency_ms Map(String, Float64), "
    "tokens Tuple(prompt UInt32, completion UInt32), cost_usd Float64, error String, "
    "feedback Tuple(rating Nullable(Int8), comment String), attributes Map(String, String)), "
    "retriever_params String, latency_total_ms Float64, source_topic String, source_partition Int32, source_offset Int64, "
    "version UInt32, permission_leaks UInt16"
)

#: ClickHouse's input format for the lines: one JSON array per row, tuples as arrays
TRACE_JSON_FORMAT = "JSONCompactEachRow"

#: ``TRACE_COLUMNS`` in order, computed from the parsed line; ``_r`` is ``trace.retrieved`` sorted by rank
#: (ties keep their order, as Python's ``sorted`` does); a chunk without a score is stored as NaN (never a valid
#: score: the contract wants finite ones), which the score features skip; ``{ingested_at_ms:Int64}`` is the batch's
#: time, plus ``version`` - 1 milliseconds for a trace's later versions (``row_version``)
TRACE_JSON_SELECT = """WITH arraySort((x, i) -> (x.rank, i), trace.retrieved, arrayEnumerate(trace.retrieved)) AS _r
SELECT trace.trace_id, trace.query_id, parseDateTime64BestEffort(trace.timestamp, 3, 'UTC'),
    trace.retriever.name, trace.retriever.version, trace.retriever.variant, retriever_params,
    trace.corpus_snapshot, trace.index_version, trace.question, trace.category, trace.tags, trace.tenant,
    trace.user_scope, arrayMap(x -> x.chunk_id, _r), arrayMap(x -> x.doc_id, _r), arrayMap(x -> x.doc_version, _r),
    arrayMap(x -> ifNull(x.score, nan), _r), arrayMap(x -> x.rank, _r), arrayMap(x -> x.text, _r),
    arrayMap(x -> x.tenant, _r), trace.context.chunk_ids, trace.context.tokens, trace.answer,
    trace.behaviour, arrayMap(x -> x.sentence, trace.citations), arrayMap(x -> x.chunk_id, trace.citations),
    arrayMap(x -> x.quote, trace.citations), trace.model.name, trace.model.version, trace.prompt.id,
    trace.prompt.version, trace.latency_ms, latency_total_ms, trace.tokens.prompt, trace.tokens.completion,
    trace.cost_usd, trace.error, trace.feedback.rating, trace.feedback.comment, trace.attributes,
    source_topic, source_partition, source_offset, fromUnixTimestamp64Milli({ingested_at_ms:Int64} + version, 'UTC'),
    permission_leaks"""

#: parse floats exactly as Python does (the default fast path may differ in the last bit); tuples from JSON
#: arrays; one parsing thread (a batch is a few MB: the parallel parser's threads cost more CPU than they
#: save); no replacing merge of the inserted block (ReplacingMergeTree's ``optimize_on_insert``: ~3 µs per
#: trace): a trace sent twice within one batch collapses under FINAL and in merges, as one sent in two
#: batches always did
TRACE_JSON_SETTINGS = {"precise_float_parsing": 1, "input_format_json_named_tuples_as_objects": 0,
                       "input_format_parallel_parsing": 0, "optimize_on_insert": 0, "input_format_null_as_default": 1}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_encoder = msgspec.json.Encoder()
_PARAMS_CACHE_MAX = 4096
_chunk = attrgetter("chunk_id", "score", "rank", "doc_id", "doc_version", "text", "tenant")
_citation = attrgetter("sentence", "chunk_id", "quote")
_NO_FEEDBACK = (None, None)


class LeakRow(NamedTuple):
    """A leaking trace of a batch: its key in ``traces`` (the table's sort key, so the store finds it at once),
    its count, and the labels of ``ragmon_permission_leaks_total``."""

    trace_id: str
    retriever_name: str
    variant: str
    category: str
    ts: datetime
    leaks: int
    labels: tuple[str, str, str]


class TraceRows:
    """A batch of traces as compact JSON lines for one insert. Not thread-safe; one per batch.

    The lines are encoded straight into one growing buffer (no bytes object per trace, no joined copy of the
    batch): fewer allocations on the hot path, and the batch's memory is one block that is freed at once.
    """

    __slots__ = ("_buf", "_count", "trace_ids", "bytes", "ingested_at", "_params", "leak_rule", "leaks", "leaking")

    def __init__(self, ingested_at: datetime | None = None, leak_rule: LeakRule | None = None) -> None:
        self._buf = bytearray()
        self._count = 0
        self.trace_ids: list[str] = []
        self.bytes = 0
        self.ingested_at = ingested_at or datetime.now(UTC)
        self._params: dict[bytes, str] = {}
        self.leak_rule = leak_rule or LeakRule()
        #: (retriever "name@version", variant, stratum) → leaked chunks in this batch; empty when none leaked
        self.leaks: dict[tuple[str, str, str], int] = {}
        #: each leaking trace of the batch (rare: the target is none), so a re-delivery is not counted again
        self.leaking: list[LeakRow] = []

    def __len__(self) -> int:
        return self._count

    def add(self, t: FastTrace, source: SourcePosition, *, size_bytes: int = 0) -> None:
        r, c, m, p, k, f = t.retriever, t.context, t.model, t.prompt, t.tokens, t.feedback
        leaks = count_leaks(self.leak_rule, t)
        if leaks:
            key = (f"{r.name}@{r.version}", r.variant, t.category)
            self.leaks[key] = self.leaks.get(key, 0) + leaks
            self.leaking.append(LeakRow(t.trace_id, r.name, r.variant, t.category, t.timestamp, leaks, key))
        row = (
            (t.trace_id, t.query_id, t.timestamp, (r.name, r.version, r.variant), t.corpus_snapshot,
             t.index_version, t.question, t.category, t.tags, t.tenant, t.user_scope, list(map(_chunk, t.retrieved)),
             (c.chunk_ids, c.tokens), t.answer, t.behaviour, list(map(_citation, t.citations)), (m.name, m.version),
             (p.id, p.version), t.latency_ms, (k.prompt, k.completion), t.cost_usd, t.error,
             _NO_FEEDBACK if f is None else (f.rating, f.comment), t.attributes),
            self._params_json(r.parameters) if r.parameters else "", total_latency(t.latency_ms),
            source.topic, source.partition, source.offset, row_version(t.attributes), leaks,
        )
        _encoder.encode_into(row, self._buf, -1)
        self._buf += b"\n"  # JSON text never contains a raw newline: msgspec escapes it inside strings
        self._count += 1
        self.trace_ids.append(t.trace_id)
        self.bytes += size_bytes

    def payload(self) -> memoryview:
        """The JSONCompactEachRow body: one line per trace, each ending in a newline (a view, not a copy)."""
        return memoryview(self._buf)

    @property
    def lines(self) -> list[bytes]:
        """Each trace's JSON line, without its newline (tests, the columnar fallback)."""
        return bytes(self._buf).split(b"\n")[:-1]

    @property
    def ingested_at_ms(self) -> int:
        """``ingested_at`` in whole milliseconds, truncated (as clickhouse-connect converts a datetime)."""
        return (self.ingested_at - _EPOCH) // timedelta(milliseconds=1)

    def columns(self) -> dict[str, list[Any]]:
        """The same batch as ``TRACE_COLUMNS`` lists (for writers that insert columns: a server, test doubles)."""
        cols = TraceColumns()
        for line in self.lines:
            r = _row_decoder.decode(line)
            cols.add(r.trace, SourcePosition(r.source_topic, r.source_partition, r.source_offset),
                     ingested_at=self.ingested_at, retriever_params=r.retriever_params,  # adds the version itself
                     permission_leaks=r.permission_leaks)
        return cols.columns

    def _params_json(self, params: dict[str, Any]) -> str:
        # json.dumps of a small dict costs ~3 µs; a batch's traces mostly share a few parameter sets
        key = _encoder.encode(params)
        text = self._params.get(key)
        if text is None:
            if len(self._params) >= _PARAMS_CACHE_MAX:
                self._params.clear()
            text = self._params[key] = json.dumps(params, sort_keys=True)
        return text


# -- reading a line back (``TraceRows.columns``): the same positions as typed records -------------------------


class _Positional(msgspec.Struct, array_like=True, frozen=True, gc=False):
    pass


class _Retriever(_Positional):
    name: str
    version: str
    variant: str


class _Chunk(_Positional):
    chunk_id: str
    score: float | None
    rank: int
    doc_id: str
    doc_version: str
    text: str | None
    tenant: str | None


class _Context(_Positional):
    chunk_ids: list[str]
    tokens: int | None


class _Citation(_Positional):
    sentence: int
    chunk_id: str
    quote: str | None


class _Model(_Positional):
    name: str
    version: str


class _Prompt(_Positional):
    id: str
    version: str


class _Tokens(_Positional):
    prompt: int
    completion: int


class _Feedback(_Positional):
    rating: int | None
    comment: str | None  # absent feedback is written as (null, null): TraceColumns stores None and ''


class _Trace(_Positional):
    trace_id: str
    query_id: str
    timestamp: datetime
    retriever: _Retriever
    corpus_snapshot: str
    index_version: str
    question: str
    category: str
    tags: list[str]
    tenant: str
    user_scope: list[str]
    retrieved: list[_Chunk]
    context: _Context
    answer: str
    behaviour: str
    citations: list[_Citation]
    model: _Model
    prompt: _Prompt
    latency_ms: dict[str, float]
    tokens: _Tokens
    cost_usd: float
    error: str
    feedback: _Feedback
    attributes: dict[str, str]


class _Row(_Positional):
    trace: _Trace
    retriever_params: str
    latency_total_ms: float
    source_topic: str
    source_partition: int
    source_offset: int
    version: int
    permission_leaks: int


_row_decoder = msgspec.json.Decoder(_Row)
