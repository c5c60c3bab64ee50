"""Simulated traffic checked without a store: each check's windows summarised in numpy as the drift SQL summarises
them, for the benchmark (``bench/drift_null.py``) and the tests.

A ``History`` keeps, per stratum, the last windows of traces drawn from ``ragmon.drift.simulation.traffic`` (each
trace's question, time and feature values). ``History.check(plans, detector)`` prepares the check at the end of the
newest window the way ``DriftChecker.entries`` does on ClickHouse: every window summarised (count, mean, standard
deviation, exact quantiles where a test reads them), each ``Feature.by_query`` feature adjusted for the question
against this check's own reference (``ragmon.drift.simulation.by_query``, the numpy twin of ``query.traces_sql``), rates
with their sampling variance. ``Check.entries(until)`` gives the entries to ``assess`` (the hourly check) or to
``watch.look`` (the window still in progress, its traces before ``until``): the reference windows and the
question levels are the same for both, so the looks of a window reuse the check's preparation. The decision is
``ragmon.drift.method.assess`` / ``ragmon.drift.check.watch``, as in the live check: nothing here decides anything.

Pure: numpy only, no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragmon.drift.method.assess import Detector, Entry, Planned
from ragmon.drift.method.features import FEATURES
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import ContinuousSummary, RateSummary, Summary
from ragmon.drift.simulation.by_query import RATE_PRIOR_ASKS, adjusted, adjusted_rate, levels_of_features
from ragmon.drift.simulation.draw import NO_SHIFT, Draw, Shift
from ragmon.drift.simulation.traffic import Stratum

#: the tests that read nothing but a window's count, mean and standard deviation (or its count of events)
_MOMENTS_ONLY = frozenset({"window_mean", "window_rate"})
#: features measured on the retrieved chunks rather than on each trace
_PER_CHUNK = "newest_version_share"


@dataclass(frozen=True, slots=True)
class Window:
    """One stratum's traces in one window: their questions (None: none recorded), times (days) and, per feature, one
    value a trace (NaN where a trace has none: the scores of an empty shortlist); the chunk feature per chunk, with
    the time of its trace."""

    keys: np.ndarray | None
    times: np.ndarray
    values: Mapping[str, np.ndarray]
    chunk_times: np.ndarray | None = None
    chunks: np.ndarray | None = None

    @classmethod
    def of(cls, draw: Draw) -> Window:
        per_trace: dict[str, np.ndarray] = {}
        full = ~draw.empty
        for name, values in draw.features().items():
            if name == _PER_CHUNK:
                continue
            if values.size == draw.times.size:
                per_trace[name] = np.asarray(values, dtype=float)
            else:  # measured on non-empty shortlists only
                aligned = np.full(draw.times.size, np.nan)
                aligned[full] = values
                per_trace[name] = aligned
        chunk_times = chunks = None
        if draw.stale is not None:
            retrieved = np.isfinite(draw.scores)
            chunk_times = np.broadcast_to(draw.times[:, None], draw.stale.shape)[retrieved]
            chunks = ~draw.stale[retrieved]
        return cls(draw.queries, draw.times, per_trace, chunk_times, chunks)

    def before(self, until: float | None) -> Window:
        """The traces timestamped before ``until`` (days; None: all)."""
        if until is None:
            return self
        keep = self.times < until
        chunk_keep = self.chunk_times < until if self.chunk_times is not None else None
        return Window(None if self.keys is None else self.keys[keep], self.times[keep],
                      {k: v[keep] for k, v in self.values.items()},
                      None if chunk_keep is None else self.chunk_times[chunk_keep],  # type: ignore[index]
                      None if chunk_keep is None else self.chunks[chunk_keep])  # type: ignore[index]

    def feature(self, name: str) -> np.ndarray:
        return self.chunks if name == _PER_CHUNK else self.values[name]  # type: ignore[return-value]


def summarise(values: np.ndarray, kind: str, *, quantiles: bool = True) -> Summary:
    """A window's summary of values as served (non-finite values dropped)."""
    if kind == "rate":
        return RateSummary.from_samples(np.asarray(values, dtype=bool))
    return ContinuousSummary.from_samples(values, quantiles=quantiles)


@dataclass
class Check:
    """One check's prepared windows: every window after the current one summarised, and what adjusts the current
    one (its question levels and M per feature). ``entries(until)`` completes it with the current window."""

    plans: Mapping[str, Sequence[Planned]]
    rest: dict[tuple[int, str], list[Summary]]
    current: list[Window]
    levels: dict[tuple[int, str], tuple[np.ndarray, float]]
    quantiles: frozenset[str]

    def entries(self, until: float | None = None) -> list[Entry]:
        """The entries of the check (``until`` None) or of a look at the current window's traces before ``until``."""
        out = []
        for (s, name), rest in self.rest.items():
            window = self.current[s]
            keep = window.times < until if until is not None else None
            values = window.feature(name)
            kind = FEATURES[name].kind
            if (s, name) in self.levels:
                level, mean = self.levels[s, name]
                if keep is not None:
                    values, level = values[keep], level[keep]
                keys = window.keys if keep is None else window.keys[keep]  # type: ignore[index]
                current = (adjusted_rate(values, level, mean) if kind == "rate" else
                           ContinuousSummary.from_samples(adjusted(values, level, mean),
                                                          quantiles=name in self.quantiles, keys=keys))
            else:
                if keep is not None:
                    values = window.before(until).feature(name)
                current = summarise(values, kind, quantiles=name in self.quantiles)
            out.append(Entry((s, name), self.plans[name], Series.from_summaries([current, *rest])))
        return out


@dataclass
class History:
    """The last ``keep`` windows of each stratum (oldest first), drawn hour by hour from ``strata``."""

    strata: list[Stratum]
    per_window: int
    keep: int
    by_query: bool = True
    windows: list[deque[Window]] = field(init=False)
    hours: int = 0

    def __post_init__(self) -> None:
        self.windows = [deque(maxlen=self.keep) for _ in self.strata]

    def draw(self, windows: int = 1, shift: Shift | None = None, drifting: Sequence[int] = (0,)) -> None:
        """Draw ``windows`` more hours of every stratum; ``shift`` into the ``drifting`` strata."""
        for _ in range(windows):
            for s, st in enumerate(self.strata):
                mine = shift if shift is not None and s in drifting else NO_SHIFT
                self.windows[s].append(Window.of(st.draw(self.per_window, self.hours % 24, self.hours / 24, mine)))
            self.hours += 1

    def served_sd(self, s: int, name: str, windows: int) -> float:
        """The standard deviation of a feature's values as served over the last ``windows`` windows."""
        values = np.concatenate([w.feature(name) for w in list(self.windows[s])[-windows:]]).astype(float)
        return float(np.nanstd(values))

    def check(self, plans: Mapping[str, Sequence[Planned]], detector: Detector, current: int = 0) -> Check:
        """The check at the end of the window ``current`` windows before the newest (0: the newest)."""
        quantiles = frozenset(n for n, ps in plans.items() if any(p.test.name not in _MOMENTS_ONLY for p in ps))
        rest: dict[tuple[int, str], list[Summary]] = {}
        levels: dict[tuple[int, str], tuple[np.ndarray, float]] = {}
        now: list[Window] = []
        for s, kept in enumerate(self.windows):
            stored = list(kept)
            end = len(stored) - current
            newest_first = stored[max(0, end - detector.history):end][::-1]
            now.append(newest_first[0])
            reference = range(1, min(detector.reference, len(newest_first) - 1) + 1)
            names = [n for n in plans if n in FEATURES]
            adjusting = [n for n in names
                         if self.by_query and FEATURES[n].by_query and newest_first[0].keys is not None]
            if adjusting:
                by_name, means = levels_of_features([w.keys for w in newest_first],  # type: ignore[misc]
                                                    {n: [w.values[n] for w in newest_first] for n in adjusting},
                                                    reference,
                                                    {n: RATE_PRIOR_ASKS
                                                     for n in adjusting if FEATURES[n].kind == "rate"})
            for name in names:
                kind = FEATURES[name].kind
                q = name in quantiles
                if name in adjusting:
                    mean = means[name]
                    lv = by_name[name]
                    levels[s, name] = (lv[0], mean)
                    rest[s, name] = [adjusted_rate(w.values[name], lv[i], mean) if kind == "rate" else
                                     ContinuousSummary.from_samples(adjusted(w.values[name], lv[i], mean), quantiles=q)
                                     for i, w in enumerate(newest_first) if i > 0]
                elif name == _PER_CHUNK and newest_first[0].chunks is None:
                    continue
                else:
                    rest[s, name] = [summarise(w.feature(name), kind, quantiles=q) for w in newest_first[1:]]
        return Check(plans, rest, now, levels, quantiles)
