"""``ragmon store``: apply migrations and show the store's state."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from ragmon.cli.common import EXIT_UNAVAILABLE, console, fail, settings_of
from ragmon.cli.options import FormatOption, check_format
from ragmon.cli.store_open import open_store
from ragmon.config import mask_dsn, secret_value
from ragmon.store import TABLES
from ragmon.store.dsn import parse_dsn

app = typer.Typer(help="The ClickHouse store (embedded chDB by default).", no_args_is_help=True)


@app.command("migrate")
def migrate(ctx: typer.Context) -> None:
    """Apply pending schema migrations (idempotent: a second run applies nothing)."""
    settings = settings_of(ctx)
    store = open_store(settings, migrate=False, writes=True)
    applied = store.migrate()
    where = mask_dsn(secret_value(settings.store.dsn) or "")
    if applied:
        console.print(f"applied {', '.join(applied)} on {where}")
    else:
        console.print(f"schema is up to date on {where}")


@app.command("status")
def status(ctx: typer.Context, output: FormatOption = "table") -> None:
    """Show applied migrations and the row count of each table (read with FINAL). An embedded store directory
    that does not exist is reported, not created."""
    check_format(output)
    settings = settings_of(ctx)
    where = mask_dsn(secret_value(settings.store.dsn) or "")
    path = parse_dsn(secret_value(settings.store.dsn) or "").path
    if path is not None and not (path / "metadata").is_dir():
        raise fail(f"no embedded store at {path.resolve()}: nothing has been stored there (is store.dsn / "
                   "RAGMON_STORE__DSN the directory the daemon uses? `ragmon store migrate` creates an empty one)",
                   EXIT_UNAVAILABLE)
    store = open_store(settings)
    counts = {name: store.row_count(name) for name in TABLES}
    versions = [f"{v:04d}_{n}" for v, n, _ in store.applied_migrations()]
    if output == "json":
        console.print_json(json.dumps({"store": where, "tables": counts, "migrations": versions}))
        return
    table = Table("table", "rows", title=f"ragmon store {where}")
    for name, count in counts.items():
        table.add_row(name, f"{count:,}")
    console.print(table)
    console.print(f"migrations applied: {', '.join(versions)}")
