"""What every ``ragmon`` subcommand shares: the consoles, the exit codes, the invocation's settings, and how an
error is printed.

Owns ``State`` (what the root callback hands to subcommands), ``settings_of``, ``print_error``/``fail`` and the
exit codes: 2 for bad configuration, arguments or input files; 3 when a service (store, broker) is unavailable;
1 when a daemon's role did not stop within the grace period (``exit_if_stuck``); 5 when a daemon stopped on an
error no retry can fix.
Must not import the root command (``ragmon.cli.app``) or any subcommand: they import this module, and the root
command imports them, so anything here that reached back would close an import loop.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.text import Text

from ragmon.config import Settings, load_settings

if TYPE_CHECKING:
    from ragmon.process import Process

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
#: too little evidence to answer: a hold (shadow, ab compare), too little classified traffic (golden coverage), a
#: drift range or check where no test could be assessed (docs/cli.md, exit codes)
EXIT_NO_EVIDENCE = 4
#: a daemon stopped by itself on an error that no retry can fix (e.g. ingest: a codec's library is missing)
EXIT_FATAL = 5
#: stopped (SIGTERM/SIGINT) before the work was done, nothing failing: ``ingest --file`` before every line was
#: stored or dead-lettered; the ``error:`` line says where to resume
EXIT_INTERRUPTED = 6

#: width of output that is not a terminal (a file, a pipe): wide enough that no table column is ever cut
UNCUT_WIDTH = 1000
err_console = Console(stderr=True)
console = Console(width=None if sys.stdout.isatty() else UNCUT_WIDTH)


class State:
    """What the root callback passes to subcommands."""

    def __init__(self, config_path: Path | None):
        self.config_path = config_path
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path)
        return self._settings


def settings_of(ctx: typer.Context) -> Settings:
    """The validated settings for this invocation (loaded once, on first use)."""
    state = ctx.find_root().obj
    if not isinstance(state, State):
        state = State(None)
    return state.settings


def print_error(message: str) -> None:
    """Print ``error: message`` to stderr; the message is shown as plain text, never as markup."""
    err_console.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: message`` to stderr and return the Exit to raise."""
    print_error(message)
    return typer.Exit(code)


def exit_if_stuck(process: Process) -> None:
    """Exit 1 naming the roles a stopped ``ragmon.process.Process`` reports still running after the grace period."""
    if process.still_running:
        raise fail(process.stuck_message(), 1)
