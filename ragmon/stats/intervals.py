"""Confidence intervals of a share, shared by every report that quotes one (the gate's coverage, the A/B
comparison's outcome rates, the drift benchmark's false-alarm rates). Pure functions: no I/O."""

from __future__ import annotations

import math

#: the normal quantile of a two-sided 95 % interval
Z95 = 1.959964


def wilson_interval(share: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (95 % by default) of a share observed over ``n`` cases; (nan, nan) when ``n`` is 0.

    Exact in form for a hit rate; for a mean of per-case values in [0, 1] (coverage) an approximation that stays
    inside [0, 1] and is honest about small n: 1 of 2 cases gives [0.09, 0.91]."""
    if n <= 0:
        return math.nan, math.nan
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
