"""``ragmon drift``: scheduled drift checks with /metrics, one-off checks, reports and synthetic traffic."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ragmon.cli import drift_explain, judge_drift_cmd
from ragmon.cli.common import EXIT_NO_EVIDENCE, console, err_console, exit_if_stuck, fail, settings_of
from ragmon.cli.drift_applied import applied_drift_settings
from ragmon.cli.options import (
    FormatOption,
    LogLevelOption,
    check_format,
    check_output_file,
    configure_logging,
    parse_when,
)
from ragmon.cli.store_open import is_remote
from ragmon.config import Settings, override

app = typer.Typer(
    help="Drift in retrieval scores, quality scores, latency and cost: reference vs current window per "
    "(retriever, variant, stratum). Without a subcommand: run checks every drift.interval_seconds and serve "
    "/metrics, /healthz and /readyz until SIGTERM.",
    invoke_without_command=True,
)
app.command("judge-agreement")(judge_drift_cmd.judge_agreement)
app.command("explain")(drift_explain.explain)


def _open(settings: Settings, *, writes: bool = False) -> Any:
    from ragmon.cli.store_open import open_store

    return open_store(settings, writes=writes)


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
    from ragmon.process import Process, drift_roles, serve_roles

    configure_logging(log_level)
    settings = override(settings_of(ctx), "server", host=host, port=port)
    settings = override(settings, "drift", interval_seconds=interval_seconds)

    def announce(process: Process) -> None:
        console.print(f"ragmon drift: a check every {settings.drift.interval_seconds:g}s; metrics on "
                      f"http://{settings.server.host}:{process.port}/metrics", highlight=False, soft_wrap=True)

    exit_if_stuck(serve_roles(settings, only=drift_roles(settings), title="ragmon drift", started=announce))


@app.command("check")
def check(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once/--loop", help="Run one check and exit (default), or keep running "
                                       "checks every drift.interval_seconds in the foreground.")] = True,
    show_all: Annotated[bool, typer.Option("--all", help="List every test, not only the drifted ones.")] = False,
    fail_on_drift: Annotated[bool, typer.Option(help="Exit with status 1 when the check finds drift, and 4 when it "
                                                "could assess no test at all.")] = False,
    at: Annotated[str | None, typer.Option(
        "--at", help="Run the check as it would have run at this time ('6h' = six hours ago, or ISO 8601): on the "
        "stored history, printed only (not stored, not exported).", show_default=False)] = None,
    output: FormatOption = "table",
) -> None:
    """Run a drift check now: store every result in drift_checks and print the drifted features.

    Each window is compared with the same time of day over drift.windows.reference_days and with how much windows
    naturally differ; PERSISTENT marks a feature whose CUSUM crossed its threshold (what the alerts page on),
    DRIFT a feature this check alone declared drifted. One check (and --at) applies the drift settings of the
    latest stored check (the daemon's windows and thresholds), with what your configuration sets explicitly on
    top, and names them on stderr. See docs/drift.md.
    """
    from ragmon.drift.check.check import DriftChecker
    from ragmon.drift.check.report import json_rows, load_check, result_rows, terminal_table
    from ragmon.drift.check.schedule import DriftRole

    output = check_format(output)
    if at is not None and not once:
        raise fail("--at runs one check as of a past time; it cannot be combined with --loop")
    when = parse_when(at, datetime.now(UTC), "--at") if at is not None else None
    settings = settings_of(ctx)
    store = _open(settings, writes=not once)
    if when is None and is_remote(store):  # the daemon holding the store stores its own checks
        when = datetime.now(UTC)
        err_console.print("the store is held by a running ragmon: this check is run through it and printed, not "
                          "stored (the daemon's drift role stores its own)", highlight=False, soft_wrap=True)
    drift_settings = settings.drift if not once else applied_drift_settings(store, settings.drift)
    checker = DriftChecker(store, drift_settings)
    found = False
    blind = False

    def show(result: Any, rows: list[dict[str, Any]]) -> None:
        nonlocal found, blind
        found = found or bool(result.drifted) or bool(result.persistent)
        # not one test assessed: "no drifted feature" would read as health; say it louder than the table
        blind = not any(r.assessed for r in result.results)
        if blind:
            err_console.print("[bold red]NOTHING ASSESSED[/]: " + (
                f"not one of the {len(result.results)} tests of this check could be assessed (too few traces or "
                "reference windows): it says nothing about drift. `--all` gives each test's reason."
                if result.results else "no traffic in this check's windows: it says nothing about drift."),
                highlight=False, soft_wrap=True)
        if output == "json":
            console.print_json(json_rows(rows if show_all else [r for r in rows if r["drifted"] or r["persistent"]]))
            return
        if rows:
            console.print(terminal_table(rows, only_drifted=not show_all))
        insufficient = sum(r.status == "insufficient_data" for r in result.results)
        console.print(f"{len(result.results)} tests, [bold]{len(result.drifted)} drifted[/], "
                      f"[bold]{len(result.persistent)} persistent[/], {insufficient} with too few samples, "
                      f"{result.duration_seconds:.2f}s; "
                      + (f"as of {result.checked_at:%Y-%m-%d %H:%M} UTC (not stored)" if when else
                         f"check id {result.check_id}"))

    if when is not None:
        result = checker.evaluate(when)
        show(result, result_rows(result))
    elif once:
        result = checker.run_once()
        show(result, load_check(store, result.check_id))
    else:
        import threading

        role = DriftRole(checker, settings.drift.interval_seconds,
                         on_result=lambda result: show(result, load_check(store, result.check_id)))
        try:
            role.run(threading.Event())
        except KeyboardInterrupt:
            pass
    if fail_on_drift and found:
        raise typer.Exit(1)
    if fail_on_drift and blind:  # a gate with no evidence holds (docs/cli.md, exit codes)
        raise typer.Exit(EXIT_NO_EVIDENCE)


@app.command("report")
def report(
    ctx: typer.Context,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML page with overlaid "
                                              "reference/current histograms of each drifted feature.",
                                              show_default=False)] = None,
    check_id: Annotated[str | None, typer.Option(help="Report this check (default: the latest).",
                                                 show_default=False)] = None,
    only_drifted: Annotated[bool, typer.Option(help="List only drifted tests in the terminal table.")] = False,
    output: FormatOption = "table",
) -> None:
    """Show a stored drift check (the latest by default) as a table or JSON, and optionally as an HTML page."""
    from ragmon.drift.check.report import html_report, json_rows, load_check, terminal_table

    output = check_format(output)
    if html is not None:
        check_output_file(html, "--html")
    store = _open(settings_of(ctx))
    rows = load_check(store, check_id)
    if not rows:
        raise fail(f"no drift check {check_id!r} is stored" if check_id else
                   "no drift check is stored yet; run `ragmon drift check` first")
    if output == "json":
        console.print_json(json_rows([r for r in rows if r["drifted"] or r["persistent"]] if only_drifted else rows))
    else:
        console.print(terminal_table(rows, only_drifted=only_drifted))
    if html is not None:
        try:
            html.write_text(html_report(rows), encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot write {html}: {exc.strerror or exc}") from None
        console.print(f"wrote {html}")


@app.command("features")
def features(ctx: typer.Context, output: FormatOption = "table") -> None:
    """List the drift features and tests (names for drift.features and drift.overrides), with the significance level
    your configuration applies (drift.alpha, or a feature's drift.overrides.<feature>.threshold)."""
    from ragmon.drift.method.features import FEATURES, significance
    from ragmon.drift.method.registry import REGISTRY

    drift_settings = settings_of(ctx).drift
    alpha = {name: significance(drift_settings, name) for name in FEATURES}
    if check_format(output) == "json":
        console.print_json(json.dumps({
            "alpha": drift_settings.alpha,
            "features": [{"feature": f.name, "kind": f.kind, "source": f.source, "default_tests": list(f.default_tests),
                          "alpha": alpha[f.name], "description": f.description}
                         for f in FEATURES.values()],
            "tests": [{"test": t.name, "unit": t.unit, "kinds": sorted(t.kinds), "alpha": drift_settings.alpha,
                       "effect": t.effect_name, "effect_threshold": t.default_effect_threshold,
                       "min_samples": t.default_min_samples, "description": t.description}
                      for t in REGISTRY.values()]}))
        return
    table = Table("feature", "kind", "source", "default tests", "α", "description", title="drift features")
    for f in FEATURES.values():
        table.add_row(f.name, f.kind, f.source, ", ".join(f.default_tests),
                      f"{alpha[f.name]:g}", f.description)
    console.print(table)
    console.print(f"α: drift.alpha = {drift_settings.alpha:g} for every test, unless "
                  "drift.overrides.<feature>.threshold sets a feature's; compared with the p-value adjusted within its "
                  "stratum (docs/drift.md).",
                  highlight=False)
    tests = Table("test", "unit", "kinds", "effect", "effect ≥", "min n", title="drift tests (defaults)")
    for t in REGISTRY.values():
        tests.add_row(t.name, t.unit, ", ".join(sorted(t.kinds)), t.effect_name,
                      f"{t.default_effect_threshold:g}", str(t.default_min_samples))
    console.print(tests)
    for t in REGISTRY.values():
        console.print(f"[bold]{t.name}[/]: {t.description}", highlight=False)


@app.command("simulate")
def simulate(
    ctx: typer.Context,
    shape: Annotated[str | None, typer.Option(
        help="Realistic traffic, generated in Python and inserted like real traces: iid, mix (each hour's mix of "
        "query types varies), trending (popular queries come and go), seasonal (mix and volume follow the day), "
        "doc_updates (documents get new versions; with --stale-index the index stops picking them up), composite "
        "(all of these together: recurring questions with their own habits, bursts of new ones, weekends, a daily "
        "document update), composite_churn (composite whose daily update also moves the scores of the questions "
        "whose documents changed). Without "
        "it: independent draws generated inside ClickHouse (fast, for volume).", show_default=False)] = None,
    per_hour: Annotated[int, typer.Option(min=1, max=100_000, help="--shape: traces per stratum per hour (the "
                                          "daily mean for seasonal).")] = 500,
    days: Annotated[int, typer.Option(min=1, max=60, help="--shape: days of history before the current hour.")] = 8,
    drift_hours: Annotated[int, typer.Option(min=0, help="--shape: hours at the end that carry the drift "
                                             "(--shift, --scale, --extra-empty, --stale-index).")] = 1,
    drift_strata: Annotated[str | None, typer.Option(
        help="--shape: comma-separated strata that drift (default: every stratum).", show_default=False)] = None,
    scale: Annotated[float, typer.Option(help="--shape: multiply every retrieval score by this.")] = 1.0,
    extra_empty: Annotated[float, typer.Option(help="--shape: add this share of empty shortlists.")] = 0.0,
    stale_index: Annotated[bool, typer.Option(
        "--stale-index", help="--shape doc_updates or composite: the index stops picking up new versions when the "
        "drift begins.")] = False,
    seed: Annotated[int, typer.Option(help="--shape: seed of the draws (same seed, same traces).")] = 1,
    reference_per_day: Annotated[int, typer.Option(
        help="Without --shape: traces per day in the same hour as the current window, for each of the 7 previous "
        "days.")] = 300,
    current: Annotated[int, typer.Option(help="Without --shape: traces in the last hour (the current window).")] = 1000,
    shift: Annotated[float, typer.Option(help="Added to every retrieval score of the current (or drifting) "
                                         "traces.")] = 0.0,
    retriever: Annotated[str, typer.Option(help="Retriever as name@version.")] = "hybrid@v1",
    strata: Annotated[str, typer.Option(
        help="Comma-separated strata (trace categories).")] = "billing,consent,security",
    empty_rate: Annotated[float, typer.Option(help="Without --shape: share of current traces with an empty "
                                              "shortlist.")] = 0.01,
) -> None:
    """Write synthetic traffic for trying drift checks out (and tuning them with `drift backtest`); never on
    production data."""
    from ragmon.drift.simulation.traffic import SHAPES

    if not math.isfinite(shift) or abs(shift) > 1:
        raise fail(f"--shift must be a finite number within [-1, 1] (scores are in [0, 1]), got {shift}")
    names = tuple(s.strip() for s in strata.split(",") if s.strip())
    if not names:
        raise fail("--strata names no stratum; give comma-separated categories, e.g. billing,consent")
    if shape is not None:
        if shape not in SHAPES:
            raise fail(f"--shape {shape!r} is not one of {', '.join(SHAPES)}")
        if not (math.isfinite(scale) and 0 < scale <= 10) or not 0 <= extra_empty <= 1:
            raise fail("--scale must be within (0, 10] and --extra-empty within [0, 1]")
        if stale_index and shape not in ("doc_updates", "composite", "composite_churn"):
            raise fail("--stale-index needs --shape doc_updates or composite")
        if drift_hours > days * 24 + 1:
            raise fail(f"--drift-hours must be at most the {days * 24 + 1} hours simulated")
        drifting = tuple(x.strip() for x in drift_strata.split(",") if x.strip()) if drift_strata else None
        if drifting is not None and not set(drifting) <= set(names):
            raise fail(f"--drift-strata {', '.join(sorted(set(drifting) - set(names)))} not among --strata")
        _simulate_shape(ctx, shape, per_hour, days, drift_hours, names, retriever, seed, shift, scale, extra_empty,
                        stale_index, drifting)
        return
    _simulate_volume(ctx, reference_per_day, current, shift, retriever, names, empty_rate)


def _simulate_shape(ctx: typer.Context, shape: str, per_hour: int, days: int, drift_hours: int,
                    names: tuple[str, ...], retriever: str, seed: int, shift: float, scale: float,
                    extra_empty: float, stale_index: bool, drifting: tuple[str, ...] | None) -> None:
    from rich.progress import Progress

    from ragmon.drift.simulation.draw import Shift
    from ragmon.drift.simulation.simulate import ShapedSpec, insert_shaped

    now = datetime.now(UTC).replace(microsecond=0)  # the hours end now, so a check right after sees a full window
    drift = Shift(add=shift, scale=scale, extra_empty=extra_empty, stale_since=0.0 if stale_index else None)
    try:
        spec = ShapedSpec(shape, per_hour, days, now, strata=names, retriever=retriever, shift=drift,
                          drift_hours=drift_hours, drift_strata=drifting, seed=seed,
                          run_id=f"{shape}{datetime.now(UTC):%H%M%S%f}")
    except ValueError as exc:
        raise fail(str(exc)) from None
    store = _open(settings_of(ctx), writes=True)
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task(f"simulating {spec.hours} hours of {shape} traffic", total=spec.hours)
        total = insert_shaped(store, spec, progress=lambda done, _n: bar.update(task, completed=done))
    console.print(f"inserted {total:,} {shape} traces: {len(names)} strata × ~{per_hour:,}/hour over {days} days "
                  f"and the last hour, up to {now:%Y-%m-%d %H:%M} UTC; drift in the last {drift_hours} hours "
                  f"of {', '.join(drifting) if drifting else 'every stratum'} (score +{shift:g} ×{scale:g}, empty "
                  f"+{extra_empty:g}{', stale index' if stale_index else ''})",
                  highlight=False, soft_wrap=True)


def _simulate_volume(ctx: typer.Context, reference_per_day: int, current: int, shift: float, retriever: str,
                     names: tuple[str, ...], empty_rate: float) -> None:
    from ragmon.drift.simulation.synthetic import SyntheticSpec, insert_synthetic

    limit = 10_000_000  # traces per window: ~7 GB of traces at most, generated inside ClickHouse
    if not (0 <= reference_per_day <= limit and 0 <= current <= limit):
        raise fail(f"--reference-per-day and --current must be between 0 and {limit:,}")
    if not 0 <= empty_rate <= 1:
        raise fail("--empty-rate must be within [0, 1]")
    now = datetime.now(UTC)
    start = now - timedelta(hours=1)
    try:
        base = SyntheticSpec(0, start, now, retrievers=(retriever,), strata=names, run_id=f"sim{now:%H%M%S%f}")
    except ValueError as exc:
        raise fail(str(exc)) from None
    store = _open(settings_of(ctx), writes=True)
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


@app.command("backtest")
def backtest_cmd(
    ctx: typer.Context,
    start: Annotated[str, typer.Option("--from", help="Start of the range ('7d' = seven days ago, or ISO 8601).")],
    end: Annotated[str, typer.Option("--to", help="End of the range ('now', '1h', or ISO 8601).")] = "now",
    output: FormatOption = "table",
    show_all: Annotated[bool, typer.Option("--all", help="List every group and feature, not only those that "
                                           "would have alarmed.")] = False,
) -> None:
    """Replay the drift detector over stored history: for every window end in the range, the check as it would
    have run then (drift check --at), from only what was timestamped before it; per group and feature, how many
    windows would have alarmed and when persistent drift began (an alarm active at --from: since when).

    Applies the drift settings of the latest stored check (the daemon's), with what your configuration sets
    explicitly on top: tune drift.alpha, drift.sequential.* and drift.windows on your own traffic before paging
    on the alerts, and measure the false-alarm rate you get. Exits 4 when not one feature could be assessed in
    the range. Reads only; nothing is stored or exported.
    """
    from ragmon.cli.drift_backtest import run_backtest

    output = check_format(output)
    now = datetime.now(UTC)
    lo, hi = parse_when(start, now, "--from"), parse_when(end, now, "--to")
    if hi <= lo:
        raise fail(f"--to ({hi.isoformat()}) must be later than --from ({lo.isoformat()})")
    if hi - lo > timedelta(days=90):
        raise fail("a backtest covers at most 90 days; split longer ranges")
    run_backtest(settings_of(ctx), lo, hi, output, show_all, _open)
