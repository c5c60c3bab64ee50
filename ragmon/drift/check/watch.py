"""Pages within minutes: the window in progress, looked at between the checks with a group-sequential test.

The hourly check judges a window once it is complete, so a collapse that begins at 10:01 is seen at 11:00 at the
earliest. Between checks ``look`` tests the **window in progress** — its traces so far — with the same primary
window test as the check (``window_mean``, ``window_rate``: the same seasonal baseline, between-window spread,
question adjustment and innovation), every ``interval`` (5 minutes), and pages when a look's p-value is under the
share of the false-alarm budget that look may spend.

**The budget.** ``drift.sequential.false_alarms_per_day`` is the paging budget, shared: a share
(``drift.watch.budget_share``) goes to the looks, the rest to the CUSUM (``ragmon.drift.method.sequential``). With S
series assessed, W windows a day each, the looks at one series' window may together false-alarm with probability

    α_w = share · budget / (S · W)

so over a day the looks add at most ``share · budget`` false pages (``drift.watch.budget_share`` 0.5 of 0.1: one
in 20 days, over every series). Within a window α_w is **spent** over the looks by the Lan–DeMets Pocock-type
function of the elapsed fraction t of the window, ``α(t) = α_w · ln(1 + (e − 1) t)``, the last look at the check
on the complete window (t = 1). The boundaries are the exact group-sequential ones for a Brownian motion observed at
the looks (``boundaries``: look j pages when |z_j| ≥ c_j, the c_j such that the first crossing happens at look j
with probability α(t_j) − α(t_{j−1})). The looks of one window are cumulative means of its traces: without a
spread between windows they are exactly such a Brownian motion (corr(z_j, z_k) = √(n_j / n_k)); the window's random
effect adds one normal factor shared by every look, and by Šidák's theorem (1968) normal variables that share more of
a common factor stay inside two-sided boundaries at least as often — so the probability of a false page in a window
is at most α_w whatever the spread (up to the normal approximation of each look's test). At α_w ≈ 6·10⁻⁵ and 12 looks
the boundaries are |z| ≥ 4.47–4.49 at every look; Bonferroni over the same spending (the union bound) would ask 4.47 at
the first look rising to 4.66 at the last. Pocock-type spending puts more of the budget on the early looks than
O'Brien–Fleming's (which spends almost nothing before the end and would page no sooner than the check) — early is what
the watch is for; the large shift it exists to catch is large from its first traces.

Why not a mixture sequential probability ratio test (mSPRT), whose always-valid p-values need no look schedule?
Its likelihood ratio is for independent observations of a known variance; a window's traces share the window's
random effect (the between-window spread τ² of ``ragmon.drift.method.baseline``), which a partial window cannot estimate
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
from functools import lru_cache

import numpy as np
from scipy import special as _special
from scipy.optimize import brentq

from ragmon.drift.method.assess import Detector, Entry, Planned, cusum_planned
from ragmon.drift.method.comparison import Comparison
from ragmon.drift.method.registry import PRIMARY_TEST, NotTestable

DAY_SECONDS = 86400.0


def spending(t: float) -> float:
    """The share of a window's budget spent by the elapsed fraction ``t``: ln(1 + (e − 1) t) (Pocock type)."""
    t = min(max(t, 0.0), 1.0)
    return math.log1p((math.e - 1) * t)


@lru_cache(maxsize=64)
def boundaries(alpha: float, looks: int, points: int = 801) -> tuple[float, ...]:
    """Two-sided group-sequential boundaries, as |z|, for ``looks`` equally spaced looks (the last at the complete
    window) spending ``alpha`` by ``spending``: the exact crossing probabilities of a standard Brownian motion observed
    at fractions j/looks (Armitage, McPherson and Rowe's recursive integration on a grid of the continuation region;
    Jennison and Turnbull, ch. 19). Look j pages when its |z| reaches the j-th boundary; the probability that some
    look of a window does under no drift is ``alpha``."""
    out: list[float] = []
    grid = density = np.empty(0)
    before = 0.0
    for j in range(1, looks + 1):
        t = j / looks
        increment = alpha * (spending(t) - spending(before))
        if j == 1:
            c = float(-_special.ndtri(increment / 2))
        else:
            sd = math.sqrt(t - before)
            weights = np.full(grid.size, grid[1] - grid[0])
            weights[[0, -1]] /= 2
            mass = density * weights

            c = float(brentq(_crossing, 0.1, 40.0, args=(grid, mass, sd, math.sqrt(t), increment), xtol=1e-9))
        half = c * math.sqrt(t)
        new = np.linspace(-half, half, points)
        if j == 1:
            density = np.exp(-new ** 2 / (2 * t)) / math.sqrt(2 * math.pi * t)
        else:
            step = t - before
            density = (mass[None, :] * np.exp(-(new[:, None] - grid[None, :]) ** 2 / (2 * step))
                       / math.sqrt(2 * math.pi * step)).sum(axis=1)
        grid, before = new, t
        out.append(c)
    return tuple(out)


def _crossing(c: float, grid: np.ndarray, mass: np.ndarray, sd: float, root_t: float, target: float) -> float:
    """P(first crossing of ±c·√t at this look) − target, from the mass on the continuation grid of the last look."""
    upper, lower = (c * root_t - grid) / sd, (-c * root_t - grid) / sd
    return float(np.sum(mass * (_special.ndtr(lower) + _special.ndtr(-upper)))) - target


def look_boundary(alpha_w: float, look: int, looks: int) -> float:
    """The p-value look ``look`` of ``looks`` must reach to page, for a window budget ``alpha_w``."""
    key = float(f"{alpha_w:.4g}")  # the budget changes with the series assessed; its boundaries are cached
    c = boundaries(key, looks)[min(max(look, 1), looks) - 1]
    return float(2 * _special.ndtr(-c))


def look_share(elapsed_seconds: float | None, interval_seconds: float, window_seconds: float) -> tuple[int, float]:
    """The look a time ``elapsed_seconds`` into the window is (1 for the first look, at one interval), and the
    share of the window's budget it may spend; (0, 0) before the first look. ``None`` (or the window's length): the
    final look, at the check, on the complete window — it spends what the looks before it left."""
    last = math.ceil(window_seconds / interval_seconds)  # the final look's number
    if elapsed_seconds is None or elapsed_seconds >= window_seconds:
        return last, 1.0 - spending((last - 1) * interval_seconds / window_seconds)
    j = int(elapsed_seconds // interval_seconds)
    if j < 1:
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


def look(entries: Sequence[Entry], *, elapsed_seconds: float | None, interval_seconds: float,
         false_alarms_per_day: float, detector: Detector | None = None,
         per_day: float | None = None) -> list[Looked]:
    """Test window 0 of every entry — the window in progress, ``elapsed_seconds`` into it (None: complete, the
    final look at the check) — with the statistic its CUSUM accumulates (``assess.cusum_planned``), against the share
    of ``false_alarms_per_day`` (the watch's share of the budget) this look may spend. ``per_day``: S · W (default:
    ``series_per_day`` of these entries). Entries whose window so far is too small for the primary test, or that
    have none, are left out."""
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
        j, _ = look_share(elapsed_seconds, interval_seconds, window_seconds)
        n = int(entry.series.n[0])
        if j == 0 or n < primary.min_samples:
            continue
        guard = max(0, min(d.lookback, d.reference // 2) - 1)
        comparison = Comparison(entry.series, 0, d.reference, max(1, d.period),
                                min_window=max(1, math.ceil(primary.min_samples / 2)), pooled=1, guard=guard)
        # the statistic the CUSUM accumulates: the sharper of mean, median
        chosen = cusum_planned(primary, comparison, entry.tests)
        try:
            outcome = chosen.test.run(comparison)
        except NotTestable:
            continue
        boundary = look_boundary(alpha_w, j, math.ceil(window_seconds / interval_seconds))
        alarm = (math.isfinite(outcome.p_value) and outcome.p_value <= boundary
                 and outcome.effect >= primary.effect_threshold)
        out.append(Looked(entry.key, chosen, n, outcome.statistic, outcome.p_value, outcome.effect, boundary,
                          bool(alarm), window_seconds if elapsed_seconds is None else elapsed_seconds, j))
    return out
