"""The root ``ragmon`` command: global options, error handling, and the registry of subcommands.

Each subcommand lives in its own module under ``ragmon/cli/`` and is registered in ``_register``. Expected
errors (``RagmonError``) print one clear message per problem and exit non-zero without a traceback:
2 for bad configuration, arguments or input files; 3 when a service (store, broker) is unavailable.
Must not hold anything a subcommand needs: subcommands import ``ragmon.cli.common``, never this module, which
imports them all.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from ragmon import __version__
from ragmon.cli.common import EXIT_UNAVAILABLE, EXIT_USAGE, State, console, err_console, print_error
from ragmon.errors import ConfigError, InputError, RagmonError

app = typer.Typer(
    name="ragmon",
    help="Production monitoring for retrieval-augmented generation: ingest traces, score live traffic, "
    "detect retrieval drift, review a weekly sample, compare shadow retrievers, gate releases.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        console.print(f"ragmon {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            envvar="RAGMON_CONFIG",
            help="YAML settings file. RAGMON_<SECTION>__<FIELD> environment variables override it.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.obj = State(config)
    from ragmon.tracing import setup_tracing

    setup_tracing(ctx.invoked_subcommand or "ragmon")


def _register() -> None:
    """Every subcommand, in the order ``ragmon --help`` lists them (daemons first, tools after)."""
    from ragmon.cli import (
        ab_cmd,
        calibrate_cmd,
        config_cmd,
        corpus_cmd,
        demo_cmd,
        drift_cmd,
        gate_cmd,
        golden_cmd,
        ingest_cmd,
        leaks_cmd,
        review_cmd,
        run_cmd,
        schema_cmd,
        score_cmd,
        shadow_cmd,
        store_cmd,
    )

    app.command("demo")(demo_cmd.demo)
    app.command("run")(run_cmd.run)
    app.command("ingest")(ingest_cmd.ingest)
    app.add_typer(score_cmd.app, name="score")
    app.add_typer(drift_cmd.app, name="drift")
    app.add_typer(review_cmd.app, name="review")
    app.add_typer(shadow_cmd.app, name="shadow")
    app.add_typer(leaks_cmd.app, name="leaks")
    app.add_typer(ab_cmd.app, name="ab")
    app.command("gate")(gate_cmd.gate)
    app.add_typer(golden_cmd.app, name="golden")
    app.command("calibrate")(calibrate_cmd.calibrate)
    app.add_typer(corpus_cmd.app, name="corpus")
    app.add_typer(store_cmd.app, name="store")
    app.add_typer(schema_cmd.app, name="schema")
    app.add_typer(config_cmd.app, name="config")


def _reflow(doc: str | None) -> str | None:
    """A docstring with each paragraph's lines joined: Typer's rich help keeps a source line break as a line
    break, so a paragraph wrapped at 120 columns printed as ragged lines in an 80-column terminal."""
    if not doc:
        return doc
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _reflow_help(typer_app: typer.Typer) -> None:
    for info in typer_app.registered_commands:
        if info.callback is not None:
            info.callback.__doc__ = _reflow(info.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


_register()
_reflow_help(app)


def main() -> None:
    """Console entry point: run the app, turning expected errors into clean messages and exit codes."""
    try:
        app()
    except ConfigError as exc:
        print_error("invalid configuration")
        for problem in exc.problems:
            err_console.print(Text(f"  {problem}"), highlight=False, soft_wrap=True)
        sys.exit(EXIT_USAGE)
    except InputError as exc:
        print_error(str(exc))
        sys.exit(EXIT_USAGE)
    except RagmonError as exc:
        print_error(str(exc))
        sys.exit(EXIT_UNAVAILABLE)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
