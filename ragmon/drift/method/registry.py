"""The drift tests, as plain records in one registry (name, kinds, unit, default thresholds, function).

A ``DriftTest`` turns a ``Comparison`` (a feature's window series, the current window and its reference) into
a ``TestOutcome``: a statistic, a p-value (significance) and an effect size. The check declares drift only when
the BH-adjusted p-value is at most ``threshold`` AND the effect reaches ``effect_threshold`` AND the sample
sizes hold ``min_samples``; the defaults live here and can be overridden per feature in the ``drift`` config
section. Pure: no I/O.

Two units of replication (docs/drift.md):

* ``window`` tests (the defaults) treat each window as one draw: the current window is compared with the
  natural spread of every reference window (``ragmon.drift.method.window_tests``). They hold their false-alarm rate
  on heterogeneous traffic. ``min_samples`` applies to the current window; a reference window counts with at
  least half of it.
* ``trace`` tests count every trace as an independent draw from one distribution (the two pooled windows of
  the classic two-sample tests). On real traffic, whose hours differ, they alarm more the more traffic there
  is; they are kept for pinned references and for comparison. ``min_samples`` applies to both windows.

test | unit | kinds | statistic | p-value | effect (default threshold)
--- | --- | --- | --- | --- | ---
window_mean | window | continuous | z of the window mean | random effects, Student t | shift / reference σ (0.1)
window_quantiles | window | continuous | z of the 10th/50th/90th percentile | smallest × 3 | shift / reference σ (0.1)
window_median | window | continuous | z of the window median | random effects, Student t | shift / reference σ (0.1)
window_rate | window | rate | z of the window share | beta-binomial | Cohen's h (0.1)
ks | trace | continuous | KS D | asymptotic KS | Wasserstein / reference σ (0.1)
psi | trace | continuous | PSI, 10 reference-quantile bins | chi-square on those bins | PSI (0.25; 0.1 = moderate)
two_proportion | trace | rate | z | two-sided normal | Cohen's h (0.2)
chi_square | trace | rate | Pearson χ² on the 2×2 table | χ²(1) | Cohen's h (0.2)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragmon.drift.method import window_tests
from ragmon.drift.method.comparison import Comparison, TestOutcome
from ragmon.drift.method.summary import LEVELS, ContinuousSummary, RateSummary, Summary
from ragmon.stats import shift as stats

Kind = Literal["continuous", "rate"]
Unit = Literal["window", "trace"]
NotTestable = window_tests.NotTestable

__all__ = ["CUSUM_TESTS", "DEFAULT_TESTS", "PRIMARY_TEST", "REGISTRY", "Comparison", "DriftTest", "NotTestable",
           "TestOutcome", "get_test"]


@dataclass(frozen=True, slots=True)
class DriftTest:
    """A drift test: where it applies, its unit of replication, its default effect threshold and sample size, and its
    function. Its significance level is ``drift.alpha`` (or a feature's ``drift.overrides.<feature>.threshold``)."""

    name: str
    kinds: frozenset[str]
    unit: Unit
    effect_name: str
    default_effect_threshold: float
    default_min_samples: int
    fn: Callable[[Comparison], TestOutcome]
    description: str
    #: the test of many comparisons of one series at once (the window tests: ``baseline.compare_rows``), if it has one
    rows: Callable[[Sequence[Comparison]], list[TestOutcome | NotTestable]] | None = None

    def run(self, comparison: Comparison) -> TestOutcome:
        """Raises ``NotTestable`` (a ``ValueError``) when the comparison holds too little for this test."""
        self._check(comparison)
        return self.fn(comparison)

    def run_rows(self, comparisons: Sequence[Comparison]) -> list[TestOutcome | NotTestable]:
        """``run`` for each comparison — one series at several current windows, with the same reference, period and
        guard (the CUSUM's look-back) — the ``NotTestable`` in the place of an outcome where it holds too little."""
        for c in comparisons:
            self._check(c)
        if self.rows is not None:
            return self.rows(comparisons)
        out: list[TestOutcome | NotTestable] = []
        for c in comparisons:
            try:
                out.append(self.fn(c))
            except NotTestable as e:
                out.append(e)
        return out

    def _check(self, comparison: Comparison) -> None:
        if comparison.kind not in self.kinds:
            raise ValueError(f"test {self.name!r} applies to {sorted(self.kinds)} features, got {comparison.kind}")


def _pair(fn: Callable[[Summary, Summary], TestOutcome]) -> Callable[[Comparison], TestOutcome]:
    """A two-sample test on the pooled same-slot reference and the current window."""
    def run(c: Comparison) -> TestOutcome:
        return fn(c.reference_summary, c.current_summary)
    run.__name__ = fn.__name__
    return run


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
        DriftTest("window_mean", frozenset({"continuous"}), "window", "shift_sigma", 0.1, 30,
                  window_tests.window_mean,
                  "The current window's mean against its seasonal baseline and the natural spread between "
                  "windows (random effects); effect = shift in reference standard deviations.",
                  rows=window_tests.window_mean_rows),
        DriftTest("window_quantiles", frozenset({"continuous"}), "window", "shift_sigma", 0.1, 50,
                  window_tests.window_quantiles,
                  "The current window's 10th, 50th and 90th percentiles, each like window_mean; smallest "
                  "p-value × 3. Catches a heavier tail or a new mode that barely moves the mean."),
        DriftTest("window_median", frozenset({"continuous"}), "window", "shift_sigma", 0.1, 30,
                  window_tests.window_median,
                  "The current window's median, like window_mean: robust to the tail of new questions and bursts "
                  "that the question adjustment cannot reach. The CUSUM accumulates it for continuous features "
                  "with a density at their median (the mean otherwise).",
                  rows=window_tests.window_median_rows),
        DriftTest("window_rate", frozenset({"rate"}), "window", "cohens_h", 0.1, 30,
                  window_tests.window_rate,
                  "The current window's share against its seasonal baseline and the natural spread between "
                  "windows (beta-binomial); effect = Cohen's h.",
                  rows=window_tests.window_rate_rows),
        DriftTest("ks", frozenset({"continuous"}), "trace", "wasserstein_sigma", 0.1, 100, _pair(_ks),
                  "Two-sample Kolmogorov–Smirnov; effect = Wasserstein distance in reference standard deviations. "
                  "Counts traces as independent draws."),
        DriftTest("psi", frozenset({"continuous"}), "trace", "psi", 0.25, 200, _pair(_psi),
                  "Population stability index over 10 reference-quantile bins; p-value from a chi-square test "
                  "on the same bins. PSI 0.1–0.25 is a moderate shift, ≥ 0.25 a major one. Counts traces as "
                  "independent draws."),
        DriftTest("two_proportion", frozenset({"rate"}), "trace", "cohens_h", 0.2, 100, _pair(_two_proportion),
                  "Pooled two-proportion z test; effect = Cohen's h. Counts traces as independent draws."),
        DriftTest("chi_square", frozenset({"rate"}), "trace", "cohens_h", 0.2, 100, _pair(_chi_square),
                  "Pearson chi-square on the 2×2 table (no continuity correction); effect = Cohen's h. Counts "
                  "traces as independent draws."),
    )
}

#: the tests a feature of each kind runs unless its config (or the feature itself) says otherwise
DEFAULT_TESTS: dict[str, tuple[str, ...]] = {"continuous": ("window_mean",), "rate": ("window_rate",)}
#: the test whose result row carries the sequential rule (CUSUM), and the watch's test, per kind
PRIMARY_TEST: dict[str, str] = {"continuous": "window_mean", "rate": "window_rate"}
#: the tests whose z-scores the CUSUM accumulates, per kind, the first that the reference allows (a continuous
#: feature with an atom at its median — a count, a judge score — is accumulated by its mean)
CUSUM_TESTS: dict[str, tuple[str, ...]] = {"continuous": ("window_median", "window_mean"), "rate": ("window_rate",)}


def get_test(name: str) -> DriftTest:
    """The registered test called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown drift test {name!r}; known tests: {', '.join(sorted(REGISTRY))}") from None
