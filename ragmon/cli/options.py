"""Options that several ``ragmon`` commands share, and how their values are checked.

Owns the ``--log-level`` and report ``--format`` options, the ``--since``/``--until`` time forms, and the check of
output paths (a report file, an artifact directory) before any work is done. A bad value is a usage error (exit 2)
raised before the command does anything else; nothing here opens a store or the network.
"""

from __future__ import annotations

import logging
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from ragmon.cli.common import EXIT_USAGE, fail
from ragmon.config import mask_urls_in

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

LogLevelOption = Annotated[str, typer.Option("--log-level", help="Logging level: DEBUG, INFO, WARNING or ERROR "
                                                                 "(any case).")]


#: ``--format`` of the report commands (drift, score, review and store reports): a table, or JSON for scripts
FormatOption = Annotated[str, typer.Option("--format", help="table (default) or json.")]
FORMATS = ("table", "json")


def check_format(value: str) -> str:
    """A valid ``--format`` value; a usage error (exit 2) naming the choices otherwise."""
    if value not in FORMATS:
        raise fail(f"--format {value!r} is not one of {', '.join(FORMATS)}", EXIT_USAGE)
    return value


def configure_logging(level: str, *, quiet: tuple[str, ...] = ()) -> None:
    """Check ``--log-level`` and configure the root logger; ``quiet`` libraries log warnings and worse only.
    Every line the root logger's handlers write has the credentials of the URLs in it masked."""
    if level.upper() not in LOG_LEVELS:
        raise fail(f"--log-level {level!r} is not one of {', '.join(LOG_LEVELS)}", EXIT_USAGE)
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, MaskedUrls) for f in handler.filters):
            handler.addFilter(MaskedUrls())
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)


class MaskedUrls(logging.Filter):
    """Masks the credentials of every URL in a log line (``mask_url``): httpx logs each request's full URL at
    INFO, ``user:password@`` and ``?token=`` included, and ragmon's own lines may name a configured address."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_urls_in(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


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


def check_output_file(path: Path, option: str) -> None:
    """Refuse an output file that cannot be written (a directory, a missing or read-only directory, a name the
    file system refuses) before the command spends minutes on the work whose result would then be lost."""
    try:
        _check_output_file(path, option)
    except OSError as exc:  # e.g. ENAMETOOLONG: pathlib's is_dir() only swallows "no such file" errors
        raise fail(f"{option} {_clip_path(path)}: {exc.strerror or exc}") from None


def check_output_dir(path: Path, option: str) -> None:
    """Refuse an output directory that is a file, or cannot be created or written (it is created if missing)."""
    try:
        _check_output_dir(path, option)
    except OSError as exc:
        raise fail(f"{option} {_clip_path(path)}: {exc.strerror or exc}") from None


def _clip_path(path: Path, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _check_output_file(path: Path, option: str) -> None:
    if path.is_dir():
        raise fail(f"{option} {path}: is a directory; name a file")
    parent = path.parent
    if not parent.is_dir():
        raise fail(f"{option} {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise fail(f"{option} {path}: not writable by this user")


def _check_output_dir(path: Path, option: str) -> None:
    if path.exists() and not path.is_dir():
        raise fail(f"{option} {path}: is a file; name a directory")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise fail(f"{option} {path}: {existing} is a file, so the directory cannot be created")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise fail(f"{option} {path}: {existing} is not writable by this user")
