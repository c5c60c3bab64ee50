"""Per-query diff of two gate runs: the queries with the largest gains and losses, and per-stratum deltas.

Averages hide a severe regression on a few queries, so the diff is per query, by case id. Queries are ordered by
the change in coverage@k, then in reciprocal rank, then in nDCG@k — lexicographically, never a blended score.
Runs over different golden-set versions (or the same version label with different content) are not compared
unless the caller says so: their averages are over different questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragmon.errors import InputError

METRICS = ("recall_at_k", "reciprocal_rank_at_k", "ndcg_at_k")
STRATUM_METRICS = ("coverage_at_k", "recall_at_depth", "mrr_at_k", "ndcg_at_k")


class GoldenMismatchError(InputError):
    """The two runs used different golden sets."""


@dataclass(frozen=True, slots=True)
class QueryDelta:
    case_id: str
    category: str
    before: dict[str, float | None]
    after: dict[str, float | None]
    delta: dict[str, float]
    error_before: str | None
    error_after: str | None


@dataclass(frozen=True, slots=True)
class Comparison:
    baseline_golden_version: str
    golden_differs: bool
    parameters_before: dict[str, Any]
    gains: tuple[QueryDelta, ...]
    losses: tuple[QueryDelta, ...]
    unchanged: int
    only_in_baseline: tuple[str, ...]
    only_in_current: tuple[str, ...]
    strata: dict[str, dict[str, float | None]]  # stratum → metric → current − baseline

    def as_dict(self) -> dict[str, Any]:
        def q(d: QueryDelta) -> dict[str, Any]:
            return {"case_id": d.case_id, "category": d.category, "before": d.before, "after": d.after,
                    "delta": d.delta, "error_before": d.error_before, "error_after": d.error_after}  # fmt: skip

        return {
            "baseline_golden_version": self.baseline_golden_version,
            "golden_differs": self.golden_differs,
            "parameters_before": self.parameters_before,
            "gains": [q(d) for d in self.gains],
            "losses": [q(d) for d in self.losses],
            "unchanged": self.unchanged,
            "only_in_baseline": list(self.only_in_baseline),
            "only_in_current": list(self.only_in_current),
            "strata": self.strata,
        }


def check_same_golden(current: dict[str, Any], baseline: dict[str, Any], allow_different: bool) -> bool:
    """True when the golden sets differ (and that was allowed); ``GoldenMismatchError`` when not allowed."""
    now, then = current, baseline.get("golden", {})
    differences = []
    if now.get("version") != then.get("version"):
        differences.append(f"version {then.get('version')!r} (baseline) vs {now.get('version')!r} (this run)")
    elif now.get("sha256") != then.get("sha256"):
        differences.append(f"same version {now.get('version')!r} but different content (sha256 "
                           f"{str(then.get('sha256'))[:12]} vs {str(now.get('sha256'))[:12]}): "
                           "bump the version")  # fmt: skip
    if now.get("set") != then.get("set"):
        differences.append(f"set {then.get('set')!r} (baseline) vs {now.get('set')!r} (this run)")
    if differences and not allow_different:
        raise GoldenMismatchError(
            "refusing to compare runs over different golden sets: " + "; ".join(differences)
            + ". Averages over different questions are not comparable; re-run the baseline on this golden set, "
            "or pass --allow-different-golden to see the per-query diff of the cases both sets share."
        )
    return bool(differences)


def _scored(artifact: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["case_id"]: q for q in artifact["queries"] if not q.get("excluded") and isinstance(q.get("case_id"), str)}


def _metric(query: dict[str, Any], name: str) -> float | None:
    value = (query.get("metrics") or {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compare_runs(current: dict[str, Any], baseline: dict[str, Any], *, allow_different_golden: bool,
                 top: int) -> Comparison:
    """Diff two artifacts (``current`` as being built, ``baseline`` as loaded); ``top`` gains and losses."""
    differs = check_same_golden(current["golden"], baseline, allow_different_golden)
    now, then = _scored(current), _scored(baseline)
    deltas = []
    for case_id in sorted(now.keys() & then.keys()):
        before = {m: _metric(then[case_id], m) for m in METRICS}
        after = {m: _metric(now[case_id], m) for m in METRICS}
        delta = {m: round((after[m] or 0.0) - (before[m] or 0.0), 12) for m in METRICS}
        deltas.append(QueryDelta(case_id, str(now[case_id].get("category", "")), before, after, delta,
                                 then[case_id].get("error"), now[case_id].get("error")))  # fmt: skip
    key = lambda d: tuple(d.delta[m] for m in METRICS)  # noqa: E731
    zero = (0.0,) * len(METRICS)
    gains = sorted((d for d in deltas if key(d) > zero), key=key, reverse=True)
    losses = sorted((d for d in deltas if key(d) < zero), key=key)
    strata: dict[str, dict[str, float | None]] = {}
    old_rows = {r.get("stratum"): r for r in baseline.get("report", {}).get("strata", []) if isinstance(r, dict)}
    for row in current["report"]["strata"]:
        old = old_rows.get(row["stratum"])
        if old is None:
            continue
        strata[row["stratum"]] = {
            m: (row[m] - old[m])
            if isinstance(row.get(m), int | float) and isinstance(old.get(m), int | float) else None
            for m in STRATUM_METRICS
        }
    return Comparison(
        baseline_golden_version=str(baseline["golden"].get("version")),
        golden_differs=differs,
        parameters_before=dict(baseline.get("parameters") or {}),
        gains=tuple(gains[:top]),
        losses=tuple(losses[:top]),
        unchanged=len(deltas) - len(gains) - len(losses),
        only_in_baseline=tuple(sorted(then.keys() - now.keys())),
        only_in_current=tuple(sorted(now.keys() - then.keys())),
        strata=strata,
    )
