"""``ragmon config``: show and validate the effective configuration, and generate its reference page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml

from ragmon.cli import config_reference
from ragmon.cli.common import console, fail, settings_of
from ragmon.config import masked_dump

app = typer.Typer(help="Effective configuration (file + environment).", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of YAML."),
) -> None:
    """Print the effective configuration with every secret masked."""
    data = masked_dump(settings_of(ctx))
    text = json.dumps(data, indent=2) if as_json else yaml.safe_dump(data, sort_keys=False)
    console.print(text, markup=False, highlight=False, soft_wrap=True)  # wrapped YAML is wrong YAML


@app.command("check")
def check(ctx: typer.Context) -> None:
    """Validate the configuration as `ragmon run` would start it, without connecting anywhere: the settings, then
    each role switched on in roles.* (its judge, drift features, reviewers, ingest limits). Exit 2 with one line
    per problem. A role you never run (e.g. review, when only `ragmon ingest` is used) can be switched off with
    RAGMON_ROLES__<ROLE>=false."""
    from ragmon.process import enabled_roles, startup_problems

    settings = settings_of(ctx)
    problems = startup_problems(settings)
    if problems:
        raise fail("the configuration would not start (roles as `ragmon run` starts them):\n  " + "\n  ".join(problems))
    console.print(f"configuration is valid (checked for the roles switched on: {', '.join(enabled_roles(settings))})",
                  highlight=False)


@app.command("reference")
def reference(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Markdown file to write ('-' prints to stdout).")
    ] = config_reference.DEFAULT_PATH,
    check_only: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; exit 1 if the file differs from the settings models (CI runs "
                                     "this)."),
    ] = False,
) -> None:
    """Generate the Markdown configuration reference (every setting, its type, default and env var)."""
    if check_only:
        problem = config_reference.check(output)
        if problem:
            raise fail(problem, code=1)
        console.print(f"{output} matches the settings models")
        return
    text = config_reference.render()
    if str(output) == "-":
        console.print(text, markup=False, highlight=False, soft_wrap=True, end="")
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    console.print(f"wrote {output}")
