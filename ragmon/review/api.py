"""The review JSON API under ``/review/api/v1``: weeks, a week's queue, one item, and the caller's label.

Authenticated by ``Authorization: Bearer <token>`` (a reviewer's API token) or by the web session cookie; a
PUT made with the cookie must carry the session's CSRF token in ``X-CSRF-Token``. Responses are the pydantic
models of ``models.py`` so the OpenAPI schema describes every body, including the errors (401, 403, 404, 410,
422), served to signed-in callers only at ``/review/api/v1/openapi.json`` (the process serves no public schema).
Same visibility rule as the pages: verdicts and others' labels only after the caller's own label.
Must not: return a 5xx for any request a client can make (fuzzed with schemathesis).
"""

# no `from __future__ import annotations`: FastAPI must see the locally defined dependency types

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ragmon.errors import InputError
from ragmon.review.auth import SESSION_COOKIE, csrf_ok
from ragmon.review.context import ApiRoute, ReviewContext
from ragmon.review.item_view import build_item_view
from ragmon.review.labels import disagreements, save_label
from ragmon.review.models import (
    ErrorOut,
    ItemOut,
    LabelIn,
    LabelOut,
    QueueItemOut,
    QueueOut,
    WeekOut,
    WeeksOut,
)
from ragmon.review.queue import Week, load_week
from ragmon.review.selection import parse_week

WEEK_PATTERN = r"^\d{4}-W\d{2}$"
WeekParam = Annotated[str, Path(pattern=WEEK_PATTERN, description="ISO week, e.g. 2026-W49.")]
TraceParam = Annotated[str, Path(min_length=1, max_length=256, description="The trace id.")]
_ERRORS = {400: {"model": ErrorOut, "description": "A query parameter the endpoint does not take."},
           401: {"model": ErrorOut, "description": "Not signed in (no or bad bearer token or session)."},
           404: {"model": ErrorOut, "description": "No such week or item in the queue."},
           503: {"model": ErrorOut, "description": "The store is unavailable; retry later."}}
#: what a PUT with a body may answer before its own checks: the body, its size, the CSRF header
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "The body is not parseable JSON."},
    411: {"model": ErrorOut, "description": "A chunked body without Content-Length."},
    413: {"model": ErrorOut, "description": "The body is larger than 1 MiB."},
    403: {"model": ErrorOut, "description": "Cookie session without X-CSRF-Token."},
}
_bearer = HTTPBearer(auto_error=False, description="A reviewer's API token (`ragmon review new-token`).")


class Caller:
    """Who made an API request: the reviewer, whether by the session cookie, and that session's CSRF token."""

    def __init__(self, username: str, via_cookie: bool, csrf: str):
        self.username, self.via_cookie, self.csrf = username, via_cookie, csrf

    def check_csrf(self, request: Request) -> None:
        """A write made with the cookie must carry the session's CSRF token (403 otherwise)."""
        if self.via_cookie and not csrf_ok(self.csrf, request.headers.get("X-CSRF-Token")):
            raise HTTPException(403, "a cookie session must send its CSRF token in X-CSRF-Token")


def caller_dependency(ctx: ReviewContext) -> Any:
    """The ``Depends`` of every review API route (the review queue's and triage's): 401 unless signed in."""

    def caller(request: Request,
               credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Caller:
        if credentials is not None:
            user = ctx.auth.check_token(credentials.credentials, request.client.host if request.client else "-")
            if user is not None:
                return Caller(user, False, "")
        else:
            session = ctx.session(request.cookies.get(SESSION_COOKIE))
            if session is not None:
                return Caller(session.username, True, session.csrf)
        raise HTTPException(401, "sign in: send 'Authorization: Bearer <token>' or the review session cookie",
                            headers={"WWW-Authenticate": "Bearer"})

    return Annotated[Caller, Depends(caller)]


def api_router(ctx: ReviewContext) -> APIRouter:
    router = APIRouter(prefix="/review/api/v1", tags=["review"], responses=_ERRORS, route_class=ApiRoute)
    Who = caller_dependency(ctx)

    def week_or_404(week: str) -> Week:
        try:
            parse_week(week)
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None
        data = load_week(ctx.store, week)
        if data is None:
            raise HTTPException(404, f"week {week} has no review queue; select it with `ragmon review select`")
        return data

    def queued_trace(week: str, trace_id: str) -> dict[str, Any]:
        """The stored trace of an item in ``week``'s queue: 404 if it is not queued, 410 once TTL deleted it."""
        week_or_404(week)
        if not ctx.store.in_queue(week, trace_id):
            raise HTTPException(404, "this item is not in that week's review queue")
        trace = ctx.store.trace(week, trace_id)
        if trace is None:
            raise HTTPException(410, "the trace is no longer stored (deleted by the retention TTL)")
        return trace

    @router.get("/weeks", response_model=WeeksOut, summary="Selected weeks with progress per stratum")
    def list_weeks(who: Who) -> WeeksOut:
        loaded = [w for w in (load_week(ctx.store, name) for name in ctx.store.weeks()) if w is not None]
        return WeeksOut(weeks=[WeekOut.of(w, who.username) for w in loaded])

    @router.get("/weeks/{week}/queue", response_model=QueueOut, summary="A week's queue and its progress")
    def queue(week: WeekParam, who: Who) -> QueueOut:
        data = week_or_404(week)
        return QueueOut(**WeekOut.of(data, who.username).model_dump(),
                        items=[QueueItemOut.of(i, who.username) for i in data.items])

    @router.get("/weeks/{week}/items/{trace_id:path}", response_model=ItemOut,
                responses={410: {"model": ErrorOut, "description": "The trace was deleted by the retention TTL."}},
                summary="One item; verdicts and others' labels once the caller labelled it")
    def item(week: WeekParam, trace_id: TraceParam, who: Who) -> ItemOut:
        trace = queued_trace(week, trace_id)
        labels = ctx.store.labels_for(trace_id)
        revealed = any(lab.reviewer == who.username for lab in labels)
        return ItemOut.of(week, build_item_view(trace), labels, disagreements(labels),
                          ctx.store.verdicts(week, trace_id) if revealed else [], who.username)

    @router.put("/weeks/{week}/items/{trace_id:path}/label", response_model=LabelOut,
                responses={**BODY_ERRORS,
                           410: {"model": ErrorOut, "description": "The trace was deleted by the retention TTL."},
                           422: {"model": ErrorOut, "description": "The label is not valid for this item."}},
                summary="Store (or replace) the caller's label of an item")
    def put_label(week: WeekParam, trace_id: TraceParam, body: LabelIn, who: Who, request: Request) -> LabelOut:
        who.check_csrf(request)
        trace = queued_trace(week, trace_id)
        try:
            label = body.to_label(week, trace_id, who.username, datetime.fromtimestamp(ctx.clock(), UTC),
                                  {c["chunk_id"] for c in trace["retrieved"]})
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        save_label(ctx.store, label)
        ctx.refresh_gauges()
        return LabelOut.of(label)

    @router.get("/openapi.json", include_in_schema=False)
    def schema(request: Request, who: Who) -> JSONResponse:
        """The OpenAPI schema of the process's API (the review and triage operations), to signed-in callers."""
        return JSONResponse(request.app.openapi())

    return router

