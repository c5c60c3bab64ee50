"""The drift windows' SQL: ClickHouse summarises every window of every group in one pass per source.

Per (group, window index) and feature it returns a count, mean, standard deviation and a t-digest quantile
sketch at ``LEVELS`` (continuous features) or successes/trials (rates) — a few hundred numbers per window
whatever the traffic, so a check over millions of traces moves kilobytes, and on a cluster the sketches merge
across shards. The window index of a trace is ``⌊(end − 1 ms − ts) / length⌋`` (``ragmon.drift.method.windows``):
0 is the current window, then the reference windows and the CUSUM's look-back, newest first. Values always
travel as ``{name:Type}`` parameters; the only text formatted into SQL is table names (``store.table``),
feature expressions and quantile levels, all code constants.

``newest_version_share`` is measured against the corpus: a retrieved chunk is stale when a newer version of its
document was known ``drift.index_lag_seconds`` before the chunk was served — known from the ``corpus_versions``
feed (``ragmon corpus load``) or because some trace served it (any retriever, any variant). Routine updates
served on time are not stale; an index that stops picking new versions up serves more stale chunks every hour.

Duplicates of a re-delivered trace are not collapsed (no FINAL): they are rare and do not move a
distribution, and FINAL would multiply the cost of a scan over days of traffic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ragmon.drift.check.queries import DriftStore
from ragmon.drift.check.question_queries import (
    ASKED,
    CLUSTER_ROWS,
    cluster_sums,
    clustered_mean_variance,
    levels_sql,
    question_key,
    with_cluster_rows,
)
from ragmon.drift.check.window_sql import (
    CURRENT,
    GROUP_KEYS,
    INDEX,
    INNER_GROUP,
    OUTER_GROUP,
    REFERENCE_RANGE,
    SPAN,
    TRACE_GROUP,
    TRACE_KEYS,
    TRACE_OUTER,
)
from ragmon.drift.method.features import Feature
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import LEVELS, ContinuousSummary, RateSummary, Summary
from ragmon.drift.method.windows import WindowPlan

_LEVELS_SQL = ",".join(f"{level:g}" for level in LEVELS)


@dataclass(frozen=True, slots=True, order=True)
class Group:
    """What a feature is computed per. ``judge_fingerprint`` is set only for judge-score features."""

    retriever_name: str
    retriever_version: str
    variant: str
    stratum: str
    judge_fingerprint: str = ""

    @property
    def retriever(self) -> str:
        return f"{self.retriever_name}@{self.retriever_version}"


#: (group, feature name) → the feature's summary per window index (absent: no traffic in that window)
Windowed = dict[tuple[Group, str], dict[int, Summary]]


def plan_parameters(p: WindowPlan) -> dict[str, Any]:
    """The query parameters of a window plan (milliseconds since the epoch)."""
    ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731
    ref, cur = p.windows.reference, p.windows.current
    end = ms(p.end)
    lo = end - p.history * p.length * 1000 if not p.pinned else min(ms(ref.start), ms(cur.start))
    hi = min(end, ms(p.until)) if p.until is not None else end
    return {"end": end, "win": p.length * 1000, "lo": lo, "hi": hi, "cs": ms(cur.start), "rs": ms(ref.start),
            "re": ms(ref.end), "snapshot": ref.corpus_snapshot or ""}



def span_condition(traces: str, p: WindowPlan, *, has_snapshot: bool) -> str:
    """Which rows a check reads: the whole history (trailing), or the current window and the pinned range."""
    if not p.pinned:
        return SPAN
    pinned = REFERENCE_RANGE
    if p.windows.reference.corpus_snapshot:
        pinned += (" AND corpus_snapshot = {snapshot:String}" if has_snapshot else
                   f" AND trace_id IN (SELECT trace_id FROM {traces} WHERE corpus_snapshot = {{snapshot:String}} "
                   f"AND {REFERENCE_RANGE})")
    return f"{SPAN} AND ({CURRENT} OR ({pinned}))"


def _sketch_columns(alias: str, value: str, sketch_windows: str = "") -> list[str]:
    """Count, mean, standard deviation and the quantile sketch of a value per group and window; with
    ``sketch_windows`` (a condition on ``w``) the sketch only in the windows it selects (NaN in the others)."""
    ok = f"isFinite({value})"
    return [
        f"countIf({ok}) AS {alias}__n",
        f"avgIf({value}, {ok}) AS {alias}__mean",
        f"stddevPopIf({value}, {ok}) AS {alias}__std",
        f"quantilesTDigestIf({_LEVELS_SQL})({value}, {ok}{f' AND {sketch_windows}' if sketch_windows else ''}) "
        f"AS {alias}__q",
    ]


def _display_windows(p: WindowPlan) -> str:
    """The windows a feature whose tests read only counts and moments needs a sketch of: the current window and
    the reference windows at its slot — what a report overlays (``Comparison.reference_summary``). A t-digest per
    row of every window cost about as much as the question adjustment at 10 M traces."""
    return f"(w % {p.period} = 0)" if p.period > 1 else ""


def traces_sql(traces: str, features: Sequence[Feature], p: WindowPlan, *, by_query: bool = True,
               sketched: Collection[str] | None = None, clusters: bool = True) -> str:
    """One aggregation over ``traces`` for every traces-sourced feature, per group and window.

    With ``by_query``, a ``Feature.by_query`` feature is summarised as each trace's value less its question's level
    (``question_hash``) over the reference windows of the other parity, plus the group's reference mean — what the
    window would have scored had its questions scored as they did in the reference (``drift.simulation.by_query``,
    the same in numpy). The levels are aggregated over the reference and joined to the traces by a 64-bit key
    (``drift_group``, ``question_hash``, parity; a hash join: ALL, which with one level row a key gives what ANY
    gives, and carries the levels into the traces' rows a second faster at 10 M traces). A question asked fewer than
    ``MIN_ASKS`` times in those windows, or never, and a trace with an empty question are summarised as served (the
    join's default delta is 0), so traffic that never repeats a question is summarised as it is. A rate returns its
    count as served (``f{i}__k``), adjusted (``f{i}__ka``) and the sum of its traces' squared deltas (``f{i}__dd``):
    ``aggregate`` turns them into the adjusted count and its sampling variance. (Looking the levels up with
    ``transform`` over arrays from a scalar subquery, like ``chunks_sql``, needed 4 GiB and 16 s at 10 M traces: the
    engine turns a scalar subquery's arrays into one value per element; the join, about 3 s.)
    ``sketched``: the continuous features whose quantile sketch every window needs (a test reads their quantiles:
    ``window_quantiles``, the CUSUM's median); the others get one only where a report shows it
    (``_display_windows``). None: every feature in every window.
    """
    adjusted = [(i, f) for i, f in enumerate(features) if by_query and f.by_query]
    adjusted_at = {i for i, _ in adjusted}
    clustered = [i for i, f in adjusted if f.kind == "continuous"] if clusters else []
    inner = [TRACE_GROUP, f"{INDEX} AS w"]
    middle = [TRACE_KEYS, "w"]
    outer = [TRACE_OUTER, "w", "count() AS n_rows"]
    for i, f in enumerate(features):
        if f.kind == "continuous":
            inner.append(f"toFloat64({f.expr}) AS v{i}")
            # a cluster row's value is its sum of m{i} values, each less the same level (m{i} = 1 on a trace's row)
            middle.append(f"v{i} - lv_d{i} * m{i} AS v{i}" if i in clustered else
                          f"v{i} - lv_d{i} AS v{i}" if i in adjusted_at else f"v{i}")
            every = sketched is None or f.name in sketched
            outer.extend(_sketch_columns(f"f{i}", f"v{i}", "" if every else _display_windows(p)))
        elif i in adjusted_at:
            inner.append(f"toFloat64(toUInt8({f.expr})) AS v{i}")
            middle.extend([f"v{i} AS x{i}", f"v{i} - lv_d{i} AS a{i}", f"lv_d{i} * lv_d{i} AS e{i}"])
            outer.extend([f"sum(x{i}) AS f{i}__k", f"sum(a{i}) AS f{i}__ka", f"sum(e{i}) AS f{i}__dd"])
        else:
            inner.append(f"toUInt8({f.expr}) AS v{i}")
            middle.append(f"v{i}")
            outer.append(f"sum(v{i}) AS f{i}__k")
    where = span_condition(traces, p, has_snapshot=True)
    if adjusted:
        inner.append(f"if({ASKED}, {question_key(f'({INDEX} + 1) % 2')}, 0) AS question")
    rows = f"SELECT {', '.join(inner)} FROM {traces} WHERE {where}"
    if adjusted:
        if clustered:
            rows = with_cluster_rows(traces, rows, inner, features, adjusted_at, clustered, where)
            middle.extend(f"m{i}" for i in clustered)
            outer.extend(cluster_sums(clustered))
        rows = (f"SELECT {', '.join(middle)} FROM ({rows}) AS t "
                f"ALL LEFT JOIN ({levels_sql(traces, adjusted, where)}) AS lv ON question = lv_key")
    return f"SELECT {', '.join(outer)} FROM ({rows}) GROUP BY dg, w"


def scores_sql(scores: str, traces: str, p: WindowPlan) -> str:
    """One aggregation over ``scores`` (status ok) for the listed metrics, per judge fingerprint and window."""
    where = span_condition(traces, p, has_snapshot=False)
    return (
        f"SELECT {OUTER_GROUP}, g_fp AS judge_fingerprint, g_metric AS metric, w, count() AS n_rows, "
        f"{', '.join(_sketch_columns('s', 'value'))} "
        f"FROM (SELECT {INNER_GROUP}, toString(judge_fingerprint) AS g_fp, toString(metric) AS g_metric, value, "
        f"{INDEX} AS w FROM {scores} WHERE {where} AND status = 'ok' AND metric IN {{metrics:Array(String)}}) "
        f"GROUP BY {GROUP_KEYS}, g_fp, g_metric, w"
    )


def chunks_sql(traces: str, corpus: str, p: WindowPlan) -> str:
    """Retrieved chunks per group and window, and how many were served at the newest version the corpus held
    ``{lag:Int64}`` ms before.

    Every (document, version) is known from the earlier of its ``corpus_versions`` publication and the first trace
    that served it. A version is superseded from the time the next newer version became known; only documents with
    more than one known version matter, and ``transform`` looks each chunk's (document, version) up among them as a
    hash table — much faster than joining the exploded chunks back.

    A (document, version) is keyed by ``cityHash64`` of its two strings (``CHUNK_KEY``), as ``question_key`` keys a
    question: two pairs share a key with probability about 2⁻⁶⁴. Grouping the exploded chunks by that key instead of
    the two strings, and looking it up instead of their concatenation, took about 0.5 s off the query at 10 M traces
    (50 M chunks): 2.2–2.6 s against 2.7–3.6 s, the same rows.
    """
    where = span_condition(traces, p, has_snapshot=True)
    known = (f"SELECT any(doc) AS doc, any(ver) AS ver, min(since) AS since FROM ("
             f"SELECT {CHUNK_KEY.format(doc='doc_id', ver='doc_version')} AS k, doc_id AS doc, doc_version AS ver, "
             f"published_at AS since FROM {corpus} WHERE published_at < fromUnixTimestamp64Milli({{hi:Int64}}, 'UTC') "
             f"UNION ALL SELECT {CHUNK_KEY.format(doc='doc', ver='ver')} AS k, doc, ver, ts AS since FROM {traces} "
             f"ARRAY JOIN retrieved_doc_ids AS doc, retrieved_doc_versions AS ver WHERE {SPAN}) GROUP BY k")
    superseded = (
        f"SELECT (groupArray(key), groupArray(at)) FROM ("
        f"SELECT {CHUNK_KEY.format(doc='doc', ver='v.1')} AS key, v.2 AS at FROM ("
        f"SELECT doc, arraySort(x -> x.1, groupArray((ver, since))) AS vs FROM ({known}) GROUP BY doc "
        f"HAVING count() > 1) "
        f"ARRAY JOIN arrayMap(i -> (vs[i].1, arrayMin(arrayMap(j -> toUnixTimestamp64Milli(vs[j].2), "
        f"range(i + 1, length(vs) + 1)))), range(1, length(vs))) AS v)")
    return (
        f"WITH ({superseded}) AS superseded "
        f"SELECT {TRACE_OUTER}, w, sum(length(retrieved_doc_ids)) AS n_rows, "
        f"sum(arrayCount((d, v) -> t - {{lag:Int64}} < transform({CHUNK_KEY.format(doc='d', ver='v')}, superseded.1, "
        f"superseded.2, toInt64(9223372036854775807)), retrieved_doc_ids, retrieved_doc_versions)) AS f0__k "
        f"FROM (SELECT {TRACE_GROUP}, {INDEX} AS w, toUnixTimestamp64Milli(ts) AS t, retrieved_doc_ids, "
        f"retrieved_doc_versions FROM {traces} WHERE {where}) GROUP BY dg, w"
    )


#: the 64-bit key of a retrieved chunk's (document, version) in ``chunks_sql``
CHUNK_KEY = "cityHash64({doc}, {ver})"


def _continuous(row: dict[str, Any], alias: str) -> ContinuousSummary:
    n = int(row[f"{alias}__n"])
    if n == 0:
        return ContinuousSummary.empty()
    sketch = row[f"{alias}__q"]
    # a window without a sketch (``_display_windows``) has NaN at every level: the first says so
    q = tuple(map(float, sketch)) if sketch and math.isfinite(sketch[0]) else ()
    return ContinuousSummary(n, float(row[f"{alias}__mean"]), float(row[f"{alias}__std"]),
                             q if all(map(math.isfinite, q)) else ())


def _group(row: dict[str, Any], fingerprint: str = "") -> Group:
    return Group(str(row["retriever_name"]), str(row["retriever_version"]), str(row["variant"]),
                 str(row["category"]), fingerprint)


def aggregate(store: DriftStore, features: Sequence[Feature], p: WindowPlan, *,
              index_lag_seconds: float = 3600.0, by_query: bool = True,
              sketched: Collection[str] | None = None, clusters: bool = True) -> Windowed:
    """Run the queries these features need; every (group, feature)'s summary per window index (renumbered for
    a pinned reference). ``by_query``: summarise ``Feature.by_query`` features per question (``traces_sql``);
    ``sketched``: the features whose every window needs a quantile sketch (None: all)."""
    params = {**plan_parameters(p), "lag": int(index_lag_seconds * 1000)}
    traces = store.table("traces")
    acc: Windowed = {}

    def put(group: Group, name: str, w: int, summary: Summary) -> None:
        if w > 0 and p.offset:
            w -= p.offset
        if 0 <= w < p.history or (p.pinned and 0 <= w <= p.reference):
            acc.setdefault((group, name), {})[w] = summary

    on_traces = [f for f in features if f.source == "traces"]
    if on_traces:
        rates: dict[tuple[Group, str], dict[int, tuple[int, float, float, float]]] = {}
        cluster_rows: list[dict[str, Any]] = []
        named: dict[int, Group] = {}  # a cluster row carries its group's hash, not its names (``with_cluster_rows``)
        sql = traces_sql(traces, on_traces, p, by_query=by_query, sketched=sketched, clusters=clusters)
        for row in store.query_rows(sql, params):
            w = int(row["w"])
            if w == CLUSTER_ROWS:
                cluster_rows.append(row)
                continue
            g = named.setdefault(int(row["dg"]), _group(row))
            for i, f in enumerate(on_traces):
                if f.kind == "continuous":
                    put(g, f.name, w, _continuous(row, f"f{i}"))
                elif by_query and f.by_query:
                    rates.setdefault((g, f.name), {})[w] = (int(row["n_rows"]), float(row[f"f{i}__k"]),
                                                            float(row[f"f{i}__ka"]), float(row[f"f{i}__dd"]))
                else:
                    put(g, f.name, w, RateSummary(int(row["n_rows"]), int(row[f"f{i}__k"])))
        for (g, name), by_w in rates.items():
            for w, summary in adjusted_rates(by_w, p).items():
                put(g, name, w, summary)
        for row in cluster_rows:  # each has its group's current window among the window rows
            _put_mean_variances(acc, named[int(row["dg"])], row, on_traces)
    chunk_features = [f for f in features if f.source == "chunks"]
    if chunk_features:
        sql = chunks_sql(traces, store.table("corpus_versions"), p)
        for row in store.query_rows(sql, params):
            put(_group(row), chunk_features[0].name, int(row["w"]), RateSummary(int(row["n_rows"]), int(row["f0__k"])))
    on_scores = {f.expr: f.name for f in features if f.source == "scores"}
    if on_scores:
        rows = store.query_rows(scores_sql(store.table("scores"), traces, p), {**params, "metrics": list(on_scores)})
        for row in rows:
            put(_group(row, str(row["judge_fingerprint"])), on_scores[str(row["metric"])], int(row["w"]),
                _continuous(row, "s"))
    return acc


def _put_mean_variances(acc: Windowed, group: Group, row: dict[str, Any], features: Sequence[Feature]) -> None:
    """Give the current window's summary of each clustered feature (``cluster_sums`` in ``row``) its clustered
    ``mean_var``."""
    for i, f in enumerate(features):
        current = acc.get((group, f.name), {}).get(0)
        if f"f{i}__ss" not in row or not isinstance(current, ContinuousSummary) or current.n == 0:
            continue
        mv = clustered_mean_variance(current.n, current.mean, float(row[f"f{i}__ss"]), float(row[f"f{i}__ns"]),
                                     float(row[f"f{i}__nn"]))
        acc[(group, f.name)][0] = dataclasses.replace(current, mean_var=mv if math.isfinite(mv) else None)


def adjusted_rates(by_w: dict[int, tuple[int, float, float, float]], p: WindowPlan) -> dict[int, RateSummary]:
    """A rate adjusted for the question, per window (index as the query returned it): (traces, count as served,
    adjusted count, Σ d²) → ``RateSummary(n, adjusted count, var)``, d = level(q) − M a trace's delta (0 for a
    question not seen twice), M the share over the reference windows (the group mean the levels were taken
    against). ``var = Σ level(q)(1 − level(q)) = n·M(1 − M) + Σ ((d + M)(1 − d − M) − M(1 − M))
    = n·M(1 − M) + (1 − 2M)·Σ d − Σ d²``, with Σ d = count as served − adjusted count: the query returns one sum per
    trace's delta instead of a second column of variances to carry through the join. No reference traffic: the
    counts as served (nothing was adjusted)."""
    reference = [w - p.offset if w > 0 and p.offset else w for w in by_w]
    trials = hits = 0.0
    for w, (n, k, _, _) in zip(reference, by_w.values(), strict=True):
        if 1 <= w <= p.reference:
            trials, hits = trials + n, hits + k
    if trials <= 0:
        return {w: RateSummary(n, _whole(k)) for w, (n, k, _, _) in by_w.items()}
    m = hits / trials
    return {w: RateSummary(n, ka, max(0.0, n * m * (1 - m) + (1 - 2 * m) * (k - ka) - dd))
            for w, (n, k, ka, dd) in by_w.items()}


def _whole(k: float) -> float:
    return float(round(k)) if abs(k - round(k)) < 1e-9 else k


def to_series(by_window: dict[int, Summary], kind: str, length: int) -> Series:
    """A feature's per-window summaries as a ``Series`` of ``length`` windows (empty where absent)."""
    empty: Summary = ContinuousSummary.empty() if kind == "continuous" else RateSummary(0, 0)
    return Series.from_summaries([by_window.get(w, empty) for w in range(length)])
