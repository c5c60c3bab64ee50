"""Paired statistics for a shadow comparison: the mean paired difference with a seeded bootstrap confidence
interval, the sign test, and the shift between two score distributions.

Pure: no I/O, no clock, no globals. Randomness comes only from the ``seed`` passed in, so the same input
gives the same interval every time (reports are reproducible and testable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ragmon.stats import shift

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
#: resample in blocks so memory stays near this many float64 values whatever the sample size
_BLOCK_VALUES = 4_000_000


@dataclass(frozen=True, slots=True)
class SignTestResult:
    """Pairs where the candidate scored higher / lower / the same; exact two-sided binomial p-value on the
    non-tied pairs (1.0 when every pair is tied)."""

    wins: int
    losses: int
    ties: int
    p_value: float


@dataclass(frozen=True, slots=True)
class PairedDifferenceResult:
    """Candidate minus baseline over ``n`` pairs, with the parameters used to get the interval."""

    n: int
    mean_baseline: float
    mean_candidate: float
    mean_difference: float
    ci_low: float
    ci_high: float
    confidence: float
    n_resamples: int
    seed: int
    sign_test: SignTestResult


@dataclass(frozen=True, slots=True)
class ShiftResult:
    """Two-sample Kolmogorov–Smirnov and 1-Wasserstein distance between baseline and candidate samples."""

    n_baseline: int
    n_candidate: int
    ks_statistic: float
    ks_p_value: float
    wasserstein: float


def _finite(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    return arr[np.isfinite(arr)]


def bootstrap_mean_ci(
    diffs: Sequence[float], *, confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired differences (resampling pairs, not sides)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples!r}")
    arr = np.asarray(diffs, dtype=np.float64)
    n = arr.size
    if n == 0:
        return (math.nan, math.nan)
    if n == 1 or np.all(arr == arr[0]):
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    block = max(1, _BLOCK_VALUES // n)
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = arr[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(low), float(high))


def sign_test(diffs: Sequence[float]) -> SignTestResult:
    """Exact sign test of 'the candidate is as likely to win a pair as to lose it'."""
    arr = _finite(diffs)
    wins = int(np.sum(arr > 0))
    losses = int(np.sum(arr < 0))
    ties = int(arr.size - wins - losses)
    if wins + losses == 0:
        return SignTestResult(wins, losses, ties, 1.0)
    p_value = float(sps.binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue)
    return SignTestResult(wins, losses, ties, p_value)


def paired_difference(
    baseline: Sequence[float], candidate: Sequence[float], *, confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
) -> PairedDifferenceResult:
    """Mean of candidate − baseline over pairs where both values are finite, its bootstrap CI and sign test."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    if b.shape != c.shape:
        raise ValueError(f"paired samples must have the same length, got {b.size} and {c.size}")
    keep = np.isfinite(b) & np.isfinite(c)
    b, c = b[keep], c[keep]
    diffs = c - b
    low, high = bootstrap_mean_ci(diffs, confidence=confidence, n_resamples=n_resamples, seed=seed)
    nan = math.nan
    return PairedDifferenceResult(
        n=int(diffs.size),
        mean_baseline=float(b.mean()) if b.size else nan,
        mean_candidate=float(c.mean()) if c.size else nan,
        mean_difference=float(diffs.mean()) if diffs.size else nan,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        sign_test=sign_test(diffs),
    )


def distribution_shift(baseline: Sequence[float], candidate: Sequence[float]) -> ShiftResult | None:
    """KS and Wasserstein between the two samples (non-finite values dropped); None if either is empty.

    Thin on purpose: the statistics are the drift package's (the same KS and Wasserstein the drift checks
    use, with the asymptotic KS p-value); the Wasserstein distance here is raw, in score units.
    """
    b, c = _finite(baseline), _finite(candidate)
    if b.size == 0 or c.size == 0:
        return None
    d, p_value = shift.ks_2samp(b, c)
    return ShiftResult(
        n_baseline=int(b.size),
        n_candidate=int(c.size),
        ks_statistic=d,
        ks_p_value=p_value,
        wasserstein=shift.wasserstein(b, c),
    )
