"""The drift SQL: ClickHouse aggregates both windows of every group in one pass per source.

Per (group, window) and feature it returns a count, mean, standard deviation and a t-digest quantile sketch
at ``LEVELS`` (continuous features) or successes/trials (rates) — a few hundred numbers per group whatever
the traffic, so a check over millions of traces moves kilobytes, and on a cluster the sketches merge across
shards. Values always travel as ``{name:Type}`` parameters; the only text formatted into SQL is table names
(``store.table``), feature expressions and quantile levels, all code constants.

Duplicates of a re-delivered trace are not collapsed (no FINAL): they are rare and do not move a
distribution, and FINAL would multiply the cost of a scan over days of traffic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragmon.drift.features import Feature
from ragmon.drift.summary import LEVELS, ContinuousSummary, RateSummary, Summary
from ragmon.drift.windows import Windows

_LEVELS_SQL = ",".join(f"{level:g}" for level in LEVELS)


class QueryStore(Protocol):
    """What the drift queries need from a store (``ClickHouseStore`` satisfies it)."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]], column_names: Sequence[str]) -> int: ...


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


#: (group, feature name) → (reference summary, current summary)
Aggregates = dict[tuple[Group, str], tuple[Summary, Summary]]


def window_parameters(windows: Windows) -> dict[str, Any]:
    ref, cur = windows.reference, windows.current
    lo, hi = windows.span
    ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731
    return {
        "lo": ms(lo), "hi": ms(hi), "cs": ms(cur.start), "ce": ms(cur.end), "rs": ms(ref.start), "re": ms(ref.end),
        "anchor": ms(ref.slice_anchor) if ref.slice_anchor else 0,
        "slice": (ref.slice_seconds or 0) * 1000,
        "snapshot": ref.corpus_snapshot or "",
    }


def window_expr(traces: str, *, has_snapshot: bool, pinned_snapshot: bool = False) -> str:
    """w = 1 current, 0 reference, 2 neither. Current wins where a pinned reference overlaps it.

    ``has_snapshot``: the source table has a corpus_snapshot column (traces); ``pinned_snapshot``: the reference
    is pinned to a corpus snapshot (otherwise no snapshot condition is generated at all).
    """
    snapshot = ""
    if pinned_snapshot and has_snapshot:
        snapshot = " AND corpus_snapshot = {snapshot:String}"
    elif pinned_snapshot:
        snapshot = (f" AND trace_id IN (SELECT trace_id FROM {traces} WHERE corpus_snapshot = {{snapshot:String}}"
                    " AND ts >= fromUnixTimestamp64Milli({rs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({re:Int64}, 'UTC'))")
    return (
        "multiIf(ts >= fromUnixTimestamp64Milli({cs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({ce:Int64}, 'UTC'), 1,"
        " ts >= fromUnixTimestamp64Milli({rs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({re:Int64}, 'UTC')"
        " AND ({slice:Int64} = 0 OR positiveModulo(toUnixTimestamp64Milli(ts) - {anchor:Int64}, 86400000) < {slice:Int64})"
        f"{snapshot}, 0, 2)"
    )


_SPAN = "ts >= fromUnixTimestamp64Milli({lo:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({hi:Int64}, 'UTC')"
# Grouping by four LowCardinality columns took 3× longer in chDB than grouping by their String values
# (0.9 s vs 0.3 s for 2.3 M rows), so the inner queries cast them and the outer ones rename them back.
_INNER_GROUP = ("toString(retriever_name) AS g_rn, toString(retriever_version) AS g_rv, toString(variant) AS g_var, "
                "toString(category) AS g_cat")
_OUTER_GROUP = "g_rn AS retriever_name, g_rv AS retriever_version, g_var AS variant, g_cat AS category"
_GROUP_KEYS = "g_rn, g_rv, g_var, g_cat"


def _sketch_columns(alias: str, value: str) -> list[str]:
    ok = f"isFinite({value})"
    return [
        f"countIf({ok}) AS {alias}__n",
        f"avgIf({value}, {ok}) AS {alias}__mean",
        f"stddevPopIf({value}, {ok}) AS {alias}__std",
        f"quantilesTDigestIf({_LEVELS_SQL})({value}, {ok}) AS {alias}__q",
    ]


def traces_sql(traces: str, features: Sequence[Feature], *, pinned_snapshot: bool = False) -> str:
    """One aggregation over ``traces`` for every traces-sourced feature."""
    inner = [_INNER_GROUP, f"{window_expr(traces, has_snapshot=True, pinned_snapshot=pinned_snapshot)} AS w"]
    outer = [_OUTER_GROUP, "w", "count() AS n_rows"]
    for i, f in enumerate(features):
        if f.kind == "continuous":
            inner.append(f"toFloat64({f.expr}) AS v{i}")
            outer.extend(_sketch_columns(f"f{i}", f"v{i}"))
        else:
            inner.append(f"toUInt8({f.expr}) AS v{i}")
            outer.append(f"sum(v{i}) AS f{i}__k")
    return (f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM {traces} WHERE {_SPAN}) "
            f"WHERE w < 2 GROUP BY {_GROUP_KEYS}, w")


def scores_sql(scores: str, traces: str, *, pinned_snapshot: bool = False) -> str:
    """One aggregation over ``scores`` (status ok) for the listed metrics, per judge fingerprint."""
    value = "value"
    return (
        f"SELECT {_OUTER_GROUP}, g_fp AS judge_fingerprint, g_metric AS metric, w, count() AS n_rows, "
        f"{', '.join(_sketch_columns('s', value))} "
        f"FROM (SELECT {_INNER_GROUP}, toString(judge_fingerprint) AS g_fp, toString(metric) AS g_metric, value, "
        f"{window_expr(traces, has_snapshot=False, pinned_snapshot=pinned_snapshot)} AS w "
        f"FROM {scores} WHERE {_SPAN} AND status = 'ok' AND metric IN {{metrics:Array(String)}}) "
        f"WHERE w < 2 GROUP BY {_GROUP_KEYS}, g_fp, g_metric, w"
    )


def chunks_sql(traces: str, *, pinned_snapshot: bool = False) -> str:
    """Retrieved chunks per group and window, and how many come from their document's newest version.

    The newest version per document (over both windows) is a scalar subquery; ``transform`` then looks each
    chunk's document up in it as a hash table — twice as fast as joining the exploded chunks back.
    """
    w = window_expr(traces, has_snapshot=True, pinned_snapshot=pinned_snapshot)
    newest = (f"SELECT (groupArray(doc), groupArray(newest)) FROM (SELECT doc, max(ver) AS newest FROM "
              f"(SELECT {w} AS w, doc, ver FROM {traces} ARRAY JOIN retrieved_doc_ids AS doc, "
              f"retrieved_doc_versions AS ver WHERE {_SPAN}) WHERE w < 2 GROUP BY doc)")
    return (
        f"WITH ({newest}) AS newest_by_doc "
        f"SELECT {_OUTER_GROUP}, w, sum(length(retrieved_doc_ids)) AS n_rows, "
        f"sum(arrayCount((d, v) -> v = transform(d, newest_by_doc.1, newest_by_doc.2, ''), "
        f"retrieved_doc_ids, retrieved_doc_versions)) AS f0__k "
        f"FROM (SELECT {_INNER_GROUP}, {w} AS w, retrieved_doc_ids, retrieved_doc_versions FROM {traces} "
        f"WHERE {_SPAN}) WHERE w < 2 GROUP BY {_GROUP_KEYS}, w"
    )


def _continuous(row: dict[str, Any], alias: str) -> ContinuousSummary:
    n = int(row[f"{alias}__n"])
    if n == 0:
        return ContinuousSummary.empty()
    return ContinuousSummary(n, float(row[f"{alias}__mean"]), float(row[f"{alias}__std"]),
                             tuple(float(v) for v in row[f"{alias}__q"]))


def _empty(kind: str) -> Summary:
    return ContinuousSummary.empty() if kind == "continuous" else RateSummary(0, 0)


def _pair(acc: dict[tuple[Group, str], dict[int, Summary]], kinds: dict[str, str]) -> Aggregates:
    out: Aggregates = {}
    for (group, name), by_w in acc.items():
        out[(group, name)] = (by_w.get(0, _empty(kinds[name])), by_w.get(1, _empty(kinds[name])))
    return out


def _group(row: dict[str, Any], fingerprint: str = "") -> Group:
    return Group(str(row["retriever_name"]), str(row["retriever_version"]), str(row["variant"]),
                 str(row["category"]), fingerprint)


def aggregate(store: QueryStore, features: Sequence[Feature], windows: Windows) -> Aggregates:
    """Run the queries these features need over ``windows``; both windows' summaries per (group, feature)."""
    params = window_parameters(windows)
    pinned = windows.reference.corpus_snapshot is not None
    traces = store.table("traces")
    acc: dict[tuple[Group, str], dict[int, Summary]] = {}
    kinds = {f.name: f.kind for f in features}
    on_traces = [f for f in features if f.source == "traces"]
    if on_traces:
        for row in store.query_rows(traces_sql(traces, on_traces, pinned_snapshot=pinned), params):
            g = _group(row)
            for i, f in enumerate(on_traces):
                s = (_continuous(row, f"f{i}") if f.kind == "continuous"
                     else RateSummary(int(row["n_rows"]), int(row[f"f{i}__k"])))
                acc.setdefault((g, f.name), {})[int(row["w"])] = s
    if any(f.source == "chunks" for f in features):
        name = next(f.name for f in features if f.source == "chunks")
        for row in store.query_rows(chunks_sql(traces, pinned_snapshot=pinned), params):
            acc.setdefault((_group(row), name), {})[int(row["w"])] = RateSummary(int(row["n_rows"]), int(row["f0__k"]))
    on_scores = {f.expr: f.name for f in features if f.source == "scores"}
    if on_scores:
        rows = store.query_rows(scores_sql(store.table("scores"), traces, pinned_snapshot=pinned), {**params, "metrics": list(on_scores)})
        for row in rows:
            g = _group(row, str(row["judge_fingerprint"]))
            acc.setdefault((g, on_scores[str(row["metric"])]), {})[int(row["w"])] = _continuous(row, "s")
    return _pair(acc, kinds)
