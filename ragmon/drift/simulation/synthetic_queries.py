"""The statement that generates synthetic traces inside ClickHouse (``synthetic.insert_synthetic`` runs it per
slice of row numbers), and the seam every simulator writes simulated traffic through: ``TrafficStore``.

Owns the SQL: seeded hashes of the row number (``cityHash64`` with the seed: ClickHouse's ``rand()`` cannot be
seeded) turned into uniform, normal (Box–Muller) and exponential draws. Every value is a ``{name:Type}`` parameter;
only the ``traces`` table name is formatted in. Must not choose the parameters (``SyntheticSpec`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class TrafficStore(Protocol):
    """What the simulators write simulated traffic through (``ClickHouseStore`` satisfies it): this statement
    (``command``), or columns built in Python (``simulate``, ``incidents``). Blocking; raises ``StoreError``."""

    def table(self, name: str) -> str: ...
    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any: ...
    def insert_columns(self, table: str, columns: dict[str, Sequence[Any]], *,
                       dedup_token: str | None = None) -> int: ...


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



def insert_slice(store: TrafficStore, parameters: dict[str, Any]) -> None:
    """Insert the traces of row numbers ``offset`` … ``offset + n - 1`` (``parameters``: every ``{name:Type}`` of
    the statement)."""
    store.command(_SQL.replace("{traces}", store.table("traces")), parameters)
