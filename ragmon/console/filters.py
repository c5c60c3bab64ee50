"""The trace list's filters, read from a page's query string: what to list, and the links that carry them.

Owns ``TraceFilter`` (a time window, retriever, variant, stratum, behaviour, query id, score status, a score to
sort and filter by — a judge metric or a trace's own figure — with its order and bounds, a page number) and parsing it
from untrusted query parameters: a bad value is an ``InputError`` that says what was expected, never an exception from
deep inside. Times are 'now', a duration back from now ('30m', '24h', '7d') or ISO 8601 (naive = UTC). Must not run a
query or render HTML; the SQL lives in ``traces``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from ragmon.errors import InputError

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([mhdw])$")
_SECONDS = {"m": 60, "h": 3600, "d": 86_400, "w": 604_800}
#: what ``score`` may ask for: any score row, none, or a failed judge call among them
SCORE_STATUSES = ("scored", "unscored", "failed")
#: a stored trace is never a dead letter (rejected messages are not stored): ``stored`` is the only value a
#: trace list can honour; ``dead-lettered`` sends the reader to the dead-letter page
DEAD_LETTERED = ("stored", "dead-lettered")
BEHAVIOURS = ("answer", "refuse", "clarify", "route")
MAX_TEXT = 200
PAGE_SIZE = 50
#: the trace's own figures a list can be sorted and filtered by; any other ``metric`` is a judge metric (scores)
TRACE_FIGURES = ("top1_score", "latency_ms", "cost_usd", "tokens")
ORDERS = ("asc", "desc")
_METRIC = re.compile(r"^[A-Za-z0-9_.:@-]{1,100}$")


def parse_when(text: str, now: datetime, name: str) -> datetime:
    """``text`` as an aware UTC time: 'now', a duration back from ``now`` or ISO 8601 (naive = UTC)."""
    value = text.strip().lower()
    if value == "now":
        return now
    match = _AGO.match(value)
    try:
        if match:
            return now - timedelta(seconds=float(match[1]) * _SECONDS[match[2]])
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        raise InputError(f"{name}: expected 'now', a duration back from now (30m, 24h, 7d) or an ISO 8601 time, "
                         f"got {text[:MAX_TEXT]!r}") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def iso_time(t: datetime) -> str:
    """``t`` (UTC, naive or aware) as the ISO 8601 text a filter link carries, to the millisecond."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class TraceFilter:
    """What the trace list shows. Empty strings mean "any"; ``since``/``until`` keep the text the user gave."""

    since: str = "24h"
    until: str = "now"
    retriever: str = ""
    variant: str = ""
    stratum: str = ""
    behaviour: str = ""
    query_id: str = ""
    score: str = ""
    dead_lettered: str = ""
    metric: str = ""  # sort and filter by this score (a judge metric or one of TRACE_FIGURES)
    order: str = ""  # asc | desc (by ``metric``); empty: newest first
    min: str = ""  # keep traces whose ``metric`` is at least this
    max: str = ""  # … and at most this
    page: int = 1

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> TraceFilter:
        """The filter a query string asks for; ``InputError`` naming the parameter when a value is not allowed."""
        values = {f.name: params.get(f.name, "") for f in fields(cls) if f.name != "page"}
        for name, value in values.items():
            if len(value) > MAX_TEXT:
                raise InputError(f"{name}: at most {MAX_TEXT} characters")
        for name, allowed in (("score", SCORE_STATUSES), ("dead_lettered", DEAD_LETTERED), ("behaviour", BEHAVIOURS)):
            if values[name] and values[name] not in allowed:
                raise InputError(f"{name}: expected one of {', '.join(allowed)}, got {values[name]!r}")
        if values["order"] and values["order"] not in ORDERS:
            raise InputError(f"order: expected one of {', '.join(ORDERS)}, got {values['order']!r}")
        if values["metric"] and not _METRIC.match(values["metric"]):
            raise InputError(f"metric: expected a metric name (letters, digits, _ . : @ -), got {values['metric']!r}")
        for name in ("min", "max"):
            if values[name]:
                try:
                    bound = float(values[name])
                except ValueError:
                    bound = math.nan
                if not math.isfinite(bound):
                    raise InputError(f"{name}: expected a number, got {values[name]!r}")
        if (values["order"] or values["min"] or values["max"]) and not values["metric"]:
            raise InputError("order, min and max need a metric: the score to sort or filter by (e.g. "
                             "metric=faithfulness&order=asc)")
        page = params.get("page", "1")
        if not page.isdigit() or not 1 <= int(page) <= 10_000:
            raise InputError(f"page: expected a number from 1 to 10000, got {page[:MAX_TEXT]!r}")
        out = cls(**{k: v for k, v in values.items() if v or k not in ("since", "until")}, page=int(page))
        return out

    def bounds(self) -> tuple[float | None, float | None]:
        """``min`` and ``max`` as numbers (None: no bound); ``from_query`` checked them."""
        return (float(self.min) if self.min else None, float(self.max) if self.max else None)

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        """The [start, end) the filter covers; ``InputError`` when a time is not one or the window is empty."""
        start, end = parse_when(self.since, now, "since"), parse_when(self.until, now, "until")
        if start >= end:
            raise InputError(f"since ({self.since}) must be before until ({self.until})")
        return start, end

    def query(self, **changes: object) -> str:
        """This filter as a query string (defaults left out), with ``changes`` applied (e.g. ``page=2``)."""
        changed = replace(self, **changes)  # type: ignore[arg-type]
        default = TraceFilter()
        pairs = [(f.name, str(getattr(changed, f.name))) for f in fields(changed)
                 if getattr(changed, f.name) != getattr(default, f.name)]
        return urlencode(pairs)
