"""``ragmon ab compare``: a canary cohort against production on user outcomes, latency and judged quality.

Exit codes, as ``ragmon shadow compare``: 0 promote, 1 reject, 4 hold (inconclusive, or the cohort is too
small); 2 bad arguments, 3 store unavailable.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from ragmon.cli.common import console, fail, settings_of
from ragmon.cli.options import parse_when
from ragmon.cli.store_open import open_store

app = typer.Typer(help="A/B cohorts: a canary retriever's users against production's.", no_args_is_help=True)


@app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    baseline: Annotated[str, typer.Option(metavar="NAME[@VERSION]", help="Production retriever.", show_default=False)],
    candidate: Annotated[str, typer.Option(metavar="NAME[@VERSION]", help="Canary retriever.", show_default=False)],
    baseline_variant: Annotated[str, typer.Option(
        metavar="VARIANT", help="Trace variant of the baseline arm.")] = "production",
    candidate_variant: Annotated[str, typer.Option(metavar="VARIANT", help="Trace variant of the cohort.")] = "canary",
    since: Annotated[str, typer.Option(
        metavar="TIME", help="Window start (ISO 8601 or a duration such as 7d).")] = "7d",
    until: Annotated[str, typer.Option(metavar="TIME", help="Window end (exclusive).")] = "now",
    min_per_arm: Annotated[int | None, typer.Option(
        min=1, help="Hold a stratum with fewer traces in an arm (default ab.min_per_arm).", show_default=False)] = None,
    confidence: Annotated[float, typer.Option(help="Confidence level of the intervals.")] = 0.95,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help="table or json.")] = "table",
) -> None:
    """Per stratum: rates of citation opening, reformulation (events, or the same session asking again within
    ab.reformulation_seconds), escalation and resolution, feedback, mean latency and judged quality, each as
    candidate − baseline with an interval; verdict promote / hold / reject.

    Exit codes: 0 promote · 1 reject · 4 hold (also: cohort too small) · 2 bad arguments · 3 store unavailable.
    """
    from ragmon.ab.compare import AbOptions, Arm, compare
    from ragmon.ab.report import FORMATS, rich_renderable, to_json

    if fmt not in FORMATS:
        raise fail(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    if not 0.0 < confidence < 1.0:
        raise fail(f"--confidence must be in (0, 1), got {confidence}")
    settings = settings_of(ctx)
    now = datetime.now(UTC)
    try:
        base, cand = Arm.parse(baseline, baseline_variant), Arm.parse(candidate, candidate_variant)
    except ValueError as exc:
        raise fail(f"--baseline/--candidate: {exc}") from None
    if (base.name, base.version, base.variant) == (cand.name, cand.version, cand.variant):
        raise fail("--baseline and --candidate select the same traces; give the candidate's version or variant")
    start, end = parse_when(since, now, "--since"), parse_when(until, now, "--until")
    if start >= end:
        raise fail("--since must be before --until")
    options = AbOptions.of(settings.ab, base, cand, start, end, min_per_arm=min_per_arm, confidence=confidence)
    result = compare(open_store(settings), options)
    if fmt == "json":
        typer.echo(to_json(result), nl=False)
    else:
        console.print(rich_renderable(result))
    raise typer.Exit(result.exit_code)
