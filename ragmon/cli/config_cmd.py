"""``ragmon config``: show and validate the effective configuration."""

from __future__ import annotations

import json

import typer
import yaml

from ragmon.cli.app import console, settings_of
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
    """Validate the configuration; exit 2 with one line per problem."""
    settings_of(ctx)
    console.print("configuration is valid")
