"""Synthetic retrieval traffic generated *inside* ClickHouse, for benchmarks, demos and drift tests.

``insert_synthetic`` writes ``n`` traces with ``INSERT … SELECT … FROM numbers(n)`` — the values are seeded
hashes of the row number turned into uniform, normal and exponential draws inside ClickHouse, so ten million
traces never pass through Python and the same ``seed`` always gives the same traces. Scores are the top-k of a
per-query level (normal around ``score_mean``) plus per-chunk noise, sorted by rank; ``shift`` adds to every
score (the drift to detect). Every per-chunk array has one entry per chunk (short synthetic texts, no tenant), so
each row reads back as a valid trace (the console's trace page, ``ragmon trace show``). Every value is a query
parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


class CommandStore(Protocol):
    def table(self, name: str) -> str: ...
    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """What to generate. Timestamps are uniform over ``[start, end)``."""

    n: int
    start: datetime
    end: datetime
    shift: float = 0.0
    score_mean: float = 0.7
    score_sd: float = 0.08
    k: int = 5
    empty_rate: float = 0.01
    refusal_rate: float = 0.05
    retrievers: tuple[str, ...] = ("hybrid@v1",)
    variant: str = "production"
    strata: tuple[str, ...] = ("billing", "consent", "security")
    corpus_snapshot: str = "2026-11-01"
    seed: int = 1
    run_id: str = field(default="syn")
    #: 0: every trace asks 'synthetic question' and draws its own level. Otherwise questions are Zipf-popular
    #: (P(question i) ∝ 1/i over 1 … ``questions``) and each question has its own level, the same
    #: whatever the seed (a question scores alike every day).
    questions: int = 0

    def __post_init__(self) -> None:
        if self.n < 0 or self.k < 1 or self.questions < 0 or not self.start < self.end:
            raise ValueError(f"need n ≥ 0, k ≥ 1 and start < end, got n={self.n}, k={self.k}, "
                             f"{self.start.isoformat()}..{self.end.isoformat()}")
        if not all("@" in r for r in self.retrievers) or not self.strata:
            raise ValueError("retrievers are 'name@version' strings and strata a non-empty list")


def _h(*args: str) -> str:
    """A deterministic 64-bit hash of (seed, args): ClickHouse's rand() cannot be seeded, this can."""
    return f"cityHash64({{seed:UInt64}}, {', '.join(args)})"


def _u(*args: str) -> str:
    """Uniform in (0, 1)."""
    return f"(({_h(*args)} + 0.5) / 18446744073709551616.0)"


def _normal(mean: str, sd: str, *args: str) -> str:
    """Box–Muller from two seeded uniforms."""
    return f"({mean} + {sd} * sqrt(-2 * log({_u(*args, '1')})) * cos(2 * pi() * {_u(*args, '2')}))"


def _exponential(mean: str, *args: str) -> str:
    return f"(-{mean} * log({_u(*args)}))"


_SQL = f"""
INSERT INTO {{traces}} (trace_id, query_id, ts, retriever_name, retriever_version, variant, corpus_snapshot,
    category, question, retrieved_chunk_ids, retrieved_doc_ids, retrieved_doc_versions, retrieved_scores,
    retrieved_ranks, retrieved_texts, retrieved_tenants, behaviour, latency_total_ms, cost_usd, ingested_at)
SELECT
    concat({{run:String}}, '-', toString({{seed:UInt64}}), '-', toString(number)) AS trace_id,
    trace_id AS query_id,
    fromUnixTimestamp64Milli({{start_ms:Int64}} + toInt64({_h('number', '1')} % {{span_ms:UInt64}}), 'UTC') AS ts,
    rv[1], rv[2], {{variant:String}}, {{snapshot:String}},
    {{strata:Array(String)}}[1 + {_h('number', '3')} % length({{strata:Array(String)}})],
    if({{questions:UInt64}} = 0, 'synthetic question', concat('synthetic question ', toString(qid))),
    arrayMap(i -> concat('doc', toString({_h('number', '4', 'i')} % 500), '@c', toString(i)), idx) AS chunks,
    arrayMap(c -> splitByChar('@', c)[1], chunks),
    arrayMap(i -> if({_h('number', '5', 'i')} % 10 = 0, '2026-10-01', '2026-11-01'), idx),
    arrayReverseSort(arrayMap(i -> level + {_normal('0', '{score_sd:Float64}',
                                                    'number', '6', 'i')} * 0.5 - i * 0.03, idx)),
    arrayMap(i -> toUInt32(i), idx),
    arrayMap(c -> concat('Synthetic passage ', c), chunks),
    arrayMap(c -> '', chunks),
    if({_h('number', '7')} % 10000 < {{refuse:UInt32}}, 'refuse', 'answer'),
    300 + {_exponential('400', 'number', '8')},
    0.001 + {_exponential('0.0005', 'number', '9')},
    now64(3, 'UTC')
FROM (
    SELECT number,
        splitByChar('@', {{retrievers:Array(String)}}[1 + {_h(
            'number', '2')} % length({{retrievers:Array(String)}})]) AS rv,
        toUInt64(floor(exp({_u('number', '12')} * log(greatest({{questions:UInt64}}, 1))))) AS qid,
        if({{questions:UInt64}} = 0, {_normal('{score_mean:Float64} + {shift:Float64}', '{score_sd:Float64}',
                                              'number', '10')},
           {_normal('{score_mean:Float64} + {shift:Float64}', '{score_sd:Float64}', 'qid', '10')
            .replace('{seed:UInt64}', '0')}) AS level,
        if({_h(
            'number', '11')} % 10000 < {{empty:UInt32}}, CAST([] AS Array(UInt32)), range(1, {{k:UInt32}} + 1)) AS idx
    FROM numbers({{offset:UInt64}}, {{n:UInt64}})
)
"""


#: rows per INSERT: every row is a function of its number alone, so inserting in slices gives the same rows, and
#: each INSERT … SELECT stays well inside the embedded engine's memory (``store.embedded_memory_mb``)
INSERT_ROWS = 250_000


def insert_synthetic(store: CommandStore, spec: SyntheticSpec) -> int:
    """Insert ``spec.n`` synthetic traces into ``traces`` (in slices of ``INSERT_ROWS``); return how many."""
    start_ms = int(spec.start.timestamp() * 1000)
    span_ms = int(spec.end.timestamp() * 1000) - start_ms
    sql = _SQL.replace("{traces}", store.table("traces"))
    for offset in range(0, spec.n, INSERT_ROWS):
        store.command(sql, {
            "run": spec.run_id, "seed": spec.seed, "start_ms": start_ms, "span_ms": span_ms,
            "retrievers": list(spec.retrievers), "variant": spec.variant, "snapshot": spec.corpus_snapshot,
            "strata": list(spec.strata), "score_sd": spec.score_sd, "score_mean": spec.score_mean,
            "shift": spec.shift, "refuse": int(round(spec.refusal_rate * 10000)),
            "empty": int(round(spec.empty_rate * 10000)), "k": spec.k, "offset": offset,
            "n": min(INSERT_ROWS, spec.n - offset), "questions": spec.questions,
        })
    return spec.n
