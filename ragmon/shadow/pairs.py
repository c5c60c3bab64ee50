"""Pairing production and shadow traces by query_id inside ClickHouse, and the per-pair agreement in SQL.

One scan of ``traces FINAL`` over the window, grouped by query_id, gives each query's earliest baseline trace
and earliest candidate trace (``argMinIf`` on (ts, trace_id), so every column comes from the same row). Pairs
are the query_ids with both; the rest are counted as unpaired on their side. Overlap@k, rank-biased overlap,
top-1 agreement and Kendall tau are computed per pair with array functions — the same definitions as
``ragmon.shadow.agreement`` (the tests check they agree) — and aggregated per stratum ``WITH ROLLUP``.

Owns SQL text only; every value is a ``{name:Type}`` parameter and the table name comes from
``store.table``. Must not do statistics beyond SQL aggregates (that is ``stats`` and ``compare``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragmon.errors import InputError

#: how many top-1 scores per side and stratum are sampled (seeded) for the distribution-shift tests
SCORE_SAMPLE = 20_000
NO_STRATUM = "(none)"
_REF = re.compile(r"^(?P<name>[^@\s]{1,256})(?:@(?P<version>[^@\s]{0,256}))?$")


@dataclass(frozen=True, slots=True)
class RetrieverRef:
    """Which traces form one side: retriever name, optional version ('' = any) and variant."""

    name: str
    version: str
    variant: str

    @classmethod
    def parse(cls, text: str, variant: str, *, option: str = "--baseline") -> RetrieverRef:
        match = _REF.match(text.strip())
        if not match:
            raise InputError(f"{option} {text!r} is not NAME or NAME@VERSION (e.g. hybrid@v3)")
        if variant not in ("production", "shadow", "canary"):
            raise InputError(f"variant {variant!r} for {option} must be production, shadow or canary")
        return cls(match["name"], match["version"] or "", variant)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name

    def __str__(self) -> str:
        return f"{self.label} ({self.variant})"


def _side(prefix: str) -> str:
    return (f"(retriever_name = {{{prefix}_name:String}} AND variant = {{{prefix}_variant:String}} "
            f"AND ({{{prefix}_version:String}} = '' OR retriever_version = {{{prefix}_version:String}}))")


_COLUMNS = {
    "trace": "trace_id",
    "category": "category",
    "question": "question",
    "ids": "retrieved_chunk_ids",
    "top1": "top1_score",
    "lat": "if({stage:String} = 'total', latency_total_ms, latency_ms[{stage:String}])",
    "has_lat": "{stage:String} = 'total' OR mapContains(latency_ms, {stage:String})",
    "error": "error",
    "ctx": "context_tokens",
    "cost": "cost_usd",
    "pk": "JSONExtractInt(retriever_params, 'k')",
}


def grouped_sql(traces_table: str, *, where: str = "") -> str:
    """One row per query_id seen on either side in the window: n_b/n_c and each side's earliest trace."""
    picks = ",\n        ".join(
        f"argMinIf({expr}, (ts, cityHash64(trace_id)), side = {i}) AS {p}_{col}"
        for i, p in ((1, "b"), (2, "c")) for col, expr in _COLUMNS.items()
    )
    return f"""
    SELECT query_id, countIf(side = 1) AS n_b, countIf(side = 2) AS n_c,
        {picks}
    FROM (
        SELECT query_id, ts, trace_id, category, question, retrieved_chunk_ids, top1_score, latency_ms,
            latency_total_ms, error, context_tokens, cost_usd, retriever_params,
            multiIf({_side('b')}, 1, {_side('c')}, 2, 0) AS side
        FROM {traces_table} FINAL
        WHERE ts >= {{since:DateTime64(3, 'UTC')}} AND ts < {{until:DateTime64(3, 'UTC')}}
          AND ({_side('b')} OR {_side('c')}) {where}
    )
    GROUP BY query_id"""


#: per-pair agreement at depth {k} — the SQL twin of ``ragmon.shadow.agreement``. Chunk ids are hashed to
#: UInt64 first (integer compares are far cheaper than string compares). Each shared item enters the
#: prefix overlap at depth max(rank in baseline, rank in candidate), so RBO is a sum over shared items of the
#: tail sums of its weights p^(d-1)/d: O(k) per pair instead of k set intersections. Kendall tau counts, for
#: each shared item, the later shared items the candidate also ranks later (concordant pairs C); positions are
#: distinct, so the other pairs are discordant and tau = 2C / (n(n-1)/2) - 1.
PAIR_FEATURES = """
    arraySlice(arrayDistinct(arrayMap(x -> cityHash64(x), b_ids)), 1, {k:UInt32}) AS bk,
    arraySlice(arrayDistinct(arrayMap(x -> cityHash64(x), c_ids)), 1, {k:UInt32}) AS ck,
    arrayMap(x -> indexOf(ck, x), bk) AS pos_in_c,
    arrayFilter(x -> x > 0, pos_in_c) AS shared_pos,
    length(shared_pos) AS n_shared,
    length(bk) + length(ck) - n_shared AS n_union,
    if(n_union = 0, 1.0, n_shared / n_union) AS jaccard,
    greatest(length(bk), length(ck)) AS depth,
    arrayReverse(arrayCumSum(arrayReverse(arrayMap(d -> pow({p:Float64}, d - 1) / d, range(1, depth + 1)))))
        AS w_tail,
    if(depth = 0, 1.0, (1 - {p:Float64}) / (1 - pow({p:Float64}, depth)) * arraySum(arrayMap(
        (x, i) -> if(x = 0, 0., w_tail[greatest(x, i)]), pos_in_c, arrayEnumerate(pos_in_c)))) AS rbo,
    if(empty(b_ids) AND empty(c_ids), NULL, toNullable(toFloat64(notEmpty(b_ids) AND notEmpty(c_ids)
        AND b_ids[1] = c_ids[1]))) AS top1,
    arrayEnumerate(shared_pos) AS shared_idx,
    if(n_shared < 2, NULL, toNullable(2 * arraySum(arrayMap(
        (x, i) -> arrayCount(y -> y > x, arraySlice(shared_pos, i + 1)), shared_pos, shared_idx))
        / (n_shared * (n_shared - 1) / 2) - 1)) AS tau"""


def pairs_sql(traces_table: str, *, where: str = "", having: str = "", features: bool = True) -> str:
    """Paired queries only, with the stratum (the baseline's category) and, optionally, per-pair agreement.

    ``where`` filters traces before pairing (e.g. ``AND query_id IN {ids:Array(String)}``); ``having`` filters
    pairs (it sees the ``b_*``/``c_*`` columns). Both are SQL fragments with parameters, never values.
    """
    extra = f",{PAIR_FEATURES}" if features else ""
    return f"""
    SELECT *, if(b_category = '', '{NO_STRATUM}', b_category) AS stratum{extra}
    FROM ({grouped_sql(traces_table, where=where)})
    WHERE n_b > 0 AND n_c > 0 {having}"""


def summary_sql(traces_table: str, *, seed: int = 0, lowest: int = 5) -> str:
    """Per-stratum (and, on the row with stratum = '', overall) counts, agreement and operational figures.

    ``seed`` fixes the score sample and ``lowest`` is how many least-agreeing pairs (lowest RBO) to keep for
    the report; ClickHouse takes aggregate-function parameters only as literals, so both are formatted in as
    checked integers, never as text (the sample seed plus one: it wants a positive seed).
    """
    seed, lowest = int(seed), int(lowest)
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a non-negative 64-bit integer, got {seed}")
    if not 1 <= lowest <= 1000:
        raise ValueError(f"lowest must be between 1 and 1000, got {lowest}")
    q = "0.5, 0.95, 0.99"
    return f"""
    SELECT
        if(n_b > 0, if(b_category = '', '{NO_STRATUM}', b_category),
           if(c_category = '', '{NO_STRATUM}', c_category)) AS stratum,
        countIf(paired) AS pairs,
        countIf(n_b > 0 AND n_c = 0) AS baseline_only,
        countIf(n_c > 0 AND n_b = 0) AS candidate_only,
        sumIf(n_b - 1, n_b > 1) + sumIf(n_c - 1, n_c > 1) AS duplicates,
        avgIf(jaccard, paired) AS mean_overlap, avgIf(rbo, paired) AS mean_rbo,
        avgIf(top1, paired) AS top1_rate, countIf(paired AND top1 IS NOT NULL) AS n_top1,
        avgIf(tau, paired) AS mean_tau, countIf(paired AND tau IS NOT NULL) AS n_tau,
        quantilesExactIf({q})(b_lat, paired AND b_has_lat) AS b_lat_q,
        quantilesExactIf({q})(c_lat, paired AND c_has_lat) AS c_lat_q,
        countIf(paired AND NOT b_has_lat) AS b_lat_missing, countIf(paired AND NOT c_has_lat) AS c_lat_missing,
        avgIf(b_error != '', paired) AS b_error_rate, avgIf(c_error != '', paired) AS c_error_rate,
        avgIf(empty(b_ids) AND b_error = '', paired) AS b_empty_rate,
        avgIf(empty(c_ids) AND c_error = '', paired) AS c_empty_rate,
        avgIf(b_ctx, paired) AS b_context_tokens, avgIf(c_ctx, paired) AS c_context_tokens,
        avgIf(b_cost, paired) AS b_cost_mean, avgIf(c_cost, paired) AS c_cost_mean,
        sumIf(b_cost, paired) AS b_cost_total, sumIf(c_cost, paired) AS c_cost_total,
        avgIf(length(b_ids), paired) AS b_results, avgIf(length(c_ids), paired) AS c_results,
        countIf(paired AND b_error = '' AND length(arrayDistinct(b_ids)) < {{k:UInt32}}) AS b_short,
        countIf(paired AND c_error = '' AND length(arrayDistinct(c_ids)) < {{k:UInt32}}) AS c_short,
        groupArraySampleIf({SCORE_SAMPLE}, {seed + 1})(b_top1, paired AND isFinite(b_top1)) AS b_scores,
        groupArraySampleIf({SCORE_SAMPLE}, {seed + 1})(c_top1, paired AND isFinite(c_top1)) AS c_scores,
        groupArraySortedIf({lowest})((rbo, query_id), paired) AS lowest_rbo
    FROM (
        SELECT *, n_b > 0 AND n_c > 0 AS paired,{PAIR_FEATURES}
        FROM ({grouped_sql(traces_table)})
    )
    GROUP BY stratum WITH ROLLUP
    ORDER BY stratum = '' , stratum"""


def sides_sql(traces_table: str) -> str:
    """Per side over the window (paired or not): trace counts, the most common result-list length, and the
    retriever's parameters.k values — to choose k, check it, and explain an empty comparison. No pairing."""
    return f"""
    SELECT countIf(side = 1) AS baseline, countIf(side = 2) AS candidate,
           topKIf(1)(n_results, side = 1 AND error = '' AND n_results > 0) AS b_mode,
           topKIf(1)(n_results, side = 2 AND error = '' AND n_results > 0) AS c_mode,
           groupUniqArrayIf(8)(pk, side = 1 AND pk > 0) AS b_param_k,
           groupUniqArrayIf(8)(pk, side = 2 AND pk > 0) AS c_param_k
    FROM (
        SELECT multiIf({_side('b')}, 1, {_side('c')}, 2, 0) AS side, n_results, error,
               JSONExtractInt(retriever_params, 'k') AS pk
        FROM {traces_table} FINAL
        WHERE ts >= {{since:DateTime64(3, 'UTC')}} AND ts < {{until:DateTime64(3, 'UTC')}}
          AND ({_side('b')} OR {_side('c')})
    )"""


def parameters(baseline: RetrieverRef, candidate: RetrieverRef, since: datetime, until: datetime, *,
               k: int = 10, p: float = 0.9, seed: int = 0, stage: str = "retrieve") -> dict[str, Any]:
    return {
        "b_name": baseline.name, "b_version": baseline.version, "b_variant": baseline.variant,
        "c_name": candidate.name, "c_version": candidate.version, "c_variant": candidate.variant,
        "since": since, "until": until, "k": k, "p": p, "seed": seed, "stage": stage,
    }
