"""The drift decision for one check: run the tests, adjust p-values within each stratum, apply the three gates.

Drift is declared for a (group, feature, test) only when all three hold:

1. **sample size** — the current window holds at least ``min_samples`` observations (a trace test: both
   pooled windows do; a window test also needs reference windows to measure their spread) — else status
   ``insufficient_data``, no p-value, not part of the multiple-testing family;
2. **significance** — the adjusted p-value is at most ``threshold`` (α). The tests are adjusted **within their
   stratum** (``Candidate.stratum``: retriever, variant and stratum), never across strata: Benjamini–Hochberg over
   the stratum's tests, times the number G of strata with a test that ran (Bonferroni across strata). So a test is
   declared when its stratum's BH-adjusted p-value is at most α/G. Guarantees, per check: a stratum without drift
   declares anything with probability at most α/G *whatever the other strata hold* (the Simes inequality, for the
   positively dependent tests of one stratum), so all strata without drift together at most α·(G₀/G) ≤ α — also
   the chance that a check without any drift raises an alarm; within a stratum with drift the false-discovery rate
   is at most α/G; over an incident that spans H checks, the strata without drift declare anything in at most H·α
   of incidents (the default ``drift.alpha``, 0.016, keeps a 3-hour incident's under 5 %). Benjamini–Hochberg over
   the whole check (until 2026-12-06) gave none of these: a real incident's many small p-values in one stratum
   raise BH's bar for every test, and healthy strata were declared drifted in 20–65 % of incidents elsewhere;
3. **effect** — the test's effect size is at least ``effect_threshold`` (a significant but negligible shift,
   which large windows always find, is not drift).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from ragmon.drift.method.registry import Comparison, DriftTest, NotTestable, TestOutcome
from ragmon.stats.shift import benjamini_hochberg

Status = Literal["ok", "insufficient_data", "error"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One test to run in a check, with the thresholds that apply to it."""

    test: DriftTest
    comparison: Comparison
    threshold: float
    effect_threshold: float
    min_samples: int
    stratum: Hashable = None  # the multiple-testing family: tests are adjusted within it (None: one for the check)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one candidate. ``outcome`` is None unless ``status`` is ``ok``."""

    status: Status
    outcome: TestOutcome | None
    p_adjusted: float
    drifted: bool
    reason: str


def decide(candidates: Sequence[Candidate], *, adjust: bool = True) -> list[Decision]:
    """Decide every candidate; p-values are adjusted within each stratum (``adjust_within``; ``adjust=False``:
    raw)."""
    outcomes: list[TestOutcome | None] = []
    reasons: list[str] = []
    for c in candidates:
        short = _too_few(c)
        if short:
            outcomes.append(None)
            reasons.append(short)
            continue
        try:
            outcomes.append(c.test.run(c.comparison))
            reasons.append("")
        except NotTestable as exc:
            outcomes.append(None)
            reasons.append(str(exc))
        except (ValueError, ZeroDivisionError, FloatingPointError) as exc:
            outcomes.append(None)
            reasons.append(f"error: {exc}")
    raw = [o.p_value if o is not None and math.isfinite(o.p_value) else math.nan for o in outcomes]
    adjusted = adjust_within(raw, [c.stratum for c in candidates]) if adjust else raw
    decisions = []
    for c, o, reason, p_adj in zip(candidates, outcomes, reasons, adjusted, strict=True):
        if o is None:
            status: Status = "error" if reason.startswith("error") else "insufficient_data"
            decisions.append(Decision(status, None, math.nan, False, reason))
            continue
        significant = bool(p_adj <= c.threshold)
        large = bool(o.effect >= c.effect_threshold)
        why = ("drift" if significant and large else
               "not significant" if not significant else f"{c.test.effect_name} below {c.effect_threshold:g}")
        decisions.append(Decision("ok", o, float(p_adj), significant and large, why))
    return decisions


def adjust_within(p_values: Sequence[float], strata: Sequence[Hashable]) -> list[float]:
    """Benjamini–Hochberg within each stratum, times G, the number of strata with a p-value (at most 1); NaN stays
    NaN. One stratum: plain BH."""
    by_stratum: dict[Hashable, list[int]] = defaultdict(list)
    for i, (p, s) in enumerate(zip(p_values, strata, strict=True)):
        if math.isfinite(p):
            by_stratum[s].append(i)
    out = [math.nan] * len(p_values)
    g = len(by_stratum)
    for members in by_stratum.values():
        for i, q in zip(members, benjamini_hochberg([p_values[i] for i in members]), strict=True):
            out[i] = min(1.0, float(q) * g)
    return out


def _too_few(c: Candidate) -> str:
    """Why the candidate cannot run for lack of observations ("" when it can)."""
    cur = c.comparison.current_summary.n
    if c.test.unit == "window":
        return "" if cur >= c.min_samples else f"needs ≥ {c.min_samples} in the current window, got {cur}"
    ref = c.comparison.reference_summary.n
    if ref < c.min_samples or cur < c.min_samples:
        return f"needs ≥ {c.min_samples} per window, got {ref} reference / {cur} current"
    return ""
