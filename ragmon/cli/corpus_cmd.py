"""``ragmon corpus``: load the corpus's document-version feed that newest_version_share is measured against."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ragmon.cli.common import console, err_console, fail, settings_of

app = typer.Typer(help="The corpus's document versions (what newest_version_share is measured against).",
                  no_args_is_help=True)

#: problems printed before the rest are only counted
MAX_SHOWN = 20


@app.command("load")
def load(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="JSON Lines file, or - for standard input: one {\"doc_id\", "
                                        "\"doc_version\", \"published_at\"} object per line.", show_default=False)],
) -> None:
    """Load document versions with their publication times into corpus_versions.

    newest_version_share calls a retrieved chunk stale when a newer version of its document was published
    drift.index_lag_seconds before it was served. Versions some trace served are known without this feed; the feed
    is how ragmon sees an index that every retriever shares stop picking up new versions. Versions compare as
    strings (use ISO dates or zero-padded numbers). Bad lines are reported with their number and skipped; the good
    ones are loaded; the exit code is 2 when any line was bad. Loading the same file twice changes nothing.
    """
    from ragmon.cli.store_open import open_store
    from ragmon.drift.check.corpus import Problem, Version, load_versions, read_versions

    if path == "-":
        stream = sys.stdin.buffer
    else:
        file = Path(path)
        if not file.is_file():
            raise fail(f"{path}: no such file (give a JSON Lines file, or - for standard input)")
        stream = file.open("rb")
    good: list[Version] = []
    problems = 0
    try:
        for item in read_versions(stream):
            if isinstance(item, Problem):
                problems += 1
                if problems <= MAX_SHOWN:
                    err_console.print(f"line {item.line}: {item.message}", highlight=False, markup=False)
            else:
                good.append(item)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if problems > MAX_SHOWN:
        err_console.print(f"… and {problems - MAX_SHOWN} more bad lines", highlight=False)
    store = open_store(settings_of(ctx), writes=True)
    loaded = load_versions(store, good)
    console.print(f"loaded {loaded:,} document versions" + (f"; skipped {problems:,} bad lines" if problems else ""),
                  highlight=False)
    if problems:
        raise typer.Exit(2)
