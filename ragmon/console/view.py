"""How the console answers a request: the signed-in check (the review UI's session), its Jinja templates, the
security headers, and the error page.

Owns ``ConsolePages``. Sign-in is the review UI's: the session cookie is scoped to ``/review``, so the console
lives under ``/review/console`` and a request without a valid session is sent to ``/review/login`` and back.
Templates are autoescaped (every value from a trace, a letter or an artifact renders as text) and the CSP is the
review pages' (only this app's stylesheet; no script at all is needed here). Must not read the store.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import ChoiceLoader, Environment, PackageLoader, select_autoescape

from ragmon.console.dead_letters import escaped_text
from ragmon.review.auth import SESSION_COOKIE, Session
from ragmon.review.context import ReviewContext
from ragmon.review.web import SECURITY_HEADERS

PREFIX = "/review/console"
#: how much of a dead letter's header value the page shows
HEADER_PREVIEW_BYTES = 200


def _number(value: Any, digits: int = 3) -> str:
    """A float for a table cell: NaN/None as '–', otherwise ``digits`` significant decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def _of(value: Any, threshold: Any, digits: int = 3) -> str:
    """A statistic beside the threshold it is judged against: '2.668 of 4.8' ('–' for no value)."""
    shown = _number(value, digits)
    if shown == "–" or threshold is None or not math.isfinite(float(threshold)):
        return shown
    return f"{shown} of {float(threshold):.3g}"


def environment() -> Environment:
    # the console's own templates first; the review UI's macros (the answer with its citations) after them
    loader = ChoiceLoader([PackageLoader("ragmon.console", "templates"), PackageLoader("ragmon.review", "templates")])
    env = Environment(loader=loader, autoescape=select_autoescape(default=True), trim_blocks=True, lstrip_blocks=True)
    env.filters["seg"] = lambda s: quote(str(s), safe="")
    env.filters["num"] = _number
    env.filters["of"] = _of
    env.filters["when"] = lambda t: "–" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")
    env.filters["esc_bytes"] = lambda b: escaped_text(bytes(b)[:HEADER_PREVIEW_BYTES])
    env.globals["prefix"] = PREFIX
    return env


class ConsolePages:
    """Renders console pages for signed-in users and turns everyone else away."""

    def __init__(self, review: ReviewContext):
        self.review = review
        self.env = environment()

    def session(self, request: Request) -> Session | None:
        return self.review.session(request.cookies.get(SESSION_COOKIE))

    def page(self, template: str, session: Session, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(session=session, **values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error(self, session: Session, status: int, message: str) -> HTMLResponse:
        return self.page("error.html", session, status, message=message)

    def to_login(self, request: Request) -> RedirectResponse:
        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""), safe="")
        return RedirectResponse(f"/review/login?next={target}", status_code=303, headers=SECURITY_HEADERS)

    def signed_in(self, request: Request, render: Callable[[Session], Response]) -> Response:
        """``render(session)`` for a signed-in request; a redirect to the sign-in page otherwise."""
        session = self.session(request)
        return render(session) if session is not None else self.to_login(request)
