"""The console's routes under ``/review/console``: one handler per page, each a signed-in check, one read through
the page's module, and a template.

``console_router(settings, store, review)`` is what ``ragmon.process`` mounts next to the review UI's router (same
port, same sign-in). ``/console`` redirects here. A filter the page cannot honour is a 400 page saying what was
expected; a store or Kafka outage is the review routes' 503 (``StoreAwareRoute``) or a notice on the page. Handlers
are plain ``def``: FastAPI runs them in worker threads, so a slow store never blocks the event loop. Must not write
anything anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from ragmon.config import Settings
from ragmon.console import (
    dead_letter_reading,
    dead_letters,
    drift_page,
    gate_runs,
    incident_page,
    runbooks,
    shadow_page,
    trace_page,
    traces,
)
from ragmon.console.filters import (
    BEHAVIOURS,
    DEAD_LETTERED,
    SCORE_STATUSES,
    TRACE_FIGURES,
    TraceFilter,
    parse_when,
)
from ragmon.console.queries import ConsoleReads
from ragmon.console.view import PREFIX, ConsolePages
from ragmon.errors import InputError
from ragmon.review.auth import Session
from ragmon.review.context import ReviewContext, StoreAwareRoute

_STATIC = {"console.css": "text/css"}


def console_router(settings: Settings, store: ConsoleReads, review: ReviewContext,
                   clock: Callable[[], float] = time.time,
                   comparisons: shadow_page.ComparisonCache | None = None) -> APIRouter:
    """The console's pages; ``comparisons`` is the Shadow page's cache, shared with the daemon's warm-up loop
    (``console-shadow-warm``, built by ``ragmon.process``) when one runs."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=StoreAwareRoute)
    pages = ConsolePages(review)

    def now() -> datetime:
        return datetime.fromtimestamp(clock(), UTC)

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in _STATIC:
            return Response("not found", status_code=404)
        body = resources.files("ragmon.console").joinpath("static", name).read_bytes()
        return Response(body, media_type=_STATIC[name], headers={"X-Content-Type-Options": "nosniff"})

    @router.get("/")
    def index(request: Request) -> Response:
        return pages.signed_in(request, lambda s: RedirectResponse(f"{PREFIX}/traces", status_code=303))

    @router.get("/traces")
    def trace_list(request: Request) -> Response:
        def render(session: Session) -> Response:
            try:
                f = TraceFilter.from_query(request.query_params)
                if f.dead_lettered == "dead-lettered":
                    return pages.page("traces.html", session, f=f, listing=None, options=_options(),
                                      note="Dead-lettered messages are never stored as traces: they are on the "
                                           "Dead letters page.")
                listing = traces.list_traces(store, f, now())
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            return pages.page("traces.html", session, f=f, listing=listing, options=_options(), note="")

        return pages.signed_in(request, render)

    @router.get("/traces/{trace_id:path}")
    def trace(request: Request, trace_id: str, at: str = "") -> Response:
        def render(session: Session) -> Response:
            try:
                when = parse_when(at, now(), "at") if at else None
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            loaded = trace_page.load_trace_page(store, trace_id, when)
            if loaded is None:
                return pages.error(session, 404, "No stored trace has this id (never stored, dead-lettered, or "
                                                  "deleted by the retention TTL).")
            return pages.page("trace.html", session, p=loaded, t=loaded.trace, item=loaded.item)

        return pages.signed_in(request, render)

    letters_read = dead_letter_reading.CachedLetters(settings.console, settings.kafka)
    comparisons = comparisons if comparisons is not None else shadow_page.ComparisonCache()
    explanations = incident_page.ExplanationCache()

    @router.get("/dead-letters")
    def letters(request: Request, fresh: str = "") -> Response:
        def render(session: Session) -> Response:
            cfg = settings.console
            reading = letters_read.read(fresh=bool(fresh))
            page = dead_letters.build_page(reading.letters, "; ".join(reading.sources) or "nowhere")
            return pages.page("dead_letters.html", session, d=page, problems=reading.problems,
                              per_partition=cfg.dead_letters_read, age=max(0.0, time.monotonic() - reading.read_at),
                              replay=dead_letters.replay_commands(settings.kafka, cfg.dead_letter_file))

        return pages.signed_in(request, render)

    @router.get("/drift")
    def drift(request: Request) -> Response:
        def render(session: Session) -> Response:
            try:
                group = drift_page.group_from_query(request.query_params)
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            return pages.page("drift.html", session, d=drift_page.load_drift_page(store, group, now()),
                              reference_windows=drift_page.reference_windows,
                              reference_note=drift_page.reference_note,
                              incident_features=incident_page.FEATURES_EXPLAINED)

        return pages.signed_in(request, render)

    @router.get("/shadow")
    def shadow(request: Request) -> Response:
        def render(session: Session) -> Response:
            checked = shadow_page.check_time(now(), settings.shadow.interval_seconds)
            try:
                ask = shadow_page.asked(request.query_params)
                chosen = shadow_page.options(settings, ask, checked, lambda at: comparisons.derived(store, at))
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            return pages.page("shadow.html", session, ask=ask, shown=comparisons.run(store, chosen), checked=checked,
                              interval=settings.shadow.interval_seconds)

        return pages.signed_in(request, render)

    @router.get("/gate")
    def gate(request: Request, baseline: str = "", current: str = "") -> Response:
        def render(session: Session) -> Response:
            directory = settings.console.gate_runs_dir
            try:
                comparison = gate_runs.compare(directory, baseline, current) if baseline and current else None
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            return pages.page("gate.html", session, directory=directory, runs=gate_runs.list_runs(directory),
                              comparison=comparison, baseline=baseline, current=current)

        return pages.signed_in(request, render)

    @router.get("/gate/runs/{name}")
    def gate_run(request: Request, name: str) -> Response:
        def render(session: Session) -> Response:
            try:
                run = gate_runs.load_run(settings.console.gate_runs_dir, name)
            except InputError as exc:
                return pages.error(session, 404, str(exc))
            return pages.page("gate_run.html", session, name=name, run=run, s=gate_runs.summary(name, run),
                              strata=gate_runs.strata(run), columns=gate_runs.STRATUM_COLUMNS)

        return pages.signed_in(request, render)

    @router.get("/incident")
    def incident(request: Request) -> Response:
        def render(session: Session) -> Response:
            try:
                group, feature = incident_page.group_from_query(request.query_params)
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            found = incident_page.load_incident(store, settings, group, feature, now(), explanations)
            return pages.page("incident.html", session, i=found, plot=incident_page.cusum_plot(found.history))

        return pages.signed_in(request, render)

    @router.get("/incident/traces")
    def incident_traces(request: Request) -> Response:
        def render(session: Session) -> Response:
            try:
                shown = incident_page.segment_traces(store, settings, request.query_params, now())
            except InputError as exc:
                return pages.error(session, 400, str(exc))
            return pages.page("incident_traces.html", session, t=shown)

        return pages.signed_in(request, render)

    @router.get("/runbooks")
    def runbook_list(request: Request) -> Response:
        return pages.signed_in(request, lambda session: pages.page("runbooks.html", session, names=runbooks.names()))

    @router.get("/runbooks/{name}")
    def runbook(request: Request, name: str) -> Response:
        def render(session: Session) -> Response:
            found = runbooks.load(name)
            if found is None:
                return pages.error(session, 404, f"no runbook named {name!r}; the list is at {PREFIX}/runbooks")
            return pages.page("runbook.html", session, runbook=found)

        return pages.signed_in(request, render)

    return router


def redirect_router() -> APIRouter:
    """``/console`` → the console (a short address to type)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/console")
    def console() -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    return router


def _options() -> dict[str, tuple[str, ...]]:
    return {"behaviour": BEHAVIOURS, "score": SCORE_STATUSES, "dead_lettered": DEAD_LETTERED, "figures": TRACE_FIGURES}
