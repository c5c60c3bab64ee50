"""The review web pages: sign-in, the weeks, a week's queue with progress, an item, and the label form.

Server-rendered Jinja2 with autoescape on for every template, and a Content-Security-Policy that allows only
this app's own script and stylesheet, so text from documents and answers can only ever render as text. Every
page needs a session (else a redirect to sign-in); every POST needs the session's CSRF token. The judge's
verdicts and other reviewers' labels are left out of the HTML until this reviewer has labelled the item.
Must not: compute anything the JSON API would compute differently (both use queue/labels/item_view).
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import quote

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import ValidationError

from ragmon.errors import InputError
from ragmon.review.auth import LOGIN_COOKIE, SESSION_COOKIE, Session, csrf_ok
from ragmon.review.context import RESPONSE_HEADERS, ReviewContext, StoreAwareRoute
from ragmon.review.item_view import build_item_view
from ragmon.review.labels import disagreements, save_label
from ragmon.review.models import LabelIn
from ragmon.review.queue import load_week
from ragmon.review.selection import parse_week

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    **RESPONSE_HEADERS,
}
_TRI = {"yes": True, "no": False, "unsure": None, "na": None}
_TRI_FIELDS = {"answer_correct": "answer correct", "grounded": "grounded", "citations_supported": "citations supported",
               "refusal_appropriate": "refusal appropriate"}
#: longer credentials cannot be right (user names are at most 64 characters): refused without an scrypt
MAX_USERNAME_CHARS, MAX_PASSWORD_CHARS = 64, 1024
#: scrypt checks running at once (each takes ~16 MiB and tens of ms of CPU); more sign-ins wait their turn
#: off the event loop, so a burst of sign-ins cannot stall /healthz or the other pages
PASSWORD_CHECKS_AT_ONCE = 2
_STATIC = {"review.js": "text/javascript", "review.css": "text/css"}


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("ragmon.review", "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["seg"] = lambda s: quote(str(s), safe="")
    env.filters["yesno"] = lambda v: "unsure / n.a." if v is None else ("yes" if v else "no")
    return env


def web_router(ctx: ReviewContext) -> APIRouter:
    router = APIRouter(prefix="/review", include_in_schema=False, route_class=StoreAwareRoute)
    env = _environment()
    password_checks = anyio.CapacityLimiter(PASSWORD_CHECKS_AT_ONCE)

    def page(name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = env.get_template(name).render(**values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def session_of(request: Request) -> Session | None:
        return ctx.session(request.cookies.get(SESSION_COOKIE))

    def to_login(request: Request) -> RedirectResponse:
        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""), safe="")
        return RedirectResponse(f"/review/login?next={target}", status_code=303, headers=SECURITY_HEADERS)

    def error(session: Session | None, status: int, message: str) -> HTMLResponse:
        return page("error.html", status, session=session, message=message)

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in _STATIC:
            return Response("not found", status_code=404)
        body = resources.files("ragmon.review").joinpath("static", name).read_bytes()
        return Response(body, media_type=_STATIC[name], headers={"X-Content-Type-Options": "nosniff"})

    @router.get("/login")
    def login_form(request: Request, next: str = "/review/") -> Response:
        if session_of(request):
            return RedirectResponse(_safe_next(next), status_code=303)
        return _login_page(page, ctx, next, "", 200)

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        username, password = str(form.get("username", "")), str(form.get("password", ""))
        target = _safe_next(str(form.get("next", "/review/")))
        address = request.client.host if request.client else "-"
        if not ctx.auth.check_login_token(str(form.get("csrf_token", "")), request.cookies.get(LOGIN_COOKIE)):
            return _login_page(page, ctx, target, "The sign-in form expired or was not sent by this site; try again.",
                               403)
        if ctx.auth.throttle.blocked(username, address):
            return _login_page(page, ctx, target, "Too many failed sign-ins; wait a few minutes and try again.", 429)
        plausible = 0 < len(username) <= MAX_USERNAME_CHARS and len(password) <= MAX_PASSWORD_CHARS
        if not plausible or not await anyio.to_thread.run_sync(ctx.auth.check_password, username, password,
                                                               limiter=password_checks):
            ctx.auth.throttle.failed(username, address)
            return _login_page(page, ctx, target, "Wrong user name or password.", 401)
        ctx.auth.throttle.succeeded(username, address)
        _, cookie = ctx.auth.new_session(username)
        response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(SESSION_COOKIE, cookie, max_age=ctx.auth.max_age, httponly=True, samesite="lax",
                            secure=ctx.auth.cookie_secure, path="/review")
        response.delete_cookie(LOGIN_COOKIE, path="/review")
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        session = await anyio.to_thread.run_sync(session_of, request)  # a store query: off the event loop
        form = await request.form()
        if session and not csrf_ok(session.csrf, str(form.get("csrf_token", ""))):
            return error(session, 403, "Missing or wrong CSRF token: reload the page and try again.")
        if session:  # ends this session everywhere, including copies of the cookie
            await anyio.to_thread.run_sync(ctx.signed_out.end, session)
        response = RedirectResponse("/review/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(SESSION_COOKIE, path="/review")
        return response

    @router.get("/")
    def index(request: Request) -> Response:
        session = session_of(request)
        if not session:
            return to_login(request)
        loaded = [w for w in (load_week(ctx.store, name) for name in ctx.store.weeks()) if w is not None]
        return page("weeks.html", session=session, weeks=loaded, me=session.username)

    @router.get("/weeks/{week}")
    def queue(request: Request, week: str) -> Response:
        session = session_of(request)
        if not session:
            return to_login(request)
        data = _week_or_none(ctx, week)
        if data is None:
            return error(session, 404, f"Week {week} has no review queue. Select it with "
                                       f"`ragmon review select --week {week}`.")
        ctx.refresh_gauges()
        return page("queue.html", session=session, week=data, me=session.username,
                    progress=data.progress(session.username),
                    disputed=lambda item: bool(disagreements(list(item.labels))))

    @router.get("/weeks/{week}/items/{trace_id:path}")
    def item(request: Request, week: str, trace_id: str) -> Response:
        session = session_of(request)
        if not session:
            return to_login(request)
        return _item_page(page, error, ctx, session, week, trace_id)

    @router.post("/weeks/{week}/label/{trace_id:path}")
    async def label(request: Request, week: str, trace_id: str) -> Response:
        session = await anyio.to_thread.run_sync(session_of, request)  # a store query: off the event loop
        if not session:
            return to_login(request)
        form = await request.form()
        # the store calls run in a worker thread: a slow store must not stall the event loop (and /healthz)
        return await anyio.to_thread.run_sync(label_from_form, session, week, trace_id, form)

    def label_from_form(session: Session, week: str, trace_id: str, form: Any) -> Response:
        if not csrf_ok(session.csrf, str(form.get("csrf_token", ""))):
            return error(session, 403, "Missing or wrong CSRF token: reload the page and label again.")
        if _week_or_none(ctx, week) is None or not ctx.store.in_queue(week, trace_id):
            return error(session, 404, "This item is not in that week's review queue.")
        trace = ctx.store.trace(week, trace_id)
        if trace is None:
            return error(session, 410, "The trace is no longer stored (deleted by the retention TTL).")
        unanswered = [title for name, title in _TRI_FIELDS.items() if str(form.get(name)) not in _TRI]
        if unanswered:
            return error(session, 400, f"Choose an answer for {', '.join(unanswered)}: yes, no or unsure.")
        try:
            fields = {name: _TRI[str(form.get(name))] for name in _TRI_FIELDS}
            label_in = LabelIn(**fields, expected_behaviour=str(form.get("expected_behaviour", "")),
                               note=str(form.get("note", "")), reference_answer=str(form.get("reference_answer", "")),
                               relevant_chunk_ids=[str(v) for v in form.getlist("relevant")],
                               add_to_golden=form.get("add_to_golden") == "1")
            stored = label_in.to_label(week, trace_id, session.username, datetime.fromtimestamp(ctx.clock(), UTC),
                                       {c["chunk_id"] for c in trace["retrieved"]})
        except ValidationError as exc:
            return error(session, 400, "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
        except ValueError as exc:
            return error(session, 400, str(exc))
        save_label(ctx.store, stored)
        ctx.refresh_gauges()
        url = f"/review/weeks/{quote(week, safe='')}/items/{quote(trace_id, safe='')}#verdicts"
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)

    return router


def _safe_next(target: str) -> str:
    """Only redirect back into the review UI (no open redirect to another site)."""
    ok = target.startswith("/review") and not target.startswith("//") and "\\" not in target and "\n" not in target
    return target if ok else "/review/"


def _login_page(page: Any, ctx: ReviewContext, target: str, message: str, status: int) -> HTMLResponse:
    token, cookie = ctx.auth.new_login_token()
    response = page("login.html", status, session=None, csrf_token=token, next=_safe_next(target), message=message)
    response.set_cookie(LOGIN_COOKIE, cookie, max_age=3600, httponly=True, samesite="strict",
                        secure=ctx.auth.cookie_secure, path="/review")
    return response


def _week_or_none(ctx: ReviewContext, week: str) -> Any:
    try:
        parse_week(week)
    except InputError:
        return None
    return load_week(ctx.store, week)


def _item_page(page: Any, error: Any, ctx: ReviewContext, session: Session, week: str, trace_id: str) -> Response:
    data = _week_or_none(ctx, week)
    if data is None or not any(i.trace_id == trace_id for i in data.items):
        return error(session, 404, "This item is not in that week's review queue.")
    trace = ctx.store.trace(week, trace_id)
    if trace is None:
        return error(session, 410, "The trace is no longer stored (deleted by the retention TTL).")
    labels = ctx.store.labels_for(trace_id)
    mine = next((lab for lab in labels if lab.reviewer == session.username), None)
    revealed = mine is not None
    position = next(i for i, it in enumerate(data.items) if it.trace_id == trace_id)
    later = [*data.items[position + 1:], *data.items[:position]]
    next_item = next((it for it in later if not it.labelled_by(session.username)), None)
    return page(
        "item.html", session=session, week=data, item=build_item_view(trace), trace=trace, mine=mine,
        revealed=revealed, labels=labels if revealed else [], me=session.username,
        disagreements=disagreements(labels) if revealed else [],
        verdicts=ctx.store.verdicts(week, trace_id) if revealed else [],
        position=position + 1, next_item=next_item,
    )
