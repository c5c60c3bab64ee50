"""One drift check over window series: pooling, every test of every (group, feature), BH, and the CUSUM.

``assess`` is the pure core that the live check, ``drift check --at`` and ``drift backtest`` share: given the
per-window series of every (group, feature) — window 0 the newest — and which window is current, it

1. **pools** a group whose current window holds fewer traces than its tests need: ``j`` consecutive windows
   become one block (``j`` from ``POOL_SIZES``, at most ``max_pool``), so a low-traffic stratum is assessed over
   two, three, … hours instead of not at all; the result carries ``pooled = j``. A rare rate is pooled (up to
   ``MAX_EVENT_POOL`` windows) until its block expects ``MIN_EXPECTED_EVENTS`` of its rarer outcome. With no block
   large enough the tests report ``insufficient_data`` and the group counts as not assessed (``RagmonDriftBlind``);
2. runs every planned test on a ``Comparison`` and **decides** them together (``decide``: Benjamini–Hochberg
   within each stratum, Bonferroni across strata, effect and sample-size gates) — the per-check verdict, whose
   false-alarm rate is at most ``alpha``, and at most ``alpha / strata`` in a stratum without drift whatever the
   others hold;
3. runs the **CUSUM** (``sequential``) of each (group, feature) over the z-scores of the last ``lookback`` windows
   (of a continuous feature's mean or median, whichever the reference says is sharper; of a rate's share:
   ``cusum_planned``), each against its own reference, with the threshold set by the daily false-alarm
   budget over the series assessed in this check — the persistent-drift verdict that pages.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ragmon.drift.method.comparison import Comparison, TestOutcome
from ragmon.drift.method.decide import Candidate, Decision, decide
from ragmon.drift.method.registry import PRIMARY_TEST, DriftTest, NotTestable, get_test
from ragmon.drift.method.sequential import Cusum, cusum, threshold
from ragmon.drift.method.series import Series
from ragmon.drift.method.window_tests import has_median_density

#: block sizes a low-traffic group is pooled into (divisors of a day of hours first, so slots stay aligned)
POOL_SIZES = (1, 2, 3, 4, 6, 8, 12, 24, 48, 72, 168)
#: a rate's current block must expect at least this many of its rarer outcome at the reference share (an empty
#: shortlist in 1 % of traces, 50 traces an hour: two windows). With fewer, a Poisson count is mostly 0 and no
#: rise of the rate can reach significance in one window; a share never seen to vary (0 events) never pools.
MIN_EXPECTED_EVENTS = 1.0
#: ... but for events alone it pools at most this many windows: a rarer outcome than that is left to the CUSUM,
#: so a stale index's slowly rising share is not judged a day late
MAX_EVENT_POOL = 4


@dataclass(frozen=True, slots=True)
class Planned:
    """One test of one feature with its thresholds (a ``features.TestPlan`` satisfies it)."""

    test: DriftTest
    threshold: float
    effect_threshold: float
    min_samples: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One (group, feature) to assess: its key, its tests, its window series (newest first), and how its windows
    are compared (``None``: the detector ``assess`` is given)."""

    key: Hashable
    tests: Sequence[Planned]
    series: Series
    detector: Detector | None = None
    #: the stratum (retriever, variant, stratum) the entry's tests are adjusted within; None: the key's first
    #: element for a tuple key (``(group, feature)``), else the key
    stratum: Hashable = None

    @property
    def family(self) -> Hashable:
        """The multiple-testing family of this entry's tests (``decide``)."""
        if self.stratum is not None:
            return self.stratum
        return self.key[0] if isinstance(self.key, tuple) and self.key else self.key


@dataclass(frozen=True, slots=True)
class Detector:
    """How windows are compared: ``reference`` windows before the current one, seasonal slots of ``period``
    windows (1: none), CUSUM over ``lookback`` windows with reference value ``k`` and a threshold from
    ``false_alarms_per_day`` across all series — for ``arl_margin`` times the run length Siegmund's formula
    gives, because the z-scores of heterogeneous traffic are not the independent N(0, 1) draws it assumes
    (docs/drift.md, "Persistence") — pooling up to ``max_pool`` windows."""

    reference: int = 168
    period: int = 24
    lookback: int = 24
    k: float = 1.0
    false_alarms_per_day: float = 0.1
    windows_per_day: float = 24.0
    max_pool: int = 24
    clip: float = math.inf
    arl_margin: float = 10.0

    @property
    def history(self) -> int:
        """Windows a check needs, the current one included."""
        return 1 + self.reference + self.lookback


@dataclass(frozen=True, slots=True)
class Assessed:
    """One test of one (group, feature) in one check. ``cusum`` is set on the primary test's row."""

    key: Hashable
    planned: Planned
    comparison: Comparison
    decision: Decision
    pooled: int
    cusum: Cusum | None


#: (entry key, block size, first window of the block, the CUSUM's test) → that test's (z, rho) there
ZCache = dict[tuple[Hashable, int, int, str], tuple[float, float]]


def assess(entries: Sequence[Entry], detector: Detector | None = None, *, current: int = 0,
           cache: ZCache | None = None) -> list[Assessed]:
    """Assess every entry at window ``current`` of its series. A caller assessing the same entries at many
    windows can pass one ``cache`` so each window's primary z-score is computed once (it depends only on the
    window and the block size, not on which check asks) — only when the series are the same for every window
    assessed: ``drift backtest`` runs each replayed check on its own query instead (``ragmon.drift.backtest.backtest``).
    The CUSUM budget and ``k`` are ``detector``'s; each entry's windows are compared by its own detector when it has
    one."""
    detector = detector or Detector()
    prepared = [(e, *_prepare(e, e.detector or detector, current)) for e in entries]
    candidates = [Candidate(p.test, cmp, p.threshold, p.effect_threshold, p.min_samples, e.family)
                  for e, _, comparisons in prepared for p, cmp in comparisons]
    decisions = iter(decide(candidates))
    rows: list[tuple[Entry, Planned, Comparison, Decision, int]] = []
    for entry, pooled, comparisons in prepared:
        for planned, comparison in comparisons:
            rows.append((entry, planned, comparison, next(decisions), pooled))
    histories = {id(entry): _z_history(entry, pooled, comparisons, entry.detector or detector, current, cache)
                 for entry, pooled, comparisons in prepared}
    # the budget is shared by every series assessed now, each contributing its windows per day
    windows_per_day = sum((e.detector or detector).windows_per_day / pooled for e, pooled, _ in prepared
                          if (z := histories[id(e)]) is not None and math.isfinite(z[0][-1]))
    target = max(windows_per_day, detector.windows_per_day) / detector.false_alarms_per_day
    h = threshold(detector.k, target * detector.arl_margin)
    out = []
    for entry, planned, comparison, decision, pooled in rows:
        state = None
        history = histories[id(entry)]
        if history is not None and planned.test.name == PRIMARY_TEST[comparison.kind]:
            zs, persistence = history
            # the window tests' z-scores are already innovations; persistence beyond one lag scales them down
            state = cusum([z / math.sqrt(persistence) for z in zs], k=detector.k, h=h, clip=detector.clip)
        out.append(Assessed(entry.key, planned, comparison, decision, pooled, state))
    return out


def _prepare(entry: Entry, d: Detector, current: int) -> tuple[int, list[tuple[Planned, Comparison]]]:
    """Choose the pooling of the entry and build one comparison per planned test: the fewest windows whose
    traffic lets the entry's least demanding test run (tests that need more run when that suffices for them too);
    none when even ``max_pool`` windows are not enough (the tests then say so)."""
    need = min((p.min_samples for p in entry.tests), default=1)
    n = entry.series.n
    rare = _rare_share(entry.series, current, d.reference)
    sizes = [size for size in POOL_SIZES if size <= d.max_pool]
    enough = [size for size in sizes if int(n[current:current + size].sum()) >= need]
    # a rate's block must also expect an event (when some block within max_pool can); else traces decide
    events = [size for size in enough if size <= MAX_EVENT_POOL and rare > 0
              and int(n[current:current + size].sum()) * rare >= MIN_EXPECTED_EVENTS]
    pooled = events[0] if events else enough[0] if enough else 1
    series = entry.series if pooled == 1 else _shift(entry.series, current).blocks(pooled)
    at = current if pooled == 1 else 0
    period = d.period // pooled if d.period % pooled == 0 else 1
    reference = max(1, d.reference // pooled)
    guard = max(0, min(d.lookback // pooled, reference // 2) - 1)
    comparisons = [(p, Comparison(series, at, reference, max(1, period),
                                  min_window=max(1, math.ceil(p.min_samples / 2)), pooled=pooled, guard=guard))
                   for p in entry.tests]
    return pooled, comparisons


def _rare_share(series: Series, current: int, reference: int) -> float:
    """The reference share of a rate's rarer outcome (1 for a continuous feature): a window of n traces expects
    ``n ×`` this many of the events a shift of the rate is seen in."""
    if series.kind != "rate" or series.k is None:
        return 1.0
    ref = slice(current + 1, current + 1 + reference)
    trials = float(series.n[ref].sum())
    if trials <= 0:
        return 1.0
    share = float(series.k[ref].sum()) / trials
    return min(share, 1 - share)


def cusum_planned(planned: Planned, comparison: Comparison, tests: Sequence[Planned] = ()) -> Planned:
    """The test the CUSUM accumulates for an entry whose primary test is ``planned`` (``registry.CUSUM_TESTS``): for
    a continuous feature whose distribution's shape is tested (a quantile test among ``tests``: the retrieval
    scores), of its window mean and median the one whose z-score a shift moves more — the smaller spread, between
    windows and within the current one, ``τ² + v₀`` — the median only where the reference has a density there; else
    its mean (a count's drift is a share of traces moving to 0, which the median does not see); a rate's share. Chosen
    from the reference's spreads and the current window's size, never from its value, and once per check, so a check
    accumulates one statistic over its look-back. On independent draws the mean is the sharper (the median's sampling
    variance is π/2 times the mean's for normal scores); on traffic that mixes recurring questions, adjusted tightly,
    with new ones and bursts the adjustment cannot reach, the median (its spread between windows was half the mean's on
    composite traffic)."""
    shaped = any(p.test.name in ("window_quantiles", "window_median") for p in tests)
    if comparison.kind != "continuous" or not shaped or not has_median_density(comparison):
        return planned
    median = Planned(get_test("window_median"), planned.threshold, planned.effect_threshold, planned.min_samples)
    try:
        spreads = [_spread(p.test.run(comparison)) for p in (planned, median)]
    except NotTestable:
        return planned
    return median if spreads[1] < spreads[0] else planned


def _spread(outcome: TestOutcome) -> float:
    tau, sampling = outcome.details.get("tau", math.nan), outcome.details.get("sampling_sd", math.nan)
    return float(tau) ** 2 + float(sampling) ** 2  # type: ignore[arg-type]


def _z_history(entry: Entry, pooled: int, comparisons: list[tuple[Planned, Comparison]], d: Detector,
               current: int, cache: ZCache | None) -> tuple[list[float], float] | None:
    """The CUSUM test's z-scores over the last ``lookback`` windows (oldest first) and the current window's
    persistence (the innovations' long-run variance ratio); None when the entry has no primary test."""
    primary = next(((p, c) for p, c in comparisons if p.test.name == PRIMARY_TEST[c.kind]), None)
    if primary is None:
        return None
    planned, comparison = primary
    planned = cusum_planned(planned, comparison, entry.tests)
    steps = max(1, d.lookback // pooled)
    found: dict[int, tuple[float, float]] = {}  # back → (z, persistence)
    pending: list[tuple[int, Hashable, Comparison]] = []
    for back in range(steps - 1, -1, -1):
        at = comparison.current + back
        if at >= len(comparison.series):
            continue
        key = (entry.key, pooled, current + back * pooled, planned.test.name)
        if cache is not None and key in cache:
            found[back] = cache[key]
        elif int(comparison.series.n[at]) < planned.min_samples:
            found[back] = (math.nan, 1.0)
        else:
            pending.append((back, key, Comparison(comparison.series, at, comparison.reference, comparison.period,
                                                  comparison.min_window, comparison.pooled, comparison.guard)))
    # the look-back's windows tested together (``DriftTest.run_rows``): one at a time, they took 0.14 s more of a
    # check over 10 M traces
    for (back, _, _), outcome in zip(pending, planned.test.run_rows([c for *_, c in pending]), strict=True):
        found[back] = (math.nan, 1.0) if isinstance(outcome, NotTestable) else (
            outcome.statistic, float(outcome.details.get("persistence", 1.0)))  # type: ignore[arg-type]
    if cache is not None:
        cache.update((key, found[back]) for back, key, _ in pending)
    backs = sorted(found, reverse=True)
    zs = [found[back][0] for back in backs] or [math.nan]
    return zs, found[0][1] if 0 in found else 1.0


def _shift(series: Series, start: int) -> Series:
    """The series from window ``start`` on (so pooled blocks begin at the current window)."""
    if start == 0:
        return series
    s = slice(start, None)
    return Series(series.kind, series.n[s],
                  None if series.mean is None else series.mean[s], None if series.std is None else series.std[s],
                  None if series.q is None else series.q[s], None if series.k is None else series.k[s],
                  None if series.var is None else series.var[s])
