"""``ragmon run``: every enabled daemon role in one process, on one HTTP port, until SIGTERM/SIGINT (started through
``ragmon.process`` like every daemon command)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ragmon.cli.common import EXIT_FATAL, console, err_console, exit_if_stuck, fail, settings_of
from ragmon.cli.options import LogLevelOption, configure_logging
from ragmon.config import mask_dsn, override, secret_value


def run(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Bind address of the HTTP port (server.host).",
                                             show_default=False)] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port for /metrics, /healthz, /readyz and the review UI "
                                                  "(server.port; 0 picks a free one).", show_default=False)] = None,
    log_level: LogLevelOption = "INFO",
) -> None:
    """Run every enabled role (ingest, otlp, score, drift, review; shadow when comparisons are configured) in one
    process on the configured store — the embedded chDB engine on local disk by default.

    Roles are switched by config (roles.ingest, roles.otlp, roles.score, roles.drift, roles.review, or
    RAGMON_ROLES__<ROLE>=false), so the same image runs as one all-in-one process or as one Deployment per
    role. Ingest and score need the Kafka broker in kafka.bootstrap_servers; review needs review.users; otlp serves
    OTLP/HTTP POST /v1/traces on otlp.host:otlp.port (4318). Without Kafka, switch ingest and score off
    (RAGMON_ROLES__INGEST=false RAGMON_ROLES__SCORE=false) and send traces to /v1/traces.
    A role that cannot start is reported at start-up, one line per problem, with the setting to change.
    SIGTERM/SIGINT stops every role within process.shutdown_grace_seconds; the last line on stderr then gives
    what this process consumed, stored, dead-lettered and skipped (its counters, which restart at zero). A role
    that can never work as configured (a topic compressed with a codec whose library is missing) stops the
    process with exit code 5.
    """
    from ragmon.process import Process, serve_roles

    configure_logging(log_level, quiet=("kafka", "httpx"))
    settings = override(settings_of(ctx), "server", host=host, port=port)

    def started(process: Process) -> None:
        base = f"http://{settings.server.host}:{process.port}"
        console.print(f"ragmon running roles: {', '.join(process.role_names)}", highlight=False)
        otlp = (f" · OTLP/HTTP http://{settings.otlp.host}:{process.listener_port('otlp')}/v1/traces"
                if "otlp" in process.listeners else "")
        console.print(f"store {mask_dsn(secret_value(settings.store.dsn) or '')} · metrics {base}/metrics · "
                      f"health {base}/healthz {base}/readyz" + (f" · review UI {base}/review/" if process.routers else "")
                      + otlp, highlight=False, soft_wrap=True)

    process = serve_roles(settings, title="ragmon", started=started)
    # what this process did, for reconciling across restarts (its counters restart at zero), as `ragmon ingest` does
    totals = process.telemetry.counter_totals("ragmon_ingest_", "ragmon_outcomes_", "ragmon_score_")
    err_console.print(f"ragmon run stopped: {json.dumps(totals)}", highlight=False, soft_wrap=True)
    fatal = process.fatal_errors()
    if fatal:  # one role can never work as configured: every role was stopped, and the exit code says so
        raise fail("; ".join(f"{name} stopped: {why}" for name, why in fatal.items()), EXIT_FATAL)
    exit_if_stuck(process)
