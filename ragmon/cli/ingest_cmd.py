"""``ragmon ingest``: consume the traces topic (or, with ``--otlp-http``, OTLP/HTTP requests; with ``--file``, a
JSON Lines file) into ClickHouse until SIGTERM/SIGINT."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragmon.cli.common import (
    EXIT_FATAL,
    EXIT_INTERRUPTED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    err_console,
    exit_if_stuck,
    fail,
    settings_of,
)
from ragmon.cli.options import LogLevelOption, check_output_file, configure_logging
from ragmon.config import Settings, mask_dsn, override, secret_value

if TYPE_CHECKING:
    from ragmon.cli.idle_watch import IdleWatch
    from ragmon.process import Process
    from ragmon.store import ClickHouseStore

_FORMATS = ("auto", "native", "otlp_proto", "otlp_json")


_BootstrapServers = Annotated[str | None, typer.Option(
    help="Kafka brokers, host:port[,host:port] (kafka.bootstrap_servers).", show_default=False)]
_Topic = Annotated[str | None, typer.Option(
    help="Topic to read traces from (kafka.topic).", show_default=False)]
_GroupId = Annotated[str | None, typer.Option(
    help="Consumer group; run more replicas with the same group to scale out (kafka.group_id).",
    show_default=False)]
_DeadLetterTopic = Annotated[str | None, typer.Option(
    help="Topic for invalid messages, with ragmon.reason/detail/source headers (kafka.dead_letter_topic).",
    show_default=False)]
_InputFormat = Annotated[str | None, typer.Option(
    help="native | otlp_proto | otlp_json | auto (tell them apart per message) (kafka.input_format).",
    show_default=False)]
_MaxBatchRows = Annotated[int | None, typer.Option(
    help="Write a batch at this many traces (ingest.max_batch_rows).", show_default=False)]
_FlushIntervalSeconds = Annotated[float | None, typer.Option(
    help="Write a non-empty batch after this long; bounds freshness (ingest.flush_interval_seconds).",
    show_default=False)]
_Host = Annotated[str | None, typer.Option(
    help="Address for /metrics, /healthz, /readyz (server.host).", show_default=False)]
_Port = Annotated[int | None, typer.Option(
    help="HTTP port for /metrics, /healthz, /readyz; 0 picks a free one (server.port).",
    show_default=False)]
_ExitWhenIdle = Annotated[float | None, typer.Option(
    min=0, help="Exit 0 once, for this many seconds, partitions were assigned, the lag was zero on each, nothing "
    "was read and everything read was stored and committed (batch jobs, benchmarks). Exit 3 if no partition is "
    "assigned for twice kafka.session_timeout_ms (another member holds them all).",
    show_default=False)]
_StatsJson = Annotated[Path | None, typer.Option(
    help="On exit, write what was done (consumed, stored, dead letters, batches, retries, seconds) as JSON.",
    show_default=False)]
_File = Annotated[str | None, typer.Option(
    "--file", help="Read traces from this JSON Lines file ('-': standard input) instead of Kafka, one trace per "
    "line, through the same decoding, redaction, batching, deduplication and store. At its end (or when "
    "stopped) a summary goes to standard error: \"complete\": true and exit 0 when every line was stored or "
    "dead-lettered; otherwise exit 3 (stopped while writes failed) or 6 (interrupted), with the line to resume "
    "from (--from-line) and what was not stored or not dead-lettered. Loading a file twice stores each trace "
    "once.", show_default=False)]
_FromLine = Annotated[int, typer.Option(
    min=1, help="With --file: start at this line (1-based; the lines before it are read and skipped), to resume a "
    "run that stopped before its end where its error line says.")]
_DeadLetterFile = Annotated[str | None, typer.Option(
    help="With --file: append invalid lines here as JSON Lines, with the same reasons as the dead-letter topic "
    "('-': standard output, the default).", show_default=False)]
_OtlpHttp = Annotated[bool, typer.Option(
    "--otlp-http", help="Take OTLP/HTTP POST /v1/traces (protobuf or JSON, gzip) from applications' OpenTelemetry "
    "exporters instead of reading Kafka: no broker, no Collector. Listens on otlp.host:otlp.port (4318); bearer "
    "token otlp.token / otlp.token_file; dead letters to otlp.dead_letters. Runs until SIGTERM/SIGINT.")]
_OtlpPort = Annotated[int | None, typer.Option(
    help="With --otlp-http: the receiver's port (otlp.port; 0 picks a free one).", show_default=False)]
_Outcomes = Annotated[bool, typer.Option(
    "--outcomes", help="Ingest outcome events (schemas/outcome.v1: citation_opened, reformulated, escalated, "
    "resolved, feedback) instead of traces: from ab.outcomes_topic (dead letters to "
    "ab.outcomes_dead_letter_topic), or with --file from JSON Lines. Same guarantees as traces; see docs/ab.md.")
]


def ingest(
    ctx: typer.Context,
    bootstrap_servers: _BootstrapServers = None,
    topic: _Topic = None,
    group_id: _GroupId = None,
    dead_letter_topic: _DeadLetterTopic = None,
    input_format: _InputFormat = None,
    max_batch_rows: _MaxBatchRows = None,
    flush_interval_seconds: _FlushIntervalSeconds = None,
    host: _Host = None,
    port: _Port = None,
    exit_when_idle: _ExitWhenIdle = None,
    stats_json: _StatsJson = None,
    file: _File = None,
    from_line: _FromLine = 1,
    dead_letter_file: _DeadLetterFile = None,
    otlp_http: _OtlpHttp = False,
    otlp_port: _OtlpPort = None,
    outcomes: _Outcomes = False,
    log_level: LogLevelOption = "INFO",
) -> None:
    """Consume traces from Kafka into ClickHouse: decode, redact, batch, write, then commit offsets.

    Every valid trace is stored exactly once as read with FINAL (at-least-once delivery plus idempotent writes); invalid
    messages go to the dead-letter topic with the reason.

    While the store is down, consumption pauses and nothing is committed. SIGTERM/SIGINT stops polling, flushes, commits
    and closes within process.shutdown_grace_seconds.

    With --file, read a JSON Lines file or standard input instead (backfills, replaying dead letters after a fix, trying
    ragmon without a broker).

    With --otlp-http, take OTLP/HTTP POST /v1/traces from applications' OpenTelemetry exporters instead (OpenInference
    spans of LlamaIndex, LangChain, …; see docs/otlp.md).

    Every option overrides the same setting from --config and the RAGMON_* environment; `ragmon config show` lists them
    all.
    """
    configure_logging(log_level, quiet=("kafka",))
    _check_arguments(input_format=input_format, stats_json=stats_json, file=file, dead_letter_file=dead_letter_file,
                     from_line=from_line, outcomes=outcomes, otlp_http=otlp_http, otlp_port=otlp_port)
    settings = settings_of(ctx)
    if outcomes:  # --topic, --group-id and --dead-letter-topic name the outcome topics (ab.outcomes_*)
        settings = override(settings, "ab", outcomes_topic=topic, outcomes_group_id=group_id,
                            outcomes_dead_letter_topic=dead_letter_topic)
        topic = group_id = dead_letter_topic = None
    settings = override(settings, "kafka", bootstrap_servers=bootstrap_servers, topic=topic, group_id=group_id,
                        dead_letter_topic=dead_letter_topic, input_format=input_format)
    settings = override(settings, "ingest", max_batch_rows=max_batch_rows,
                        flush_interval_seconds=flush_interval_seconds)
    settings = override(settings, "server", host=host, port=port)
    settings = override(settings, "otlp", port=otlp_port)
    if outcomes:
        _ingest_outcomes(settings, file, dead_letter_file or "-", stats_json, exit_when_idle)
    elif file is not None:
        from ragmon.store import ClickHouseStore

        store = ClickHouseStore.open(settings.store)  # fails fast: unreachable, locked, migration failed
        _load_file(settings, store, file, dead_letter_file or "-", stats_json, from_line)
    else:
        _serve_traces(settings, "otlp" if otlp_http else "ingest", exit_when_idle, stats_json)


def _check_arguments(*, input_format: str | None, stats_json: Path | None, file: str | None,
                     dead_letter_file: str | None, from_line: int, outcomes: bool, otlp_http: bool,
                     otlp_port: int | None) -> None:
    """Options that do not go together, or a value no setting would refuse, as usage errors (exit 2)."""
    if input_format is not None and input_format not in _FORMATS:
        raise fail(f"--input-format {input_format!r} is not one of {', '.join(_FORMATS)}", EXIT_USAGE)
    if stats_json is not None:
        check_output_file(stats_json, "--stats-json")
    if dead_letter_file is not None and file is None:
        raise fail("--dead-letter-file needs --file (Kafka input dead-letters to --dead-letter-topic)", EXIT_USAGE)
    if from_line != 1 and (file is None or outcomes):
        raise fail("--from-line needs --file (of traces)", EXIT_USAGE)
    if file is not None and input_format == "otlp_proto":
        raise fail("--file reads lines of JSON: --input-format otlp_proto cannot be one per line", EXIT_USAGE)
    if otlp_http and file is not None:
        raise fail("--otlp-http and --file are two inputs: choose one", EXIT_USAGE)
    if otlp_port is not None and not otlp_http:
        raise fail("--otlp-port needs --otlp-http", EXIT_USAGE)
    if outcomes and otlp_http:
        raise fail("--outcomes reads outcome events; --otlp-http takes traces: choose one", EXIT_USAGE)


def _serve_traces(settings: Settings, role: str, exit_when_idle: float | None, stats_json: Path | None) -> None:
    """The ``ingest`` role (Kafka) or the ``otlp`` role (``--otlp-http``) in a process of its own, until a signal
    or idle; then its summary, and the exit code of what stopped it."""
    from ragmon.cli.idle_watch import exit_if_never_assigned, watch_idle
    from ragmon.process import serve_roles

    started = time.monotonic()
    watch: IdleWatch | None = None

    def announce(process: Process) -> None:
        nonlocal started, watch
        source = (f"OTLP/HTTP on http://{settings.otlp.host}:{process.listener_port('otlp')}/v1/traces"
                  if role == "otlp" else
                  f"{settings.kafka.topic} @ {settings.kafka.bootstrap_servers} (group {settings.kafka.group_id}, "
                  f"format {settings.kafka.input_format})")
        err_console.print(
            f"ragmon ingest: {source} → {mask_dsn(secret_value(settings.store.dsn) or '')}; metrics on "
            f"http://{settings.server.host}:{process.port}/metrics", highlight=False, soft_wrap=True)
        started = time.monotonic()
        if exit_when_idle is not None:
            watch = watch_idle(process, role, exit_when_idle, settings)

    # fails fast: store unreachable or locked, bad config, broker unreachable, port in use
    process = serve_roles(settings, only=[role], title="ragmon ingest", started=announce)
    s = process.service(role).stats
    elapsed = time.monotonic() - started
    summary = {"consumed": s.consumed, "stored": s.stored, "dead_letters": dict(s.dead_letters),
               "batches": s.batches, "retries": s.retries, "commits": s.commits, "seconds": round(elapsed, 3),
               "first_data_at": s.first_data_at, "last_write_at": s.last_write_at,
               "first_data_cpu": s.first_data_cpu, "last_write_cpu": s.last_write_cpu}
    err_console.print(f"ragmon ingest stopped: {json.dumps(summary)}", highlight=False, soft_wrap=True)
    if stats_json is not None:
        try:
            stats_json.write_text(json.dumps(summary) + "\n", encoding="utf-8")
        except OSError as exc:
            err_console.print(f"error: --stats-json {stats_json}: cannot write ({exc.strerror or exc}); the summary "
                              "is on the line above", highlight=False, markup=False)
    fatal = process.service(role).fatal_error
    if fatal is not None:
        raise fail(f"ingest stopped: {fatal}", EXIT_FATAL)
    exit_if_never_assigned(watch, settings.kafka.topic, settings.kafka.group_id)
    exit_if_stuck(process)


def _ingest_outcomes(settings: Settings, file: str | None, dead_letter_path: str, stats_json: Path | None,
                     exit_when_idle: float | None) -> None:
    """``--outcomes``: the outcome loop over a file (until its end), or over Kafka as the ``outcomes`` role of a
    process (``/metrics``, ``/healthz``, ``/readyz`` as ``ragmon ingest`` serves them) until a signal or idle."""
    if file is None:
        _serve_outcomes(settings, stats_json, exit_when_idle)
        return
    import signal

    from ragmon.errors import InputError
    from ragmon.outcomes.loop import open_outcome_loop
    from ragmon.store import ClickHouseStore

    store = ClickHouseStore.open(settings.store)
    try:
        loop, done, close = open_outcome_loop(settings, store, file=file, dead_letter_file=dead_letter_path)
    except InputError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stats = loop.run(stop, until=done)
    finally:
        close()
    _outcome_summary(stats, stats_json)
    if not loop.source.finished():  # read to its end and every line committed (as for traces)
        raise fail(f"stopped before the end of {file} ({stats.last_error or 'interrupted'}): run the same command "
                   "again; what was stored is not stored twice",
                   EXIT_UNAVAILABLE if loop.paused or loop.source.read_error else EXIT_INTERRUPTED)
    if stats.consumed and not stats.stored and not stats.already_stored:  # not one outcome event in the input
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(stats.dead_letters.items()))
        what = (f"{stats.traces} of them are traces (trace.v1): load a trace file with `ragmon ingest --file {file}`, "
                "without --outcomes" if stats.traces else
                "see each line's reason in the dead letters, and the fields of schemas/outcome.v1 in docs/ab.md")
        raise fail(f"none of the {stats.consumed} lines of {file} is an outcome event: every one was dead-lettered "
                   f"({reasons}) to {dead_letter_path}; {what}", EXIT_USAGE)


def _serve_outcomes(settings: Settings, stats_json: Path | None, exit_when_idle: float | None) -> None:
    from ragmon.cli.idle_watch import exit_if_never_assigned, watch_idle
    from ragmon.process import serve_roles

    watch: IdleWatch | None = None

    def announce(process: Process) -> None:
        nonlocal watch
        ab = settings.ab
        err_console.print(
            f"ragmon ingest --outcomes: {ab.outcomes_topic} @ {settings.kafka.bootstrap_servers} (group "
            f"{ab.outcomes_group_id}) → {mask_dsn(secret_value(settings.store.dsn) or '')}; metrics on "
            f"http://{settings.server.host}:{process.port}/metrics", highlight=False, soft_wrap=True)
        if exit_when_idle is not None:
            watch = watch_idle(process, "outcomes", exit_when_idle, settings)

    process = serve_roles(settings, only=["outcomes"], title="ragmon ingest --outcomes", started=announce)
    _outcome_summary(process.service("outcomes").stats, stats_json)
    exit_if_never_assigned(watch, settings.ab.outcomes_topic, settings.ab.outcomes_group_id)
    exit_if_stuck(process)


def _outcome_summary(stats: Any, stats_json: Path | None) -> None:
    summary = json.dumps({"consumed": stats.consumed, "stored": stats.stored, "already_stored": stats.already_stored,
                          "dead_letters": dict(stats.dead_letters), "batches": stats.batches, "retries": stats.retries})
    err_console.print(f"ragmon ingest --outcomes: {summary}", highlight=False, soft_wrap=True, markup=False)
    if stats_json is not None:
        stats_json.write_text(summary + "\n", encoding="utf-8")


def _load_file(settings: Settings, store: ClickHouseStore, path: str, dead_letter_path: str, stats_json: Path | None,
               from_line: int) -> None:
    """``--file``: load the lines, print the summary; exit 0 when every line was stored or dead-lettered, 2 when
    every line was dead-lettered (not one trace: the wrong file or format), otherwise 3 (stopped while writes
    failed) or 6 (interrupted) with what was not done and how to resume."""
    import signal

    from ragmon.errors import InputError
    from ragmon.ingest.file_input import load_file

    stop = threading.Event()
    stopped_by: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    err_console.print(f"ragmon ingest: reading {path}{' (standard input)' if path == '-' else ''}"
                      f"{f' from line {from_line}' if from_line > 1 else ''} → "
                      f"{mask_dsn(secret_value(settings.store.dsn) or '')}; dead letters to {dead_letter_path}",
                      highlight=False, soft_wrap=True, markup=False)
    try:
        result = load_file(settings, store, path, dead_letter_path, from_line=from_line, stop=stop)
    except InputError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    summary = json.dumps(result.summary())
    err_console.print(f"ragmon ingest --file: {summary}", highlight=False, soft_wrap=True, markup=False)
    if stats_json is not None:
        try:
            stats_json.write_text(summary + "\n", encoding="utf-8")
        except OSError as exc:
            err_console.print(f"error: --stats-json {stats_json}: cannot write ({exc.strerror or exc})",
                              highlight=False, markup=False)
    if not result.complete:
        why = (f"while writes failed ({result.last_error})" if result.writes_failed
               else f"reading failed ({result.read_error})" if result.read_error
               else f"by {stopped_by[0]}" if stopped_by else "before its end")
        raise fail(f"stopped {why}: {_not_done(result, path)}",
                   EXIT_UNAVAILABLE if result.writes_failed or result.read_error else EXIT_INTERRUPTED)
    if result.lines and not result.stored and sum(result.dead_letters.values()) == result.lines:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(result.dead_letters.items()))
        otlp = ("; OTLP/JSON export requests with --input-format auto or otlp_json"
                if settings.kafka.input_format == "native" else "")
        raise fail(f"none of the {result.lines} lines of {path} is a trace: every one was dead-lettered ({reasons}) "
                   f"to {dead_letter_path}; see each line's reason there and the fields of "
                   f"schemas/trace.v1.schema.json (docs/trace-contract.md). Outcome events load with --outcomes{otlp}",
                   EXIT_USAGE)


def _not_done(result: Any, path: str) -> str:
    """What an incomplete ``--file`` run did not do, and how to finish it (the ``error:`` line)."""
    resume = result.resume_from_line
    parts = [f"lines 1–{resume - 1} of {path} are stored or dead-lettered" if resume > 1
             else f"not every line of {path} is stored or dead-lettered"]
    given_up = []
    if result.not_stored:
        given_up.append(f"{result.not_stored} trace(s) read were not stored")
    if result.dead_letters_not_written:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(result.dead_letters_not_written.items()))
        given_up.append(f"{sum(result.dead_letters_not_written.values())} dead letter(s) were not written ({reasons})")
    if given_up:
        parts.append(f"from line {resume} on, " + " and ".join(given_up))
    fix = ("once writes succeed again, " if result.writes_failed
           else "once the input can be read, " if result.read_error else "")
    same_input = " (for -, feed the same input again)" if path == "-" else ""
    if resume > 1:
        parts.append(f"{fix}resume with the same command and --from-line {resume}{same_input}; running it whole again "
                     f"works too: no trace is stored twice, but the dead letters of lines 1–{resume - 1} are written "
                     "again")
    else:
        parts.append(f"{fix}run the same command again{same_input}: no trace is stored twice")
    return "; ".join(parts)
