"""Reference and current windows of a drift check, computed from the config and an injected ``now``.

* current: ``[now − current_seconds, now)``;
* trailing reference: the ``reference_days`` before the current window, cut into windows of the current
  window's length. Every one of them measures how much windows naturally differ; with ``same_hours`` those at
  the same time of day as the current window (seven for a one-hour window) are its seasonal baseline, so daily
  seasonality does not look like drift;
* pinned reference: fixed dates ``[reference_start, reference_end)``, or every trace served from
  ``reference_corpus_snapshot`` before the current window (within the last 90 days), again cut into windows.

``plan`` turns that into a ``WindowPlan``: the window index of a trace is ``⌊(end − 1 ms − ts) / length⌋``
(0 = the current window, 1 the one before, …), which the queries compute in ClickHouse; the plan says how many
windows the reference holds, the seasonal period in windows, and how many more windows the CUSUM looks back.

Pure: no clock (``now`` is passed in), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ragmon.config import DriftWindowSettings

DAY = timedelta(days=1)
#: how far back a corpus-snapshot reference looks (the traces TTL default)
SNAPSHOT_LOOKBACK = timedelta(days=90)


@dataclass(frozen=True, slots=True)
class Window:
    """A time range ``[start, end)``; optionally only the daily slices ``[anchor + k·day, +slice)`` inside it,
    and optionally only traces of one corpus snapshot."""

    start: datetime
    end: datetime
    slice_anchor: datetime | None = None
    slice_seconds: int | None = None
    corpus_snapshot: str | None = None

    def describe(self) -> str:
        text = f"{self.start:%Y-%m-%d %H:%M}–{self.end:%Y-%m-%d %H:%M} UTC"
        if self.slice_seconds:
            text += f", same {self.slice_seconds // 60} min of each day"
        if self.corpus_snapshot:
            text += f", corpus snapshot {self.corpus_snapshot}"
        return text

    def slices(self) -> list[tuple[datetime, datetime]]:
        """The time ranges the window actually covers: its daily slices (newest first) when it has them, else
        itself."""
        if not (self.slice_seconds and self.slice_anchor):
            return [(self.start, self.end)]
        out, k = [], 1
        while (begin := self.slice_anchor - k * DAY) >= self.start:
            out.append((begin, begin + timedelta(seconds=self.slice_seconds)))
            k += 1
        return out


@dataclass(frozen=True, slots=True)
class Windows:
    reference: Window
    current: Window

    @property
    def span(self) -> tuple[datetime, datetime]:
        """The smallest time range holding both windows (the query's prefilter)."""
        return (min(self.reference.start, self.current.start), max(self.reference.end, self.current.end))


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def resolve(spec: DriftWindowSettings, now: datetime) -> Windows:
    """The windows of a check run at ``now``."""
    now = _utc(now)
    current = Window(now - timedelta(seconds=spec.current_seconds), now)
    if spec.reference == "trailing":
        start = current.start - timedelta(days=spec.reference_days)
        if spec.same_hours and spec.current_seconds < DAY.total_seconds():
            reference = Window(start, current.start, slice_anchor=current.start, slice_seconds=spec.current_seconds)
        else:
            reference = Window(start, current.start)
    elif spec.reference_start is not None and spec.reference_end is not None:
        reference = Window(_utc(spec.reference_start), _utc(spec.reference_end),
                           corpus_snapshot=spec.reference_corpus_snapshot)
    elif spec.reference_corpus_snapshot:
        reference = Window(current.start - SNAPSHOT_LOOKBACK, current.start,
                           corpus_snapshot=spec.reference_corpus_snapshot)
    else:
        raise ValueError("a pinned reference needs reference_start and reference_end, or reference_corpus_snapshot")
    return Windows(reference, current)


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """How a check at ``end`` cuts time into windows of ``length`` seconds (index 0 the current window).

    Trailing: windows ``0 … history − 1`` are read; ``reference`` of them follow the current one; ``lookback``
    more feed the CUSUM. Pinned: the current window and the pinned range are read, the pinned windows renumbered
    to follow the current one (``offset`` subtracted, a multiple of ``period`` so each keeps its time of day).
    """

    windows: Windows
    end: datetime
    length: int
    reference: int
    period: int
    lookback: int
    pinned: bool = False
    offset: int = 0
    #: read only traces before this time (a look at the window in progress, ``ragmon.drift.check.watch``); None: ``end``
    until: datetime | None = None

    @property
    def history(self) -> int:
        """Windows of history the query reads, the current one included (trailing)."""
        return 1 + self.reference + self.lookback

    @property
    def windows_per_day(self) -> float:
        return DAY.total_seconds() / self.length

    def index(self, t: datetime) -> int:
        """The window index of time ``t`` (before renumbering)."""
        return int((self.end - _utc(t)).total_seconds() * 1000 - 1) // (self.length * 1000)


def plan(spec: DriftWindowSettings, now: datetime, *, lookback: int = 24, until: datetime | None = None) -> WindowPlan:
    """The window plan of a check run at ``now`` with ``lookback`` windows of CUSUM history; with ``until`` (before
    ``now``), of a look at that time at the window ending at ``now``, still in progress: only traces before
    ``until`` are read."""
    if until is not None:
        return replace(plan(spec, now, lookback=lookback), until=_utc(until))
    windows = resolve(spec, now)
    length = spec.current_seconds
    day = int(DAY.total_seconds())
    period = day // length if spec.same_hours and length < day and day % length == 0 else 1
    end = windows.current.end
    if spec.reference == "trailing":
        reference = max(1, int(spec.reference_days * day // length))
        return WindowPlan(windows, end, length, reference, period, lookback)
    # a pinned baseline is a period of known-good behaviour as a whole, not a time of day: no seasonal slots
    period = 1
    ref = windows.reference
    plan_ = WindowPlan(windows, end, length, 1, period, 0, pinned=True)
    first = max(1, plan_.index(min(ref.end, windows.current.start) - timedelta(milliseconds=1)))
    last = max(first, plan_.index(ref.start))
    offset = period * ((first - 1) // period)
    return WindowPlan(windows, end, length, last - offset, period, 0, pinned=True, offset=offset)
