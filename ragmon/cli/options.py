"""Options that several ``ragmon`` commands share, and how their values are checked.

Owns the ``--log-level`` option and its check. A bad value is a usage error (exit 2) raised before the command
does anything else; nothing here opens a store or the network.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from ragmon.cli.app import EXIT_USAGE, fail

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

LogLevelOption = Annotated[str, typer.Option("--log-level", help="Logging level: DEBUG, INFO, WARNING or ERROR "
                                                                 "(any case).")]


def configure_logging(level: str, *, quiet: tuple[str, ...] = ()) -> None:
    """Check ``--log-level`` and configure the root logger; ``quiet`` libraries log warnings and worse only."""
    if level.upper() not in LOG_LEVELS:
        raise fail(f"--log-level {level!r} is not one of {', '.join(LOG_LEVELS)}", EXIT_USAGE)
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
