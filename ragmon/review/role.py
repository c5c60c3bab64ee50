"""The review role as ``ragmon review`` and ``ragmon run`` start it: the routers to mount on the shared HTTP
port, and the gauges of the newest selected week's progress.

``ReviewRole(settings, store, telemetry).router`` is the one APIRouter (HTML pages under ``/review``, the
negative-feedback triage pages under ``/review/triage``, JSON API under ``/review/api/v1``); ``roles()`` are the daemon loops: the gauges ``ragmon_review_items_due`` and
``ragmon_review_items_reviewed`` every ``refresh_interval_seconds`` (labels also refresh them), the weekly
selection of the last complete week once it has traffic (idempotent: a selected week is never changed), and the
negative-feedback triage selection of the last complete week, run every hour so that thumbs-down events arriving
within a day after the week are queued too (``triage.py``: the queue is provisional until a run after that grace
makes it final; the week before is finished too if it was left provisional). The automatic seeds are derived
from ``session_secret`` and the week when a secret is set, so every replica picks the same sample; otherwise they
are random. Either way they are recorded with the selection.

``check(settings)`` and ``build(settings, store, telemetry, ...) -> RoleParts`` have the shape every role
package's ``role.py`` has; ``ragmon.process`` calls them for ``ragmon review``, ``ragmon demo --keep-serving`` and
``ragmon run``. Must not open the store or bind a port.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter

from ragmon.config import ReviewSettings, Settings, secret_value
from ragmon.config.review import cookie_secure, is_loopback
from ragmon.daemon import PeriodicRole, RoleParts
from ragmon.review.api import api_router
from ragmon.review.auth import Authenticator
from ragmon.review.context import ReviewContext
from ragmon.review.selection import SelectionResult, previous_week, select_week
from ragmon.review.triage import load_triage, select_triage
from ragmon.review.triage_api import triage_api_router
from ragmon.review.triage_web import triage_router
from ragmon.review.web import web_router
from ragmon.store import ClickHouseStore
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.review")


class ReviewRole:
    def __init__(self, settings: ReviewSettings, store: ClickHouseStore, telemetry: Telemetry | None = None,
                 clock: Callable[[], float] = time.time):
        self.context = ReviewContext(store, Authenticator(settings, clock, telemetry), settings, telemetry, clock)
        self.router = APIRouter()
        self.router.include_router(web_router(self.context))
        self.router.include_router(api_router(self.context))
        #: the store of the triage queue's tables (the in-memory review double has none)
        self._triage_store = store if isinstance(store, ClickHouseStore) else None
        if self._triage_store is not None:
            self.router.include_router(triage_router(self.context, store))
            self.router.include_router(triage_api_router(self.context, store))

    def refresh_gauges(self) -> None:
        self.context.refresh_gauges()

    def auto_select(self) -> SelectionResult:
        """Select the last complete ISO week if it is not selected yet (a no-op otherwise)."""
        ctx = self.context
        now = datetime.fromtimestamp(ctx.clock(), UTC)
        week = previous_week(now)
        key = secret_value(ctx.settings.session_secret)
        seed = (hmac.new(key.encode(), f"review-seed:{week}".encode(), hashlib.sha256).hexdigest()[:16]
                if key else secrets.token_hex(8))
        cfg = ctx.settings
        result = select_week(ctx.store, week, cfg.sample_size, seed=seed, stratify=cfg.stratify,
                             min_per_stratum=cfg.min_per_stratum if cfg.stratify else 0, now=now, selected_by="auto")
        if result.written:
            ctx.refresh_gauges()
        return result

    def auto_triage(self) -> dict[str, int]:
        """Queue, or top up, the last complete week's negative-feedback triage until it is final, and finish the
        week before if its queue was left provisional; returns {week: traces added} for the weeks that got some."""
        store = self._triage_store
        if store is None:
            return {}
        ctx = self.context
        now = datetime.fromtimestamp(ctx.clock(), UTC)
        last = previous_week(now)
        key = secret_value(ctx.settings.session_secret)
        added: dict[str, int] = {}
        for week in (previous_week(now - timedelta(days=7)), last):
            existing = load_triage(store, week)
            if existing is not None and existing.final or existing is None and week != last:
                continue  # final, or an older week never queued: nothing to do
            seed = (hmac.new(key.encode(), f"triage-seed:{week}".encode(), hashlib.sha256).hexdigest()[:16]
                    if key else None)
            result = select_triage(store, week, max_items=ctx.settings.triage_max_items, seed=seed, now=now,
                                   selected_by="auto")
            if result.added:
                added[week] = result.added
                log.info("triage %s: %d thumbs-down trace(s) queued (%s)", week, result.added,
                         "final" if result.final else f"provisional until {result.final_after:%Y-%m-%d %H:%M} UTC")
        return added

    def roles(self, select_interval_seconds: float = 3600.0) -> list[PeriodicRole]:
        """The review role's loops for ``Daemon``: gauges, the weekly selection and the weekly triage selection."""
        return [PeriodicRole("review-gauges", self.context.settings.refresh_interval_seconds, self.refresh_gauges),
                PeriodicRole("review-select", select_interval_seconds, self.auto_select),
                PeriodicRole("review-triage", select_interval_seconds, self.auto_triage)]


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when the review UI could not sign anyone in (no reviewers, a bad secret or hash)."""
    Authenticator(settings.review, time.time)


def build(settings: Settings, store: ClickHouseStore, telemetry: Telemetry, *, select: bool = True) -> RoleParts:
    """The pages and API to mount, the gauges loop, and (unless ``select`` is False) the weekly selection and
    the weekly triage selection."""
    secure = cookie_secure(settings.review, settings.server)
    if not is_loopback(settings.server.host):
        log.warning("the review UI is served on %s over plain HTTP: serve it to browsers through an HTTPS proxy "
                    "(review.cookie_secure is %s%s)", settings.server.host, "on" if secure else "OFF",
                    "" if secure else ": session cookies would cross the network in clear text")
    role = ReviewRole(settings.review.model_copy(update={"cookie_secure": secure}), store, telemetry)
    gauges, selection, triage = role.roles()
    return RoleParts(loops=(gauges, selection, triage) if select else (gauges,), service=role, routers=(role.router,))
