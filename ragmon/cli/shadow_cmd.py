"""``ragmon shadow compare``: compare a candidate retriever's shadow traces with production, per stratum.

Exit codes (for pipelines): 0 promote (every stratum met every threshold), 1 reject (some stratum failed a
threshold), 4 hold (not enough evidence, an inconclusive interval, or no thresholds given); 2 for bad
arguments and 3 when the store is unavailable, as everywhere in ragmon.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragmon.cli.common import console, err_console, fail, settings_of
from ragmon.cli.options import check_output_file, parse_when
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.verdict import Thresholds, parse_quality_drops

if TYPE_CHECKING:
    from ragmon.shadow.result import ComparisonResult

app = typer.Typer(help="Compare a candidate retriever running in shadow mode with production.",
                  no_args_is_help=True)


# The options of ``shadow compare``, each declared once; the option name comes from the parameter's name.
BaselineOption = Annotated[str, typer.Option(
    metavar="NAME[@VERSION]", help="Production retriever as NAME or NAME@VERSION (any version if omitted).",
    show_default=False)]
CandidateOption = Annotated[str, typer.Option(
    metavar="NAME[@VERSION]", help="Candidate retriever as NAME or NAME@VERSION.", show_default=False)]
BaselineVariantOption = Annotated[str, typer.Option(metavar="VARIANT", help="Trace variant of the baseline side.")]
CandidateVariantOption = Annotated[str, typer.Option(
    metavar="VARIANT", help="Trace variant of the candidate side (shadow traces carry variant=shadow).")]
SinceOption = Annotated[str, typer.Option(
    metavar="TIME", help="Window start: ISO 8601 time (naive = UTC) or a duration back from now such as 24h or 7d.")]
UntilOption = Annotated[str | None, typer.Option(
    metavar="TIME", help="Window end (exclusive), same forms as --since; default now.", show_default=False)]
KOption = Annotated[int | None, typer.Option(
    help="Compare the top k of each list. Default: the smaller of the two sides' usual result counts.",
    show_default=False)]
FormatOption = Annotated[str, typer.Option(
    "--format", metavar="FORMAT", help="table (terminal), markdown, html or json.")]
OutOption = Annotated[Path | None, typer.Option(
    help="Write the report to this file instead of stdout.", show_default=False)]
MinPairsOption = Annotated[int | None, typer.Option(
    help="Hold a stratum with fewer pairs than this.", show_default=False)]
MinOverlapOption = Annotated[float | None, typer.Option(
    help="Reject a stratum whose mean overlap@k (Jaccard) is below this (0–1).", show_default=False)]
MaxLatencyDeltaOption = Annotated[float | None, typer.Option(
    help="Reject a stratum whose candidate p95 latency exceeds the baseline's by more than this many ms.",
    show_default=False)]
MaxErrorRateDeltaOption = Annotated[float | None, typer.Option(
    help="Reject a stratum whose candidate error rate exceeds the baseline's by more than this (0.01 = one "
         "percentage point).", show_default=False)]
MaxQualityDropOption = Annotated[list[str] | None, typer.Option(
    metavar="METRIC=X",
    help="METRIC=X, repeatable: reject a stratum when the whole confidence interval of the metric's mean paired "
         "difference lies below -X; hold when it straddles -X. Metrics: judge metrics in the scores table, and "
         "recall_at_k, mrr, ndcg_at_k with --golden.", show_default=False)]
GoldenOption = Annotated[Path | None, typer.Option(
    help="Golden set (JSON array of golden-case.v1): live queries whose question matches a case are canaries with "
         "recall, MRR and nDCG on both sides.", show_default=False)]
LatencyStageOption = Annotated[str, typer.Option(
    metavar="STAGE", help="latency_ms key to compare (shadow traces often skip generation), or 'total'.")]
RboPOption = Annotated[float, typer.Option(help="Persistence of rank-biased overlap, in (0, 1).")]
ConfidenceOption = Annotated[float, typer.Option(help="Confidence level of the bootstrap intervals.")]
ResamplesOption = Annotated[int, typer.Option(help="Bootstrap resamples.", min=100, max=100_000)]
SeedOption = Annotated[int, typer.Option(help="Seed of the bootstrap and the score sample (reproducible reports).",
                                         min=0)]
TopOption = Annotated[int, typer.Option(help="How many largest gains and losses to show.", min=0, max=100)]
RankByOption = Annotated[str | None, typer.Option(
    metavar="METRIC", help="Metric ranking the gains and losses (default: ndcg_at_k on canaries, else the judge "
                           "metric with most pairs).", show_default=False)]


@app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    baseline: BaselineOption,
    candidate: CandidateOption,
    baseline_variant: BaselineVariantOption = "production",
    candidate_variant: CandidateVariantOption = "shadow",
    since: SinceOption = "24h",
    until: UntilOption = None,
    k: KOption = None,
    fmt: FormatOption = "table",
    out: OutOption = None,
    min_pairs: MinPairsOption = None,
    min_overlap: MinOverlapOption = None,
    max_latency_p95_delta_ms: MaxLatencyDeltaOption = None,
    max_error_rate_delta: MaxErrorRateDeltaOption = None,
    max_quality_drop: MaxQualityDropOption = None,
    golden: GoldenOption = None,
    latency_stage: LatencyStageOption = "retrieve",
    rbo_p: RboPOption = 0.9,
    confidence: ConfidenceOption = 0.95,
    resamples: ResamplesOption = 2000,
    seed: SeedOption = 0,
    top: TopOption = 5,
    rank_by: RankByOption = None,
) -> None:
    """Pair production and shadow traces by query_id and report ranking agreement, score shift, operational
    and quality deltas per stratum, the biggest wins and losses, and a promote/hold/reject verdict.

    Exit codes: 0 promote · 1 reject · 4 hold (also when no thresholds are given) · 2 bad arguments · 3 store
    unavailable.
    """
    from ragmon.cli.store_open import open_store
    from ragmon.shadow.canary import load_golden
    from ragmon.shadow.compare import CompareOptions, compare
    from ragmon.shadow.report import FORMATS

    if fmt not in FORMATS:
        raise fail(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    now = datetime.now(UTC)
    thresholds = _thresholds(min_pairs, min_overlap, max_latency_p95_delta_ms, max_error_rate_delta,
                             max_quality_drop or [])
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
    result = compare(open_store(settings_of(ctx)), options)
    _report(result, fmt, out)
    raise typer.Exit(result.exit_code)


def _thresholds(min_pairs: int | None, min_overlap: float | None, max_latency_p95_delta_ms: float | None,
                max_error_rate_delta: float | None, max_quality_drop: list[str]) -> Thresholds:
    """The verdict's thresholds; a usage error (exit 2) for a malformed --max-quality-drop or a value out of range."""
    try:
        return Thresholds(min_pairs=min_pairs, min_overlap=min_overlap,
                          max_latency_p95_delta_ms=max_latency_p95_delta_ms,
                          max_error_rate_delta=max_error_rate_delta,
                          max_quality_drop=parse_quality_drops(max_quality_drop))
    except ValueError as exc:
        raise fail(str(exc)) from None


def _report(result: ComparisonResult, fmt: str, out: Path | None) -> None:
    """The report in ``fmt``, to ``out`` (with one line on stderr saying so) or to stdout."""
    from ragmon.shadow.report import render, rich_renderable

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
