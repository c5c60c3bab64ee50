"""Quality deltas from judge scores: pair each query's baseline and candidate scores per metric, only when
both were judged with the SAME judge fingerprint, and explain what is missing or mixed.

Live scoring samples by query_id, so a production trace and its shadow twin are judged together; this
module reads their ``scores`` rows (status ok, finite value, the latest per trace/metric/fingerprint) in one
join against the pairs and never averages across fingerprints.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ragmon.shadow.pairs import pairs_sql


@dataclass
class JudgedPairs:
    """Paired values per (stratum, metric, fingerprint), plus what could not be paired and why."""

    values: dict[tuple[str, str, str], dict[str, tuple[float, float]]] = field(default_factory=dict)
    baseline_only: dict[str, int] = field(default_factory=dict)  # metric -> pairs judged on the baseline only
    candidate_only: dict[str, int] = field(default_factory=dict)
    mixed: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # metric -> {(fp_b, fp_c)}
    mixed_pairs: dict[str, int] = field(default_factory=dict)

    def metrics(self) -> set[str]:
        return {m for _, m, _ in self.values} | set(self.baseline_only) | set(self.candidate_only) | set(self.mixed)

    def notices(self) -> list[str]:
        out = []
        for metric in sorted(self.metrics()):
            matched = sum(len(v) for (_, m, _), v in self.values.items() if m == metric)
            fps = sorted({fp for (_, m, fp) in self.values if m == metric})
            if len(fps) > 1:
                out.append(f"{metric}: judged with {len(fps)} judge fingerprints ({', '.join(f[:12] for f in fps)}); "
                           "each is reported separately, never averaged together")
            b, c = self.baseline_only.get(metric, 0), self.candidate_only.get(metric, 0)
            if b or c:
                out.append(f"{metric}: {b} pairs judged on the baseline only and {c} on the candidate only "
                           f"({matched} judged on both): is live scoring sampling both variants by query_id?")
            if self.mixed_pairs.get(metric):
                combos = "; ".join(f"{x[:12]} vs {y[:12]}" for x, y in sorted(self.mixed[metric]))
                out.append(f"{metric}: {self.mixed_pairs[metric]} pairs judged with different judge fingerprints "
                           f"on the two sides ({combos}); not compared — re-score them with one judge")
        return out


def judged_sql(traces_table: str, scores_table: str) -> str:
    """Every ok score of a paired trace: (query_id, stratum, side, metric, fingerprint, value).

    Only queries with at least one score in the window are paired (live scoring samples a fraction of the
    traffic), and both twins of such a query are kept, so one-sided judging is seen and reported.
    """
    judged_queries = (f"SELECT query_id FROM {scores_table} WHERE ts >= {{since:DateTime64(3, 'UTC')}} "
                      "AND ts < {until:DateTime64(3, 'UTC')} AND status = 'ok'")
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
        WHERE ts >= {{since:DateTime64(3, 'UTC')}} AND ts < {{until:DateTime64(3, 'UTC')}}
          AND status = 'ok' AND isFinite(value)
        GROUP BY trace_id, metric, judge_fingerprint
    ) AS s ON s.trace_id = p.trace_id"""


def pair_scores(columns: dict[str, Any]) -> JudgedPairs:
    """Group the rows of ``judged_sql`` into comparable pairs (same metric, same fingerprint on both sides)."""
    per: dict[tuple[str, str, str], dict[str, dict[str, float]]] = defaultdict(lambda: {"b": {}, "c": {}})
    if not columns.get("query_id"):  # an empty result may come back without column names
        return JudgedPairs()
    for q, stratum, side, metric, fp, value in zip(
        columns["query_id"], columns["stratum"], columns["side"], columns["metric"], columns["fingerprint"],
        columns["value"], strict=True,
    ):
        per[(q, stratum, metric)][side][fp] = float(value)
    out = JudgedPairs()
    for (q, stratum, metric), sides in per.items():
        b, c = sides["b"], sides["c"]
        shared = set(b) & set(c)
        for fp in shared:
            out.values.setdefault((stratum, metric, fp), {})[q] = (b[fp], c[fp])
        if shared:
            continue
        if b and c:
            out.mixed.setdefault(metric, set()).update((x, y) for x in b for y in c)
            out.mixed_pairs[metric] = out.mixed_pairs.get(metric, 0) + 1
        elif b:
            out.baseline_only[metric] = out.baseline_only.get(metric, 0) + 1
        else:
            out.candidate_only[metric] = out.candidate_only.get(metric, 0) + 1
    return out
