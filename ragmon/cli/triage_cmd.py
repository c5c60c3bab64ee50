"""``ragmon review triage``: queue the week's thumbs-down traces for triage and report causes per stratum with trend.

Exit codes: 0 done (also when the week had no thumbs-down traffic); 2 bad arguments; 3 the store is unavailable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ragmon.cli.common import console, err_console, fail, settings_of
from ragmon.errors import InputError


class Format(StrEnum):
    table = "table"
    json = "json"


def triage(
    ctx: typer.Context,
    week: Annotated[str | None, typer.Option(help="ISO week such as 2026-W49 (default: the last complete week).",
                                             show_default=False)] = None,
    max_items: Annotated[int, typer.Option(min=1, max=100_000, help="Queue every thumbs-down trace of the week, or "
                                           "a seeded random sample of this many when there are more.")] = 200,
    seed: Annotated[str | None, typer.Option(help="Seed of the random order (default: a fresh one; recorded).",
                                             show_default=False)] = None,
    weeks: Annotated[int, typer.Option(min=1, max=52, help="Weeks in the report, the chosen week last: the trend "
                                       "compares it with the ones before.")] = 4,
    no_select: Annotated[bool, typer.Option("--no-select", help="Only report; queue nothing.")] = False,
    fmt: Annotated[Format, typer.Option("--format", help="table or json (stdout holds only the JSON).")] = Format.table,
) -> None:
    """Queue the week's thumbs-down production traces for triage in the review UI (/review/triage), then report
    triaged causes per stratum for the last --weeks weeks with the trend.

    Every thumbs-down trace of the week is queued, or a seeded random sample of --max-items. Negative feedback events count up to a day after the week, so until a selection runs after that the queue is provisional (a warning says so): selecting the week again adds what arrived since; after that it changes nothing. The review role of a running daemon does this every hour. Reviewers give each one cause from the failure taxonomy (docs/review.md). The weekly random review sample never reads feedback; triage is kept apart from it.
    """
    from ragmon.cli.store_open import open_store
    from ragmon.review.records import parse_week, previous_week
    from ragmon.review.triage import CAUSES, select_triage, selection_warning
    from ragmon.review.triage_report import triage_report

    now = datetime.now(UTC)
    week = week or previous_week(now)
    try:
        start, end = parse_week(week)
    except InputError as exc:
        raise fail(str(exc)) from None
    if start > now:
        raise fail(f"--week {week} has not started yet; the last complete week is {previous_week(now)}")
    warning = None if no_select else selection_warning(week, now)
    if warning:  # the week, or the day after it when late feedback still counts, is not over
        err_console.print(f"warning: {warning}", highlight=False, markup=False)
    store = open_store(settings_of(ctx), writes=not no_select)  # a report alone reads through a running daemon
    try:
        selected = None if no_select else select_triage(store, week, max_items=max_items, seed=seed, now=now)
        report = triage_report(store, week, weeks)
    except InputError as exc:
        raise fail(str(exc)) from None
    if fmt == Format.json:
        payload = report.as_dict()
        if selected is not None:
            payload["selection"] = {"week": week, "queued": len(selected.items), "thumbs_down": selected.population,
                                    "seed": selected.seed, "already_selected": selected.already_selected,
                                    "added": selected.added, "final": selected.final,
                                    "final_after": selected.final_after.isoformat() if selected.final_after else None}
        console.print_json(json.dumps(payload))
        return
    if selected is not None:
        state = ("queued" if not selected.already_selected
                 else f"already queued, {selected.added} late one(s) added" if selected.added
                 else "already queued, nothing changed")
        if selected.items and not selected.final:
            state += " (provisional: see the warning)"
        console.print(f"{week}: {len(selected.items)} of {selected.population} thumbs-down production trace(s) {state} "
                      f"(seed {selected.seed}); triage them at /review/triage/{week}", highlight=False, soft_wrap=True)
    table = Table("cause", "stratum", *report.weeks, "share", "trend (pp)",
                  title=f"triage causes, {report.weeks[0]} to {report.weeks[-1]}", title_justify="left")
    for r in report.rows:
        table.add_row(escape(r.cause), escape(r.stratum or "(none)"), *map(str, r.counts),
                      "—" if r.share is None else f"{r.share:.0%}",
                      "—" if r.trend_pp is None else f"{r.trend_pp:+.0f}")  # fmt: skip
    table.add_row("triaged / queued / thumbs-down", "", *(f"{t}/{q}/{d}" for t, q, d in zip(
        report.triaged, report.queued, report.thumbs_down, strict=True)), "", "", style="bold")  # fmt: skip
    console.print(table)
    if report.rows == ():
        console.print(f"no triaged traces in these weeks yet; causes: {', '.join(CAUSES)}", highlight=False)
