"""What crosses the review store seam: the ISO weeks review work is filed under, and the frozen records the
review role writes and reads (``queries.ReviewStore`` takes and returns these, never store rows).

Owns ``parse_week``/``iso_week``/``previous_week`` and ``Label``, ``Verdict``, ``SampledTrace``,
``SelectionRecord``. Plain data: no I/O, no policy (which behaviours a label may name is ``labels``; who may see
a verdict is the pages' and the API's). Must not import the store or another review module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ragmon.errors import InputError

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


def parse_week(week: str) -> tuple[datetime, datetime]:
    """``'2026-W49'`` → (Monday 00:00 UTC, next Monday 00:00 UTC); ``InputError`` for anything else."""
    m = _WEEK.match(week)
    if not m:
        raise InputError(f"week {week!r} is not an ISO week like 2026-W49")
    try:
        monday = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError:
        raise InputError(f"week {week!r} does not exist (ISO years have 52 or 53 weeks)") from None
    start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    try:
        return start, start + timedelta(days=7)
    except OverflowError:  # the last weeks of year 9999 end past the calendar
        raise InputError(f"week {week!r} is out of range: the week must end before the year 10000") from None


def iso_week(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def previous_week(now: datetime) -> str:
    """The last complete ISO week before ``now`` (the default week to select)."""
    return iso_week(now - timedelta(days=7))


@dataclass(frozen=True, slots=True)
class SampledTrace:
    """One trace of a week's sample (and, once queued, of its review queue) at its position in the random order."""

    trace_id: str
    query_id: str
    category: str
    position: int


@dataclass(frozen=True)
class SelectionRecord:
    """How a week's sample was drawn, as recorded with it: enough to reproduce it (seed and parameters)."""

    week: str
    seed: str
    size: int
    stratified: bool
    min_per_stratum: int
    population: int
    selected: int
    method: str
    selected_by: str
    selected_at: datetime


@dataclass(frozen=True)
class Label:
    """One reviewer's judgement of one trace. ``None`` in a yes/no field means "unsure" or "not applicable"."""

    week: str
    trace_id: str
    reviewer: str
    labelled_at: datetime
    answer_correct: bool | None
    grounded: bool | None
    citations_supported: bool | None
    refusal_appropriate: bool | None
    expected_behaviour: str
    add_to_golden: bool = False
    note: str = ""
    relevant_chunk_ids: tuple[str, ...] = field(default_factory=tuple)
    reference_answer: str = ""


@dataclass(frozen=True)
class Verdict:
    """One ``scores`` row: a metric a judge (or the metrics library) gave the trace."""

    metric: str
    value: float
    status: str
    error: str
    judge_name: str
    judge_fingerprint: str
    details: Any = field(default=None)
