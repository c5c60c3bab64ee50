"""``ragmon run``: every enabled daemon role in one process, on one HTTP port, until SIGTERM/SIGINT."""

from __future__ import annotations

from typing import Annotated

import typer

from ragmon.cli.common import console, err_console, settings_of
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
    """Run every enabled role (ingest, score, drift, review; shadow when comparisons are configured) in one
    process on the configured store — the embedded chDB engine on local disk by default.

    Roles are switched by config (roles.ingest, roles.score, roles.drift, roles.review, or
    RAGMON_ROLES__<ROLE>=false), so the same image runs as one all-in-one process or as one Deployment per
    role. Ingest and score need the Kafka broker in kafka.bootstrap_servers; review needs review.users.
    A role that cannot start is reported at start-up, one line per problem, with the setting to change.
    """
    from ragmon.assemble import build_process
    from ragmon.server import create_app, serve

    configure_logging(log_level)
    settings = override(settings_of(ctx), "server", host=host, port=port)
    process = build_process(settings)
    daemon = process.daemon()
    app = create_app(process.telemetry, process.health, process.routers, title="ragmon")
    bind = settings.server.host
    handle = serve(app, bind, settings.server.port, forwarded_allow_ips=settings.server.forwarded_allow_ips)
    base = f"http://{bind}:{handle.port}"
    console.print(f"ragmon running roles: {', '.join(process.role_names)}", highlight=False)
    console.print(f"store {mask_dsn(secret_value(settings.store.dsn) or '')} · metrics {base}/metrics · "
                  f"health {base}/healthz {base}/readyz" + (f" · review UI {base}/review/" if process.routers else ""),
                  highlight=False, soft_wrap=True)
    try:
        still_running = daemon.run_until_signal()
    finally:
        handle.stop()
    if still_running:
        err_console.print(f"roles still running after the grace period: {', '.join(still_running)}")
        raise typer.Exit(1)
