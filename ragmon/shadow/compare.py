"""``compare``: one shadow comparison of a candidate retriever with the baseline over a time window.

Runs the pairing/agreement/operational aggregation in ClickHouse (``queries``), the judge-score pairing
(``quality``) and canary queries (``canary``), then the paired statistics (``stats``) and the verdicts
(``verdict``), and assembles a frozen ``ComparisonResult``. Every edge case ends in a notice that says what
happened and what to do, never in an exception: no pairs, different k, missing or mixed judge scores.
Raises ``InputError`` for contradictory options and ``StoreError`` when the store fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ragmon.contracts.golden import GoldenCase
from ragmon.errors import InputError
from ragmon.shadow import canary, pairs, quality, queries
from ragmon.shadow.examples import pick_examples
from ragmon.shadow.queries import ShadowStore
from ragmon.shadow.result import (
    QUANTILES,
    Agreement,
    ComparisonResult,
    Operational,
    QualityDelta,
    Side,
    StratumComparison,
    Verdict,
)
from ragmon.shadow.stats import distribution_shift, paired_difference
from ragmon.shadow.verdict import EXIT_CODES, Thresholds, combine, decide

DEFAULT_K = 10
ALL = "all"


@dataclass(frozen=True)
class CompareOptions:
    """Everything a comparison depends on (echoed into the result)."""

    baseline: pairs.RetrieverRef
    candidate: pairs.RetrieverRef
    since: datetime
    until: datetime
    k: int | None = None
    rbo_p: float = 0.9
    latency_stage: str = "retrieve"
    thresholds: Thresholds = field(default_factory=Thresholds)
    golden: Sequence[GoldenCase] = ()
    confidence: float = 0.95
    n_resamples: int = 2000
    seed: int = 0
    top: int = 5
    rank_by: str | None = None

    def check(self) -> None:
        if self.baseline == self.candidate:
            raise InputError(f"--baseline and --candidate both select {self.baseline}; give the candidate's name, "
                             "version or variant (shadow traces carry variant=shadow)")
        if self.since >= self.until:
            raise InputError(f"--since {self.since.isoformat()} is not before --until {self.until.isoformat()}")
        if self.k is not None and not 1 <= self.k <= 1000:
            raise InputError(f"--k must be between 1 and 1000, got {self.k}")
        if not 0.0 < self.rbo_p < 1.0:
            raise InputError(f"--rbo-p must be in (0, 1), got {self.rbo_p}")
        if not self.latency_stage or len(self.latency_stage) > 256:
            raise InputError("--latency-stage must name a latency_ms key (e.g. retrieve) or 'total'")


def compare(store: ShadowStore, opts: CompareOptions) -> ComparisonResult:
    opts.check()
    notices: list[str] = []
    params = pairs.parameters(opts.baseline, opts.candidate, opts.since, opts.until, k=opts.k or DEFAULT_K,
                              p=opts.rbo_p, seed=opts.seed, stage=opts.latency_stage)
    counts = queries.side_counts(store, params)
    k = _choose_k(counts, opts, notices)
    params["k"] = k
    rows = queries.summary(store, params, seed=opts.seed, lowest=max(1, opts.top))
    by_stratum = {r["stratum"]: r for r in rows if r["stratum"] != ""}
    total = next((r for r in rows if r["stratum"] == ""), None)
    if total is None or total["pairs"] == 0:
        notices.append(_why_no_pairs(store, params, opts, int(counts["baseline"]), int(counts["candidate"])))

    judged = quality.pair_scores(queries.judged_scores(store, params))
    notices.extend(judged.notices())
    canaries: dict[str, dict[str, Any]] = {}
    if opts.golden:
        index, notes = canary.canary_index(opts.golden)
        notices.extend(notes)
        if index:
            found = queries.canary_pairs(store, params, sorted(index))
            canaries = canary.score_canaries(found, index, k)
        notices.append(f"canary queries: {len(canaries)} paired queries match one of {len(index)} golden cases")
    if total is not None and total["pairs"] and not judged.metrics() and not canaries:
        notices.append("no quality data: no paired trace has judge scores in the window (live scoring must sample "
                       "both variants; it does so by query_id) and no --golden canary matched; only agreement and "
                       "operational figures are reported")
    if total is not None:
        for side, label in (("b", "baseline"), ("c", "candidate")):
            if total[f"{side}_lat_missing"]:
                notices.append(f"{total[f'{side}_lat_missing']} {label} traces lack latency stage "
                               f"{opts.latency_stage!r}; they are left out of the latency quantiles")
        if total["duplicates"]:
            notices.append(f"{total['duplicates']} extra traces share a query_id with another trace of the same side; "
                           "the earliest of each is compared")

    deltas = _quality_deltas(judged, canaries, opts)
    strata = [_stratum(name, row, deltas.get(name, ()), k, opts) for name, row in sorted(by_stratum.items())]
    overall_verdict = combine([s.verdict for s in strata], [s.stratum for s in strata])
    empty = _empty_row()
    overall = _stratum(ALL, total or empty, deltas.get(ALL, ()), k, opts, verdict=overall_verdict)
    lowest = [(float(rbo), q) for rbo, q in (total or {}).get("lowest_rbo", [])]
    examples = pick_examples(store, params, judged, canaries, lowest, opts, k, notices)
    return ComparisonResult(
        baseline=opts.baseline, candidate=opts.candidate, since=opts.since, until=opts.until, k=k,
        thresholds=opts.thresholds, confidence=opts.confidence, n_resamples=opts.n_resamples, seed=opts.seed,
        baseline_traces=int(counts["baseline"]), candidate_traces=int(counts["candidate"]), strata=tuple(strata),
        overall=overall, examples=examples, verdict=overall_verdict,
        exit_code=EXIT_CODES[overall_verdict.decision], notices=tuple(notices),
    )


def _choose_k(row: dict[str, Any], opts: CompareOptions, notices: list[str]) -> int:
    b_mode = row["b_mode"][0] if row["b_mode"] else None
    c_mode = row["c_mode"][0] if row["c_mode"] else None
    b_pk, c_pk = sorted(row["b_param_k"]), sorted(row["c_param_k"])
    if b_pk and c_pk and b_pk != c_pk:
        notices.append(f"different k: the baseline runs with parameters.k {b_pk}, the candidate with {c_pk}")
    k = opts.k
    if k is None:
        modes = [m for m in (b_mode, c_mode) if m]
        k = min(modes) if modes else DEFAULT_K
        if b_mode and c_mode and b_mode != c_mode:
            notices.append(f"different k: the baseline usually returns {b_mode} results and the candidate {c_mode}; "
                           f"compared at k={k} (the smaller). Pass --k to choose; at a larger k the shorter list's "
                           "missing positions count as disagreement")
    else:
        for mode, label in ((b_mode, "baseline"), (c_mode, "candidate")):
            if mode and mode < k:
                notices.append(f"the {label} usually returns {mode} results, fewer than --k {k}: its missing "
                               "positions count as disagreement in overlap@k and RBO")
    return int(k)


def _why_no_pairs(store: ShadowStore, params: dict[str, Any], opts: CompareOptions, nb: int, nc: int) -> str:
    window = f"between {opts.since.isoformat()} and {opts.until.isoformat()}"
    if nb and nc:
        return (f"no pairs: {nb} baseline and {nc} candidate traces {window}, but no query_id is shared — shadow "
                "traces must carry the query_id of the production trace they mirror")
    seen = queries.retrievers_seen(store, params)
    listed = ", ".join(f"{r['n']}@{r['v']} ({r['variant']}) {r['c']}" for r in seen) or "none at all"
    missing = " and ".join(x for x, n in (("baseline " + str(opts.baseline), nb),
                                          ("candidate " + str(opts.candidate), nc)) if not n)
    return (f"no pairs: no traces of the {missing} {window}. Retrievers seen in the window: {listed}. Check "
            "--baseline/--candidate (NAME[@VERSION]), --baseline-variant/--candidate-variant and the window")


def _quality_deltas(judged: quality.JudgedPairs, canaries: dict[str, dict[str, Any]], opts: CompareOptions
                    ) -> dict[str, list[QualityDelta]]:
    groups: dict[tuple[str, str, str, str], list[tuple[float, float]]] = {}
    for (stratum, metric, fp), values in judged.values.items():
        for key in ((stratum, metric, "judge", fp), (ALL, metric, "judge", fp)):
            groups.setdefault(key, []).extend(values.values())
    for item in canaries.values():
        for metric, pair in item["metrics"].items():
            for key in ((item["stratum"], metric, "canary", ""), (ALL, metric, "canary", "")):
                groups.setdefault(key, []).append(pair)
    out: dict[str, list[QualityDelta]] = {}
    for (stratum, metric, source, fp), values in sorted(groups.items()):
        b = [v[0] for v in values]
        c = [v[1] for v in values]
        result = paired_difference(b, c, confidence=opts.confidence, n_resamples=opts.n_resamples, seed=opts.seed)
        out.setdefault(stratum, []).append(QualityDelta(metric, source, fp, result))  # type: ignore[arg-type]
    return out


def _side(row: dict[str, Any], s: str) -> Side:
    q = row.get(f"{s}_lat_q") or []
    latency = tuple(float(x) for x in q) if len(q) == len(QUANTILES) and all(map(math.isfinite, q)) else None
    return Side(
        latency_ms=latency if row["pairs"] and row["pairs"] > row[f"{s}_lat_missing"] else None,  # type: ignore[arg-type]
        latency_missing=int(row[f"{s}_lat_missing"]), error_rate=_f(row[f"{s}_error_rate"]),
        empty_rate=_f(row[f"{s}_empty_rate"]), context_tokens=_f(row[f"{s}_context_tokens"]),
        cost_mean_usd=_f(row[f"{s}_cost_mean"]), cost_total_usd=_f(row[f"{s}_cost_total"]),
        results_mean=_f(row[f"{s}_results"]), short_lists=int(row[f"{s}_short"]),
    )


def _stratum(name: str, row: dict[str, Any], deltas: Sequence[QualityDelta], k: int, opts: CompareOptions,
             verdict: Verdict | None = None) -> StratumComparison:
    agreement = Agreement(k, opts.rbo_p, _f(row["mean_overlap"]), _f(row["mean_rbo"]), _f(row["top1_rate"]),
                          int(row["n_top1"]), _f(row["mean_tau"]), int(row["n_tau"]))
    ops = Operational(opts.latency_stage, _side(row, "b"), _side(row, "c"))
    latency = ops.latency_delta_ms()
    shift = distribution_shift(row.get("b_scores") or [], row.get("c_scores") or [])
    if verdict is None:
        verdict = decide(opts.thresholds, pairs=int(row["pairs"]), overlap=agreement.mean_overlap, k=k,
                         latency_p95_delta_ms=latency[1] if latency else None,
                         error_rate_delta=ops.candidate.error_rate - ops.baseline.error_rate, quality=tuple(deltas),
                         top1_rate=agreement.top1_rate if agreement.n_top1 else None,
                         score_ks=shift.ks_statistic if shift is not None else None,
                         rankings_compared=bool(agreement.n_top1) or shift is not None)
    return StratumComparison(
        stratum=name, pairs=int(row["pairs"]), baseline_only=int(row["baseline_only"]),
        candidate_only=int(row["candidate_only"]), duplicates=int(row["duplicates"]), agreement=agreement,
        shift=shift, operational=ops,
        quality=tuple(deltas), verdict=verdict,
    )


def _f(value: Any) -> float:
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _empty_row() -> dict[str, Any]:
    row: dict[str, Any] = {name: 0 for name in (
        "pairs", "baseline_only", "candidate_only", "duplicates", "n_top1", "n_tau", "b_lat_missing",
        "c_lat_missing", "b_short", "c_short")}
    for name in ("mean_overlap", "mean_rbo", "top1_rate", "mean_tau"):
        row[name] = math.nan
    for s in ("b", "c"):
        for name in ("error_rate", "empty_rate", "context_tokens", "cost_mean", "cost_total", "results"):
            row[f"{s}_{name}"] = math.nan
        row[f"{s}_lat_q"] = []
        row[f"{s}_scores"] = []
    return row
