"""``ragmon review``: serve the review UI, select a week's random sample, show progress, export to the golden set,
and make the credentials the ``review`` config section takes."""

from __future__ import annotations

import json
import secrets
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ragmon.cli import triage_cmd
from ragmon.cli.common import console, err_console, exit_if_stuck, fail, settings_of
from ragmon.cli.options import FormatOption, check_format, check_output_file
from ragmon.cli.store_open import open_store
from ragmon.config import override
from ragmon.review.auth import hash_password, token_digest
from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.queue import NO_STRATUM, load_week
from ragmon.review.selection import parse_week, previous_week, select_week

app = typer.Typer(
    help="Weekly human review of a random sample of production traces. Without a subcommand: serve the UI.",
    invoke_without_command=True,
)

HostOpt = Annotated[str | None, typer.Option("--host", help="Bind address (default: server.host).", show_default=False)]
PortOpt = Annotated[int | None, typer.Option("--port", help="HTTP port (default: server.port; 0 = any free port).",
                                             show_default=False)]

NoSelectOpt = Annotated[bool, typer.Option(
    "--no-select", help="Do not select the last complete week automatically (review.sample_size traces, hourly check; "
    "a selected week is never changed).")]


@app.callback()
def review(ctx: typer.Context, host: HostOpt = None, port: PortOpt = None, no_select: NoSelectOpt = False) -> None:
    """Serve the review UI and API at http://HOST:PORT/review/ (with /metrics and /healthz on the same port)."""
    if ctx.invoked_subcommand is None:
        _serve(ctx, host, port, not no_select)


@app.command("serve")
def serve_cmd(ctx: typer.Context, host: HostOpt = None, port: PortOpt = None, no_select: NoSelectOpt = False) -> None:
    """Serve the review UI and JSON API (same as `ragmon review` without a subcommand). Stops on Ctrl-C/SIGTERM.
    Also selects the last complete week's sample once it has traffic, unless --no-select."""
    _serve(ctx, host, port, not no_select)


def _serve(ctx: typer.Context, host: str | None, port: int | None, auto_select: bool = True) -> None:
    from ragmon.process import Process, serve_roles

    settings = override(settings_of(ctx), "server", host=host, port=port)

    def announce(process: Process) -> None:
        auth = process.service("review").context.auth
        if auth.ephemeral_key:
            err_console.print("warning: review.session_secret is not set: sessions end when this process restarts "
                              "and are not shared between replicas", highlight=False)
        console.print(f"review UI on http://{settings.server.host}:{process.port}/review/ "
                      f"({len(auth.users)} reviewers; Ctrl-C stops)", highlight=False, soft_wrap=True)

    exit_if_stuck(serve_roles(settings, only=["review"], options={"review": {"select": auto_select}},
                              title="ragmon review", started=announce))


@app.command("select")
def select(
    ctx: typer.Context,
    week: Annotated[str | None, typer.Option(help="ISO week such as 2026-W49 (default: the last complete week).",
                                             show_default=False)] = None,
    size: Annotated[int | None, typer.Option(min=1, help="Traces to sample (default: review.sample_size).",
                                             show_default=False)] = None,
    stratify: Annotated[bool | None, typer.Option(
        "--stratify/--no-stratify", help="Guarantee --min-per-stratum traces per category (default: review.stratify).",
        show_default=False)] = None,
    min_per_stratum: Annotated[int | None, typer.Option(
        min=0, help="Minimum per category with --stratify (default: review.min_per_stratum).",
        show_default=False)] = None,
    seed: Annotated[str | None, typer.Option(
        help="Seed of the random order (default: a fresh random one). It is recorded; pass a recorded seed with "
        "--dry-run to reproduce a sample.", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the sample without writing the queue.")] = False,
    partial: Annotated[bool, typer.Option(
        "--partial", help="Allow a week that has not ended: only its traffic so far can be chosen, and the selection "
        "is final.")] = False,
) -> None:
    """Choose the week's review sample uniformly at random from its production traces (never by complaint or
    judge score) and put it in the queue. Running it again for the same week changes nothing."""
    settings = settings_of(ctx)
    cfg = settings.review
    week = week or previous_week(datetime.now(UTC))
    size = cfg.sample_size if size is None else size
    stratify = cfg.stratify if stratify is None else stratify
    min_per = cfg.min_per_stratum if min_per_stratum is None else min_per_stratum
    if min_per_stratum is not None and not stratify:
        raise fail("--min-per-stratum needs --stratify")
    _, week_end = parse_week(week)
    now = datetime.now(UTC)
    if week_end > now and not partial and not dry_run:
        raise fail(f"{week} has not ended yet (it ends {week_end:%Y-%m-%d %H:%M} UTC); a selection is final, so "
                   "select it after it ends, or pass --partial to sample only the traffic so far")
    store = ClickHouseReviewQueries(open_store(settings, writes=True))
    result = select_week(store, week, size, seed=seed, stratify=stratify, min_per_stratum=min_per,
                         now=now, dry_run=dry_run)
    if result.already_selected:
        console.print(f"{week} was already selected (seed {result.seed}, {len(result.items)} items): nothing changed",
                      highlight=False, soft_wrap=True)
        return
    if not result.items:
        raise fail(f"{week} has no production traces stored; nothing selected (check the week, or that ingest ran)")
    table = Table("stratum", "production traces", "selected", title=f"review sample {week}")
    chosen = result.selected_by_stratum()
    for stratum, n in sorted(result.population_by_stratum.items()):
        table.add_row(stratum or NO_STRATUM, f"{n:,}", str(chosen.get(stratum, 0)))
    table.add_row("total", f"{result.population:,}", str(len(result.items)), style="bold")
    console.print(table)
    what = "would select (dry run, nothing written)" if dry_run else "selected and queued"
    console.print(f"{what}: {len(result.items)} traces, seed {result.seed}"
                  f"{f', at least {result.min_per_stratum} per stratum' if result.stratified else ''}", highlight=False,
                  soft_wrap=True)


app.command("triage")(triage_cmd.triage)


@app.command("status")
def status(ctx: typer.Context,
           week: Annotated[str | None, typer.Option(help="ISO week (default: the newest selected).",
                                                    show_default=False)] = None,
           output: FormatOption = "table") -> None:
    """Show a week's progress per stratum: items, reviewed (at least one label), and disagreements."""
    check_format(output)
    if week is not None:
        parse_week(week)  # InputError (exit 2) before the store is opened
    settings = settings_of(ctx)
    store = ClickHouseReviewQueries(open_store(settings))
    from ragmon.review.labels import disagreements

    names = store.weeks()
    week = week or (names[0] if names else None)
    data = load_week(store, week) if week else None
    if data is None:
        raise fail(f"no review queue for {week or 'any week'}; select one with `ragmon review select --week ...`")
    disputed: dict[str, int] = {}
    for item in data.items:
        if disagreements(list(item.labels)):
            disputed[item.category or NO_STRATUM] = disputed.get(item.category or NO_STRATUM, 0) + 1
    if output == "json":
        console.print_json(json.dumps({"week": data.week, "seed": data.seed, "strata": [
            {"stratum": p.stratum, "items": p.total, "reviewed": p.reviewed,
             "disagreements": disputed.get(p.stratum, 0)}
            for p in data.progress()]}))
        return
    table = Table("stratum", "items", "reviewed", "disagreements", title=f"review {data.week} (seed {data.seed})")
    for p in data.progress():
        table.add_row(p.stratum, str(p.total), str(p.reviewed), str(disputed.get(p.stratum, 0)))
    console.print(table)


@app.command("export")
def export(
    ctx: typer.Context,
    golden: Annotated[Path, typer.Option("--golden", help="Golden set file (JSON array of golden-case.v1); created "
                                         "if missing, existing cases kept.", dir_okay=False)],
    week: Annotated[str | None, typer.Option(help="Only this ISO week (default: every week).",
                                             show_default=False)] = None,
    prefer: Annotated[list[str] | None, typer.Option(
        metavar="TYPE", help="Question type to export first (repeatable), e.g. one `ragmon golden coverage` "
                             "names as under-represented.", show_default=False)] = None,
    prefer_under_represented: Annotated[bool, typer.Option(
        "--prefer-under-represented", help="Export first the question types the --golden file under-represents "
                                           "in live traffic (a coverage check over coverage.window_days).")] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Add at most this many cases (preferred types first).",
                                              show_default=False)] = None,
) -> None:
    """Write the items reviewers marked "add to golden set" as golden cases, with the adjudication filled in.
    Each case is tagged with its trace's classified question type (when the score role stored one)."""
    from ragmon.coverage.queries import types_of_traces
    from ragmon.review.export import export_golden

    check_output_file(golden, "--golden")
    if week is not None:
        parse_week(week)  # InputError (exit 2) before the store is opened
    settings = settings_of(ctx)
    unknown = sorted(set(prefer or ()) - {*settings.coverage.question_types, "other"})
    if unknown:
        raise fail(f"--prefer {', '.join(unknown)}: not among coverage.question_types "
                   f"({', '.join(settings.coverage.question_types)})")
    raw = open_store(settings)
    store = ClickHouseReviewQueries(raw)
    order = list(prefer or ())
    if prefer_under_represented:
        order += [t for t in _under_represented(settings, raw, golden) if t not in order]
    result = export_golden(store, golden, week=week, prefer=order, limit=limit,
                           question_types=lambda ids: types_of_traces(raw, ids))
    console.print(f"{golden}: {len(result.added)} cases added, {len(result.already_present)} already present"
                  + (f", {len(result.deferred)} left for later (--limit {limit})" if result.deferred else "")
                  + (f"; preferred types: {', '.join(order)}" if order else ""),
                  highlight=False, soft_wrap=True)
    for cid, why in result.skipped.items():
        err_console.print(f"skipped {cid}: {why}", highlight=False, markup=False)
    if result.skipped:
        raise typer.Exit(1)


def _under_represented(settings: Any, store: Any, golden: Path) -> list[str]:
    """The types a coverage check of ``golden`` against live traffic names (none when the file is missing)."""
    from ragmon.coverage.check import check_coverage
    from ragmon.coverage.stats import CoverageThresholds
    from ragmon.golden_files import load_golden

    c = settings.coverage
    cases = load_golden(golden).cases if golden.exists() else ()
    result = check_coverage(store, cases, c.question_types, until=datetime.now(UTC),
                            window=timedelta(days=c.window_days),
                            thresholds=CoverageThresholds.of(c))
    return list(result.under_represented())


@app.command("hash-password")
def hash_password_cmd(
    stdin: Annotated[bool, typer.Option("--stdin", help="Read the password from standard input (one line).")] = False,
) -> None:
    """Print the scrypt hash to put in review.users[].password_hash (the password itself is never stored)."""
    if stdin:
        try:
            password = sys.stdin.buffer.readline().decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise fail("the password on standard input is not UTF-8 text") from None
    else:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    if len(password) < 8:
        raise fail("use a password of at least 8 characters")
    console.print(hash_password(password), highlight=False, soft_wrap=True)


@app.command("new-token")
def new_token() -> None:
    """Make a random API token for the JSON API: give the token to the reviewer, put its SHA-256 in
    review.users[].token_sha256."""
    token = secrets.token_urlsafe(32)
    console.print(f"token:        {token}\ntoken_sha256: {token_digest(token)}", highlight=False, soft_wrap=True)
