"""The ``ragmon …`` commands the alert runbooks (``alerts/runbooks/*.md``) tell on-call to run, and which of them
are reads that may run against a live daemon.

Used by ``tests/integration/test_read_while_running.py`` (every read command against a running daemon) and by the
operations harness (``tests/support/operations``: the same commands in a loop while the daemon is under faults).
Test plumbing only: no assertions.
"""

from __future__ import annotations

import re
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[2] / "alerts" / "runbooks"
#: runbook commands not run as reads, and why: each starts a daemon, writes, or needs an argument the page names
NOT_READS = {
    "ragmon review": "starts the review daemon",
    "ragmon run": "starts the daemon",
    "ragmon drift": "starts the drift daemon",
    "ragmon gate": "needs a golden set and a candidate (the page says when to run it)",
    "ragmon corpus load": "writes (loads the corpus feed)",
    "ragmon calibrate": "needs review labels (the page says the queue is unreviewed)",
    "ragmon review hash-password": "prompts for a password; no store",
    "ragmon schema validate message.json": "needs a saved message file; no store",
}
#: every form of these: calibrate needs human review labels (the demo's data has none), the gate a golden set
NOT_READ_PREFIXES = ("ragmon calibrate ", "ragmon gate ")


def runbook_commands() -> list[str]:
    """Every distinct ``ragmon …`` command in backticks in a runbook, whitespace normalised (a command may wrap a
    line), sorted."""
    return sorted({" ".join(c.split()) for page in RUNBOOKS.glob("*.md")
                   for c in re.findall(r"`(ragmon [^`]+)`", page.read_text(encoding="utf-8"))})


def is_read(command: str) -> bool:
    """A command that only reads the store and names no placeholder (``<stratum>``) to fill in."""
    return command not in NOT_READS and "<" not in command and not command.startswith(NOT_READ_PREFIXES)


def runbook_reads() -> list[str]:
    """The runbook commands that are reads (``is_read``), as written (``ragmon …``)."""
    return [c for c in runbook_commands() if is_read(c)]
