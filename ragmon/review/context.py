"""What the review pages and the review API share: the request context and the route class they mount on.

Owns ``ReviewContext`` (the review store, the authenticator, the review settings, the gauges and the clock that
every handler reads), ``StoreAwareRoute`` (bounded request bodies, a store outage as 503, the response headers) and
the limits they apply. Must not import the routers (``api``, ``web``) or the role that assembles them: they
import this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import InitVar, dataclass, field
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from ragmon.config import ReviewSettings
from ragmon.errors import StoreError
from ragmon.review.auth import Authenticator, Session
from ragmon.review.metrics import ReviewMetrics
from ragmon.review.queries import ReviewRows, ReviewStore, review_store
from ragmon.review.queue import load_week
from ragmon.review.sessions import SignedOut
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.review")


@dataclass
class ReviewContext:
    """What the request handlers share. ``clock`` returns Unix seconds (injected in tests).

    The first argument is a ``ReviewStore``, or the process's ``ClickHouseStore`` (what the role builder
    holds), which becomes ``store`` wrapped in ``ClickHouseReviewQueries``.
    """

    source: InitVar[ReviewStore | ReviewRows]
    auth: Authenticator
    settings: ReviewSettings
    telemetry: Telemetry | None
    clock: Callable[[], float]
    store: ReviewStore = field(init=False)
    #: the review gauges, registered on ``telemetry`` when given
    metrics: ReviewMetrics | None = field(init=False)
    signed_out: SignedOut = field(init=False)

    def __post_init__(self, source: ReviewStore | ReviewRows) -> None:
        self.store = review_store(source)
        self.metrics = self.telemetry.use(ReviewMetrics) if self.telemetry is not None else None
        self.signed_out = SignedOut(self.store, self.clock)

    def session(self, cookie: str | None) -> Session | None:
        """The signed-in session of a cookie: signed, unexpired, the user's password unchanged, not signed out."""
        session = self.auth.read_session(cookie)
        if session is None or session in self.signed_out:
            return None
        return session

    def refresh_gauges(self) -> None:
        if self.metrics is None:
            return
        selected = self.store.weeks()
        week = load_week(self.store, selected[0]) if selected else None
        due, reviewed = self.metrics.review_items_due, self.metrics.review_items_reviewed
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


class ApiRoute(StoreAwareRoute):
    """A JSON API route: besides ``StoreAwareRoute``'s bounds, a query parameter the route does not declare is
    refused (400, naming it and the ones it takes), so a typo such as ``?wek=`` never quietly means "no filter"."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        known = _query_names(self.dependant)

        async def route(request: Request) -> Response:
            unknown = sorted({name for name in request.query_params if name not in known})
            if unknown:
                takes = ", ".join(sorted(known)) or "none"
                response: Response = JSONResponse(
                    {"detail": f"unknown query parameter(s) {', '.join(map(repr, unknown))}; this endpoint takes: "
                               f"{takes}"}, status_code=400)
                for name, value in RESPONSE_HEADERS.items():
                    response.headers.setdefault(name, value)
                return response
            return await handler(request)

        return route


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route takes, its dependencies' included (their ``alias``: the name on the wire)."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names

