"""The ``read_api`` section: how read commands reach the running ragmon that holds the embedded store.

chDB lets one process open a data directory. While ``ragmon run`` (or any daemon) holds it, ``ragmon drift
report``, ``store status`` and every other read command ask that process over its HTTP port instead
(``ragmon.store.read_api`` serves, ``ragmon.store.remote`` asks). Owns this model only; must not bind a port.
The token file is read at load time when it exists (like every ``*_file`` secret); a daemon creates a missing one.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from ragmon.config.section import Section

#: the file a daemon writes in its embedded data directory: where it answers, and the token it accepts
ANNOUNCE_FILE = "ragmon-read-api.json"


class ReadApiSettings(Section):
    enabled: bool = Field(
        True,
        description="A daemon holding the embedded (chDB) store answers other ragmon processes' read commands "
        "(drift report, store status, score report, …) on server.port under /api/v1/store, to holders of the "
        "read token; the queries run read-only. Off: those commands fail with 'in use' while it runs.",
    )
    url: str | None = Field(
        None,
        description="Where read commands reach that daemon, e.g. http://127.0.0.1:9108. Unset: the address the "
        f"daemon wrote in its data directory ({ANNOUNCE_FILE}, mode 0600, removed when it stops).",
    )
    token: SecretStr | None = Field(
        None, description="The read API's bearer token (both sides). Unset, with token_file unset too: the daemon "
        f"makes a random one and writes it in {ANNOUNCE_FILE}, readable by whoever may read the store's files. Masked.",
    )
    token_file: Path | None = Field(
        None, description="Read the bearer token from this file (a mounted Secret); wins over token. A daemon "
        "creates it (mode 0600, a random token) when it does not exist yet.",
    )
    timeout_seconds: float = Field(120.0, gt=0, le=3600, description="How long a read command waits for one answer.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("http://") or v.startswith("https://")):
            raise ValueError("an http:// or https:// address of the daemon's server port, e.g. http://127.0.0.1:9108")
        return v.rstrip("/") if v else v
