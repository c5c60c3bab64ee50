"""Verdicts: promote / hold / reject per stratum from thresholds the user gives, and the exit code.

Rules (also in docs/shadow.md):

* No threshold given → every stratum is **hold** ("no thresholds given"): ragmon never invents a bar.
* A stratum with no pairs, or fewer than ``min_pairs``, is **hold**: too little evidence to decide.
* Point thresholds (overlap@k, p95 latency delta, error-rate delta) **reject** when violated.
* A quality threshold ``max_quality_drop[metric] = x`` uses the bootstrap interval of the mean paired
  difference (candidate − baseline): **reject** when the whole interval is below −x (confidently worse by more
  than x), pass when the whole interval is at or above −x, **hold** otherwise (inconclusive), when the
  metric has no judged pairs in the stratum, or fewer than ``MIN_QUALITY_PAIRS`` (10). For a rate of wrong
  decisions (``wrong_refusal``, ``missed_refusal``: lower is better) x bounds the rise instead: reject when the
  whole interval is above +x, pass when it is at or below +x.
* A stratum whose retrieval changed a lot (top-1 agreement below ``MIN_TOP1_AGREEMENT`` or a KS distance between
  the two sides' score distributions above ``MAX_SCORE_KS``) is **hold**, not promote, unless a quality measure of
  retrieval (``RETRIEVAL_QUALITY``: nDCG, recall or MRR on golden canaries, or the judge's context metrics) passed
  its threshold in that stratum: passing latency, error-rate or faithfulness bars says nothing about whether the
  other chunks are better. The reason names the change and what would measure it. So is a stratum where no
  pair had a ranking on both sides to compare (``rankings_compared`` False): an unknown change is no evidence.
* A stratum is **promote** only when every threshold passes: the rule ``ab compare`` shares
  (``ragmon.metrics.promotion.verdict``: any harm rejects, a check without data or inconclusive holds). The
  overall verdict is reject if any stratum rejects, else hold if any holds, else promote. Exit codes: 0 promote,
  1 reject, 4 hold.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragmon.judge.scoring import LOWER_IS_BETTER
from ragmon.metrics.promotion import HARM, INCONCLUSIVE, OK, verdict
from ragmon.shadow.result import Decision, QualityDelta, Verdict

#: paired values a quality threshold needs before it may promote or reject: with fewer, a bootstrap interval
#: can be a single point (one pair, or a run of equal differences) that says nothing about the population
MIN_QUALITY_PAIRS = 10
#: retrieval changed "a lot" below this share of pairs with the same top-1 chunk …
MIN_TOP1_AGREEMENT = 0.5
#: … or above this KS distance between the baseline's and the candidate's retrieval-score distributions
MAX_SCORE_KS = 0.3
#: metrics that measure whether the retrieved chunks are good: only a pass on one of them promotes a changed retrieval
RETRIEVAL_QUALITY = frozenset({"ndcg_at_k", "recall_at_k", "mrr", "context_precision", "context_relevant_share"})
EXIT_PROMOTE = 0
EXIT_REJECT = 1
EXIT_HOLD = 4
EXIT_CODES: dict[Decision, int] = {"promote": EXIT_PROMOTE, "reject": EXIT_REJECT, "hold": EXIT_HOLD}


@dataclass(frozen=True)
class Thresholds:
    """What the candidate must meet in every stratum. ``None`` / empty means 'not checked'."""

    min_pairs: int | None = None
    min_overlap: float | None = None
    max_latency_p95_delta_ms: float | None = None
    max_error_rate_delta: float | None = None
    max_quality_drop: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.min_pairs is not None and self.min_pairs < 1:
            raise ValueError(f"min_pairs must be at least 1, got {self.min_pairs}")
        if self.min_overlap is not None and not 0.0 <= self.min_overlap <= 1.0:
            raise ValueError(f"min_overlap must be in [0, 1], got {self.min_overlap}")
        if self.max_error_rate_delta is not None and not -1.0 <= self.max_error_rate_delta <= 1.0:
            raise ValueError(f"max_error_rate_delta must be in [-1, 1], got {self.max_error_rate_delta}")
        for metric, drop in self.max_quality_drop.items():
            if not drop >= 0:
                raise ValueError(f"max quality drop for {metric!r} must be >= 0, got {drop}")

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.min_pairs, self.min_overlap, self.max_latency_p95_delta_ms,
                                           self.max_error_rate_delta)) or bool(self.max_quality_drop)

    @property
    def decisive(self) -> bool:
        """Whether anything beyond ``min_pairs`` is checked (min_pairs alone can only hold, never promote)."""
        return any(v is not None for v in (self.min_overlap, self.max_latency_p95_delta_ms,
                                           self.max_error_rate_delta)) or bool(self.max_quality_drop)


def decide(
    t: Thresholds, *, pairs: int, overlap: float, k: int, latency_p95_delta_ms: float | None,
    error_rate_delta: float, quality: tuple[QualityDelta, ...], top1_rate: float | None = None,
    score_ks: float | None = None, rankings_compared: bool = True,
) -> Verdict:
    """The verdict for one stratum, with one reason per threshold checked (each says value vs bar).
    ``top1_rate`` (share of pairs with the same top-1 chunk) and ``score_ks`` (KS distance of the retrieval
    scores) say how much retrieval changed; None: unknown. ``rankings_compared`` False: no pair had a ranking on
    both sides and no scores either, so how retrieval changed is a measure without data (it holds, unless a
    retrieval-quality measure passed)."""
    if not t.given:
        return Verdict("hold", ("no thresholds given (pass --min-overlap, --max-latency-p95-delta-ms, "
                                "--max-error-rate-delta, --max-quality-drop or --min-pairs)",))
    if pairs == 0:
        return Verdict("hold", ("no pairs in this stratum",))
    if t.min_pairs is not None and pairs < t.min_pairs:
        return Verdict("hold", (f"only {pairs} pairs, fewer than --min-pairs {t.min_pairs}",))
    if not t.decisive:
        return Verdict("hold", (f"{pairs} pairs ≥ --min-pairs {t.min_pairs}, but no other threshold given",))
    failed: list[str] = []
    unsure: list[str] = []
    passed: list[str] = []
    passed_metrics: set[str] = set()
    if t.min_overlap is not None:
        line = f"overlap@{k} {overlap:.3f} vs min {t.min_overlap:.3f}"
        (passed if overlap >= t.min_overlap else failed).append(line)
    if t.max_latency_p95_delta_ms is not None:
        if latency_p95_delta_ms is None:
            unsure.append("p95 latency delta unknown (latency stage missing on a side)")
        else:
            line = f"p95 latency delta {latency_p95_delta_ms:+.1f} ms vs max {t.max_latency_p95_delta_ms:+.1f} ms"
            (passed if latency_p95_delta_ms <= t.max_latency_p95_delta_ms else failed).append(line)
    if t.max_error_rate_delta is not None:
        line = f"error-rate delta {error_rate_delta:+.4f} vs max {t.max_error_rate_delta:+.4f}"
        (passed if error_rate_delta <= t.max_error_rate_delta else failed).append(line)
    for metric, drop in sorted(t.max_quality_drop.items()):
        found = [q for q in quality if q.metric == metric and q.result.n > 0]
        if not found:
            unsure.append(f"{metric}: no paired values in this stratum (not judged on both sides, no canary)")
            continue
        worse_when_higher = metric in LOWER_IS_BETTER
        for q in found:
            r = q.result
            who = f"{metric} [{q.judge_fingerprint[:12]}]" if q.source == "judge" else metric
            line = (f"{who} Δ {r.mean_difference:+.3f}, {r.confidence:.0%} CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}] "
                    + (f"vs max rise {drop:.3f} (lower is better)" if worse_when_higher else f"vs max drop {drop:.3f}")
                    + f" (n={r.n})")
            # the change for the worse, as a share: a drop, or for a rate of wrong decisions a rise
            worst, best = (r.ci_high, r.ci_low) if worse_when_higher else (-r.ci_low, -r.ci_high)
            if r.n < MIN_QUALITY_PAIRS:
                unsure.append(line + f": too few paired values to decide (at least {MIN_QUALITY_PAIRS})")
            elif best > drop:
                failed.append(line)
            elif worst <= drop:
                passed.append(line)
                passed_metrics.add(metric)
            else:
                unsure.append(line + ": inconclusive")
    changed = _retrieval_change(top1_rate, score_ks)
    if not failed and not rankings_compared and not passed_metrics & RETRIEVAL_QUALITY:
        unsure.insert(0, "no pair has a ranking on both sides to compare (no top-1 chunk on one side, no retrieval "
                         "scores): how retrieval changed is unknown; gate a measure of retrieval quality (--golden "
                         "with --max-quality-drop ndcg_at_k=…, recall_at_k or mrr)")
    elif not failed and changed and not passed_metrics & RETRIEVAL_QUALITY:
        unsure.insert(0, f"retrieval changed a lot ({changed}) and no measure of retrieval quality passed: gate "
                         "one (--golden with --max-quality-drop ndcg_at_k=…, recall_at_k or mrr; or the judge's "
                         "context_precision / context_relevant_share)")
    decision = verdict([HARM] * len(failed) + [INCONCLUSIVE] * len(unsure) + [OK] * len(passed))
    return Verdict(decision, tuple(f"FAIL {x}" for x in failed) + tuple(f"? {x}" for x in unsure)
                   + tuple(f"ok {x}" for x in passed))


def _retrieval_change(top1_rate: float | None, score_ks: float | None) -> str:
    """What says retrieval changed a lot ('' when nothing does)."""
    parts = []
    if top1_rate is not None and top1_rate < MIN_TOP1_AGREEMENT:
        parts.append(f"top-1 agreement {top1_rate:.0%} < {MIN_TOP1_AGREEMENT:.0%}")
    if score_ks is not None and score_ks > MAX_SCORE_KS:
        parts.append(f"score KS D {score_ks:.2f} > {MAX_SCORE_KS:.2f}")
    return ", ".join(parts)


def combine(verdicts: list[Verdict], strata: list[str]) -> Verdict:
    """Overall verdict from the per-stratum verdicts (worst wins)."""
    if not verdicts:
        return Verdict("hold", ("no strata to judge: no pairs",))
    for decision in ("reject", "hold"):
        hit = [s for s, v in zip(strata, verdicts, strict=True) if v.decision == decision]
        if hit:
            return Verdict(decision, (f"{decision} in {len(hit)} of {len(strata)} strata: {', '.join(hit)}",))  # type: ignore[arg-type]
    return Verdict("promote", (f"promote in all {len(strata)} strata",))


def parse_quality_drops(items: list[str]) -> dict[str, float]:
    """``METRIC=X`` strings → {metric: x}; raises ValueError with the offending item."""
    out: dict[str, float] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        metric = metric.strip()
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not sep or not metric or not number >= 0:
            raise ValueError(f"--max-quality-drop {item!r} must be METRIC=X with X >= 0 (e.g. faithfulness=0.02)")
        out[metric] = number
    return out
