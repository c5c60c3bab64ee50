"""What the web side serves: the HTTP server (``server``) and the weekly human review (``review``) sections.

Owns these models and the check of trusted proxy addresses. Reviewer secrets are hashes, never passwords; the
``users_file`` is read by the review role, not here. Must not bind a port.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from ragmon.config.section import Section


class ServerSettings(Section):
    host: str = Field("127.0.0.1", description="Address the HTTP server (/metrics, /healthz, /readyz, review UI) binds.")
    port: int = Field(9108, ge=0, le=65535, description="HTTP port (0 picks a free one).")
    forwarded_allow_ips: str = Field(
        "",
        description="Reverse proxies whose X-Forwarded-For names the client (comma-separated addresses or networks, "
        "or '*'). Empty (default): none, the header is ignored and the client is the connection's address, so no "
        "client can pick the address sign-in throttling counts under. Behind an Ingress, list the ingress "
        "controller's pod network, or every client shares the proxy's address.",
    )

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _forwarded_hosts(cls, v: str) -> str:
        if not v.strip():
            return ""
        hosts = [h.strip() for h in v.split(",")]
        if "*" in hosts and len(hosts) > 1:
            raise ValueError("'*' (trust every proxy) stands alone, not in a list")
        for host in hosts:
            if host != "*":
                try:
                    ipaddress.ip_network(host)  # strict, as uvicorn reads it: 10.0.0.0/8, not 10.0.0.1/8
                except ValueError:
                    raise ValueError(f"{host!r} is not an IP address or network (e.g. 10.0.0.0/8), nor '*'") from None
        return v


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is this machine only: 127.0.0.0/8, ::1 or localhost."""
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[] ")).is_loopback
    except ValueError:
        return False


def cookie_secure(review: ReviewSettings, server: ServerSettings) -> bool:
    """``review.cookie_secure`` in force: as set, else on unless ``server.host`` is loopback."""
    return review.cookie_secure if review.cookie_secure is not None else not is_loopback(server.host)


class ReviewUser(Section):
    username: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,64}$", description="Reviewer name, recorded on every label.")
    password_hash: SecretStr | None = Field(
        None, description="scrypt hash from `ragmon review hash-password` (never the password itself). Masked."
    )
    token_sha256: SecretStr | None = Field(
        None, description="SHA-256 (hex) of this reviewer's JSON API bearer token, from `ragmon review new-token`. Masked."
    )


class ReviewSettings(Section):
    users: list[ReviewUser] = Field(
        default_factory=list, description="Who may sign in. Empty: the review UI refuses to start (no anonymous access)."
    )
    users_file: Path | None = Field(None, description="YAML list of users (same fields), e.g. a mounted Secret; added to users.")
    session_secret: SecretStr | None = Field(
        None, description="Key that signs session cookies (≥ 32 chars). Unset: a random key per process. Masked."
    )
    session_secret_file: Path | None = Field(None, description="Read the session key from this file instead.")
    session_max_age_seconds: int = Field(28_800, ge=60, le=2_592_000, description="A session expires this long after sign-in.")
    cookie_secure: bool | None = Field(
        None, description="Mark cookies Secure (sent over HTTPS only). Unset: on, unless server.host is a loopback "
        "address (a browser on the same machine over plain HTTP). Serving a non-loopback address over plain HTTP "
        "logs a warning: put the UI behind an HTTPS proxy.",
    )
    login_max_failures: int = Field(5, ge=1, le=1000, description="Failed sign-ins per user and address before a lock-out.")
    login_lockout_seconds: int = Field(300, ge=1, le=86_400, description="Window of the sign-in failure count.")
    sample_size: int = Field(50, ge=1, le=100_000, description="Traces in each week's random sample.")
    stratify: bool = Field(False, description="Guarantee min_per_stratum traces per category in the sample.")
    min_per_stratum: int = Field(0, ge=0, le=10_000, description="Minimum per category when stratify is on.")
    refresh_interval_seconds: float = Field(60.0, gt=0, le=3600, description="How often the review gauges are recomputed.")
    triage_max_items: int = Field(
        200, ge=1, le=100_000, description="Thumbs-down traces the daemon's weekly triage selection queues (all of "
        "them, or a seeded random sample of this many); as `ragmon review triage --max-items`.",
    )
