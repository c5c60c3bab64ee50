"""Intervals for an A/B comparison of two independent cohorts: rates and means.

Owns the difference of two proportions with Newcombe's hybrid score interval (from two Wilson intervals: good
coverage at small counts and rates near 0 or 1, where the Wald interval fails) and the difference of two means
with Welch's t interval. Each returns a frozen ``Delta`` with the confidence applied. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import norm
from scipy.stats import t as student_t

from ragmon.stats.intervals import wilson_interval


@dataclass(frozen=True)
class Delta:
    """candidate − baseline, with its interval; NaN when a side has no data."""

    baseline: float
    candidate: float
    n_baseline: int
    n_candidate: int
    delta: float
    low: float
    high: float
    confidence: float


def rate_delta(k_base: int, n_base: int, k_cand: int, n_cand: int, confidence: float = 0.95) -> Delta:
    """Difference of proportions (candidate − baseline) with Newcombe's hybrid score interval (method 10)."""
    if not n_base or not n_cand:
        p1 = k_base / n_base if n_base else math.nan
        p2 = k_cand / n_cand if n_cand else math.nan
        return Delta(p1, p2, n_base, n_cand, math.nan, math.nan, math.nan, confidence)
    z = float(norm.ppf(0.5 + confidence / 2))
    p1, p2 = k_base / n_base, k_cand / n_cand
    l1, u1 = wilson_interval(p1, n_base, z)
    l2, u2 = wilson_interval(p2, n_cand, z)
    d = p2 - p1
    low = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    high = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return Delta(p1, p2, n_base, n_cand, d, max(-1.0, low), min(1.0, high), confidence)


def mean_delta(base: Sequence[float], cand: Sequence[float], confidence: float = 0.95) -> Delta:
    """Difference of means (candidate − baseline) with Welch's t interval (NaN interval below 2 values a side)."""
    n1, n2 = len(base), len(cand)
    m1 = sum(base) / n1 if n1 else math.nan
    m2 = sum(cand) / n2 if n2 else math.nan
    if n1 < 2 or n2 < 2:
        return Delta(m1, m2, n1, n2, m2 - m1, math.nan, math.nan, confidence)
    v1 = sum((x - m1) ** 2 for x in base) / (n1 - 1)
    v2 = sum((x - m2) ** 2 for x in cand) / (n2 - 1)
    se2 = v1 / n1 + v2 / n2
    d = m2 - m1
    if se2 == 0:
        return Delta(m1, m2, n1, n2, d, d, d, confidence)
    df = se2 ** 2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    half = float(student_t.ppf(0.5 + confidence / 2, df)) * math.sqrt(se2)
    return Delta(m1, m2, n1, n2, d, d - half, d + half, confidence)
