"""The read API: a daemon holding the embedded store answers other ragmon processes' reads over its HTTP port.

chDB lets one process open a data directory, so while ``ragmon run`` holds it a read command cannot open it.
``read_access`` builds, for a daemon whose store is embedded, a router with ``POST /api/v1/store/read`` (a
bearer token; one query and its parameters in, the rows out in ``ragmon.store.wire``'s JSON) and announces where
it answers in ``<data directory>/ragmon-read-api.json`` (mode 0600) so read commands on the same host find it;
``ragmon.store.remote`` is the other side. Every query runs on a connection of its own that is read-only for its
whole life (``ClickHouseStore.reader``: ClickHouse's ``readonly = 1``, set once when it opens): no writes, no
DDL, no settings changes and no table functions that reach files or the network; the token therefore grants
reading ragmon's tables, the same as reading the data directory's files, and nothing more.

Must not run a query on the daemon's own (writing) connection: settings stick to a chDB connection, so a read-only
setting passed per query there would turn every later write of the daemon read-only. Must not answer without a
valid token; errors are returned as one line, never the engine's text with a stack.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from ragmon.config import Settings, secret_value
from ragmon.config.read_api import ANNOUNCE_FILE
from ragmon.errors import ConfigError, StoreError
from ragmon.store import wire

log = logging.getLogger("ragmon.store.read_api")
PATH = "/api/v1/store/read"
MAX_REQUEST_BYTES = 1 << 20
OPS = ("query", "command")


@dataclass
class ReadAccess:
    """The read API of one daemon: its router, its token, and the file announcing it (``publish``/``withdraw``)."""

    router: APIRouter
    token: str
    announce_path: Path

    def publish(self, host: str, port: int) -> None:
        """Write ``{"url", "token"}`` to the announce file (mode 0600) once the port is bound. A file that cannot
        be written is logged, not fatal: read commands then need ``read_api.url`` and a token setting."""
        shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
        url = f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"
        try:
            _write_private(self.announce_path, json.dumps({"url": url, "token": self.token}))
        except OSError as exc:
            log.warning("cannot write %s (%s): read commands need read_api.url and read_api.token_file to reach "
                        "this process", self.announce_path, exc.strerror or exc)

    def withdraw(self) -> None:
        with contextlib.suppress(OSError):
            self.announce_path.unlink()


def read_access(settings: Settings, store: Any) -> ReadAccess | None:
    """The read API for ``store`` when it is embedded and ``read_api.enabled``; else None. Its queries run on
    ``store.reader()``, a connection of their own. The token: the configured one, else ``read_api.token_file``'s
    (created with a random token when missing), else a new one."""
    path = embedded_path(settings)
    if path is None or not settings.read_api.enabled or not hasattr(store, "reader"):
        return None
    given = settings.read_api.token_file is None or settings.read_api.token_file.exists()
    token = (secret_value(settings.read_api.token) if given else None) or _file_token(settings.read_api.token_file)
    return ReadAccess(router(store.reader(), token), token, path / ANNOUNCE_FILE)


def embedded_path(settings: Settings) -> Path | None:
    """The embedded store's data directory, or None for a server store."""
    from ragmon.store.dsn import parse_dsn

    return parse_dsn(secret_value(settings.store.dsn) or "").path


def router(reader: Any, token: str) -> APIRouter:
    """``POST /api/v1/store/read``: ``{"op": "query"|"command", "sql": …, "parameters": {…}}`` in wire form, run on
    ``reader``, a store whose connection is read-only (``ClickHouseStore.reader``)."""
    api = APIRouter()
    expected = f"Bearer {token}".encode()

    @api.post(PATH, include_in_schema=False)
    async def read(request: Request) -> Response:
        presented = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(presented, expected):
            return _answer(401, error="a valid read token is required: Authorization: Bearer <read_api token>")
        body = await request.body()
        if len(body) > MAX_REQUEST_BYTES:
            return _answer(413, error=f"a read request is at most {MAX_REQUEST_BYTES} bytes")
        try:
            op, sql, parameters = _parse(body)
        except ValueError as exc:
            return _answer(400, error=str(exc))
        try:
            if op == "command":
                value = await run_in_threadpool(reader.command, sql, parameters)
                return _answer(200, value=wire.encode(value if isinstance(value, int | str | list) else None))
            result = await run_in_threadpool(reader.query, sql, parameters)
            return _answer(200, columns=list(result.column_names),
                           rows=[wire.encode(list(r)) for r in result.result_rows])
        except StoreError as exc:
            if "(READONLY)" in str(exc):  # a write, a setting or a table function reaching out: not a read
                return _answer(403, error="refused: the read API runs queries read-only (no writes, settings, "
                                          "file() or url())")
            return _answer(503 if exc.retryable else 400, error=_one_line(exc), retryable=exc.retryable)
        except TypeError as exc:  # a column type the wire format does not carry
            return _answer(500, error=str(exc))

    return api


def _parse(body: bytes) -> tuple[str, str, dict[str, Any]]:
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ValueError("the body is not JSON") from None
    if not isinstance(request, dict):
        raise ValueError('the body is a JSON object: {"op", "sql", "parameters"}')
    op, sql, parameters = request.get("op"), request.get("sql"), request.get("parameters") or {}
    if op not in OPS:
        raise ValueError(f"op is one of {', '.join(OPS)}")
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError("sql is a non-empty string")
    if not isinstance(parameters, dict) or not all(isinstance(k, str) for k in parameters):
        raise ValueError("parameters is an object of named values")
    try:
        return op, sql, {k: wire.decode(v) for k, v in parameters.items()}
    except RecursionError:
        raise ValueError("parameters are nested too deeply") from None


def _answer(status: int, **body: Any) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def _one_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:400]


def _file_token(path: Path | None) -> str:
    if path is None:
        return secrets.token_urlsafe(32)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = secrets.token_urlsafe(32)
        try:
            _write_private(path, token + "\n")
        except OSError as exc:
            raise ConfigError([f"read_api.token_file: {path} does not exist and cannot be created "
                               f"({exc.strerror or exc}); create it with a long random token"]) from None
        log.info("wrote a new read API token to %s", path)
        return token
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"read_api.token_file: cannot read {path} ({exc})"]) from None
    if len(token) < 16:
        raise ConfigError([f"read_api.token_file: {path} holds fewer than 16 characters; use a long random token"])
    return token


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (created so, never widened in between)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
