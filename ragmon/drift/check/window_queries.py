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


_INDEX = "intDiv({end:Int64} - 1 - toUnixTimestamp64Milli(ts), {win:Int64})"
_SPAN = "ts >= fromUnixTimestamp64Milli({lo:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({hi:Int64}, 'UTC')"
_CURRENT = "ts >= fromUnixTimestamp64Milli({cs:Int64}, 'UTC')"
#: the reference's time range (a pinned reference's rows; a trailing reference's question levels)
_REFERENCE_RANGE = ("ts >= fromUnixTimestamp64Milli({rs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({re:Int64}, "
                    "'UTC')")
# Grouping by four LowCardinality columns took 3× longer in chDB than grouping by their String values
# (0.9 s vs 0.3 s for 2.3 M rows), so the inner queries cast them and the outer ones rename them back.
_INNER_GROUP = ("toString(retriever_name) AS g_rn, toString(retriever_version) AS g_rv, toString(variant) AS g_var, "
                "toString(category) AS g_cat")
_OUTER_GROUP = "g_rn AS retriever_name, g_rv AS retriever_version, g_var AS variant, g_cat AS category"
_GROUP_KEYS = "g_rn, g_rv, g_var, g_cat"


def span_condition(traces: str, p: WindowPlan, *, has_snapshot: bool) -> str:
    """Which rows a check reads: the whole history (trailing), or the current window and the pinned range."""
    if not p.pinned:
        return _SPAN
    pinned = _REFERENCE_RANGE
    if p.windows.reference.corpus_snapshot:
        pinned += (" AND corpus_snapshot = {snapshot:String}" if has_snapshot else
                   f" AND trace_id IN (SELECT trace_id FROM {traces} WHERE corpus_snapshot = {{snapshot:String}} "
                   f"AND {_REFERENCE_RANGE})")
    return f"{_SPAN} AND ({_CURRENT} OR ({pinned}))"


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


#: a question counts for the levels of the other parity's windows once asked this often in this parity's windows
MIN_ASKS = 2
#: a rate's question level is shrunk towards its group's share by this many asks (``by_query.RATE_PRIOR_ASKS``)
RATE_PRIOR_ASKS = 0.5
#: a trace without a question (an empty one, e.g. a span that did not record its input) has no level
_ASKED = "question_hash != cityHash64('')"


def _question_key(parity: str) -> str:
    """The 64-bit join key of a (drift group, question, window parity): both hashes are already uniform 64-bit
    (cityHash64 at insert), so their XOR, shifted to make room for the parity bit, keys them as well as hashing the
    three again would (two (group, question) pairs share a key with probability 2⁻⁶³, as with any 64-bit hash), and
    costs less: 0.3 s of a check over 10 M traces, where each trace is keyed once for the levels and once for the
    lookup."""
    return f"bitXor(question_hash, drift_group) * 2 + toUInt64({parity})"


def _levels_sql(traces: str, features: Sequence[tuple[int, Feature]], where: str) -> str:
    """The reference levels as one row set to join, per (group, question, window parity) for questions asked at
    least ``MIN_ASKS`` times: ``lv_key`` and ``lv_d{i}``, the question's level less its group's mean (0 where the
    question has fewer than ``MIN_ASKS`` finite values of that feature); a rate's level is shrunk towards the group's
    share by ``RATE_PRIOR_ASKS`` asks. The group means join the levels, not the traces: one join of the traces instead
    of two (0.2–0.3 s of 6 at 10 M traces).

    Each parity is aggregated apart, on one thread (``_PARITY_SETTINGS``), the two side by side. Aggregated together
    on two threads, each thread's hash table held nearly every (group, question, parity) key: at 10 M traces (2 M keys)
    the aggregation needed about 700 MB, past half the default 1 GiB budget, and spilled to disk (2.5 s of a 7 s
    check). Apart, the keys of the two aggregations are disjoint: about 350 MB, no spill, for a second read of the
    reference's rows (0.3–0.5 s)."""
    values = ", ".join(f"toFloat64({f.expr}) AS r{i}" for i, f in features)
    rows = f"SELECT drift_group AS g, {{key}} {values} FROM {traces} WHERE {where} AND {_REFERENCE_RANGE}"
    group = rows.replace("{key}", "")
    # a value that is always finite (a count, a rate, latency, cost) needs no count of its own: one count() serves
    means = ", ".join(f"avg(r{i}) AS gm{i}" if f.always_finite else f"avgIf(r{i}, isFinite(r{i})) AS gm{i}"
                      for i, f in features)
    sums = ", ".join(["count() AS c_all", *(f"sum(r{i}) AS s{i}" if f.always_finite else
                                            f"countIf(isFinite(r{i})) AS c{i}, sumIf(r{i}, isFinite(r{i})) AS s{i}"
                                            for i, f in features)])
    counts = {i: "c_all" if f.always_finite else f"c{i}" for i, f in features}
    keep = " OR ".join(sorted({f"{counts[i]} >= {MIN_ASKS}" for i, _ in features}))
    deltas = []
    for i, f in features:
        c = counts[i]
        if f.kind == "rate":
            level = f"((s{i} + {RATE_PRIOR_ASKS!r} * gm{i}) / ({c} + {RATE_PRIOR_ASKS!r}))"
            deltas.append(f"if({c} >= {MIN_ASKS}, {level} - gm{i}, 0) AS lv_d{i}")
        else:
            deltas.append(f"if({c} >= {MIN_ASKS}, s{i} / {c} - gm{i}, 0) AS lv_d{i}")

    def parity(p: int) -> str:
        question = (rows.replace("{key}", f"{_question_key(str(p))} AS key,")
                    + f" AND {_ASKED} AND {_INDEX} % 2 = {p}")
        return f"SELECT any(g) AS g, key, {sums} FROM ({question}) GROUP BY key HAVING {keep} {_PARITY_SETTINGS}"

    # ALL, not ANY: an ANY INNER JOIN keeps one left row per key (here: one question per group)
    return (f"SELECT key AS lv_key, {', '.join(deltas)} FROM ({parity(0)} UNION ALL {parity(1)}) AS l "
            f"ALL INNER JOIN (SELECT g, {means} FROM ({group}) GROUP BY g) AS m USING g")


#: the settings of each parity's aggregation of the question levels (``_levels_sql``): a subquery's SETTINGS apply to
#: that subquery only
_PARITY_SETTINGS = "SETTINGS max_threads = 1"


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
    inner = [_INNER_GROUP, f"{_INDEX} AS w"]
    middle = [_GROUP_KEYS, "w"]
    outer = [_OUTER_GROUP, "w", "count() AS n_rows"]
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
    rows = f"SELECT {', '.join(inner)} FROM {traces} WHERE {where}"
    if adjusted:
        inner.append(f"if({_ASKED}, {_question_key(f'({_INDEX} + 1) % 2')}, 0) AS question")
        rows = f"SELECT {', '.join(inner)} FROM {traces} WHERE {where}"
        if clustered:
            rows = _with_cluster_rows(traces, rows, inner, features, adjusted_at, clustered, where)
            middle.extend(f"m{i}" for i in clustered)
            outer.extend(_cluster_sums(clustered))
        rows = (f"SELECT {', '.join(middle)} FROM ({rows}) AS t "
                f"ALL LEFT JOIN ({_levels_sql(traces, adjusted, where)}) AS lv ON question = lv_key")
    return f"SELECT {', '.join(outer)} FROM ({rows}) GROUP BY {_GROUP_KEYS}, w"


#: the window index of the rows that carry the current window's clusters (``_with_cluster_rows``)
CLUSTER_ROWS = -1


def _with_cluster_rows(table: str, rows: str, inner: Sequence[str], features: Sequence[Feature],
                       adjusted: Collection[int], clustered: Sequence[int], where: str) -> str:
    """The traces' rows and, with window index ``CLUSTER_ROWS``, one row per (group, cluster) of the current window
    for the clustered variance: a cluster is a question (a trace without one is a cluster of its own), its row
    carries the sum ``v{i}`` of its finite values of each clustered feature and their count ``m{i}`` (NaN and 0 for
    the other features). The level join then adjusts a cluster's sum as it adjusts its traces (``traces_sql``).

    Summed per question in the engine's hash aggregation: a ``sumMap`` over the current window's rows (an ordered
    map of generic values) took 1.1–1.7 s of a check over 10 M traces; this, about 0.3 s."""
    names = [*(c.rsplit(" AS ", 1)[1] for c in _INNER_GROUP.split(", ")), "w",
             *(f"v{i}" for i in range(len(features))), "question"]
    traces = [*names, *(f"toFloat64(1) AS m{i}" for i in clustered)]
    clusters = [*names[:4], f"toInt64({CLUSTER_ROWS}) AS w"]
    for i, f in enumerate(features):
        if i in clustered:
            clusters.append(f"c_v{i} AS v{i}")
        elif f.kind == "continuous":
            clusters.append(f"nan AS v{i}")
        else:  # a rate: as its traces' column is typed (``traces_sql``)
            clusters.append(f"toFloat64(0) AS v{i}" if i in adjusted else f"toUInt8(0) AS v{i}")
    clusters.extend(["c_question AS question", *(f"toFloat64(c_m{i}) AS m{i}" for i in clustered)])
    sums = [*(f"sumIf(v{i}, isFinite(v{i})) AS c_v{i}, countIf(isFinite(v{i})) AS c_m{i}" for i in clustered),
            "any(question) AS c_question"]
    current = (f"SELECT {', '.join(inner)}, if(question = 0, cityHash64(trace_id), question) AS cluster "
               f"FROM {table} WHERE {where} AND {_CURRENT}")
    return (f"SELECT {', '.join(traces)} FROM ({rows}) UNION ALL "
            f"SELECT {', '.join(clusters)} FROM (SELECT {_GROUP_KEYS}, {', '.join(sums)} FROM ({current}) "
            f"GROUP BY {_GROUP_KEYS}, cluster)")


def _cluster_sums(clustered: Sequence[int]) -> list[str]:
    """Per clustered feature, over the cluster rows of the current window (``_with_cluster_rows``), each with the
    adjusted sum ``S_q`` and count ``n_q`` of its question's finite values: ``Σ S_q²``, ``Σ n_q S_q`` and ``Σ n_q²``,
    from which ``clustered_mean_variance`` computes the variance of the window's mean."""
    on = f"w = {CLUSTER_ROWS}"
    return [column for i in clustered for column in (
        f"sumIf(v{i} * v{i}, {on}) AS f{i}__ss", f"sumIf(m{i} * v{i}, {on}) AS f{i}__ns",
        f"sumIf(m{i} * m{i}, {on}) AS f{i}__nn")]


def clustered_mean_variance(n: int, mean: float, ss: float, ns: float, nn: float) -> float:
    """The variance of a window's mean with its questions as clusters, ``Σ_q (S_q − n_q x̄)² / n²`` =
    ``(Σ S_q² − 2 x̄ Σ n_q S_q + x̄² Σ n_q²) / n²`` (``summary.clustered_variance``), from the sums ``_cluster_sums``
    returns; NaN for an empty window."""
    if n <= 0:
        return math.nan
    return max(0.0, (ss - 2 * mean * ns + mean * mean * nn) / (n * n))


def scores_sql(scores: str, traces: str, p: WindowPlan) -> str:
    """One aggregation over ``scores`` (status ok) for the listed metrics, per judge fingerprint and window."""
    where = span_condition(traces, p, has_snapshot=False)
    return (
        f"SELECT {_OUTER_GROUP}, g_fp AS judge_fingerprint, g_metric AS metric, w, count() AS n_rows, "
        f"{', '.join(_sketch_columns('s', 'value'))} "
        f"FROM (SELECT {_INNER_GROUP}, toString(judge_fingerprint) AS g_fp, toString(metric) AS g_metric, value, "
        f"{_INDEX} AS w FROM {scores} WHERE {where} AND status = 'ok' AND metric IN {{metrics:Array(String)}}) "
        f"GROUP BY {_GROUP_KEYS}, g_fp, g_metric, w"
    )


def chunks_sql(traces: str, corpus: str, p: WindowPlan) -> str:
    """Retrieved chunks per group and window, and how many were served at the newest version the corpus held
    ``{lag:Int64}`` ms before.

    Every (document, version) is known from the earlier of its ``corpus_versions`` publication and the first trace
    that served it. A version is superseded from the time the next newer version became known; only documents with
    more than one known version matter, and ``transform`` looks each chunk's (document, version) up among them as a
    hash table — much faster than joining the exploded chunks back.
    """
    where = span_condition(traces, p, has_snapshot=True)
    known = (f"SELECT doc, ver, min(since) AS since FROM ("
             f"SELECT doc_id AS doc, doc_version AS ver, published_at AS since FROM {corpus} "
             f"WHERE published_at < fromUnixTimestamp64Milli({{hi:Int64}}, 'UTC') "
             f"UNION ALL SELECT doc, ver, ts AS since FROM {traces} ARRAY JOIN retrieved_doc_ids AS doc, "
             f"retrieved_doc_versions AS ver WHERE {_SPAN}) GROUP BY doc, ver")
    superseded = (
        f"SELECT (groupArray(key), groupArray(at)) FROM ("
        f"SELECT concat(doc, '\\0', v.1) AS key, v.2 AS at FROM ("
        f"SELECT doc, arraySort(x -> x.1, groupArray((ver, since))) AS vs FROM ({known}) GROUP BY doc "
        f"HAVING count() > 1) "
        f"ARRAY JOIN arrayMap(i -> (vs[i].1, arrayMin(arrayMap(j -> toUnixTimestamp64Milli(vs[j].2), "
        f"range(i + 1, length(vs) + 1)))), range(1, length(vs))) AS v)")
    return (
        f"WITH ({superseded}) AS superseded "
        f"SELECT {_OUTER_GROUP}, w, sum(length(retrieved_doc_ids)) AS n_rows, "
        f"sum(arrayCount((d, v) -> t - {{lag:Int64}} < transform(concat(d, '\\0', v), superseded.1, superseded.2, "
        f"toInt64(9223372036854775807)), retrieved_doc_ids, retrieved_doc_versions)) AS f0__k "
        f"FROM (SELECT {_INNER_GROUP}, {_INDEX} AS w, toUnixTimestamp64Milli(ts) AS t, retrieved_doc_ids, "
        f"retrieved_doc_versions FROM {traces} WHERE {where}) GROUP BY {_GROUP_KEYS}, w"
    )


def _continuous(row: dict[str, Any], alias: str) -> ContinuousSummary:
    n = int(row[f"{alias}__n"])
    if n == 0:
        return ContinuousSummary.empty()
    q = tuple(float(v) for v in row[f"{alias}__q"])
    return ContinuousSummary(n, float(row[f"{alias}__mean"]), float(row[f"{alias}__std"]),
                             q if all(math.isfinite(v) for v in q) else ())  # no sketch in this window


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
        sql = traces_sql(traces, on_traces, p, by_query=by_query, sketched=sketched, clusters=clusters)
        for row in store.query_rows(sql, params):
            g, w = _group(row), int(row["w"])
            if w == CLUSTER_ROWS:
                cluster_rows.append(row)
                continue
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
        for row in cluster_rows:
            _put_mean_variances(acc, _group(row), row, on_traces)
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
    """Give the current window's summary of each clustered feature (``_cluster_sums`` in ``row``) its clustered
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
