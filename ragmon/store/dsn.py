"""The store DSN as data: parsing and checking ``store.dsn``, and masking the password in it (or in any service
URL, such as ``judge.base_url``, or in any URL a log line names) for display.

Owns the DSN's grammar only (``chdb:///abs/dir``, ``chdb://./rel/dir``, ``http(s)://user:password@host:port/db``).
Pure: it must not import clickhouse-connect, chDB, the store adapter or ``ragmon.config``, because settings
validation imports it to check the DSN at start-up without opening anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ragmon.errors import PermanentStoreError

#: query parameters whose value is a credential (Azure's api-key, SAS signatures, OAuth tokens, …)
_SECRET_QUERY = re.compile(
    r"([?&;](?:[A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|pwd|signature|credential)[A-Za-z0-9_.-]*|sig|code|auth)=)"
    r"[^&;#]*", re.IGNORECASE)
#: a URL inside free text (a log line): a scheme, ://, then anything up to whitespace or a quote
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_EXAMPLE = "use chdb:///absolute/dir, chdb://./relative/dir or http(s)://user:password@host:8123/database"


@dataclass(frozen=True)
class Dsn:
    """A parsed store DSN. ``path`` is set for chDB, the network fields for a server."""

    scheme: str
    path: Path | None = None
    host: str = ""
    port: int | None = None
    username: str = "default"
    password: str = ""
    database: str | None = None

    @property
    def embedded(self) -> bool:
        return self.scheme == "chdb"


def parse_dsn(dsn: str) -> Dsn:
    """Parse and check a DSN; raise ``PermanentStoreError`` naming what is wrong and how to write it."""
    text = dsn.strip()
    if text.startswith("chdb://"):
        raw = text[len("chdb://"):]
        if raw in ("", "/") or "?" in raw or raw == "memory" or raw.startswith("memory/"):
            raise PermanentStoreError(f"store.dsn {dsn!r} names no data directory on disk; {_EXAMPLE}")
        return Dsn(scheme="chdb", path=Path(raw))
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise PermanentStoreError(f"store.dsn {mask_dsn(dsn)!r} is not a valid URL ({exc}); {_EXAMPLE}, with ?, #, / "
                                  "and @ in the user name or password percent-encoded (? as %3F)") from None
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise PermanentStoreError(f"store.dsn {mask_dsn(dsn)!r} has no host; {_EXAMPLE}")
        database = parts.path.strip("/") or None
        return Dsn(
            scheme=parts.scheme,
            host=parts.hostname,
            port=port,
            username=unquote(parts.username) if parts.username else "default",
            password=unquote(parts.password) if parts.password else "",
            database=database,
        )
    raise PermanentStoreError(f"store.dsn scheme {parts.scheme or '(none)'!r} is not supported; {_EXAMPLE}")


def mask_dsn(dsn: str) -> str:
    """Hide the password part of a DSN: ``http://u:pw@h`` → ``http://u:****@h``.

    Done on the text, not on a parsed URL: a password with an unescaped ``?``, ``#`` or ``/`` makes a URL parser
    see the password as the host, query or path. Everything between ``user:`` and the last ``@`` is masked (at
    worst a little more than the password, never less).
    """
    scheme, sep, rest = dsn.partition("://")
    if not sep or "@" not in rest:
        return dsn
    userinfo, _, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':****' if colon else ''}@{host}"


def mask_url(url: str) -> str:
    """Hide the credentials of a service URL: the password of ``user:password@`` (as ``mask_dsn``), a user name
    given alone (``https://<token>@host``, how tokens ride in URLs), and the values of query parameters that hold
    one (``api-key=``, ``token=``, ``sig=``, …): ``https://u:pw@h/v1?api-key=k`` → ``https://u:****@h/v1?api-key=****``.
    """
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest and ":" not in rest.rpartition("@")[0]:
        url = f"{scheme}://****@{rest.rpartition('@')[2]}"
    return _SECRET_QUERY.sub(r"\1****", mask_dsn(url))


def mask_urls_in(text: str) -> str:
    """``text`` (a log line) with every URL in it masked by ``mask_url``."""
    return _URL_IN_TEXT.sub(lambda m: mask_url(m.group()), text) if "://" in text else text
