"""The console's settings (``console``): where the pages read what is not in the store, and the addresses the alert
rules' links point at (exported as ``ragmon_links_info``, read by the rules' annotation templates).

Owns this one model. The console itself (``ragmon.console``) is mounted wherever the review UI is, behind its
sign-in, so it has no switch, port or users of its own. Must not read a file or open a connection.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, field_validator

from ragmon.config.section import Section

#: where the daemon serves the runbooks (alerts/runbooks), under the console's address
RUNBOOKS_PATH = "/review/console/runbooks"


class ConsoleSettings(Section):
    public_url: str | None = Field(
        None, max_length=2048,
        description="The address on-call opens ragmon's HTTP port at (e.g. https://ragmon.example.com): the alerts' "
        "dashboard_url links to the console there (exported as ragmon_links_info, without any user:password@, "
        "query or fragment). Unset: http://<server.host>:<server.port>.",
    )
    runbook_base_url: str | None = Field(
        None, min_length=1, max_length=2048,
        description="Where the alerts' runbook_url links point: <this>/<AlertName>.md (exported as "
        "ragmon_links_info, without any user:password@, query or fragment). Unset: the runbooks ragmon serves itself "
        "behind the console's sign-in, <console address>/review/console/runbooks. Point it at your fork or wiki copy "
        "of alerts/runbooks.",
    )
    gate_runs_dir: Path = Field(
        Path(".ragmon/gate-runs"),
        description="Directory of the gate's run artifacts (run-<sha256>.json) that the console's Gate runs page "
        "lists: the `--out` of `ragmon gate run`.",
    )
    dead_letter_file: Path | None = Field(
        None,
        description="Read dead letters from this JSON Lines file (`ragmon ingest --file ... --dead-letter-file`; "
        "`ragmon demo` writes <dir>/dead-letters.jsonl). Unless read_dead_letter_topic is true, the topic is not read "
        "then.",
    )
    read_dead_letter_topic: bool | None = Field(
        None,
        description="Whether the Dead letters page reads kafka.dead_letter_topic. Unset: only when no "
        "dead_letter_file is configured; true: the file and the topic; false: never (no broker here).",
    )
    dead_letters_read: int = Field(
        1_000, ge=1, le=100_000,
        description="How many of the newest dead letters the Dead letters page reads (per partition of the topic, "
        "or from the end of the file); its counts by reason are over these.",
    )
    dead_letter_read_timeout_seconds: float = Field(
        2.0, gt=0, le=60,
        description="How long the Dead letters page waits for the dead-letter topic (reaching a broker, then "
        "reading) before it shows what it has. What it read, or why it could not, is kept for "
        "dead_letter_cache_seconds, so a broker that does not answer costs one wait, not one per page view.",
    )
    dead_letter_cache_seconds: float = Field(
        30.0, ge=0, le=3600,
        description="How long the Dead letters page reuses what it read (0: read on every view). The page says how "
        "old it is and offers a fresh read.",
    )

    def reads_dead_letter_topic(self) -> bool:
        """Whether the Dead letters page reads the topic (see ``read_dead_letter_topic``)."""
        return self.dead_letter_file is None if self.read_dead_letter_topic is None else self.read_dead_letter_topic

    @field_validator("public_url", "runbook_base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        """An absolute http(s) address without a trailing slash (the rules append the path), whose host a browser
        reads as ``published_link`` does (a password with an unescaped / or ? makes it unreadable)."""
        if v is None:
            return None
        # the value is not repeated in a message: the problem line shows it, its credentials masked
        if not v.startswith(("http://", "https://")) or any(c.isspace() or c in "\"'<>" for c in v):
            raise ValueError("expected an http:// or https:// address without spaces or quotes")
        try:
            parts = urlsplit(v)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            raise ValueError("expected an http(s) address whose host and port can be read (percent-encode /, ?, # "
                             "and @ in a user name or password)") from None
        if not parts.hostname:
            raise ValueError("expected an http(s) address with a host")
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

    def published_links(self, host: str, port: int, hostname: str) -> dict[str, str]:
        """The labels of ``ragmon_links_info`` (``runbook_base_url``, ``console_url``): the two addresses without
        credentials, because anyone who can scrape ``/metrics`` reads them, Prometheus keeps them, and the alerts
        carry them into every notification."""
        console_url = self.console_url(host, port, hostname)
        return {"runbook_base_url": published_link(self.runbooks_url(console_url)),
                "console_url": published_link(console_url)}


def published_link(url: str) -> str:
    """``url`` as a link anyone may read: scheme, host, port and path, without ``user:password@``, query or fragment.

    The query and fragment go whole, not only the parameters that look secret: the alert rules append a path to
    these addresses, so a query or fragment in them never made a working link, and a name such as ``?t=`` or
    ``#access_token=`` cannot be recognised as a secret. The host is the one a browser reads (``urlsplit``).
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
