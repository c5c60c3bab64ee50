"""``ragmon shadow compare``: compare a candidate retriever's shadow traces with production, per stratum.

Exit codes (for pipelines): 0 promote (every stratum met every threshold), 1 reject (some stratum failed a
threshold), 4 hold (not enough evidence, an inconclusive interval, or no thresholds given); 2 for bad
arguments and 3 when the store is unavailable, as everywhere in ragmon.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from ragmon.cli.common import console, err_console, fail, settings_of
from ragmon.cli.options import check_output_file, parse_when
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.verdict import Thresholds, parse_quality_drops

app = typer.Typer(help="Compare a candidate retriever running in shadow mode with production.",
                  no_args_is_help=True)

@app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    baseline: Annotated[str, typer.Option(
        metavar="NAME[@VERSION]", help="Production retriever as NAME or NAME@VERSION (any version if "
                                       "omitted).", show_default=False)],
    candidate: Annotated[str, typer.Option(
        metavar="NAME[@VERSION]", help="Candidate retriever as NAME or NAME@VERSION.", show_default=False)],
    baseline_variant: Annotated[str, typer.Option(
        metavar="VARIANT", help="Trace variant of the baseline side.")] = "production",
    candidate_variant: Annotated[str, typer.Option(
        metavar="VARIANT", help="Trace variant of the candidate side (shadow traces "
                                "carry variant=shadow).")] = "shadow",
    since: Annotated[str, typer.Option(
        metavar="TIME", help="Window start: ISO 8601 time (naive = UTC) or a duration back from "
                             "now such as 24h or 7d.")] = "24h",
    until: Annotated[str | None, typer.Option(
        metavar="TIME", help="Window end (exclusive), same forms as --since; default now.",
        show_default=False)] = None,
    k: Annotated[int | None, typer.Option(help="Compare the top k of each list. Default: the smaller of the two "
                                               "sides' usual result counts.", show_default=False)] = None,
    fmt: Annotated[str, typer.Option(
        "--format", metavar="FORMAT", help="table (terminal), markdown, html or json.")] = "table",
    out: Annotated[Path | None, typer.Option(help="Write the report to this file instead of stdout.",
                                             show_default=False)] = None,
    min_pairs: Annotated[int | None, typer.Option(help="Hold a stratum with fewer pairs than this.",
                                                  show_default=False)] = None,
    min_overlap: Annotated[float | None, typer.Option(help="Reject a stratum whose mean overlap@k (Jaccard) is "
                                                          "below this (0–1).", show_default=False)] = None,
    max_latency_p95_delta_ms: Annotated[float | None, typer.Option(
        help="Reject a stratum whose candidate p95 latency exceeds the baseline's by more than this many ms.",
        show_default=False)] = None,
    max_error_rate_delta: Annotated[float | None, typer.Option(
        help="Reject a stratum whose candidate error rate exceeds the baseline's by more than this (0.01 = one "
             "percentage point).", show_default=False)] = None,
    max_quality_drop: Annotated[list[str] | None, typer.Option(
        metavar="METRIC=X",
        help="METRIC=X, repeatable: reject a stratum when the whole confidence interval of the metric's mean "
             "paired difference lies below -X; hold when it straddles -X. Metrics: judge metrics in the scores "
             "table, and recall_at_k, mrr, ndcg_at_k with --golden.", show_default=False)] = None,
    golden: Annotated[Path | None, typer.Option(help="Golden set (JSON array of golden-case.v1): live queries "
                                                     "whose question matches a case are canaries with recall, MRR "
                                                     "and nDCG on both sides.", show_default=False)] = None,
    latency_stage: Annotated[str, typer.Option(
        metavar="STAGE", help="latency_ms key to compare (shadow traces often skip "
                              "generation), or 'total'.")] = "retrieve",
    rbo_p: Annotated[float, typer.Option(help="Persistence of rank-biased overlap, in (0, 1).")] = 0.9,
    confidence: Annotated[float, typer.Option(help="Confidence level of the bootstrap intervals.")] = 0.95,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.", min=100, max=100_000)] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap and the score sample (reproducible reports).",
                                      min=0)] = 0,
    top: Annotated[int, typer.Option(help="How many largest gains and losses to show.", min=0, max=100)] = 5,
    rank_by: Annotated[str | None, typer.Option(
        metavar="METRIC", help="Metric ranking the gains and losses (default: ndcg_at_k on "
                               "canaries, else the judge metric with most pairs).",
        show_default=False)] = None,
) -> None:
    """Pair production and shadow traces by query_id and report ranking agreement, score shift, operational
    and quality deltas per stratum, the biggest wins and losses, and a promote/hold/reject verdict.

    Exit codes: 0 promote · 1 reject · 4 hold (also when no thresholds are given) · 2 bad arguments · 3 store
    unavailable.
    """
    from ragmon.cli.store_open import open_store
    from ragmon.shadow.canary import load_golden
    from ragmon.shadow.compare import CompareOptions, compare
    from ragmon.shadow.report import FORMATS, render, rich_renderable

    if fmt not in FORMATS:
        raise fail(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    now = datetime.now(UTC)
    try:
        thresholds = Thresholds(min_pairs=min_pairs, min_overlap=min_overlap,
                                max_latency_p95_delta_ms=max_latency_p95_delta_ms,
                                max_error_rate_delta=max_error_rate_delta,
                                max_quality_drop=parse_quality_drops(max_quality_drop or []))
    except ValueError as exc:
        raise fail(str(exc)) from None
    if not 0.0 < confidence < 1.0:
        raise fail(f"--confidence must be in (0, 1), got {confidence}")
    options = CompareOptions(
        baseline=RetrieverRef.parse(baseline, baseline_variant, option="--baseline"),
        candidate=RetrieverRef.parse(candidate, candidate_variant, option="--candidate"),
        since=parse_when(since, now, "--since"), until=parse_when(until, now, "--until") if until else now,
        k=k, rbo_p=rbo_p, latency_stage=latency_stage, thresholds=thresholds,
        golden=load_golden(golden) if golden else (), confidence=confidence, n_resamples=resamples, seed=seed,
        top=top, rank_by=rank_by,
    )
    options.check()  # bad arguments are exit 2 before the store is opened (or found down)
    if out is not None:
        check_output_file(out, "--out")
    store = open_store(settings_of(ctx))
    result = compare(store, options)
    if out is not None:
        try:
            out.write_text(render(result, fmt), encoding="utf-8")
        except OSError as exc:
            raise fail(f"--out {out}: cannot write the report ({exc.strerror or exc})") from None
        err_console.print(f"wrote {fmt} report to {out}: {result.pairs} pairs, verdict "
                          f"{result.verdict.decision} (exit code {result.exit_code})", markup=False, highlight=False)
    elif fmt == "table":
        console.print(rich_renderable(result))
    else:
        typer.echo(render(result, fmt), nl=False)
    raise typer.Exit(result.exit_code)
