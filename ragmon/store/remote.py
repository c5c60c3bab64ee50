"""``RemoteReadStore``: the store's read methods answered by the running ragmon that holds the embedded store.

A read command that finds the embedded data directory held by a daemon (``StoreLockedError``) opens this instead
(``connect_remote``): the same ``table``/``query``/``query_rows``/``query_columns``/``command`` methods, each one
``POST /api/v1/store/read`` to that daemon (``ragmon.store.read_api``), values carried exactly by
``ragmon.store.wire``, so the command prints what it would print locally. Writes raise ``PermanentStoreError``:
the daemon runs every query read-only.

Where the daemon answers and its token: ``read_api.url`` / ``read_api.token`` / ``read_api.token_file`` when set,
else what the daemon announced in its data directory. Every httpx failure is translated here into a
``StoreError`` whose message says what to do; callers never see an httpx exception. Messages name the daemon's
address with any credentials in it masked (``mask_url``), as ``config show`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ragmon.config import Settings, secret_value
from ragmon.config.read_api import ANNOUNCE_FILE
from ragmon.errors import PermanentStoreError, RetryableStoreError, StoreError
from ragmon.store import wire
from ragmon.store.clickhouse import ClickHouseStore
from ragmon.store.dsn import mask_url
from ragmon.store.read_api import PATH, embedded_path

READ_ONLY = ("the store is read through the running ragmon that holds it, which answers reads only; run this "
             "command when that process has stopped, or run it against a ClickHouse server")


@dataclass(frozen=True)
class RemoteResult:
    """What ``query`` returns: the part of clickhouse-connect's ``QueryResult`` ragmon reads."""

    column_names: tuple[str, ...]
    result_rows: list[tuple[Any, ...]]

    @property
    def result_columns(self) -> list[tuple[Any, ...]]:
        return [tuple(r[i] for r in self.result_rows) for i in range(len(self.column_names))]


class RemoteReadStore:
    """The read side of ``ClickHouseStore``, served by the daemon at ``url``. Blocking; thread-safe (httpx)."""

    embedded = True
    read_only = True

    def __init__(self, settings: Settings, url: str, token: str, *, transport: httpx.BaseTransport | None = None):
        self.settings = settings.store
        self.database = settings.store.database
        self.url = mask_url(url)  # what messages name; the client keeps the address itself
        self._http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                  timeout=settings.read_api.timeout_seconds, transport=transport)

    # the same identifier check, readiness rule and row count as the local store (they need only ``database``,
    # ``ping`` and ``command``)
    table = ClickHouseStore.table
    readiness = ClickHouseStore.readiness
    row_count = ClickHouseStore.row_count  # one read through ``command``: ``ragmon store status`` while the daemon runs

    def ping(self) -> None:
        self.command("SELECT 1")

    def migrate(self) -> list[str]:
        """Nothing to apply: the daemon migrated the store when it opened it."""
        return []

    def applied_migrations(self) -> list[tuple[int, str, str]]:
        rows = self.query(
            f"SELECT version, name, checksum FROM {self.table('schema_migrations')} FINAL ORDER BY version"
        ).result_rows
        return [(int(v), str(n), str(c)) for v, n, c in rows]

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        return self._post("command", sql, parameters)["value"]

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None,
              settings: Mapping[str, Any] | None = None) -> RemoteResult:
        if settings:
            raise PermanentStoreError(f"query settings {sorted(settings)} cannot be changed: {READ_ONLY}")
        answer = self._post("query", sql, parameters)
        return RemoteResult(tuple(answer["columns"]), [tuple(r) for r in answer["rows"]])

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        result = self.query(sql, parameters)
        return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]

    def query_columns(self, sql: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Sequence[Any]]:
        result = self.query(sql, parameters)
        return dict(zip(result.column_names, result.result_columns, strict=True))

    def insert_columns(self, table: str, columns: Any, *, dedup_token: str | None = None) -> int:
        raise PermanentStoreError(f"cannot write to {table}: {READ_ONLY}")

    def insert_rows(self, table: str, rows: Any, column_names: Any, *, dedup_token: str | None = None) -> int:
        raise PermanentStoreError(f"cannot write to {table}: {READ_ONLY}")

    def insert_trace_rows(self, rows: Any, *, dedup_token: str | None = None) -> int:
        raise PermanentStoreError(f"cannot write to traces: {READ_ONLY}")

    def close(self) -> None:
        self._http.close()

    def _post(self, op: str, sql: str, parameters: Mapping[str, Any] | None) -> dict[str, Any]:
        body = {"op": op, "sql": sql, "parameters": {k: wire.encode(v) for k, v in (parameters or {}).items()}}
        try:
            response = self._http.post(PATH, content=json.dumps(body), headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            raise RetryableStoreError(f"the running ragmon at {self.url} did not answer ({type(exc).__name__}: "
                                      f"{exc or 'no detail'}); is it still running, and is read_api.url "
                                      "right?") from None
        try:
            answer = response.json()
            error = answer.get("error") if isinstance(answer, dict) else "an answer that is not a JSON object"
        except ValueError:
            answer, error = None, f"HTTP {response.status_code}, not a read API answer"
        if response.status_code == 401:
            raise PermanentStoreError(f"the running ragmon at {self.url} refused the read token; give this command the "
                                      "daemon's token (read_api.token_file, or read_api.token) or unset both to use "
                                      f"the one it wrote in {ANNOUNCE_FILE}")
        if response.status_code == 404:
            raise PermanentStoreError(f"{self.url} serves no read API ({PATH}: 404); is read_api.url the address of "
                                      "a ragmon daemon with read_api.enabled?")
        if response.status_code != 200 or error:
            cls = RetryableStoreError if response.status_code in (502, 503, 504) else PermanentStoreError
            raise cls(f"the running ragmon at {self.url} could not answer: {error}")
        try:
            return {k: wire.decode(v) if k in ("value", "rows") else v for k, v in answer.items()}
        except ValueError as exc:
            raise PermanentStoreError(f"the running ragmon at {self.url} sent a bad answer: {exc}") from None


def connect_remote(settings: Settings) -> RemoteReadStore:
    """The read store of the daemon holding ``settings.store``'s embedded directory; ``StoreError`` (what to do)
    when its address or token is unknown or it does not answer."""
    url, token = settings.read_api.url, secret_value(settings.read_api.token)
    if settings.read_api.token_file is not None:  # read at load time when it existed: here to name it if not
        token = _read_token(settings.read_api.token_file)
    if url is None or token is None:
        announced = _announcement(embedded_path(settings))
        url = url or announced.get("url")
        token = token or announced.get("token")
    if not url or not token:
        raise PermanentStoreError(
            "no running ragmon has announced a read API for this store (it is off, or the daemon is older); set "
            "read_api.url and read_api.token_file to reach it")
    store = RemoteReadStore(settings, str(url), str(token))
    try:
        store.ping()
    except StoreError:
        store.close()
        raise
    return store


def _read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PermanentStoreError(f"read_api.token_file: cannot read {path} ({getattr(exc, 'strerror', None) or exc})"
                                  ) from None


def _announcement(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads((path / ANNOUNCE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except PermissionError:
        raise PermanentStoreError(f"cannot read {path / ANNOUNCE_FILE} (permission denied): run this command as the "
                                  "user that runs the daemon, or set read_api.url and read_api.token_file") from None
    except (OSError, ValueError) as exc:
        raise PermanentStoreError(f"cannot read {path / ANNOUNCE_FILE} ({exc})") from None
    return data if isinstance(data, dict) else {}
