"""The console's settings (``console``): where the pages read what is not in the store, and the addresses the alert
rules' links point at (exported as ``ragmon_links_info``, read by the rules' annotation templates).

Owns this one model. The console itself (``ragmon.console``) is mounted wherever the review UI is, behind its
sign-in, so it has no switch, port or users of its own. Must not read a file or open a connection.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from ragmon.config.section import Section

#: where the daemon serves the runbooks (alerts/runbooks), under the console's address
RUNBOOKS_PATH = "/review/console/runbooks"


class ConsoleSettings(Section):
    public_url: str | None = Field(
        None, max_length=2048,
        description="The address on-call opens ragmon's HTTP port at (e.g. https://ragmon.example.com): the alerts' "
        "dashboard_url links to the console there (exported as ragmon_links_info). Unset: "
        "http://<server.host>:<server.port>.",
    )
    runbook_base_url: str | None = Field(
        None, min_length=1, max_length=2048,
        description="Where the alerts' runbook_url links point: <this>/<AlertName>.md (exported as "
        "ragmon_links_info). Unset: the runbooks ragmon serves itself behind the console's sign-in, "
        "<console address>/review/console/runbooks. Point it at your fork or wiki copy of alerts/runbooks.",
    )
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

    @field_validator("public_url", "runbook_base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        """An absolute http(s) address without a trailing slash (the rules append the path)."""
        if v is None:
            return None
        if not v.startswith(("http://", "https://")) or any(c.isspace() or c in "\"'<>" for c in v):
            raise ValueError(f"expected an http:// or https:// address without spaces or quotes, got {v[:80]!r}")
        return v.rstrip("/")

    def console_url(self, host: str, port: int, hostname: str) -> str:
        """``public_url``, or the address the server binds when it is unset (``hostname`` for a wildcard bind)."""
        if self.public_url:
            return self.public_url
        shown = hostname if host in ("0.0.0.0", "::", "") else host
        return f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"

    def runbooks_url(self, console_url: str) -> str:
        """``runbook_base_url``, or the runbooks the daemon serves under ``console_url``."""
        return self.runbook_base_url or console_url + RUNBOOKS_PATH
