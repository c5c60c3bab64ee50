"""Pages within minutes: the window in progress, looked at between the checks with a group-sequential test.

The hourly check judges a window once it is complete, so a collapse that begins at 10:01 is seen at 11:00 at the
earliest. Between checks ``look`` tests the **window in progress** — its traces so far — with the same primary
window test as the check (``window_mean``, ``window_rate``: the same seasonal baseline, between-window spread,
question adjustment and innovation), every ``interval`` (5 minutes), and pages when a look's p-value is under the
share of the false-alarm budget that look may spend.

**The budget.** ``drift.sequential.false_alarms_per_day`` is the paging budget, shared: a share
(``drift.watch.budget_share``) goes to the looks, the rest to the CUSUM (``ragmon.drift.sequential``). With S
series assessed, W windows a day each, the looks at one series' window may together false-alarm with probability

    α_w = share · budget / (S · W)

so over a day the looks add at most ``share · budget`` false pages (``drift.watch.budget_share`` 0.5 of 0.1: one
in 20 days, over every series). Within a window α_w is **spent** over the looks by the Lan–DeMets Pocock-type
function of the elapsed fraction t of the window, ``α(t) = α_w · ln(1 + (e − 1) t)``: look j (at ``j·interval``)
may spend ``α(t_j) − α(t_{j−1})`` and pages when its p-value is at most that, with the effect gate of the check.
By the union bound the window's looks false-alarm with probability at most ``α_w`` whatever the correlation
between them — the looks of a window share its traces and its random effect, and that correlation depends on the
spread between windows and on the window's own heterogeneity, which are estimated, so an exact group-sequential
boundary would rest on estimates where the union bound rests on nothing (and costs little: at α_w ≈ 10⁻⁵ the two
boundaries are within a few tenths of a z-unit). Pocock-type spending puts more of the budget on the early looks
than O'Brien–Fleming's (which spends almost nothing before the end and would page no sooner than the check) —
early is what the watch is for; the large shift it exists to catch is large from its first traces.

Why not a mixture sequential probability ratio test (mSPRT), whose always-valid p-values need no look schedule?
Its likelihood ratio is for independent observations of a known variance; a window's traces share the window's
random effect (the between-window spread τ² of ``ragmon.drift.baseline``), which a partial window cannot estimate
and which does not shrink as traces arrive: an mSPRT over traces is the per-trace test that alarms on every busy
hour of real traffic (docs/drift.md, "Traffic is not independent draws"). Spending the budget over looks at the
window test keeps the window as the unit.

A look tests only groups whose window so far holds the primary test's ``min_samples`` without pooling; a pooled
low-traffic group is the check's. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from scipy import special as _special

from ragmon.drift.assess import Detector, Entry, Planned
from ragmon.drift.comparison import Comparison
from ragmon.drift.registry import PRIMARY_TEST, NotTestable

DAY_SECONDS = 86400.0


def spending(t: float) -> float:
    """The share of a window's budget spent by the elapsed fraction ``t``: ln(1 + (e − 1) t) (Pocock type)."""
    t = min(max(t, 0.0), 1.0)
    return math.log1p((math.e - 1) * t)


def look_share(elapsed_seconds: float, interval_seconds: float, window_seconds: float) -> tuple[int, float]:
    """The look a time ``elapsed_seconds`` into the window is (1 for the first look, at one interval), and the
    share of the window's budget it may spend; (0, 0) before the first look or once the window is complete (the
    check judges the whole window)."""
    j = int(elapsed_seconds // interval_seconds)
    if j < 1 or j * interval_seconds >= window_seconds:
        return 0, 0.0
    return j, spending(j * interval_seconds / window_seconds) - spending((j - 1) * interval_seconds / window_seconds)


@dataclass(frozen=True, slots=True)
class Looked:
    """One series at one look: the partial window's primary test, the p-value it had to be under, and whether it
    pages. ``boundary_z`` is that p-value as a normal z (two-sided)."""

    key: Hashable
    planned: Planned
    n: int
    z: float
    p_value: float
    effect: float
    boundary: float
    alarm: bool
    elapsed_seconds: float
    look: int

    @property
    def boundary_z(self) -> float:
        return float(-_special.ndtri(self.boundary / 2)) if self.boundary > 0 else math.inf


def series_per_day(entries: Sequence[Entry], detector: Detector | None = None) -> float:
    """S · W: series with a primary test times their windows a day — what the budget is shared over."""
    default = detector or Detector()
    return sum((e.detector or default).windows_per_day for e in entries
               if any(p.test.name == PRIMARY_TEST[e.series.kind] for p in e.tests))


def look(entries: Sequence[Entry], *, elapsed_seconds: float, interval_seconds: float,
         false_alarms_per_day: float, detector: Detector | None = None,
         per_day: float | None = None) -> list[Looked]:
    """Test window 0 of every entry — the window in progress, ``elapsed_seconds`` into it — with its primary test,
    against the share of ``false_alarms_per_day`` (the watch's share of the budget) this look may spend. ``per_day``:
    S · W (default: ``series_per_day`` of these entries). Entries whose window so far is too small for the primary
    test, or that have none, are left out."""
    default = detector or Detector()
    per_day = per_day if per_day is not None else series_per_day(entries, default)
    if per_day <= 0:
        return []
    alpha_w = false_alarms_per_day / per_day
    out = []
    for entry in entries:
        d = entry.detector or default
        primary = next((p for p in entry.tests if p.test.name == PRIMARY_TEST[entry.series.kind]), None)
        if primary is None:
            continue
        window_seconds = DAY_SECONDS / d.windows_per_day
        j, share = look_share(elapsed_seconds, interval_seconds, window_seconds)
        n = int(entry.series.n[0])
        if j == 0 or n < primary.min_samples:
            continue
        guard = max(0, min(d.lookback, d.reference // 2) - 1)
        comparison = Comparison(entry.series, 0, d.reference, max(1, d.period),
                                min_window=max(1, math.ceil(primary.min_samples / 2)), pooled=1, guard=guard)
        try:
            outcome = primary.test.run(comparison)
        except NotTestable:
            continue
        boundary = alpha_w * share
        alarm = (math.isfinite(outcome.p_value) and outcome.p_value <= boundary
                 and outcome.effect >= primary.effect_threshold)
        out.append(Looked(entry.key, primary, n, outcome.statistic, outcome.p_value, outcome.effect, boundary,
                          bool(alarm), elapsed_seconds, j))
    return out
