"""Comparing two question-type distributions: the golden set's counts against live traffic's, in one stratum.

Owns the statistics: the G-test (log-likelihood ratio) of the 2×K contingency table through SciPy, Cramér's V
from the Pearson statistic, the total variation distance of the two share vectors, and which types traffic asks
more than the golden set holds. The decision rests on the effect size (TVD above ``max_distance``) *and* a small
p-value: production traffic is not independent draws (the mix moves hour to hour), so with enough traffic any
difference is "significant", and the test alone would always fire. Pure: no I/O, no clock, no store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scipy.stats import chi2_contingency

#: a stratum's outcome: the golden set describes traffic, no longer does, or one side is too small to say
MATCHES, DIVERGED, TOO_SMALL, NO_GOLDEN = "matches", "diverged", "too_small", "no_golden_cases"
#: traffic without a category and no golden case of the ``uncategorized`` stratum: compared in ``all`` only
NO_CATEGORY = "no_category"


@dataclass(frozen=True)
class CoverageThresholds:
    """The parameters a comparison applied (recorded in every result)."""

    max_distance: float = 0.2
    alpha: float = 0.01
    min_traces: int = 50
    min_share_gap: float = 0.05

    @classmethod
    def of(cls, settings: Any) -> CoverageThresholds:
        """From the ``coverage`` settings section (any object with these fields)."""
        return cls(settings.max_distance, settings.alpha, settings.min_traces, settings.min_share_gap)


@dataclass(frozen=True)
class TypeShare:
    question_type: str
    golden: int
    traffic: int
    golden_share: float
    traffic_share: float

    @property
    def gap(self) -> float:
        """Traffic share minus golden share: positive when traffic asks this type more than the set holds."""
        return self.traffic_share - self.golden_share


@dataclass(frozen=True)
class StratumCoverage:
    """One stratum's comparison, with the statistics and the thresholds applied."""

    stratum: str
    status: str
    golden_cases: int
    traffic: int
    shares: tuple[TypeShare, ...]
    distance: float
    g_statistic: float
    p_value: float
    cramers_v: float
    under_represented: tuple[str, ...]
    thresholds: CoverageThresholds


def shares_of(golden: Mapping[str, int], traffic: Mapping[str, int], types: tuple[str, ...]) -> tuple[TypeShare, ...]:
    ng, nt = sum(golden.values()), sum(traffic.values())
    names = [*types, *sorted((set(golden) | set(traffic)) - set(types))]
    return tuple(TypeShare(t, golden.get(t, 0), traffic.get(t, 0), golden.get(t, 0) / ng if ng else 0.0,
                           traffic.get(t, 0) / nt if nt else 0.0) for t in names)


def total_variation(shares: tuple[TypeShare, ...]) -> float:
    """Half the L1 distance between the two share vectors, in [0, 1]."""
    return min(1.0, 0.5 * sum(abs(s.gap) for s in shares))


def g_test(golden: Mapping[str, int], traffic: Mapping[str, int]) -> tuple[float, float, float]:
    """(G statistic, p-value, Cramér's V) of the 2×K table, dropping types neither side has.

    One type on both sides, or an empty side: nothing to test (0, 1, 0)."""
    types = sorted(t for t in set(golden) | set(traffic) if golden.get(t, 0) + traffic.get(t, 0) > 0)
    table = [[golden.get(t, 0) for t in types], [traffic.get(t, 0) for t in types]]
    n = sum(map(sum, table))
    if len(types) < 2 or not sum(table[0]) or not sum(table[1]):
        return 0.0, 1.0, 0.0
    g, p, _, _ = chi2_contingency(table, correction=False, lambda_="log-likelihood")
    pearson = chi2_contingency(table, correction=False)[0]
    v = math.sqrt(pearson / n)  # min(rows, cols) - 1 == 1 for a 2×K table
    return float(g), float(p), min(1.0, float(v))


def compare_stratum(stratum: str, golden: Mapping[str, int], traffic: Mapping[str, int], types: tuple[str, ...],
                    thresholds: CoverageThresholds) -> StratumCoverage:
    """Compare one stratum's golden-set and traffic question-type counts."""
    shares = shares_of(golden, traffic, types)
    ng, nt = sum(golden.values()), sum(traffic.values())
    # with one side empty there is no distribution to compare: no distance and no test (NaN: "-" and null in
    # reports, no gauge), never the 0 and p = 1 of a perfect match
    g, p, v = g_test(golden, traffic) if ng and nt else (math.nan, math.nan, math.nan)
    distance = total_variation(shares) if ng and nt else math.nan
    under = tuple(s.question_type for s in sorted(shares, key=lambda s: -s.gap)
                  if s.traffic > 0 and s.gap >= thresholds.min_share_gap) if ng and nt else ()
    if not ng:
        status = NO_GOLDEN if nt >= thresholds.min_traces else TOO_SMALL
        under = tuple(s.question_type for s in sorted(shares, key=lambda s: -s.traffic) if s.traffic)
    elif nt < thresholds.min_traces:
        status, under = TOO_SMALL, ()
    elif distance > thresholds.max_distance and p < thresholds.alpha:
        status = DIVERGED
    else:
        status = MATCHES
    return StratumCoverage(stratum, status, ng, nt, shares, distance, g, p, v, under, thresholds)
