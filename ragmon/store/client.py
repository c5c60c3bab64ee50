"""Opening ClickHouse from one DSN, and translating clickhouse-connect/chDB exceptions into ragmon errors.

``chdb:///path`` opens the embedded engine in-process through clickhouse-connect's chDB interface (the same
driver, SQL and tables as a server); ``http(s)://user:password@host:port/database`` opens a server. The DSN's
grammar lives in ``ragmon.store.dsn`` (pure, so settings validation checks it without this module).

chDB allows one engine per process and one process per data directory. ``open_client`` keeps one client per
data directory for the life of the process (a second ``open_client`` with the same path shares it) and turns
the "directory already in use" failure into ``StoreLockedError`` with a message that says what to do.

Settings stick to a chDB connection: clickhouse-connect applies a command's per-call settings to the connection
with ``SET`` and restores them afterwards, and a ``readonly = 1`` set that way cannot be restored (read-only mode
refuses every ``SET``), so it would stay in force for every later write of the process. Reads that must be
read-only therefore get a connection of their own (``open_read_only_client``), read-only for its whole life,
never the shared writer's connection with a setting.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from ragmon.config import StoreSettings, secret_value
from ragmon.errors import PermanentStoreError, RetryableStoreError, StoreError, StoreLockedError
from ragmon.store.dsn import parse_dsn

_CHDB_CLIENTS: dict[str, Any] = {}
# Every client exception is translated here into a StoreError that the caller reports once. clickhouse-connect
# also logs an "Unexpected Http Driver Exception" warning, which Python prints on stderr when logging is not
# configured (the CLI): the NullHandler keeps it out of CLI output; configured daemons still log it.
logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
_CHDB_LOCK = threading.Lock()

def embedded_engine_options(memory_mb: int) -> dict[str, int]:
    """Server settings of the embedded engine for a memory budget of ``memory_mb`` MiB (``store.embedded_memory_mb``).

    ClickHouse's defaults are sized for a dedicated server: 16 background merge threads, 5 GiB for each of the mark,
    primary index and skip-index mark caches, merges allowed half the machine's RAM. Inside a ragmon process they
    let caches and concurrent merges grow the resident memory with the data stored. So the engine merges on at most
    as many threads as there are cores (at least 2), its caches take fixed shares of the budget, merges are not
    started past half of it, and the budget is the engine's hard limit (a query past it fails, and is retried
    where ragmon retries; docs/operations.md, "Sizing"). chDB passes these to ClickHouse at start-up.

    A query gets a thread for each eighth of the budget free (``max_threads_min_free_memory_per_thread``), up to
    ``max_threads`` (the cores). ClickHouse asks 1 GiB free a thread, sized for a server: under the default 1 GiB
    budget every query ran on one thread, and a drift check over 10 M traces took 11 s instead of 7.
    """
    budget = memory_mb << 20
    return {
        "background_pool_size": max(2, min(16, os.cpu_count() or 2)),
        "mark_cache_size": budget // 8,
        "primary_index_cache_size": budget // 16,
        "index_mark_cache_size": budget // 32,
        "query_condition_cache_size": budget // 32,
        "compiled_expression_cache_size": budget // 32,
        "merges_mutations_memory_usage_soft_limit": budget // 2,
        "max_server_memory_usage": budget,
        "max_threads_min_free_memory_per_thread": budget // 8,
    }


#: the engine's settings at the default ``store.embedded_memory_mb``
EMBEDDED_ENGINE_OPTIONS = embedded_engine_options(StoreSettings.model_fields["embedded_memory_mb"].default)

# ClickHouse error codes worth retrying: timeouts, too many parts/queries, network, table readonly (242, a replica
# without its coordinator), not enough disk space (243: the disk fills and frees again; ingest and score back off
# meanwhile), memory. 164 (READONLY, the user or connection is read-only) is not: no retry changes it.
_RETRYABLE_CODES = {159, 160, 202, 203, 209, 210, 241, 242, 243, 252, 285, 319, 425, 999, 1000}


def open_client(settings: StoreSettings) -> Any:
    """Open (or share, for chDB) a clickhouse-connect client. Fails fast with a ``StoreError``."""
    dsn = parse_dsn(secret_value(settings.dsn) or "")
    if dsn.embedded:
        return _open_chdb(dsn.path, embedded_engine_options(settings.embedded_memory_mb))  # type: ignore[arg-type]
    import clickhouse_connect

    try:
        client = clickhouse_connect.get_client(
            interface=dsn.scheme,
            host=dsn.host,
            port=dsn.port,
            username=dsn.username,
            password=dsn.password,
            connect_timeout=settings.connect_timeout_seconds,
            send_receive_timeout=settings.query_timeout_seconds,
        )
    except Exception as exc:  # noqa: BLE001 - translated at the boundary
        where = f"{dsn.host}:{dsn.port or (8443 if dsn.scheme == 'https' else 8123)}"
        raise translate(
            exc,
            f"cannot reach the ClickHouse server at {where} (is it running, and is store.dsn / RAGMON_STORE__DSN "
            "right?)"
        ) from None
    return client


def open_read_only_client(settings: StoreSettings) -> Any:
    """A second connection to the embedded engine this process already runs, read-only for its whole life: no
    writes, no DDL, no setting changes (``readonly`` itself included) and no table functions that reach files or
    the network. Its session is its own, so nothing run on it can change the writer's connection. Embedded stores
    only; raises ``StoreError`` when the engine is not open here or the connection is not read-only."""
    dsn = parse_dsn(secret_value(settings.dsn) or "")
    if not dsn.embedded:
        raise PermanentStoreError("a read-only connection is opened on the embedded engine only (chdb://)")
    import clickhouse_connect

    key = str(dsn.path.resolve())  # type: ignore[union-attr]
    with _CHDB_LOCK:
        if key not in _CHDB_CLIENTS:
            raise PermanentStoreError(f"the embedded engine at {key} is not open in this process")
        try:
            client = clickhouse_connect.get_client(
                dsn=f"chdb://{key}", chdb_options=embedded_engine_options(settings.embedded_memory_mb))
            client.command("SET readonly = 1")
            mode = client.command("SELECT getSetting('readonly')")
        except Exception as exc:  # noqa: BLE001
            raise translate(exc, f"cannot open a read-only connection to the embedded engine at {key}") from None
    if str(mode).strip() != "1":
        raise PermanentStoreError(f"the read-only connection to {key} reports readonly = {mode!r}, not 1")
    return client


def _open_chdb(path: Path, options: dict[str, int]) -> Any:
    import clickhouse_connect

    key = str(path.resolve())
    with _CHDB_LOCK:
        client = _CHDB_CLIENTS.get(key)
        if client is not None:
            return client
        if _CHDB_CLIENTS:
            other = next(iter(_CHDB_CLIENTS))
            raise StoreLockedError(
                f"this process already runs the embedded engine on {other}; chDB allows one data directory per "
                f"process, so {key} cannot be opened too. Use the same store.dsn everywhere in one process."
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PermanentStoreError(f"cannot create the chDB data directory {key}: {exc.strerror or exc}") from None
        locked = StoreLockedError(
            f"the embedded ClickHouse data directory {key} is in use by another process (chDB allows one "
            "process per directory). Stop the other ragmon process, point this one at a server with "
            "RAGMON_STORE__DSN=http://…, or give it its own directory with RAGMON_STORE__DSN=chdb:///other/dir.")
        if _held_elsewhere(path):  # asked first: the engine would print its own "Cannot lock file" line on stderr
            raise locked
        try:
            client = clickhouse_connect.get_client(dsn=f"chdb://{key}", chdb_options=options)
            client.command("SELECT 1")
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            if "EmbeddedServer" in text or "Cannot lock file" in text or "already running" in text:
                raise locked from None
            raise translate(exc, f"cannot open the embedded ClickHouse engine at {key}") from None
        _CHDB_CLIENTS[key] = client
        return client


def _held_elsewhere(path: Path) -> bool:
    """Whether another process holds the engine's lock on ``path`` (ClickHouse ``flock``s its ``status`` file
    while it runs). Checked with a lock taken and dropped at once; where ``flock`` is missing, False (the engine
    then reports it)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return False
    try:
        fd = os.open(path / "status", os.O_RDONLY)
    except OSError:  # no status file: no engine has run here yet
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def translate(exc: BaseException, context: str) -> StoreError:
    """Map a clickhouse-connect / chDB / network exception to a retryable or permanent ``StoreError``."""
    from clickhouse_connect.driver import exceptions as ch

    text = f"{context}: {_first_line(exc)}"
    code = getattr(exc, "code", None)
    if isinstance(exc, ch.OperationalError | ConnectionError | TimeoutError | OSError):
        return RetryableStoreError(text)
    if isinstance(code, int) and code in _RETRYABLE_CODES:
        return RetryableStoreError(text)
    if isinstance(exc, ch.DatabaseError):
        for marker in ("TIMEOUT_EXCEEDED", "TOO_MANY_PARTS", "TOO_MANY_SIMULTANEOUS_QUERIES", "MEMORY_LIMIT_EXCEEDED",
                       "NETWORK_ERROR", "SOCKET_TIMEOUT", "TABLE_IS_READ_ONLY", "KEEPER_EXCEPTION", "NOT_ENOUGH_SPACE"):
            if marker in str(exc):
                return RetryableStoreError(text)
    return PermanentStoreError(text)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:400]
