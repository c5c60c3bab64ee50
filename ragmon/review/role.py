"""The review role as ``ragmon review`` and ``ragmon run`` start it: the routers to mount on the shared HTTP
port, and the gauges of the newest selected week's progress.

``ReviewRole(settings, store, telemetry).router`` is the one APIRouter (HTML pages under ``/review``, JSON API
under ``/review/api/v1``); ``roles()`` are the daemon loops: the gauges ``ragmon_review_items_due`` and
``ragmon_review_items_reviewed`` every ``refresh_interval_seconds`` (labels also refresh them), and the weekly
selection of the last complete week once it has traffic (idempotent: a selected week is never changed). The
automatic seed is derived from ``session_secret`` and the week when a secret is set, so every replica picks the
same sample; otherwise it is random. Either way it is recorded with the selection.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from ragmon.config import ReviewSettings, secret_value
from ragmon.daemon import PeriodicRole
from ragmon.errors import StoreError
from ragmon.review.auth import Authenticator, Session
from ragmon.review.queue import load_week, weeks
from ragmon.review.selection import SelectionResult, previous_week, select_week
from ragmon.review.sessions import SignedOut
from ragmon.store import ClickHouseStore
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.review")


@dataclass
class ReviewContext:
    """What the request handlers share. ``clock`` returns Unix seconds (injected in tests)."""

    store: ClickHouseStore
    auth: Authenticator
    settings: ReviewSettings
    telemetry: Telemetry | None
    clock: Callable[[], float]
    signed_out: SignedOut = field(init=False)

    def __post_init__(self) -> None:
        self.signed_out = SignedOut(self.store, self.clock)

    def session(self, cookie: str | None) -> Session | None:
        """The signed-in session of a cookie: signed, unexpired, the user's password unchanged, not signed out."""
        session = self.auth.read_session(cookie)
        if session is None or session in self.signed_out:
            return None
        return session

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


#: the largest request body the review UI and API accept (a label with a long note is a few KB)
MAX_BODY_BYTES = 1_048_576
#: on every review response (the HTML pages add a Content-Security-Policy and framing rules of their own)
RESPONSE_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


class StoreAwareRoute(APIRoute):
    """Bounds request bodies (413/411 before anything is read) and turns a store outage during a request into
    503 with what to do, instead of a 500 with a traceback."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            if request.method in ("POST", "PUT"):
                if "chunked" in request.headers.get("transfer-encoding", "").lower():
                    return JSONResponse({"detail": "send a Content-Length (chunked bodies are not accepted)"},
                                        status_code=411)
                length = request.headers.get("content-length", "0")
                if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                    return JSONResponse({"detail": f"the body must be at most {MAX_BODY_BYTES:,} bytes"},
                                        status_code=413)
            try:
                response = await handler(request)
            except StoreError as exc:
                log.warning("review request %s failed: %s", request.url.path, exc)
                response = JSONResponse({"detail": "the store is unavailable; try again in a minute "
                                         f"({'retryable' if exc.retryable else 'permanent'} store error)"},
                                        status_code=503, headers={"Retry-After": "60"})
            # API responses carry questions, answers and document text: never cached, never sniffed as HTML
            for name, value in RESPONSE_HEADERS.items():
                response.headers.setdefault(name, value)
            return response

        return route


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

    def roles(self, select_interval_seconds: float = 3600.0) -> list[PeriodicRole]:
        """The review role's loops for ``Daemon``: gauges, and the weekly selection."""
        return [PeriodicRole("review-gauges", self.context.settings.refresh_interval_seconds, self.refresh_gauges),
                PeriodicRole("review-select", select_interval_seconds, self.auto_select)]
