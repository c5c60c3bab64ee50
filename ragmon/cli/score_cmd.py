"""``ragmon score``: score sampled traces with the pinned judge (Kafka consumer or store backfill), and report."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from ragmon.cli.common import EXIT_USAGE, console, err_console, exit_if_stuck, fail, settings_of
from ragmon.cli.options import FormatOption, LogLevelOption, check_format, configure_logging, parse_when
from ragmon.config import Settings, override
from ragmon.contracts.trace import Variant

app = typer.Typer(help="Live scoring with the pinned judge.", no_args_is_help=False)


# The options of ``ragmon score``, each declared once; the option name comes from the parameter's name unless given.
FromStoreOption = Annotated[bool, typer.Option(
    "--from-store", help="Score traces already in the store (a backfill) instead of consuming Kafka.")]
SinceOption = Annotated[str, typer.Option(
    help="With --from-store: oldest trace time to score ('24h' = 24 hours ago, 'now', or ISO 8601).")]
UntilOption = Annotated[str, typer.Option(help="With --from-store: score traces older than this.")]
JudgeOption = Annotated[str | None, typer.Option(
    help="Judge kind: heuristic (deterministic, no model) or openai (judge.kind).", show_default=False)]
RateOption = Annotated[float | None, typer.Option(
    help="Share of traces to score, 0..1, decided from hash(salt, query_id) (sampling.rate).", show_default=False)]
BootstrapServersOption = Annotated[str | None, typer.Option(
    help="Kafka brokers host:port[,…] (kafka.bootstrap_servers).", show_default=False)]
TopicOption = Annotated[str | None, typer.Option(
    help="Traces topic to consume (score.topic, default kafka.topic).", show_default=False)]
GroupIdOption = Annotated[str | None, typer.Option(
    help="Consumer group; replicas with the same group split the partitions (score.group_id).", show_default=False)]
MaxTracesOption = Annotated[int | None, typer.Option(
    min=1, help="Stop after reading this many traces (Kafka mode).", show_default=False)]
ExitWhenIdleOption = Annotated[float | None, typer.Option(
    min=0, help="Kafka mode: exit 0 once, for this many seconds, partitions were assigned, the lag was zero on each, "
    "nothing was read, judged or waiting to be stored, and every offset read was committed (batch jobs, tests). Exit 3 "
    "if no partition is assigned for twice kafka.session_timeout_ms (another member holds them all; a killed one "
    "holds them until its session times out).", show_default=False)]
PageSizeOption = Annotated[int, typer.Option(help="With --from-store: traces read per page and at most per insert; the "
                                             "next page is read while the judges still work on the last one.")]
OnlyFailedOption = Annotated[bool, typer.Option(
    "--only-failed", help="With --from-store: score again only the traces whose scores by this judge (its "
    "fingerprint) are stored as failed, e.g. after a judge outage outlasted judge.deadline_seconds; the new rows "
    "replace the failed ones.")]
HostOption = Annotated[str | None, typer.Option(
    help="Kafka mode: address for /metrics, /healthz (server.host).", show_default=False)]
PortOption = Annotated[int | None, typer.Option(
    help="Kafka mode: HTTP port for /metrics, /healthz; 0 picks a free one (server.port).", show_default=False)]


@app.callback(invoke_without_command=True)
def score(
    ctx: typer.Context,
    from_store: FromStoreOption = False,
    since: SinceOption = "24h",
    until: UntilOption = "now",
    judge: JudgeOption = None,
    rate: RateOption = None,
    bootstrap_servers: BootstrapServersOption = None,
    topic: TopicOption = None,
    group_id: GroupIdOption = None,
    max_traces: MaxTracesOption = None,
    exit_when_idle: ExitWhenIdleOption = None,
    page_size: PageSizeOption = 500,
    only_failed: OnlyFailedOption = False,
    host: HostOption = None,
    port: PortOption = None,
    log_level: LogLevelOption = "INFO",
) -> None:
    """Score sampled traces with the pinned judge and write scores (with the judge fingerprint) to the store.

    Every trace gets a sampling decision (sampled, not_sampled, capped, over_budget) in sampling_decisions. Sampled
    traces are judged and scored with the same metric functions as the gate; a judge that keeps failing is recorded as
    status=failed, never as a score.

    Kafka mode (default) consumes the traces topic in its own consumer group until SIGTERM; run more replicas to scale
    out. --from-store scores stored traces between --since and --until.

    Options override the same settings from --config and RAGMON_* variables (judge.*, sampling.*, score.*).
    """
    if ctx.invoked_subcommand is not None:
        return
    _check_arguments(judge, page_size, only_failed, from_store)
    configure_logging(log_level, quiet=("kafka", "httpx"))
    settings = override(settings_of(ctx), "judge", kind=judge)
    settings = override(settings, "sampling", rate=rate)
    settings = override(settings, "kafka", bootstrap_servers=bootstrap_servers)
    settings = override(settings, "score", topic=topic, group_id=group_id)
    settings = override(settings, "server", host=host, port=port)
    if not from_store:
        _summary(*_consume(settings, max_traces, exit_when_idle))
        return
    now = datetime.now(UTC)  # bad times are exit 2 before the store is opened (or found down)
    start, end = parse_when(since, now, "--since"), parse_when(until, now, "--until")
    if end <= start:
        raise fail(f"--until ({end.isoformat()}) must be later than --since ({start.isoformat()})", EXIT_USAGE)
    _summary(*_backfill(settings, start, end, page_size, only_failed))


def _check_arguments(judge: str | None, page_size: int, only_failed: bool, from_store: bool) -> None:
    """A usage error (exit 2) for an unknown judge, a page size under 1, or --only-failed without --from-store."""
    if judge is not None and judge not in ("heuristic", "openai"):
        raise fail(f"--judge {judge!r} is not one of heuristic, openai", EXIT_USAGE)
    if page_size < 1:
        raise fail("--page-size must be at least 1", EXIT_USAGE)
    if only_failed and not from_store:
        raise fail("--only-failed scores stored traces again: use it with --from-store", EXIT_USAGE)


def _backfill(settings: Settings, start: datetime, end: datetime, page_size: int,
              only_failed: bool) -> tuple[Any, Any, float]:
    """--from-store: score the stored traces between ``start`` and ``end`` (with --only-failed, those whose scores by
    this judge failed), with a progress bar on stderr; the result, the judge and the seconds taken."""
    from ragmon.cli.store_open import open_store
    from ragmon.score.runner import BatchResult, backfill, build_scorer
    from ragmon.telemetry import Telemetry

    telemetry = Telemetry()
    store = open_store(settings, writes=True)
    started = time.monotonic()
    scorer = build_scorer(settings, store, telemetry)
    scorer.announce()
    from ragmon.score.sources import StoreScoreSource

    total = StoreScoreSource(store, start, end, failed_of=scorer.judge.fingerprint if only_failed else None).count()
    if total == 0 and only_failed:
        err_console.print(f"no trace between {start.isoformat()} and {end.isoformat()} has scores of judge "
                          f"{scorer.judge.fingerprint} stored as failed: nothing to score again", highlight=False,
                          soft_wrap=True)
    elif total == 0:
        err_console.print(f"no stored traces between {start.isoformat()} and {end.isoformat()}: widen --since/"
                          "--until, or ingest traces first (ragmon ingest)", highlight=False, soft_wrap=True)
    from rich.progress import Progress

    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task(f"scoring {total:,} stored traces", total=total or None)
        result: BatchResult = backfill(scorer, store, start, end, page_size=page_size,
                                       flush_interval_seconds=settings.score.flush_interval_seconds,
                                       only_failed=only_failed,
                                       progress=lambda _n, r: bar.update(task, completed=sum(r.decisions.values())))
    return result, scorer.judge, time.monotonic() - started


def _consume(settings: Settings, max_traces: int | None, idle: float | None) -> tuple[Any, Any, float]:
    """Kafka mode: the score role through the process assembler, until SIGTERM (or --max-traces, --exit-when-idle)."""
    from ragmon.cli.idle_watch import IdleWatch, exit_if_never_assigned, watch_idle
    from ragmon.config import mask_dsn, secret_value
    from ragmon.process import Process, serve_roles

    started = time.monotonic()
    watch: IdleWatch | None = None

    def announce(process: Process) -> None:
        nonlocal watch
        judge = process.service("score").scorer.judge
        err_console.print(
            f"ragmon score: {settings.score.topic or settings.kafka.topic} @ {settings.kafka.bootstrap_servers} (group "
            f"{settings.score.group_id}), judge {judge.name} {judge.fingerprint} → "
            f"{mask_dsn(secret_value(settings.store.dsn) or '')}; metrics on "
            f"http://{settings.server.host}:{process.port}/metrics", highlight=False, soft_wrap=True)
        if idle is not None:
            watch = watch_idle(process, "score", idle, settings)

    process = serve_roles(settings, only=["score"], options={"score": {"max_traces": max_traces}},
                          title="ragmon score", started=announce)
    role = process.service("score")
    if watch is not None and watch.gave_up_after is not None:
        _summary(role.result, role.scorer.judge, time.monotonic() - started)
        exit_if_never_assigned(watch, settings.score.topic or settings.kafka.topic, settings.score.group_id)
    exit_if_stuck(process)
    return role.result, role.scorer.judge, time.monotonic() - started


def _summary(result: Any, judge: Any, seconds: float) -> None:
    decisions = ", ".join(f"{k} {v:,}" for k, v in sorted(result.decisions.items())) or "none"
    console.print(f"decisions: {decisions}; scored {result.scored:,}, failed {result.failed:,}, judge cost "
                  f"${result.cost_usd:.4f}, {seconds:.1f}s")
    if not result.sums:
        return
    table = Table("judge fingerprint", "metric", "traces", "mean", title=f"this run ({judge.name} judge)")
    for (fp, metric), (total, n) in sorted(result.sums.items()):
        table.add_row(fp, metric, f"{n:,}", f"{total / n:.3f}")
    console.print(table)


@app.command("report")
def report(
    ctx: typer.Context,
    since: Annotated[str, typer.Option(help="Oldest trace time ('7d' = 7 days ago, 'now', or ISO 8601).")] = "7d",
    until: Annotated[str, typer.Option(help="Newest trace time (exclusive).")] = "now",
    retriever: Annotated[str | None, typer.Option(help="Only this retriever name.", show_default=False)] = None,
    variant: Annotated[str | None, typer.Option(
        help="Only this variant: production, shadow or canary.", show_default=False)] = None,
    output: FormatOption = "table",
) -> None:
    """Stored scores per judge fingerprint, retriever, variant, metric and stratum ('*' = all strata). Fingerprints,
    retrievers and variants are never pooled."""
    check_format(output)
    from ragmon.cli.store_open import open_store
    from ragmon.score.report import score_report

    variants = [v.value for v in Variant]
    if variant is not None and variant not in variants:
        raise fail(f"--variant {variant!r} is not one of {', '.join(variants)}", EXIT_USAGE)
    now = datetime.now(UTC)
    start, end = parse_when(since, now, "--since"), parse_when(until, now, "--until")
    if end <= start:
        raise fail(f"--until ({end.isoformat()}) must be later than --since ({start.isoformat()})", EXIT_USAGE)
    store = open_store(settings_of(ctx))
    rows = score_report(store, start, end, retriever=retriever, variant=variant)
    if output == "json":
        console.print_json(json.dumps([asdict(r) for r in rows]))
        return
    if not rows:
        console.print(f"no scores between {start.isoformat()} and {end.isoformat()}")
        return
    fingerprints = sorted({r.judge_fingerprint for r in rows})
    for fp in fingerprints:
        mine = [r for r in rows if r.judge_fingerprint == fp]
        table = Table("retriever", "variant", "metric", "stratum", "ok", "n/a", "failed", "mean",
                      title=f"judge {mine[0].judge_name} · fingerprint {fp}")
        for r in mine:
            table.add_row(r.retriever, r.variant, r.metric, r.category or "(none)", f"{r.n_ok:,}",
                          f"{r.n_not_applicable:,}", f"{r.n_failed:,}", "—" if r.mean is None else f"{r.mean:.3f}")
        console.print(table)
    if len(fingerprints) > 1:
        console.print(f"{len(fingerprints)} judge fingerprints in this window: their scores are not comparable; "
                      "compare like with like.")
