"""The drift tests, as plain records in one registry (name, kinds, default thresholds, function).

A ``DriftTest`` turns a (reference, current) pair of window summaries into a ``TestOutcome``: a statistic,
a p-value (significance) and an effect size. The check declares drift only when the BH-adjusted p-value is
at most ``threshold`` AND the effect reaches ``effect_threshold`` AND both windows hold ``min_samples``; the
defaults live here and can be overridden per feature in the ``drift`` config section. Pure: no I/O.

| test | kinds | statistic | p-value | effect (default threshold) |
| --- | --- | --- | --- | --- |
| ks | continuous | KS D | asymptotic KS | Wasserstein / reference σ (0.1) |
| psi | continuous | PSI, 10 reference-quantile bins | chi-square on those bins | PSI (0.25; 0.1 = moderate) |
| two_proportion | rate | z | two-sided normal | Cohen's h (0.2) |
| chi_square | rate | Pearson χ² on the 2×2 table | χ²(1) | Cohen's h (0.2) |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ragmon.drift import stats
from ragmon.drift.summary import LEVELS, ContinuousSummary, RateSummary, Summary

Kind = Literal["continuous", "rate"]


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """What one test says about one (reference, current) pair."""

    statistic: float
    p_value: float
    effect: float
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DriftTest:
    """A drift test: where it applies, its default thresholds, and the function that runs it."""

    name: str
    kinds: frozenset[str]
    default_threshold: float  # significance level, compared with the BH-adjusted p-value
    effect_name: str
    default_effect_threshold: float
    default_min_samples: int
    fn: Callable[[Summary, Summary], TestOutcome]
    description: str

    def run(self, ref: Summary, cur: Summary) -> TestOutcome:
        kind = "rate" if isinstance(ref, RateSummary) else "continuous"
        if kind not in self.kinds or type(ref) is not type(cur):
            raise ValueError(f"test {self.name!r} applies to {sorted(self.kinds)} features, got {kind}")
        return self.fn(ref, cur)


def _continuous(ref: Summary, cur: Summary) -> tuple[ContinuousSummary, ContinuousSummary]:
    assert isinstance(ref, ContinuousSummary) and isinstance(cur, ContinuousSummary)
    return ref, cur


def _ks(ref: Summary, cur: Summary) -> TestOutcome:
    r, c = _continuous(ref, cur)
    d = stats.ks_from_quantiles(r.quantiles, c.quantiles, LEVELS)
    w1 = stats.wasserstein_from_quantiles(r.quantiles, c.quantiles, LEVELS)
    return TestOutcome(d, stats.ks_pvalue(d, r.n, c.n), stats.normalised_effect(w1, r.std),
                       {"wasserstein": w1, "reference_std": r.std})


def _psi(ref: Summary, cur: Summary, bins: int = 10) -> TestOutcome:
    r, c = _continuous(ref, cur)
    rc, cc = stats.psi_counts_from_quantiles(r.quantiles, c.quantiles, LEVELS, r.n, c.n, bins)
    value = stats.psi_from_counts(rc, cc)
    _, p, dof = stats.chi_square(np.vstack([rc, cc]))
    return TestOutcome(value, p, value, {"bins": int(rc.size), "dof": dof})


def _rates(ref: Summary, cur: Summary) -> tuple[RateSummary, RateSummary]:
    assert isinstance(ref, RateSummary) and isinstance(cur, RateSummary)
    return ref, cur


def _two_proportion(ref: Summary, cur: Summary) -> TestOutcome:
    r, c = _rates(ref, cur)
    z, p = stats.two_proportion_z(r.k, r.n, c.k, c.n)
    return TestOutcome(z, p, stats.cohens_h(r.value, c.value), {"rate_reference": r.value, "rate_current": c.value})


def _chi_square(ref: Summary, cur: Summary) -> TestOutcome:
    r, c = _rates(ref, cur)
    chi2, p, _ = stats.chi_square([[r.k, r.n - r.k], [c.k, c.n - c.k]])
    return TestOutcome(chi2, p, stats.cohens_h(r.value, c.value), {"rate_reference": r.value, "rate_current": c.value})


REGISTRY: dict[str, DriftTest] = {
    t.name: t
    for t in (
        DriftTest("ks", frozenset({"continuous"}), 0.05, "wasserstein_sigma", 0.1, 100, _ks,
                  "Two-sample Kolmogorov–Smirnov; effect = Wasserstein distance in reference standard deviations."),
        DriftTest("psi", frozenset({"continuous"}), 0.05, "psi", 0.25, 200, _psi,
                  "Population stability index over 10 reference-quantile bins; p-value from a chi-square test "
                  "on the same bins. PSI 0.1–0.25 is a moderate shift, ≥ 0.25 a major one."),
        DriftTest("two_proportion", frozenset({"rate"}), 0.05, "cohens_h", 0.2, 100, _two_proportion,
                  "Pooled two-proportion z test; effect = Cohen's h."),
        DriftTest("chi_square", frozenset({"rate"}), 0.05, "cohens_h", 0.2, 100, _chi_square,
                  "Pearson chi-square on the 2×2 table (no continuity correction); effect = Cohen's h."),
    )
}

#: the tests a feature of each kind runs unless its config says otherwise
DEFAULT_TESTS: dict[str, tuple[str, ...]] = {"continuous": ("ks", "psi"), "rate": ("two_proportion",)}


def get_test(name: str) -> DriftTest:
    """The registered test called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown drift test {name!r}; known tests: {', '.join(sorted(REGISTRY))}") from None
