"""The shadow role's SQL, and the seam it runs over: ``ShadowStore``.

Pairing production and shadow traces by query_id happens inside ClickHouse. The traces of ``traces FINAL`` over the
window whose query_id was seen on both sides, grouped by query_id, give each query's earliest baseline trace and
earliest candidate trace (``argMinIf`` on (ts, trace_id), so every column comes from the same row): the pairs. A
light count per query_id over both sides (traces per side, the stratum) finds the unpaired ones, and the summary
joins the pairs to it — grouping every query of the busier side with all its columns took 15 s of the 17 s the first
view of a shadow comparison took on 10 M traces (``bench/console.py``). Overlap@k, rank-biased overlap, top-1
agreement and Kendall tau are computed per pair with array functions — the same definitions as
``ragmon.shadow.agreement`` (the tests check they agree) — and aggregated per stratum ``WITH ROLLUP``. Judge scores
are joined to the pairs, and canary queries are found by their normalized question.

Why this level: ``ShadowStore`` is the read side of the one store (``table``, ``query_rows``,
``query_columns``; ``ClickHouseStore`` satisfies it), and the functions at the end are the questions
``compare`` asks (``side_counts``, ``summary``, ``judged_scores``, ``canary_pairs``, ``pair_lists``,
``retrievers_seen``). There is no in-memory double: pairing, agreement, quantiles and the rollup *are* this
SQL, so a double would be a second implementation testing itself; the pure definitions in ``agreement`` are
checked against it on chDB instead (``tests/integration/shadow/test_compare.py``).

Owns every SQL string of the shadow role. Every value is a ``{name:Type}`` parameter; the only text formatted
in is table names (``store.table``), code-constant column expressions, and checked integers. Must not do
statistics beyond SQL aggregates (that is ``stats`` and ``compare``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

#: how many top-1 scores per side and stratum are sampled (seeded) for the distribution-shift tests
SCORE_SAMPLE = 20_000
NO_STRATUM = "(none)"
#: a question normalized in SQL as ``canary.normalize_question`` does in Python (the baseline's, in a pair)
NORMALIZED_QUESTION_SQL = "lowerUTF8(trimBoth(replaceRegexpAll(b_question, '[ \\t\\n\\r\\f]+', ' ')))"


class ShadowStore(Protocol):
    """What the shadow queries need from a store (``ClickHouseStore`` satisfies it). Owned by the store; the
    shadow role only reads. Blocking; raises ``StoreError`` (``retryable`` for an outage); thread-safe."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def query_columns(self, sql: str, parameters: dict[str, Any] | None = None) -> dict[str, Sequence[Any]]: ...


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


#: the comparison's window (``since`` inclusive, ``until`` exclusive)
_WINDOW = "ts >= {since:DateTime64(3, 'UTC')} AND ts < {until:DateTime64(3, 'UTC')}"


def grouped_sql(traces_table: str, *, where: str = "", columns: dict[str, str] = _COLUMNS) -> str:
    """One row per query_id seen on either side in the window: n_b/n_c and, of each side's earliest trace, the
    ``columns`` (``_COLUMNS``: all a pair needs)."""
    picks = ",\n        ".join(
        f"argMinIf({expr}, (ts, cityHash64(trace_id)), side = {i}) AS {p}_{col}"
        for i, p in ((1, "b"), (2, "c")) for col, expr in columns.items()
    )
    return f"""
    SELECT query_id, countIf(side = 1) AS n_b, countIf(side = 2) AS n_c,
        {picks}
    FROM (
        SELECT query_id, ts, trace_id, category, question, retrieved_chunk_ids, top1_score, latency_ms,
            latency_total_ms, error, context_tokens, cost_usd, retriever_params,
            multiIf({_side('b')}, 1, {_side('c')}, 2, 0) AS side
        FROM {traces_table} FINAL
        WHERE {_WINDOW} AND ({_side('b')} OR {_side('c')}) {where}
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
    FROM ({grouped_sql(traces_table, where=f"{where} {_on_both_sides(traces_table)}")})
    WHERE n_b > 0 AND n_c > 0 {having}"""


def _on_both_sides(traces_table: str) -> str:
    """A filter keeping the traces of queries seen on both sides in the window, before they are grouped: pairing
    groups only those (41,452 of 829,429 queries in ``bench/console.py``'s store), not every query of the busier
    side, whose picks (question, lists, latencies) would be built and thrown away."""
    seen = [f"query_id IN (SELECT query_id FROM {traces_table} WHERE {_WINDOW} AND {_side(p)})" for p in "bc"]
    return f"AND {seen[0]} AND {seen[1]}"


def _per_query_sql(traces_table: str) -> str:
    """One row per query_id seen on either side: how many traces each side has and each side's stratum (of its
    earliest trace) — what the summary needs of the queries that are not paired."""
    return grouped_sql(traces_table, columns={"category": "category"})


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
        SELECT q.query_id AS query_id, q.n_b AS n_b, q.n_c AS n_c, q.b_category AS b_category,
            q.c_category AS c_category, p.* EXCEPT (query_id, n_b, n_c, b_category, c_category),
            q.n_b > 0 AND q.n_c > 0 AS paired
        FROM ({_per_query_sql(traces_table)}) AS q
        ANY LEFT JOIN ({pairs_sql(traces_table)}) AS p ON q.query_id = p.query_id
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
        WHERE {_WINDOW}
          AND ({_side('b')} OR {_side('c')})
    )"""


def judged_sql(traces_table: str, scores_table: str) -> str:
    """Every ok score of a paired trace: (query_id, stratum, side, metric, fingerprint, value).

    Only queries with at least one score in the window are paired (live scoring samples a fraction of the
    traffic), and both twins of such a query are kept, so one-sided judging is seen and reported.
    """
    judged_queries = f"SELECT query_id FROM {scores_table} WHERE {_WINDOW} AND status = 'ok'"
    return f"""
    SELECT p.query_id AS query_id, p.stratum AS stratum, p.side AS side, s.metric AS metric,
           s.judge_fingerprint AS fingerprint, s.latest AS value
    FROM (
        SELECT query_id, stratum, arrayJoin([(b_trace, 'b'), (c_trace, 'c')]) AS t, t.1 AS trace_id, t.2 AS side
        FROM ({pairs_sql(traces_table, where=f"AND query_id IN ({judged_queries})", features=False)})
    ) AS p
    INNER JOIN (
        SELECT trace_id, metric, judge_fingerprint, argMax(value, scored_at) AS latest
        FROM {scores_table} FINAL
        WHERE {_WINDOW}
          AND status = 'ok' AND isFinite(value)
        GROUP BY trace_id, metric, judge_fingerprint
    ) AS s ON s.trace_id = p.trace_id"""


def canary_sql(traces_table: str) -> str:
    """Pairs whose baseline question, normalized, is in ``{questions:Array(String)}``, with both full lists.

    The query_ids are found first with a plain scan of the baseline side, so only canary queries are paired.
    """
    matching = (f"SELECT query_id FROM {traces_table} WHERE {_WINDOW} AND retriever_name = {{b_name:String}} "
                f"AND {NORMALIZED_QUESTION_SQL.replace('b_question', 'question')} IN {{questions:Array(String)}}")
    return f"""
    SELECT query_id, stratum, b_question AS question, {NORMALIZED_QUESTION_SQL} AS key, b_ids, c_ids
    FROM ({pairs_sql(traces_table, where=f"AND query_id IN ({matching})",
                     having=f"AND {NORMALIZED_QUESTION_SQL} IN {{questions:Array(String)}}", features=False)})"""


def _details_sql(traces_table: str) -> str:
    """Both top-k lists and the question of the pairs whose query_id is in ``{ids:Array(String)}``."""
    return f"""SELECT query_id, stratum, b_question AS question, arraySlice(arrayDistinct(b_ids), 1, {{k:UInt32}}) AS b,
                     arraySlice(arrayDistinct(c_ids), 1, {{k:UInt32}}) AS c
              FROM ({pairs_sql(traces_table, where="AND query_id IN {ids:Array(String)}", features=False)})"""


def _seen_sql(traces_table: str) -> str:
    """The ten retrievers with the most traces in the window, to explain an empty comparison."""
    return (f"SELECT retriever_name AS n, retriever_version AS v, variant, count() AS c FROM {traces_table} FINAL "
            f"WHERE {_WINDOW} GROUP BY n, v, variant ORDER BY c DESC LIMIT 10")


# -- the questions ``compare`` asks; ``params`` come from ``pairs.parameters`` ----------------------------------

def side_counts(store: ShadowStore, params: dict[str, Any]) -> dict[str, Any]:
    """One row of ``sides_sql``: traces per side, the most common list length, parameters.k seen."""
    return store.query_rows(sides_sql(store.table("traces")), params)[0]


def summary(store: ShadowStore, params: dict[str, Any], *, seed: int, lowest: int) -> list[dict[str, Any]]:
    """The rows of ``summary_sql``: one per stratum, and the overall row with stratum ``''``."""
    return store.query_rows(summary_sql(store.table("traces"), seed=seed, lowest=lowest), params)


def judged_scores(store: ShadowStore, params: dict[str, Any]) -> dict[str, Sequence[Any]]:
    """The columns of ``judged_sql`` (for ``quality.pair_scores``)."""
    return store.query_columns(judged_sql(store.table("traces"), store.table("scores")), params)


def canary_pairs(store: ShadowStore, params: dict[str, Any], questions: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of ``canary_sql`` for these normalized questions."""
    return store.query_rows(canary_sql(store.table("traces")), {**params, "questions": list(questions)})


def pair_lists(store: ShadowStore, params: dict[str, Any], ids: Sequence[str], k: int) -> dict[str, dict[str, Any]]:
    """query_id → {stratum, question, b, c}: both top-``k`` lists of these pairs (empty for no ids)."""
    if not ids:
        return {}
    rows = store.query_rows(_details_sql(store.table("traces")), {**params, "ids": list(ids), "k": k})
    return {r["query_id"]: {"stratum": r["stratum"], "question": r["question"], "b": tuple(r["b"]),
                            "c": tuple(r["c"])} for r in rows}


def retrievers_seen(store: ShadowStore, params: dict[str, Any]) -> list[dict[str, Any]]:
    """(n, v, variant, c): the ten retrievers with the most traces in the window."""
    return store.query_rows(_seen_sql(store.table("traces")), params)
