"""What a replay carries from one check to the next: primary z-scores computed on exactly the same windows.

A check's CUSUM adds up the primary test's z-scores of its last ``lookback`` windows, each against its own
reference, so a check computes ``lookback`` comparisons per (group, feature) — most of a check's time in Python.
``drift backtest`` runs a check every window; consecutive checks share all but one of those windows. The z-score
of a window depends only on the summaries of that window and of the reference windows after it (and on the
settings, the same for every check of a replay), so when a check's series, shifted by one window, equals the
previous check's, the previous z-scores are this check's, one index further back. ``ZReuse.advance`` hands the
check exactly those; anything whose windows differ — scores adjusted against a moved question level
(``drift.by_query``), a version share whose look-back moved, late traffic, a pooled block (blocks start at the
current window), a pinned reference, a window of another length — is computed afresh. Equal inputs, equal
outputs: a replayed check is the check ``drift check --at`` runs, only faster.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragmon.drift.method.assess import Entry, ZCache
from ragmon.drift.method.series import Series
from ragmon.drift.method.windows import WindowPlan


@dataclass
class ZReuse:
    """Carries one replay's z-scores forward, a window (``step_seconds``) at a time. Not thread-safe."""

    step_seconds: int
    cache: ZCache = field(default_factory=dict)
    series: dict[Hashable, Series] = field(default_factory=dict)

    def advance(self, entries: Sequence[Entry], plans: Mapping[int, WindowPlan]) -> ZCache:
        """The cache for a check one step after the last one ``advance`` was given (``plans``: each entry's window
        plan by ``id``). ``assess`` fills it with what it computes; the next ``advance`` carries that on."""
        carried: ZCache = {}
        same: set[Hashable] = set()
        series: dict[Hashable, Series] = {}
        for entry in entries:
            wp = plans[id(entry)]
            if wp.pinned or wp.length != self.step_seconds:
                continue
            series[entry.key] = entry.series
            before = self.series.get(entry.key)
            if before is not None and _shifted(before, entry.series):
                same.add(entry.key)
        for (key, pooled, at, test), value in self.cache.items():
            # the current window's z holds its design effect (``window_tests._deff``), which a window past is
            # assessed without: it is computed again, one check later, as ``drift check --at`` computes it
            if pooled == 1 and key in same and at > 0:
                carried[(key, 1, at + 1, test)] = value
        self.cache, self.series = carried, series
        return carried


def _shifted(before: Series, now: Series) -> bool:
    """Whether ``now``'s windows from index 1 on are ``before``'s from index 0 on (the same windows, one check
    later), summary for summary."""
    if before.kind != now.kind or len(before) != len(now) or len(now) < 2:
        return False
    for a, b in ((before.n, now.n), (before.mean, now.mean), (before.std, now.std), (before.q, now.q),
                 (before.k, now.k), (before.var, now.var)):
        if (a is None) != (b is None):
            return False
        if a is not None and b is not None and not np.array_equal(a[:-1], b[1:], equal_nan=True):
            return False
    return True
