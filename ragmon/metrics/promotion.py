"""The promotion rule that ``shadow compare`` and ``ab compare`` share: from each measure's status to a verdict.

Each measure a comparison checks ends in one status: ``ok`` (the evidence rules out harm beyond its tolerance),
``harm`` (it shows harm beyond it), ``inconclusive`` (it can do neither yet) or ``no_data`` (nothing to measure:
no events, no judged pairs, no latency). The verdict of a stratum is

* **reject** when any measure is harm;
* **promote** only when there is at least one measure and every one is ok;
* **hold** otherwise: an inconclusive measure, and a measure without data, both hold. A measure nobody could
  take is not evidence that nothing got worse, so it can never let a candidate through.

Pure: no I/O, no clock, no globals.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Status = Literal["ok", "harm", "inconclusive", "no_data"]
Decision = Literal["promote", "hold", "reject"]

OK: Status = "ok"
HARM: Status = "harm"
INCONCLUSIVE: Status = "inconclusive"
NO_DATA: Status = "no_data"
STATUSES: tuple[Status, ...] = (OK, HARM, INCONCLUSIVE, NO_DATA)


def verdict(statuses: Iterable[Status]) -> Decision:
    """reject if any status is harm; promote when there is at least one and all are ok; hold otherwise."""
    seen = list(statuses)
    unknown = set(seen) - set(STATUSES)
    if unknown:
        raise ValueError(f"unknown measure status {sorted(unknown)}; expected one of {', '.join(STATUSES)}")
    if HARM in seen:
        return "reject"
    if seen and all(s == OK for s in seen):
        return "promote"
    return "hold"
