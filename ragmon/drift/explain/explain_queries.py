"""The SQL of ``drift explain``: one pass over one group's traces that summarises a feature per (dimension,
segment, window) — count, sum, sum of squares — for the reference and current windows of a drift check.

The dimensions are the fields every trace carries that a change can hide in (``DIMENSIONS``; the expressions are
code constants). Each trace is counted once per dimension (``arrayJoin`` over the dimensions), the rows are
grouped by (dimension, segment, window) and only the ``MAX_SEGMENTS`` busiest segments of each dimension and
window come back, each with its window's totals (one query); the rest is summed into ``(other)`` from the
totals. Question types come from the ``question_types`` table (the score role classifies the traces it scores;
the others are ``(not classified)``). Values travel as ``{name:Type}`` parameters; nothing from a trace is
formatted into SQL.

Which traces: the group's (retriever name and version, variant, stratum), in the current window of the check's
window plan and in its reference windows — with ``same_hours``, the windows at the current one's time of day
(window index a multiple of the plan's period), as the check compares them; a pinned reference, its range (and
corpus snapshot). Reads through the drift ``DriftStore``; must not decide anything.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ragmon.drift.check.queries import DriftStore
from ragmon.drift.check.window_queries import Group, plan_parameters
from ragmon.drift.explain.explain import Moments, SegmentInput
from ragmon.drift.method.features import Feature
from ragmon.drift.method.windows import WindowPlan

#: segments per dimension and window returned by ClickHouse; the rest is summed into OTHER
MAX_SEGMENTS = 200
OTHER = "(other)"
_TOP_DOC = "if(length(retrieved_doc_ids) > 0, retrieved_doc_ids[1], '')"


@dataclass(frozen=True, slots=True)
class Dimension:
    """A field a trace carries, as a SQL expression (String), and what it means."""

    name: str
    expr: str
    description: str


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("document", _TOP_DOC, "the top-ranked retrieved document"),
    Dimension("source", f"if(attributes['source'] != '', attributes['source'], "
              f"if(position({_TOP_DOC}, '/') > 0, substring({_TOP_DOC}, 1, position({_TOP_DOC}, '/') - 1), ''))",
              "the top document's source: attributes['source'], else its id up to the first '/' (kb/refund-12 → kb)"),
    Dimension("corpus_snapshot", "toString(corpus_snapshot)", "the corpus snapshot served"),
    Dimension("index_version", "toString(index_version)", "the index version served"),
    Dimension("retriever_params", "retriever_params", "the retriever's parameters (k, fusion weights, …) as sent"),
    Dimension("reranker", "JSONExtractString(retriever_params, 'reranker')", "retriever_params.reranker"),
    Dimension("model", "concat(toString(model_name), '@', toString(model_version))", "model name@version"),
    Dimension("prompt", "concat(toString(prompt_id), '@', toString(prompt_version))", "prompt id@version"),
    Dimension("question_type", "qt_type", "the question type the score role classified (question_types)"),
    Dimension("question", "toString(question_hash)", "the question asked (normalised text), popular ones apart"),
    Dimension("tenant", "toString(tenant)", "the tenant"),
    Dimension("source_before", "src_before", "where the question was answered from in the reference (its most "
              "frequent top-document source there); questions not asked in the reference are left out"),
)


@dataclass(frozen=True, slots=True)
class Summaries:
    """Per dimension, its segments' moments in both windows; and the windows' totals."""

    dimensions: dict[str, list[SegmentInput]]
    reference: Moments
    current: Moments


def window_condition(p: WindowPlan) -> tuple[str, str]:
    """(the current window, the reference windows) as SQL conditions on ``ts`` over ``plan_parameters``."""
    current = ("ts >= fromUnixTimestamp64Milli({cs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({end:Int64}, "
               "'UTC')")
    if p.pinned:
        reference = ("ts >= fromUnixTimestamp64Milli({rs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({re:Int64}, "
                     "'UTC') AND ts < fromUnixTimestamp64Milli({cs:Int64}, 'UTC')")
        if p.windows.reference.corpus_snapshot:
            reference += " AND corpus_snapshot = {snapshot:String}"
        return current, reference
    index = "intDiv({end:Int64} - 1 - toUnixTimestamp64Milli(ts), {win:Int64})"
    reference = (f"ts >= fromUnixTimestamp64Milli({{lo:Int64}}, 'UTC') AND ts < fromUnixTimestamp64Milli({{cs:Int64}}, "
                 f"'UTC') AND {index} BETWEEN 1 AND {{nref:Int64}} AND {index} % {{period:Int64}} = 0")
    return current, reference


#: the dimensions whose segments come from the joins (question types, where a question was answered before)
_JOINED = ("qt_type", "src_before")
#: the marker of a trace a dimension leaves out (``source_before`` of a question not asked in the reference)
_SKIP = "\\0skip"


def _inner_sql(traces: str, question_types: str, feature: Feature, p: WindowPlan) -> str:
    """Rows (v, cur, d = (dimension index, segment, label)) of one group's finite ``feature`` values: one row per
    trace and dimension."""
    current, reference = window_condition(p)
    group = ("retriever_name = {rn:String} AND retriever_version = {rv:String} AND variant = {var:String} "
             "AND category = {cat:String}")
    source = next(d.expr for d in DIMENSIONS if d.name == "source")
    # each dimension's segment is computed once per trace, before the joins, which then carry short strings rather
    # than the trace's maps, arrays and question text
    own = ", ".join(f"toString({d.expr}) AS d{i}" for i, d in enumerate(DIMENSIONS) if d.expr not in _JOINED)
    rows = (f"SELECT trace_id, toFloat64({feature.expr}) AS v, ({current}) AS cur, question_hash, "
            f"substringUTF8(question, 1, 200) AS question_start, {own} FROM {traces} "
            f"WHERE {group} AND (({current}) OR ({reference})) AND isFinite(v)")
    types = (f"SELECT trace_id, argMax(toString(question_type), classified_at) AS qt_type FROM {question_types} "
             f"WHERE status = 'ok' AND retriever_name = {{rn:String}} AND variant = {{var:String}} "
             f"AND category = {{cat:String}} AND ts >= fromUnixTimestamp64Milli({{lo:Int64}}, 'UTC') "
             f"AND ts < fromUnixTimestamp64Milli({{end:Int64}}, 'UTC') GROUP BY trace_id")
    # where each question was answered from in the reference: its most frequent top-document source there
    before = (f"SELECT question_hash AS qh, topK(1)({source})[1] AS src_before FROM {traces} "
              f"WHERE {group} AND ({reference}) AND question_hash != cityHash64('') GROUP BY qh")
    joined = (f"SELECT t.*, if(q.qt_type = '', '(not classified)', q.qt_type) AS qt_type, "
              f"if(b.qh = 0, '{_SKIP}', b.src_before) AS src_before FROM ({rows}) AS t "
              f"ANY LEFT JOIN ({types}) AS q ON t.trace_id = q.trace_id "
              f"ANY LEFT JOIN ({before}) AS b ON t.question_hash = b.qh")
    dims = ", ".join(f"tuple({i}, {f'toString({d.expr})' if d.expr in _JOINED else f'd{i}'}, "
                     f"{'question_start' if d.name == 'question' else chr(39) * 2})" for i, d in enumerate(DIMENSIONS))
    return (f"SELECT v, cur, d FROM (SELECT v, cur, arrayJoin([{dims}]) AS d FROM ({joined})) "
            f"WHERE d.2 != '{_SKIP}'")


def explain_sql(traces: str, question_types: str, feature: Feature, p: WindowPlan) -> str:
    """One aggregation per (dimension, segment, window) — the busiest ``MAX_SEGMENTS`` of each dimension and window —
    with the moments of every trace the dimension counts in that window alongside (``total_*``, a window function
    over the same aggregation: one pass over the traces, not a second one for the totals)."""
    segments = (f"SELECT d.1 AS dim, d.2 AS seg, cur, count() AS n, sum(v) AS s, sum(v * v) AS ss, "
                f"substringUTF8(any(d.3), 1, 200) AS label FROM ({_inner_sql(traces, question_types, feature, p)}) "
                f"GROUP BY dim, seg, cur")
    return (f"SELECT dim, seg, cur, n, s, ss, label, total_n, total_s, total_ss FROM (SELECT *, "
            f"sum(n) OVER w AS total_n, sum(s) OVER w AS total_s, sum(ss) OVER w AS total_ss, "
            f"row_number() OVER (w ORDER BY n DESC) AS rank FROM ({segments}) WINDOW w AS (PARTITION BY dim, cur)) "
            f"WHERE rank <= {MAX_SEGMENTS} ORDER BY dim, cur, n DESC")


def parameters(group: Group, p: WindowPlan) -> dict[str, Any]:
    params = plan_parameters(p)
    # the reference windows the check compares (trailing): with same_hours, those at the current hour of day
    params.update(nref=p.reference, period=max(1, p.period))
    params.update(rn=group.retriever_name, rv=group.retriever_version, var=group.variant, cat=group.stratum)
    return params


def summarise(store: DriftStore, feature: Feature, group: Group, p: WindowPlan) -> Summaries:
    """Query ClickHouse; ``StoreError`` when it cannot answer."""
    if feature.source != "traces":
        raise ValueError(f"drift explain decomposes features of the traces; {feature.name} comes from {feature.source}")
    tables = (store.table("traces"), store.table("question_types"), feature, p)
    params = parameters(group, p)
    per: dict[str, dict[str, dict[int, Moments]]] = defaultdict(lambda: defaultdict(dict))
    labels: dict[tuple[str, str], str] = {}
    totals: dict[str, dict[int, Moments]] = defaultdict(lambda: {0: Moments(), 1: Moments()})
    for row in store.query_rows(explain_sql(*tables), params):
        name, cur = DIMENSIONS[int(row["dim"])].name, int(bool(row["cur"]))
        per[name][str(row["seg"])][cur] = Moments(int(row["n"]), float(row["s"]), float(row["ss"]))
        labels[(name, str(row["seg"]))] = str(row["label"] or "")
        totals[name][cur] = Moments(int(row["total_n"]), float(row["total_s"]), float(row["total_ss"]))
    out: dict[str, list[SegmentInput]] = {}
    for d in DIMENSIONS:
        segs = per.get(d.name, {})
        inputs = [SegmentInput(value, w.get(0, Moments()), w.get(1, Moments()), labels.get((d.name, value), ""))
                  for value, w in segs.items()]
        other = [_minus(totals[d.name][k], [s.current if k else s.reference for s in inputs]) for k in (0, 1)]
        if other[0].n or other[1].n:
            inputs.append(SegmentInput(OTHER, other[0], other[1], "traffic outside the busiest segments"))
        out[d.name] = inputs
    everything = totals[DIMENSIONS[0].name]
    return Summaries(out, everything[0], everything[1])


def _minus(total: Moments, parts: list[Moments]) -> Moments:
    n = total.n - sum(m.n for m in parts)
    if n <= 0:
        return Moments()
    return Moments(n, total.total - sum(m.total for m in parts), total.squares - sum(m.squares for m in parts))
