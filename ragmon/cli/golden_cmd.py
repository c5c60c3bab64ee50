"""``ragmon golden coverage``: does the golden set still describe the question types live traffic asks?

Exit codes: 0 every stratum with enough traffic matches, 1 some stratum diverged (or has traffic and no golden
case), 4 too little classified traffic anywhere; 2 bad arguments or golden file, 3 store unavailable.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from ragmon.cli.common import console, fail, settings_of
from ragmon.cli.options import parse_when
from ragmon.cli.store_open import open_store

app = typer.Typer(help="The golden set against live traffic.", no_args_is_help=True)


@app.command("coverage")
def coverage_cmd(
    ctx: typer.Context,
    golden: Annotated[Path | None, typer.Option(help="Golden set (JSON); default coverage.golden_path.",
                                                show_default=False)] = None,
    since: Annotated[str | None, typer.Option(metavar="TIME", help="Window start (ISO 8601 or a duration such as "
                                                                   "7d); default coverage.window_days back.",
                                              show_default=False)] = None,
    until: Annotated[str, typer.Option(metavar="TIME", help="Window end (exclusive).")] = "now",
    fingerprint: Annotated[str | None, typer.Option(help="Classifier fingerprint to count (default: the newest "
                                                         "in the window).", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help="table or json.")] = "table",
) -> None:
    """Compare the golden set's question-type tags with the types of classified live traces, per stratum:
    G-test, Cramér's V, total variation distance, and the types traffic asks more than the set holds.

    Exit codes: 0 matches · 1 diverged · 4 too little traffic · 2 bad arguments · 3 store unavailable.
    """
    from ragmon.coverage.check import check_coverage
    from ragmon.coverage.report import FORMATS, rich_renderable, to_json
    from ragmon.coverage.stats import CoverageThresholds
    from ragmon.golden_files import load_golden

    if fmt not in FORMATS:
        raise fail(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    settings = settings_of(ctx)
    c = settings.coverage
    path = golden or c.golden_path
    if path is None:
        raise fail("no golden set: pass --golden PATH or set coverage.golden_path")
    now = datetime.now(UTC)
    end = parse_when(until, now, "--until")
    start = parse_when(since, now, "--since") if since else None
    window = (end - start) if start is not None else timedelta(days=c.window_days)
    if window.total_seconds() <= 0:
        raise fail("--since must be before --until")
    cases = load_golden(path).cases
    store = open_store(settings)
    result = check_coverage(store, cases, c.question_types, until=end, window=window, fingerprint=fingerprint,
                            thresholds=CoverageThresholds.of(c))
    if fingerprint is not None and not any(st.traffic for st in result.strata):
        raise fail(f"--fingerprint {fingerprint[:80]!r}: no traffic in the window was classified with it; leave it "
                   "out to use the newest classifier's (`ragmon golden coverage --format json` names it)")
    if fmt == "json":
        typer.echo(to_json(result), nl=False)
    else:
        console.print(rich_renderable(result))
    raise typer.Exit(result.exit_code)
