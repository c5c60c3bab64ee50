"""The console's settings (``console``): where the pages read what is not in the store, and the address the alert
rules' links point at.

Owns this one model. The console itself (``ragmon.console``) is mounted wherever the review UI is, behind its
sign-in, so it has no switch, port or users of its own. Must not read a file or open a connection.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ragmon.config.section import Section


class ConsoleSettings(Section):
    gate_runs_dir: Path = Field(
        Path(".ragmon/gate-runs"),
        description="Directory of the gate's run artifacts (run-<sha256>.json) that the console's Gate runs page "
        "lists: the `--out` of `ragmon gate run`.",
    )
    dead_letter_file: Path | None = Field(
        None,
        description="Read dead letters from this JSON Lines file (`ragmon ingest --file ... --dead-letter-file`) "
        "instead of kafka.dead_letter_topic.",
    )
    dead_letters_read: int = Field(
        1_000, ge=1, le=100_000,
        description="How many of the newest dead letters the Dead letters page reads (per partition of the topic, "
        "or from the end of the file); its counts by reason are over these.",
    )
    dead_letter_read_timeout_seconds: float = Field(
        5.0, gt=0, le=60,
        description="How long the Dead letters page waits for the dead-letter topic before it shows what it has.",
    )
