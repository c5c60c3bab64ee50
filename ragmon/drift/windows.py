"""Reference and current windows of a drift check, computed from the config and an injected ``now``.

* current: ``[now − current_seconds, now)``;
* trailing reference: the ``reference_days`` before the current window; with ``same_hours`` only the same
  hours of day as the current window (seven one-hour slices for a one-hour window), so daily seasonality
  does not look like drift;
* pinned reference: fixed dates ``[reference_start, reference_end)``, or every trace served from
  ``reference_corpus_snapshot`` before the current window (within the last 90 days).

Pure: no clock (``now`` is passed in), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
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
