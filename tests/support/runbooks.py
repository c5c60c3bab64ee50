"""The read commands on-call runs during an incident: every `ragmon …` command the alert runbooks name, less those
that start a daemon, write, or need an argument the page names; and the read commands of each kind with their
time options. Used by the tests that run them against a running daemon (tests/integration/test_read_while_running.py,
tests/integration/test_writes_after_reads.py, the system test)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[2] / "alerts" / "runbooks"
#: runbook commands not run here, and why: each starts a daemon, writes, or needs an argument the page names
NOT_READS = {
    "ragmon review": "starts the review daemon",
    "ragmon run": "starts the daemon",
    "ragmon drift": "starts the drift daemon",
    "ragmon gate": "needs a golden set and a candidate (the page says when to run it)",
    "ragmon corpus load": "writes (loads the corpus feed)",
    "ragmon calibrate": "needs review labels (the page says the queue is unreviewed)",
    "ragmon review hash-password": "prompts for a password; no store",
    "ragmon schema validate message.json": "needs a saved message file; no store",
    "ragmon score --from-store --only-failed --since 6h": "writes (judges failed traces again, with the judge)",
    "ragmon score": "starts the score daemon (scores lost traces again)",
    "ragmon ingest --file traces.jsonl": "writes (re-sends lost traces from a file the page names)",
    "ragmon ingest --group-id ragmon-replay --exit-when-idle 60": "writes (re-reads the topic into the store)",
}
#: every form of these: calibrate needs human review labels (the demo's data has none), the gate a golden set
NOT_READ_PREFIXES = ("ragmon calibrate ", "ragmon gate ")


def runbook_commands() -> list[str]:
    """Every `ragmon …` command quoted in alerts/runbooks/*.md, whitespace normalized (a command may wrap a line)."""
    return sorted({" ".join(c.split()) for page in RUNBOOKS.glob("*.md")
                   for c in re.findall(r"`(ragmon [^`]+)`", page.read_text(encoding="utf-8"))})


def runbook_reads() -> list[str]:
    """The runbook commands that only read the store and need nothing but the store (see ``NOT_READS``)."""
    return [c for c in runbook_commands()
            if c not in NOT_READS and "<" not in c and not c.startswith(NOT_READ_PREFIXES)]


def read_commands(tmp: Path, now: datetime | None = None) -> list[list[str]]:
    """Each read command with the options a person adds (time ranges, JSON, an HTML file in ``tmp``)."""
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    since, at = (now - timedelta(days=3)).isoformat(), (now - timedelta(hours=1)).isoformat()
    return [
        ["store", "status"],
        ["store", "status", "--format", "json"],
        ["drift", "report"],
        ["drift", "report", "--format", "json", "--html", str(tmp / "drift.html")],
        ["drift", "check", "--at", at, "--all", "--format", "json"],
        ["drift", "backtest", "--from", (now - timedelta(hours=6)).isoformat(), "--to", now.isoformat()],
        ["score", "report", "--since", since, "--until", now.isoformat()],
        ["score", "report", "--since", since, "--until", now.isoformat(), "--format", "json"],
        ["shadow", "compare", "--baseline", "hybrid@v1", "--candidate", "hybrid@v2", "--since", since, "--until",
         now.isoformat(), "--format", "json"],
        ["review", "status"],
        ["review", "status", "--format", "json"],
        ["ab", "compare", "--baseline", "hybrid@v1", "--candidate", "hybrid@v2", "--since", since, "--until",
         now.isoformat(), "--format", "json"],
        ["leaks", "list", "--since", since, "--until", now.isoformat(), "--format", "json"],
        ["review", "triage", "--no-select", "--format", "json"],
    ]
