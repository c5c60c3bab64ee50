"""The review role as ``ragmon review`` and ``ragmon run`` start it: the routers to mount on the shared HTTP
port, and the gauges of the newest selected week's progress.

``ReviewRole(settings, store, telemetry).router`` is the one APIRouter (HTML pages under ``/review``, JSON API
under ``/review/api/v1``); ``refresh_gauges()`` recomputes ``ragmon_review_items_due`` and
``ragmon_review_items_reviewed`` (call it every ``refresh_interval_seconds``; labels also refresh it).
Must not: select a week on its own (selection is an explicit, recorded act: ``ragmon review select``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import APIRouter

from ragmon.config import ReviewSettings
from ragmon.review.auth import Authenticator
from ragmon.review.queue import load_week, weeks
from ragmon.store import ClickHouseStore
from ragmon.telemetry import Telemetry


@dataclass
class ReviewContext:
    """What the request handlers share. ``clock`` returns Unix seconds (injected in tests)."""

    store: ClickHouseStore
    auth: Authenticator
    settings: ReviewSettings
    telemetry: Telemetry | None
    clock: Callable[[], float]

    def refresh_gauges(self) -> None:
        if self.telemetry is None:
            return
        selected = weeks(self.store)
        week = load_week(self.store, selected[0]) if selected else None
        due, reviewed = self.telemetry.review_items_due, self.telemetry.review_items_reviewed
        due.clear()
        reviewed.clear()
        for p in week.progress() if week else ():
            due.labels(stratum=p.stratum).set(p.total)
            reviewed.labels(stratum=p.stratum).set(p.reviewed)


class ReviewRole:
    def __init__(self, settings: ReviewSettings, store: ClickHouseStore, telemetry: Telemetry | None = None,
                 clock: Callable[[], float] = time.time):
        from ragmon.review.api import api_router
        from ragmon.review.web import web_router

        self.context = ReviewContext(store, Authenticator(settings, clock), settings, telemetry, clock)
        self.router = APIRouter()
        self.router.include_router(web_router(self.context))
        self.router.include_router(api_router(self.context))

    def refresh_gauges(self) -> None:
        self.context.refresh_gauges()
