"""``ragmon schema``: export and check the JSON Schema files generated from the contract models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragmon.cli.app import console, fail
from ragmon.contracts import schemas

app = typer.Typer(help="JSON Schemas of the trace and golden-case contracts.", no_args_is_help=True)

DirOption = Annotated[Path, typer.Option("--dir", help="Directory holding the schema files.")]


@app.command("export")
def export(directory: DirOption = Path("schemas")) -> None:
    """Write trace.v1.schema.json and golden-case.v1.schema.json from the pydantic models."""
    for path in schemas.export(directory):
        console.print(f"wrote {path}")


@app.command("check")
def check(directory: DirOption = Path("schemas")) -> None:
    """Exit 1 if a checked-in schema file differs from the models (CI runs this)."""
    problems = schemas.check(directory)
    if problems:
        for line in problems:
            console.print(line, markup=False, soft_wrap=True)  # paths must not wrap
        raise fail(f"{len(problems)} schema file(s) out of date", code=1)
    console.print(f"schemas in {directory} match the models ({len(schemas.SCHEMAS)} files)")
