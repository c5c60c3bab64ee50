"""Quality deltas from judge scores: pair each query's baseline and candidate scores per metric, only when
both were judged with the SAME judge fingerprint, and explain what is missing or mixed.

Live scoring samples by query_id, so a production trace and its shadow twin are judged together; this
module pairs their ``scores`` rows (status ok, finite value, the latest per trace/metric/fingerprint; read in
one join against the pairs by ``queries.judged_sql``) and never averages across fingerprints.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


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
                out.append(f"{metric}: {b} pairs have a value on the baseline only and {c} on the candidate only "
                           f"({matched} on both): the judge gave none on the other side (not applicable there, e.g. "
                           "a refusal or an answer without citations, or the call failed: `ragmon score report` "
                           "counts both); they are left out of the paired comparison")
            if self.mixed_pairs.get(metric):
                combos = "; ".join(f"{x[:12]} vs {y[:12]}" for x, y in sorted(self.mixed[metric]))
                out.append(f"{metric}: {self.mixed_pairs[metric]} pairs judged with different judge fingerprints "
                           f"on the two sides ({combos}); not compared — re-score them with one judge")
        return out




def pair_scores(columns: dict[str, Any]) -> JudgedPairs:
    """Group the rows of ``queries.judged_sql`` into comparable pairs (same metric, same fingerprint on both sides)."""
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
