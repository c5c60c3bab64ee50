"""``ragmon drift``: scheduled drift checks with /metrics, one-off checks, reports and synthetic traffic."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ragmon.cli.common import console, exit_if_stuck, fail, settings_of
from ragmon.cli.options import LogLevelOption, check_output_file, configure_logging
from ragmon.config import Settings, override

app = typer.Typer(
    help="Drift in retrieval scores, quality scores, latency and cost: reference vs current window per "
    "(retriever, variant, stratum). Without a subcommand: run checks every drift.interval_seconds and serve "
    "/metrics, /healthz and /readyz until SIGTERM.",
    invoke_without_command=True,
)


def _open(settings: Settings) -> Any:
    from ragmon.store import ClickHouseStore

    return ClickHouseStore.open(settings.store)


@app.callback()
def drift(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Address for /metrics, /healthz, /readyz (server.host).",
                                             show_default=False)] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port; 0 picks a free one (server.port).",
                                             show_default=False)] = None,
    interval_seconds: Annotated[float | None, typer.Option(
        help="Seconds between checks (drift.interval_seconds, default 3600).", show_default=False)] = None,
    log_level: LogLevelOption = "INFO",
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from ragmon.process import Process, serve_roles

    configure_logging(log_level)
    settings = override(settings_of(ctx), "server", host=host, port=port)
    settings = override(settings, "drift", interval_seconds=interval_seconds)

    def announce(process: Process) -> None:
        console.print(f"ragmon drift: a check every {settings.drift.interval_seconds:g}s; metrics on "
                      f"http://{settings.server.host}:{process.port}/metrics", highlight=False, soft_wrap=True)

    exit_if_stuck(serve_roles(settings, only=["drift"], title="ragmon drift", started=announce))


@app.command("check")
def check(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once/--loop", help="Run one check and exit (default), or keep running "
                                       "checks every drift.interval_seconds in the foreground.")] = True,
    show_all: Annotated[bool, typer.Option("--all", help="List every test, not only the drifted ones.")] = False,
    fail_on_drift: Annotated[bool, typer.Option(help="Exit with status 1 when the check finds drift.")] = False,
) -> None:
    """Run a drift check now: store every result in drift_checks and print the drifted features."""
    from ragmon.drift.check import DriftChecker
    from ragmon.drift.report import load_check, terminal_table
    from ragmon.drift.schedule import DriftRole

    settings = settings_of(ctx)
    store = _open(settings)
    checker = DriftChecker(store, settings.drift)
    found = False

    def show(result: Any) -> None:
        nonlocal found
        found = found or bool(result.drifted)
        rows = load_check(store, result.check_id)
        if rows:
            console.print(terminal_table(rows, only_drifted=not show_all))
        insufficient = sum(r.status == "insufficient_data" for r in result.results)
        console.print(f"{len(result.results)} tests, [bold]{len(result.drifted)} drifted[/], {insufficient} with too "
                      f"few samples, {result.duration_seconds:.2f}s; check id {result.check_id}")

    if once:
        show(checker.run_once())
    else:
        import threading

        role = DriftRole(checker, settings.drift.interval_seconds, on_result=show)
        try:
            role.run(threading.Event())
        except KeyboardInterrupt:
            pass
    if fail_on_drift and found:
        raise typer.Exit(1)


@app.command("report")
def report(
    ctx: typer.Context,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML page with overlaid "
                                              "reference/current histograms of each drifted feature.",
                                              show_default=False)] = None,
    check_id: Annotated[str | None, typer.Option(help="Report this check (default: the latest).",
                                                 show_default=False)] = None,
    only_drifted: Annotated[bool, typer.Option(help="List only drifted tests in the terminal table.")] = False,
) -> None:
    """Show a stored drift check (the latest by default) as a table, and optionally as an HTML page."""
    from ragmon.drift.report import html_report, load_check, terminal_table

    if html is not None:
        check_output_file(html, "--html")
    store = _open(settings_of(ctx))
    rows = load_check(store, check_id)
    if not rows:
        raise fail(f"no drift check {check_id!r} is stored" if check_id else
                   "no drift check is stored yet; run `ragmon drift check` first")
    console.print(terminal_table(rows, only_drifted=only_drifted))
    if html is not None:
        try:
            html.write_text(html_report(rows), encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot write {html}: {exc.strerror or exc}") from None
        console.print(f"wrote {html}")


@app.command("features")
def features() -> None:
    """List the drift features and tests (names for drift.features and drift.overrides)."""
    from ragmon.drift.features import FEATURES
    from ragmon.drift.registry import DEFAULT_TESTS, REGISTRY

    table = Table("feature", "kind", "source", "default tests", "description", title="drift features")
    for f in FEATURES.values():
        table.add_row(f.name, f.kind, f.source, ", ".join(DEFAULT_TESTS[f.kind]), f.description)
    console.print(table)
    tests = Table("test", "kinds", "α", "effect", "effect ≥", "min n", title="drift tests (defaults)")
    for t in REGISTRY.values():
        tests.add_row(t.name, ", ".join(sorted(t.kinds)), f"{t.default_threshold:g}", t.effect_name,
                      f"{t.default_effect_threshold:g}", str(t.default_min_samples))
    console.print(tests)
    for t in REGISTRY.values():
        console.print(f"[bold]{t.name}[/]: {t.description}", highlight=False)


@app.command("simulate")
def simulate(
    ctx: typer.Context,
    reference_per_day: Annotated[int, typer.Option(
        help="Traces per day in the same hour as the current window, for each of the 7 previous days.")] = 300,
    current: Annotated[int, typer.Option(help="Traces in the last hour (the current window).")] = 1000,
    shift: Annotated[float, typer.Option(help="Added to every retrieval score of the current traces.")] = 0.0,
    retriever: Annotated[str, typer.Option(help="Retriever as name@version.")] = "hybrid@v1",
    strata: Annotated[str, typer.Option(help="Comma-separated strata (trace categories).")] = "billing,consent,security",
    empty_rate: Annotated[float, typer.Option(help="Share of current traces with an empty shortlist.")] = 0.01,
) -> None:
    """Write synthetic traffic (generated inside ClickHouse) for trying drift checks out; never on production."""
    from ragmon.drift.synthetic import SyntheticSpec, insert_synthetic

    limit = 10_000_000  # traces per window: ~7 GB of traces at most, generated inside ClickHouse
    if not (0 <= reference_per_day <= limit and 0 <= current <= limit):
        raise fail(f"--reference-per-day and --current must be between 0 and {limit:,}")
    if not 0 <= empty_rate <= 1:
        raise fail("--empty-rate must be within [0, 1]")
    if not math.isfinite(shift) or abs(shift) > 1:
        raise fail(f"--shift must be a finite number within [-1, 1] (scores are in [0, 1]), got {shift}")
    now = datetime.now(UTC)
    start = now - timedelta(hours=1)
    names = tuple(s.strip() for s in strata.split(",") if s.strip())
    if not names:
        raise fail("--strata names no stratum; give comma-separated categories, e.g. billing,consent")
    try:
        base = SyntheticSpec(0, start, now, retrievers=(retriever,), strata=names, run_id=f"sim{now:%H%M%S%f}")
    except ValueError as exc:
        raise fail(str(exc)) from None
    store = _open(settings_of(ctx))
    total = 0
    for day in range(1, 8):
        total += insert_synthetic(store, _with(base, n=reference_per_day, start=start - timedelta(days=day),
                                               end=now - timedelta(days=day), seed=day))
    total += insert_synthetic(store, _with(base, n=current, shift=shift, empty_rate=empty_rate, seed=0,
                                           start=start, end=now - timedelta(seconds=1)))
    console.print(f"inserted {total:,} synthetic traces ({reference_per_day:,}/day × 7 reference, {current:,} "
                  f"current, score shift {shift:+g})")


def _with(spec: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(spec, **changes)
