"""``ragmon leaks``: the stored traces whose retrieval showed a user another tenant's chunks (for on-call).

Exit codes: 0 the listing was printed (leaks or none); 2 bad arguments; 3 the store is unavailable. The listing
names trace, query, retriever, stratum, the user's tenant and each leaked chunk with its tenant: never the
chunk text, question or answer (docs/leaks.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ragmon.cli.common import EXIT_USAGE, console, err_console, fail, settings_of
from ragmon.cli.options import parse_when

app = typer.Typer(help="Permission leaks: retrieved chunks of another tenant, counted on every trace.",
                  no_args_is_help=True)


class Format(StrEnum):
    table = "table"
    json = "json"


@app.command("list")
def list_(
    ctx: typer.Context,
    since: Annotated[str, typer.Option(metavar="TIME", help="Oldest trace time: a duration back from now (30m, 24h, "
                                       "7d), 'now' or ISO 8601 (naive = UTC).")] = "24h",
    until: Annotated[str, typer.Option(metavar="TIME", help="Traces before this time.")] = "now",
    stratum: Annotated[str, typer.Option(help="Only this stratum (trace category).")] = "",
    retriever: Annotated[str, typer.Option(help="Only this retriever name.")] = "",
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="List at most this many traces, newest first "
                                       "(the totals count them all).")] = 100,
    fmt: Annotated[Format, typer.Option("--format", help="table (terminal) or json (stdout holds only the JSON).")]
    = Format.table,
) -> None:
    """List the traces that leaked between --since and --until, newest first, with each leaked chunk's id and tenant.

    A leak is a retrieved chunk whose tenant is neither the asking user's tenant nor one of ingest.shared_tenants; ingest counts them on every trace (permission_leaks) and exports ragmon_permission_leaks_total, which pages through RagmonPermissionLeak.

    Example: ragmon leaks list --since 1h --format json
    """
    from ragmon.cli.store_open import open_store
    from ragmon.leaks.listing import list_leaks, traces_matching
    from ragmon.metrics.permissions import LeakRule

    now = datetime.now(UTC)
    start, end = parse_when(since, now, "--since"), parse_when(until, now, "--until")
    if end <= start:
        raise fail(f"--until ({end.isoformat()}) must be later than --since ({start.isoformat()})", EXIT_USAGE)
    settings = settings_of(ctx)
    store = open_store(settings)  # through the running daemon when it holds the embedded store
    listing = list_leaks(store, LeakRule.sharing(settings.ingest.shared_tenants), since=start, until=end,
                         limit=limit, stratum=stratum, retriever=retriever)  # fmt: skip
    warnings = []
    if not listing.total_traces and (stratum or retriever) and not traces_matching(
            store, since=start, until=end, stratum=stratum, retriever=retriever):  # a typo is not an all-clear
        named = " and ".join(f"{k} {v!r}" for k, v in (("stratum", stratum), ("retriever", retriever)) if v)
        warnings.append(f"no trace at all of {named} in that window: check the name (`ragmon store status`, the "
                        "console's traces page)")
    for warning in warnings:  # on stderr in both formats; the JSON carries them too
        err_console.print(f"warning: {warning}", highlight=False, markup=False)
    if fmt == Format.json:
        console.print_json(json.dumps({**listing.as_dict(), "warnings": warnings}))
        return
    window = f"between {start.isoformat(timespec='seconds')} and {end.isoformat(timespec='seconds')}"
    if not listing.total_traces:
        console.print(f"no permission leaks {window}", highlight=False)
        return
    table = Table("time", "trace", "retriever", "variant", "stratum", "user tenant", "leaked chunk (tenant)",
                  title=f"{listing.total_traces:,} leaking trace(s), {listing.total_leaks:,} leaked chunk(s) {window}")
    for t in listing.traces:
        chunks = ", ".join(f"{c.chunk_id} ({c.tenant})" for c in t.chunks) or f"{t.stored_leaks} (rule changed since)"
        table.add_row(t.timestamp.isoformat(timespec="seconds"), escape(t.trace_id), escape(t.retriever),
                      escape(t.variant), escape(t.stratum or "-"), escape(t.user_tenant), escape(chunks))  # fmt: skip
    console.print(table)
    if len(listing.traces) < listing.total_traces:
        console.print(f"showing the newest {len(listing.traces)}; raise --limit or narrow --since for the rest",
                      highlight=False)  # fmt: skip
