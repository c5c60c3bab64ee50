"""The drift query's adjustment for the question (``drift.by_query``): each (group, question, window parity)'s
reference level, and the current window's questions as clusters (``drift.questions_as_clusters``).
``window_queries.traces_sql`` joins both to the traces; ``docs/drift.md`` ("Popular questions") gives the formulas."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from ragmon.drift.check.window_sql import CURRENT, INDEX, REFERENCE_RANGE, TRACE_KEYS
from ragmon.drift.method.features import Feature

#: a question counts for the levels of the other parity's windows once asked this often in this parity's windows
MIN_ASKS = 2
#: a rate's question level is shrunk towards its group's share by this many asks (``by_query.RATE_PRIOR_ASKS``)
RATE_PRIOR_ASKS = 0.5
#: the question hash of a trace without a question (an empty one, e.g. a span that did not record its input)
EMPTY = "cityHash64('')"
#: a trace with a question: only those have a level
ASKED = f"question_hash != {EMPTY}"


def question_key(parity: str) -> str:
    """The 64-bit join key of a (drift group, question, window parity): both hashes are already uniform 64-bit
    (cityHash64 at insert), so their XOR, shifted to make room for the parity bit, keys them as well as hashing the
    three again would (two (group, question) pairs share a key with probability 2⁻⁶³, as with any 64-bit hash), and
    costs less: 0.3 s of a check over 10 M traces, where each trace is keyed once for the levels and once for the
    lookup."""
    return f"bitXor(question_hash, drift_group) * 2 + toUInt64({parity})"


def levels_sql(traces: str, features: Sequence[tuple[int, Feature]], where: str) -> str:
    """The reference levels as one row set to join, per (group, question, window parity) for questions asked at
    least ``MIN_ASKS`` times: ``lv_key`` and ``lv_d{i}``, the question's level less its group's mean (0 where the
    question has fewer than ``MIN_ASKS`` finite values of that feature); a rate's level is shrunk towards the group's
    share by ``RATE_PRIOR_ASKS`` asks: ``(s + a·m) / (c + a) − m = (s − c·m) / (c + a)``.

    Each parity is aggregated apart, on one thread (``PARITY_SETTINGS``), the two side by side. Aggregated together
    on two threads, each thread's hash table held nearly every (group, question, parity) key: at 10 M traces (2 M keys)
    the levels needed 650–700 MiB, past half the default 1 GiB budget, and their aggregation spilled to disk (2.5 s of
    a 7 s check). Apart, the keys of the two aggregations are disjoint: 450–500 MiB, just under the spill point at
    that size, for a second read of the reference's rows (about 0.5 s). Beyond it they spill again unless the budget
    grows (``store.embedded_memory_mb``).

    The group means come from the same two aggregations, not from a third read of the reference: every reference
    trace is in one (group, question, parity) row (a trace without a question in its group's row for the empty
    question), so a group's sums over its rows are its sums over its traces. The rows are grouped by group, each
    group's sums taken and its kept questions collected (``groupArrayIf``), and the questions unrolled again
    (``ARRAY JOIN``), each beside its group's mean: 0.3–0.4 s less at 10 M traces than reading the reference a third
    time and joining its means."""
    values = ", ".join(f"toFloat64({f.expr}) AS r{i}" for i, f in features)
    # a value that is always finite (a count, a rate, latency, cost) needs no count of its own: one count() serves
    counts = {i: "c_all" if f.always_finite else f"c{i}" for i, f in features}
    sums = ", ".join(["count() AS c_all", *(f"sum(r{i}) AS s{i}" if f.always_finite else
                                            f"countIf(isFinite(r{i})) AS c{i}, sumIf(r{i}, isFinite(r{i})) AS s{i}"
                                            for i, f in features)])
    fields = ["key", *dict.fromkeys(x for i, _ in features for x in (counts[i], f"s{i}"))]
    element = {x: f"k.{n}" for n, x in enumerate(fields, start=1)}  # a question's row, as a tuple in the array
    keep = " OR ".join(sorted({f"{counts[i]} >= {MIN_ASKS}" for i, _ in features}))
    deltas = []
    for i, f in features:
        c, s, mean = element[counts[i]], element[f"s{i}"], f"(t_s{i} / t_{counts[i]})"
        if f.kind == "rate":
            deltas.append(f"if({c} >= {MIN_ASKS}, ({s} - {c} * {mean}) / ({c} + {RATE_PRIOR_ASKS!r}), 0) AS lv_d{i}")
        else:
            deltas.append(f"if({c} >= {MIN_ASKS}, {s} / {c} - {mean}, 0) AS lv_d{i}")

    def parity(p: int) -> str:
        rows = (f"SELECT drift_group AS g, {question_key(str(p))} AS key, {values} FROM {traces} "
                f"WHERE {where} AND {REFERENCE_RANGE} AND {INDEX} % 2 = {p}")
        return f"SELECT any(g) AS g, key, {sums} FROM ({rows}) GROUP BY key {PARITY_SETTINGS}"

    # the empty question's row counts for its group's mean, and has no level: a trace without a question is looked
    # up with key 0 (``window_queries.traces_sql``)
    asked = f"bitXor(intDiv(key, 2), g) != {EMPTY}"
    totals = ", ".join(f"sum({x}) AS t_{x}" for x in fields[1:])
    groups = (f"SELECT g, {totals}, groupArrayIf(({', '.join(fields)}), ({keep}) AND {asked}) AS questions "
              f"FROM ({parity(0)} UNION ALL {parity(1)}) GROUP BY g")
    return f"SELECT k.1 AS lv_key, {', '.join(deltas)} FROM ({groups}) ARRAY JOIN questions AS k"


#: the settings of each parity's aggregation of the question levels (``levels_sql``): a subquery's SETTINGS apply to
#: that subquery only
PARITY_SETTINGS = "SETTINGS max_threads = 1"


#: the window index of the rows that carry the current window's clusters (``with_cluster_rows``)
CLUSTER_ROWS = -1


def with_cluster_rows(table: str, rows: str, inner: Sequence[str], features: Sequence[Feature],
                       adjusted: Collection[int], clustered: Sequence[int], where: str) -> str:
    """The traces' rows and, with window index ``CLUSTER_ROWS``, one row per (group, cluster) of the current window
    for the clustered variance: a cluster is a question (a trace without one is a cluster of its own), its row
    carries the sum ``v{i}`` of its finite values of each clustered feature and their count ``m{i}`` (NaN and 0 for
    the other features). The level join then adjusts a cluster's sum as it adjusts its traces
    (``window_queries.traces_sql``).

    Summed per question in the engine's hash aggregation: a ``sumMap`` over the current window's rows (an ordered
    map of generic values) took 1.1–1.7 s of a check over 10 M traces; this, about 0.3 s."""
    names = [*TRACE_KEYS.split(", "), "w", *(f"v{i}" for i in range(len(features))), "question"]
    traces = [*names, *(f"toFloat64(1) AS m{i}" for i in clustered)]
    # a cluster row carries its group's hash alone, not its names (``aggregate`` names it from the window rows): the
    # names' ``any`` states in the per-question aggregation (4 strings for each of 351 k questions at 10 M traces)
    # took 2 s more at a 512 MiB budget
    clusters = ["dg", *(f"toLowCardinality('') AS {name}" for name in TRACE_KEYS.split(", ")[1:]),
                f"toInt64({CLUSTER_ROWS}) AS w"]
    for i, f in enumerate(features):
        if i in clustered:
            clusters.append(f"c_v{i} AS v{i}")
        elif f.kind == "continuous":
            clusters.append(f"nan AS v{i}")
        else:  # a rate: as its traces' column is typed (``window_queries.traces_sql``)
            clusters.append(f"toFloat64(0) AS v{i}" if i in adjusted else f"toUInt8(0) AS v{i}")
    clusters.extend(["c_question AS question", *(f"toFloat64(c_m{i}) AS m{i}" for i in clustered)])
    sums = [*(f"sumIf(v{i}, isFinite(v{i})) AS c_v{i}, countIf(isFinite(v{i})) AS c_m{i}" for i in clustered),
            "any(question) AS c_question"]
    current = (f"SELECT {', '.join(inner)}, if(question = 0, cityHash64(trace_id), question) AS cluster "
               f"FROM {table} WHERE {where} AND {CURRENT}")
    return (f"SELECT {', '.join(traces)} FROM ({rows}) UNION ALL "
            f"SELECT {', '.join(clusters)} FROM (SELECT dg, {', '.join(sums)} FROM ({current}) "
            f"GROUP BY dg, cluster)")


def cluster_sums(clustered: Sequence[int]) -> list[str]:
    """Per clustered feature, over the cluster rows of the current window (``with_cluster_rows``), each with the
    adjusted sum ``S_q`` and count ``n_q`` of its question's finite values: ``Σ S_q²``, ``Σ n_q S_q`` and ``Σ n_q²``,
    from which ``clustered_mean_variance`` computes the variance of the window's mean."""
    on = f"w = {CLUSTER_ROWS}"
    return [column for i in clustered for column in (
        f"sumIf(v{i} * v{i}, {on}) AS f{i}__ss", f"sumIf(m{i} * v{i}, {on}) AS f{i}__ns",
        f"sumIf(m{i} * m{i}, {on}) AS f{i}__nn")]


def clustered_mean_variance(n: int, mean: float, ss: float, ns: float, nn: float) -> float:
    """The variance of a window's mean with its questions as clusters, ``Σ_q (S_q − n_q x̄)² / n²`` =
    ``(Σ S_q² − 2 x̄ Σ n_q S_q + x̄² Σ n_q²) / n²`` (``summary.clustered_variance``), from the sums ``cluster_sums``
    returns; NaN for an empty window."""
    if n <= 0:
        return math.nan
    return max(0.0, (ss - 2 * mean * ns + mean * mean * nn) / (n * n))
