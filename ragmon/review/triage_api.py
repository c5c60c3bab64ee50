"""The triage JSON API under ``/review/api/v1/triage``: weeks with a triage queue, a week's queue, the weekly cause
report, and the caller's cause for a queued thumbs-down trace.

The same authentication as the review API (``api.caller_dependency``: a reviewer's bearer token or the session
cookie, whose writes need ``X-CSRF-Token``), the same pydantic error bodies, and the same rule as the triage pages:
it reads and writes the triage tables only, never the random sample's. For scripts and dashboards that file or
count complaints by cause without the web pages. Must not return a 5xx for a request a client can make.
"""

# no `from __future__ import annotations`: FastAPI must see the locally defined dependency types

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ragmon.errors import InputError
from ragmon.review.api import BODY_ERRORS, WEEK_PATTERN, caller_dependency
from ragmon.review.context import ApiRoute, ReviewContext
from ragmon.review.models import ErrorOut
from ragmon.review.queries import ReviewRows
from ragmon.review.records import parse_week
from ragmon.review.triage import (
    CAUSES,
    MAX_NOTE_CHARS,
    TriageWeek,
    load_triage,
    save_triage_label,
    triage_weeks,
)
from ragmon.review.triage_report import triage_report

WeekParam = Annotated[str, Path(pattern=WEEK_PATTERN, description="ISO week, e.g. 2026-W49.")]
TraceParam = Annotated[str, Path(min_length=1, max_length=256, description="The trace id.")]
_ERRORS = {400: {"model": ErrorOut, "description": "A query parameter the endpoint does not take."},
           401: {"model": ErrorOut, "description": "Not signed in (no or bad bearer token or session)."},
           404: {"model": ErrorOut, "description": "No triage queue for that week, or the trace is not in it."},
           503: {"model": ErrorOut, "description": "The store is unavailable; retry later."}}


class TriageWeekOut(BaseModel):
    week: str = Field(description="ISO week.")
    thumbs_down: int = Field(description="The week's thumbs-down production traces (what the queue was drawn from).")
    queued: int = Field(description="Traces in the triage queue (all thumbs-down, or a seeded random sample).")
    triaged: int = Field(description="Queued traces with a cause.")
    seed: str = Field(description="Seed of the random order (the sample, when capped).")

    @classmethod
    def of(cls, w: TriageWeek) -> "TriageWeekOut":
        return cls(week=w.week, thumbs_down=w.population, queued=len(w.items), triaged=w.labelled, seed=w.seed)


class TriageItemOut(BaseModel):
    trace_id: str
    stratum: str = Field(description="The trace's stratum (category).")
    ts: datetime = Field(description="When the query was asked.")
    cause: str | None = Field(description="The newest label's cause; null while nobody triaged it.")
    reviewer: str | None = Field(description="Who gave that cause.")


class TriageQueueOut(TriageWeekOut):
    items: list[TriageItemOut]


class TriageWeeksOut(BaseModel):
    weeks: list[TriageWeekOut] = Field(description="Weeks with a triage queue, newest first.")
    causes: dict[str, str] = Field(description="The failure taxonomy: cause → what it means.")


class CauseRowOut(BaseModel):
    cause: str
    stratum: str = Field(description="A stratum, or ALL.")
    counts: list[int] = Field(description="Triaged traces with this cause, per week of the report (oldest first).")
    share: float | None = Field(description="Share of the stratum's triaged traces in the report's week.")
    trend_pp: float | None = Field(description="That share minus the mean share of the earlier weeks, in "
                                               "percentage points.")


class TriageReportOut(BaseModel):
    weeks: list[str] = Field(description="The report's weeks, oldest first; the last is the one asked for.")
    thumbs_down: list[int]
    queued: list[int]
    triaged: list[int]
    rows: list[CauseRowOut]


class TriageLabelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cause: str = Field(max_length=64, description=f"One of: {', '.join(CAUSES)}.")
    note: str = Field("", max_length=MAX_NOTE_CHARS, description="Free text; required for cause 'other'.")


class TriageLabelOut(BaseModel):
    week: str
    trace_id: str
    reviewer: str
    cause: str
    note: str
    labelled_at: datetime


def _utc(ts: datetime) -> datetime:
    """The store's times are UTC; say so, so every client parses them the same (RFC 3339 needs an offset)."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def triage_api_router(ctx: ReviewContext, store: ReviewRows) -> APIRouter:
    router = APIRouter(prefix="/review/api/v1/triage", tags=["triage"], responses=_ERRORS,
                       route_class=ApiRoute)
    Who = caller_dependency(ctx)

    def week_or_404(week: str) -> TriageWeek:
        try:
            parse_week(week)
        except InputError as exc:  # 2026-W99: no such week, so no command to suggest
            raise HTTPException(404, str(exc)) from None
        data = load_triage(store, week)
        if data is None:
            raise HTTPException(404, f"week {week} has no triage queue; queue it with "
                                     f"`ragmon review triage --week {week}`")
        return data

    @router.get("/weeks", response_model=TriageWeeksOut, summary="Weeks with a triage queue, and the taxonomy")
    def weeks(who: Who) -> TriageWeeksOut:
        loaded = [w for w in (load_triage(store, name) for name in triage_weeks(store)) if w is not None]
        return TriageWeeksOut(weeks=[TriageWeekOut.of(w) for w in loaded], causes=dict(CAUSES))

    @router.get("/weeks/{week}/queue", response_model=TriageQueueOut, summary="A week's triage queue")
    def queue(week: WeekParam, who: Who) -> TriageQueueOut:
        data = week_or_404(week)
        return TriageQueueOut(**TriageWeekOut.of(data).model_dump(), items=[
            TriageItemOut(trace_id=i.trace_id, stratum=i.category, ts=_utc(i.ts), cause=i.cause, reviewer=i.reviewer)
            for i in data.items])

    @router.get("/weeks/{week}/report", response_model=TriageReportOut,
                summary="Triaged causes per stratum over the weeks ending with this one, with the trend")
    def report(week: WeekParam, who: Who,
               weeks: Annotated[int, Query(ge=1, le=52, description="Weeks in the report.")] = 4) -> TriageReportOut:
        try:
            parse_week(week)
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None
        return TriageReportOut(**triage_report(store, week, weeks).as_dict())

    @router.put("/weeks/{week}/items/{trace_id:path}/label", response_model=TriageLabelOut,
                responses={**BODY_ERRORS,
                           422: {"model": ErrorOut, "description": "Not a cause of the taxonomy, or 'other' "
                                                                   "without a note."}},
                summary="Store (or replace) the caller's cause for a queued thumbs-down trace")
    def put_label(week: WeekParam, trace_id: TraceParam, body: TriageLabelIn, who: Who,
                  request: Request) -> TriageLabelOut:
        who.check_csrf(request)
        data = week_or_404(week)
        if not any(i.trace_id == trace_id for i in data.items):
            raise HTTPException(404, "this trace is not in that week's triage queue")
        at = datetime.fromtimestamp(ctx.clock(), UTC)
        try:
            save_triage_label(store, week, trace_id, who.username, body.cause, body.note, at)
        except InputError as exc:
            raise HTTPException(422, str(exc)) from None
        return TriageLabelOut(week=week, trace_id=trace_id, reviewer=who.username, cause=body.cause,
                              note=body.note.strip(), labelled_at=at)

    return router
