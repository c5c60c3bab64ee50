"""The triage pages of the review UI: the weeks with a triage queue, a week's queue, and an item with its cause form.

Under ``/review/triage``, beside (and apart from) the random-sample pages of ``web.py``, with the same sign-in,
CSRF token, autoescaped templates and Content-Security-Policy. A thumbs-down trace is shown with the user's
feedback comment, the question, the answer and the ranked chunks (text as text, never markup), and a form for
one cause from the taxonomy (``triage.CAUSES``) with an optional note. Must not read or write the random
sample's tables.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from ragmon.errors import InputError
from ragmon.review.auth import SESSION_COOKIE, Session, csrf_ok
from ragmon.review.context import ReviewContext, StoreAwareRoute
from ragmon.review.item_view import build_item_view
from ragmon.review.queries import ReviewRows
from ragmon.review.records import parse_week
from ragmon.review.triage import CAUSES, TriageWeek, load_triage, save_triage_label, triage_weeks
from ragmon.review.triage_queries import stored_trace_row
from ragmon.review.web import SECURITY_HEADERS, _environment
from ragmon.store.trace_rows import row_to_trace


def triage_router(ctx: ReviewContext, store: ReviewRows) -> APIRouter:
    router = APIRouter(prefix="/review/triage", include_in_schema=False, route_class=StoreAwareRoute)
    env = _environment()

    def page(name: str, status: int = 200, **values: Any) -> Response:
        from fastapi.responses import HTMLResponse

        return HTMLResponse(env.get_template(name).render(**values), status_code=status, headers=SECURITY_HEADERS)

    def signed_in(request: Request) -> Session | None:
        return ctx.session(request.cookies.get(SESSION_COOKIE))

    def to_login(request: Request) -> Response:
        return RedirectResponse(f"/review/login?next={quote(request.url.path, safe='')}", status_code=303,
                                headers=SECURITY_HEADERS)  # fmt: skip

    def error(session: Session | None, status: int, message: str) -> Response:
        return page("error.html", status, session=session, message=message)

    def week_or_none(week: str) -> TriageWeek | None:
        try:
            parse_week(week)
        except InputError:
            return None
        return load_triage(store, week)

    @router.get("/")
    def weeks(request: Request) -> Response:
        session = signed_in(request)
        if not session:
            return to_login(request)
        loaded = [w for w in (load_triage(store, name) for name in triage_weeks(store)) if w is not None]
        return page("triage_weeks.html", session=session, weeks=loaded)

    @router.get("/{week}")
    def queue(request: Request, week: str) -> Response:
        session = signed_in(request)
        if not session:
            return to_login(request)
        data = week_or_none(week)
        if data is None:
            return error(session, 404, f"Week {week} has no triage queue. Queue it with "
                                       f"`ragmon review triage --week {week}`.")  # fmt: skip
        return page("triage_queue.html", session=session, week=data, causes=CAUSES)

    @router.get("/{week}/items/{trace_id:path}")
    def item(request: Request, week: str, trace_id: str) -> Response:
        session = signed_in(request)
        if not session:
            return to_login(request)
        data = week_or_none(week)
        position = next((i for i, it in enumerate(data.items) if it.trace_id == trace_id), None) if data else None
        if data is None or position is None:
            return error(session, 404, "This item is not in that week's triage queue.")
        row = stored_trace_row(store, trace_id)
        if row is None:
            return error(session, 410, "The trace is no longer stored (deleted by the retention TTL).")
        trace = row_to_trace(row)
        later = [*data.items[position + 1:], *data.items[:position]]
        return page("triage_item.html", session=session, week=data, item=build_item_view(trace), trace=trace,
                    current=data.items[position], causes=CAUSES, position=position + 1,
                    next_item=next((it for it in later if it.cause is None), None))  # fmt: skip

    @router.post("/{week}/label/{trace_id:path}")
    async def label(request: Request, week: str, trace_id: str) -> Response:
        session = await anyio.to_thread.run_sync(signed_in, request)
        if not session:
            return to_login(request)
        form = await request.form()
        return await anyio.to_thread.run_sync(save, session, week, trace_id, form)

    def save(session: Session, week: str, trace_id: str, form: Any) -> Response:
        if not csrf_ok(session.csrf, str(form.get("csrf_token", ""))):
            return error(session, 403, "Missing or wrong CSRF token: reload the page and label again.")
        try:
            parse_week(week)
            save_triage_label(store, week, trace_id, session.username, str(form.get("cause", "")),
                              str(form.get("note", "")), datetime.fromtimestamp(ctx.clock(), UTC))  # fmt: skip
        except InputError as exc:
            return error(session, 400, str(exc))
        data = load_triage(store, week)
        following = next((it for it in data.items if it.cause is None), None) if data else None
        target = (f"/review/triage/{quote(week, safe='')}/items/{quote(following.trace_id, safe='')}" if following
                  else f"/review/triage/{quote(week, safe='')}")  # fmt: skip
        return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)

    return router
