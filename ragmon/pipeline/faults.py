"""Test-only fault points: make a crash window visible so a test can ``kill -9`` the process inside it.

``RAGMON_TEST_FAULTS="before_insert=2,after_insert=2,during_insert=0"`` makes the ingest loop print
``ragmon-fault: <point> rows=<n> token=<t>`` to stderr at that point and then sleep that many seconds. The
points are ``before_insert`` (batch sealed, nothing written), ``during_insert`` (immediately before the insert
call: a kill a few milliseconds later lands inside it) and ``after_insert`` (the store acknowledged, the
offsets are not yet committed). Unset (the default) costs one dict lookup per batch. Never set in production.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

ENV = "RAGMON_TEST_FAULTS"
POINTS = ("before_insert", "during_insert", "after_insert")


class FaultPoints:
    """Parsed fault points: {point: seconds to sleep after announcing it}."""

    def __init__(self, points: Mapping[str, float] | None = None):
        self.points = dict(points or {})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> FaultPoints:
        raw = environ.get(ENV, "").strip()
        points: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in raw.split(","))):
            name, _, seconds = part.partition("=")
            if name not in POINTS:
                raise ValueError(f"{ENV}: unknown fault point {name!r}; expected one of {', '.join(POINTS)}")
            points[name] = float(seconds or 0)
        return cls(points)

    def hit(self, point: str, **info: object) -> None:
        if point not in self.points:
            return
        details = " ".join(f"{k}={v}" for k, v in info.items())
        print(f"ragmon-fault: {point} {details}", file=sys.stderr, flush=True)
        if self.points[point] > 0:
            time.sleep(self.points[point])
