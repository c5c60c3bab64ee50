"""``ragmon store``: apply migrations and show the store's state."""

from __future__ import annotations

import typer
from rich.table import Table

from ragmon.cli.common import console, settings_of
from ragmon.cli.store_open import open_store
from ragmon.config import mask_dsn, secret_value
from ragmon.store import TABLES

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
def status(ctx: typer.Context) -> None:
    """Show applied migrations and the row count of each table (read with FINAL)."""
    settings = settings_of(ctx)
    store = open_store(settings)
    table = Table("table", "rows", title=f"ragmon store {mask_dsn(secret_value(settings.store.dsn) or '')}")
    for name in TABLES:
        final = "FINAL" if name != "drift_checks" else ""
        count = store.command(f"SELECT count() FROM {store.table(name)} {final}")
        table.add_row(name, f"{int(count):,}")
    console.print(table)
    versions = ", ".join(f"{v:04d}_{n}" for v, n, _ in store.applied_migrations())
    console.print(f"migrations applied: {versions}")
