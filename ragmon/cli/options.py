"""Options that several ``ragmon`` commands share, and how their values are checked.

Owns the ``--log-level`` option and the ``--since``/``--until`` time forms. A bad value is a usage error (exit 2)
raised before the command does anything else; nothing here opens a store or the network.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from ragmon.cli.app import EXIT_USAGE, fail

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

LogLevelOption = Annotated[str, typer.Option("--log-level", help="Logging level: DEBUG, INFO, WARNING or ERROR "
                                                                 "(any case).")]


def configure_logging(level: str, *, quiet: tuple[str, ...] = ()) -> None:
    """Check ``--log-level`` and configure the root logger; ``quiet`` libraries log warnings and worse only."""
    if level.upper() not in LOG_LEVELS:
        raise fail(f"--log-level {level!r} is not one of {', '.join(LOG_LEVELS)}", EXIT_USAGE)
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)


def parse_when(text: str, now: datetime, option: str) -> datetime:
    """A ``--since``/``--until`` value as an aware UTC time: 'now', a duration back from ``now`` ('30m', '24h',
    '7d', '2w') or ISO 8601 (naive = UTC)."""
    value = text.strip()
    if value.lower() == "now":
        return now
    try:
        match = _AGO.match(value.lower())
        if match:
            return now - timedelta(seconds=float(match[1]) * _SECONDS[match[2]])
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise fail(f"{option} {text!r} is not a time: neither an ISO 8601 time (2026-12-01T09:00:00Z, naive = "
                       "UTC) nor 'now' nor a duration back from now (30m, 24h, 7d, 2w)", EXIT_USAGE) from None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:
        raise fail(f"{option} {text!r} reaches back before year 1; use a shorter duration or a later time",
                   EXIT_USAGE) from None
