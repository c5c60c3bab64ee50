"""``ClickHouseStore``: the one place that talks to ClickHouse (server or embedded chDB).

Owns: opening the client, migrations, columnar batch inserts with an insert deduplication token, and
parameterized reads. Every clickhouse-connect/chDB exception is translated here into a ``StoreError``
(retryable or permanent); callers never see a client-library exception.

Thread-safety: chDB runs queries of one process through one engine; calls are serialized with a lock so the
ingest, score, drift and review roles of ``ragmon run`` can share one store object. ``reader()`` gives reads
that must not write (the read API) a store on a connection of their own: settings stick to a chDB connection, so
a read-only setting passed per call on the shared one would make every later write of the process fail.

The embedded engine ignores failed file writes: on a full disk it acknowledges inserts whose parts are incomplete.
Its inserts therefore go through the engine's ``WriteGuard`` (``ragmon.store.write_guard``): refused while the disk
is below ``store.min_free_disk_mb``, acknowledged only once their part is known whole; and migrations do not run on
a disk below it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from ragmon.config import StoreSettings
from ragmon.errors import PermanentStoreError, RetryableStoreError, StoreError
from ragmon.store.client import open_client, open_read_only_client, translate
from ragmon.store.dsn import parse_dsn
from ragmon.store.migrate import load_migrations, render, tracking_table_sql
from ragmon.store.parts import broken_on_disk
from ragmon.store.trace_json import (
    TRACE_JSON_FORMAT,
    TRACE_JSON_SELECT,
    TRACE_JSON_SETTINGS,
    TRACE_JSON_STRUCTURE,
    LeakRow,
    TraceRows,
)
from ragmon.store.trace_rows import TRACE_COLUMNS

log = logging.getLogger("ragmon.store")
TABLES = ("traces", "scores", "sampling_decisions", "review_queue", "review_labels", "drift_checks", "corpus_versions",
          "triage_queue", "triage_labels",
          "question_types", "outcomes")
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: a query failed reading a part's files: the engine may have kept an incomplete part (``ragmon.store.integrity``)
_READ_BROKEN = ("CANNOT_READ_ALL_DATA", "Empty marks file", "CORRUPTED_DATA", "Cannot read all marks",
                "CHECKSUM_DOESNT_MATCH", "Checksum doesn't match")


class ClickHouseStore:
    """A ClickHouse database holding ragmon's tables.

    Blocking: every method blocks until ClickHouse answers. Raises ``RetryableStoreError`` for outages and
    timeouts, ``PermanentStoreError`` for everything else (including bad SQL and bad data).
    """

    def __init__(self, settings: StoreSettings, client: Any, *, read_only: bool = False):
        self.settings = settings
        #: a store on a read-only connection (``reader()``): its writes fail with ClickHouse's READONLY error
        self.read_only = read_only
        self.database = settings.database
        dsn = parse_dsn(settings.dsn.get_secret_value())
        self.embedded = dsn.embedded
        self._client = client
        #: the embedded engine's write guard (None for a server store)
        self.guard: Any = None
        self._lock = threading.RLock()
        # trace batches for chDB's file() are written here; one directory per chDB data directory, which one
        # process at most holds, so other processes' files in it were left by one that died mid-insert
        self._spool: Path | None = None
        #: batches for ``file()`` go through an in-memory file where the OS has them (Linux), else the spool
        self.in_memory_batches = hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir()
        if dsn.path is not None:
            key = hashlib.blake2b(str(dsn.path.resolve()).encode(), digest_size=8).hexdigest()
            self._spool = Path(tempfile.gettempdir()) / f"ragmon-insert-{key}"

    @classmethod
    def open(cls, settings: StoreSettings, *, migrate: bool = True) -> ClickHouseStore:
        """Connect (fail fast with a clear ``StoreError``) and, by default, apply pending migrations. The embedded
        engine gets its write guard, which reports the broken parts the engine detached while opening."""
        dsn = parse_dsn(settings.dsn.get_secret_value())
        before = broken_on_disk(dsn.path) if dsn.path is not None else set()
        store = cls(settings, open_client(settings))
        store.ping()
        store._sweep_spool()
        if dsn.path is not None:
            from ragmon.store.write_guard import guard_for

            store.guard = guard_for(dsn.path, store, settings.min_free_disk_mb << 20, before=before)
        if migrate:
            store.migrate()
        return store

    def reader(self) -> ClickHouseStore:
        """A store for reads only, on a connection of its own that is read-only for its whole life (the embedded
        engine; ``open_read_only_client``). Nothing run through it can change this store's connection, and it
        serializes its calls with its own lock, so reads through it do not wait for this store's writes."""
        reader = ClickHouseStore(self.settings, open_read_only_client(self.settings), read_only=True)
        reader.guard = self.guard  # to name a part its reads find broken; it never writes through it
        return reader

    def table(self, name: str) -> str:
        """Fully qualified table name; only known identifiers are ever formatted into SQL."""
        if not _TABLE_NAME.match(name):
            raise PermanentStoreError(f"invalid table name {name!r}")
        return f"{self.database}.{name}"

    # -- schema ---------------------------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied (empty when up to date). Idempotent."""
        on_cluster = f"ON CLUSTER {self.settings.cluster}" if self.settings.cluster else ""
        self.command(f"CREATE DATABASE IF NOT EXISTS {self.database} {on_cluster}")
        self.command(tracking_table_sql(self.settings))
        applied = {
            row[0]
            for row in self.query(f"SELECT version FROM {self.table('schema_migrations')} FINAL").result_rows
        }
        pending = [m for m in load_migrations() if m.version not in applied]
        problem = self.guard.startup_problem() if pending and self.guard is not None else None
        if problem:  # the engine would ignore failed writes of table metadata
            raise RetryableStoreError(f"migrations {', '.join(f'{m.version:04d}_{m.name}' for m in pending)} not "
                                      f"applied: {problem}")
        done = []
        for migration in pending:
            for statement in render(migration, self.settings):
                self.command(statement)
            self.insert_rows(
                "schema_migrations",
                [[migration.version, migration.name, migration.checksum]],
                ["version", "name", "checksum"],
            )
            done.append(f"{migration.version:04d}_{migration.name}")
        return done

    def applied_migrations(self) -> list[tuple[int, str, str]]:
        rows = self.query(
            f"SELECT version, name, checksum FROM {self.table('schema_migrations')} FINAL ORDER BY version"
        ).result_rows
        return [(int(v), str(n), str(c)) for v, n, c in rows]

    def row_count(self, name: str) -> int:
        """The rows of table ``name`` (one of ``TABLES``) as reads see them: with FINAL, so a re-written row counts
        once, except ``drift_checks`` (a plain MergeTree: every row is its own). Blocking; raises ``StoreError``."""
        final = "" if name == "drift_checks" else " FINAL"
        return int(self.command(f"SELECT count() FROM {self.table(name)}{final}"))

    # -- I/O --------------------------------------------------------------------------------------------------

    def ping(self) -> None:
        """Raise ``StoreError`` unless the store answers a trivial query."""
        self.command("SELECT 1")

    def readiness(self) -> tuple[bool, str]:
        """A ``/readyz`` check: (True, …) when the store answers, else (False, why). Never raises."""
        try:
            self.ping()
        except StoreError as exc:
            return False, f"store unreachable: {exc}"
        if self.guard is not None:
            ok, detail = self.guard.readiness()
            return ok, f"store answers; {detail}"
        return True, "store answers"

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None,
                settings: Mapping[str, Any] | None = None) -> Any:
        """Run a statement. On the embedded engine ``settings`` are applied to the connection and restored after
        the call (clickhouse-connect's chDB driver), which ``readonly`` would make impossible: it is refused here
        (use ``reader()``)."""
        if settings and "readonly" in settings and self.embedded:
            raise PermanentStoreError("readonly cannot be set per call on the embedded engine (it would stay in force "
                                      "for every later write of the process); use ClickHouseStore.reader()")
        with self._lock:
            try:
                return self._client.command(sql, parameters=parameters, settings=settings)
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at the boundary
                raise self._translate(exc, "ClickHouse command failed") from None

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None,
              settings: Mapping[str, Any] | None = None) -> Any:
        """Run a parameterized query (``{name:Type}`` placeholders); values never go into the SQL text."""
        with self._lock:
            try:
                return self._client.query(sql, parameters=parameters, settings=settings)
            except Exception as exc:  # noqa: BLE001
                raise self._translate(exc, "ClickHouse query failed") from None

    def _translate(self, exc: BaseException, context: str) -> StoreError:
        """``translate``, and a read that failed on a part's files named to the write guard."""
        if self.guard is not None and any(marker in str(exc) for marker in _READ_BROKEN):
            self.guard.note_read_error(str(exc))
        return translate(exc, context)

    def _guarded(self, table: str, insert: Any) -> None:
        """Run ``insert`` through the embedded engine's write guard (a server store: as it is)."""
        if self.guard is None or self.read_only:
            insert()
        else:
            self.guard.write(self.database, table, insert)

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows as dicts keyed by column name."""
        result = self.query(sql, parameters)
        names = result.column_names
        return [dict(zip(names, row, strict=True)) for row in result.result_rows]

    def query_columns(self, sql: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Sequence[Any]]:
        """Columns keyed by name (cheaper than rows for large numeric results)."""
        result = self.query(sql, parameters)
        return dict(zip(result.column_names, result.result_columns, strict=True)) if result.result_rows else {
            name: [] for name in result.column_names
        }

    def insert_columns(self, table: str, columns: Mapping[str, Sequence[Any]], *,
                       dedup_token: str | None = None) -> int:
        """Insert one columnar batch; return its row count.

        ``dedup_token`` makes a retried insert of the same batch a no-op (ClickHouse insert deduplication);
        derive it from what identifies the batch (topic/partition/offset range), never reuse it for other rows.
        """
        names = list(columns)
        data = [columns[n] for n in names]
        n_rows = len(data[0]) if data else 0
        if n_rows == 0:
            return 0
        settings = {"insert_deduplication_token": dedup_token} if dedup_token else None
        qualified = self.table(table)

        def insert() -> None:
            with self._lock:
                try:
                    self._client.insert(qualified, data, column_names=names, column_oriented=True, settings=settings)
                except Exception as exc:  # noqa: BLE001
                    raise translate(exc, f"insert into {table} failed") from None

        self._guarded(table, insert)
        return n_rows

    def insert_trace_rows(self, rows: TraceRows, *, dedup_token: str | None = None) -> int:
        """Insert a ``TraceRows`` batch into ``traces``; return its row count. Same token rule as ``insert_columns``.

        Embedded: ClickHouse reads the compact JSON lines from a file (``file()``; chDB does not feed inline data to
        ``input()``) and maps them with ``TRACE_JSON_SELECT``. A server gets the columnar insert of the same rows
        (its ``file()`` would read the server's disk). The settings go in the query's SETTINGS clause, the token
        as a query parameter: passed as client settings, chDB's driver would run eight statements per insert
        (read, set and restore each setting).
        """
        if not len(rows):
            return 0
        if not self.embedded:
            return self.insert_columns("traces", rows.columns(), dedup_token=dedup_token)
        settings = ", ".join(f"{name} = {int(value)}" for name, value in TRACE_JSON_SETTINGS.items())
        parameters: dict[str, Any] = {"structure": TRACE_JSON_STRUCTURE, "ingested_at_ms": rows.ingested_at_ms}
        if dedup_token:
            settings += ", insert_deduplication_token = {token:String}"
            parameters["token"] = dedup_token
        sql = (f"INSERT INTO {self.table('traces')} ({', '.join(TRACE_COLUMNS)}) {TRACE_JSON_SELECT} "
               f"FROM file({{path:String}}, '{TRACE_JSON_FORMAT}', {{structure:String}}) SETTINGS {settings}")

        def insert() -> None:
            with self._lock:  # the whole file's life: the spool directory is removed again when empty
                try:
                    with self._batch_file(rows.payload()) as path:
                        self._client.command(sql, parameters={**parameters, "path": path})
                except Exception as exc:  # noqa: BLE001
                    raise translate(exc, "insert into traces failed") from None

        self._guarded("traces", insert)
        return len(rows)

    def stored_leaks(self, rows: Sequence[LeakRow]) -> dict[str, int]:
        """The largest ``permission_leaks`` already stored for each of these traces (a trace not stored yet is
        absent), found through the table's sort key. Blocking; raises ``StoreError``."""
        if not rows:
            return {}
        keys = sorted({(r.retriever_name, r.variant, r.category, r.ts.astimezone(UTC).date(), r.trace_id)
                       for r in rows})
        found = self.query_rows(
            f"SELECT trace_id, max(permission_leaks) AS n FROM {self.table('traces')} "
            "WHERE (retriever_name, variant, category, toDate(ts), trace_id) IN "
            "{keys:Array(Tuple(String, String, String, Date, String))} GROUP BY trace_id", {"keys": keys})
        return {r["trace_id"]: int(r["n"]) for r in found}

    def _batch_file(self, payload: memoryview) -> contextlib.AbstractContextManager[str]:
        """The batch as a file the embedded engine's ``file()`` reads: on Linux an anonymous in-memory file
        (``memfd``: never on disk, gone with the process); elsewhere, or where memfd is refused, a private file in
        the spool directory."""
        if self.in_memory_batches:
            try:
                fd = os.memfd_create("ragmon-traces", os.MFD_CLOEXEC)
            except OSError as exc:  # e.g. a seccomp profile without memfd_create: the spool from now on
                self.in_memory_batches = False
                log.warning("in-memory batch files unavailable (%s); writing batches to %s", exc, self._spool)
            else:
                return _memfd_file(fd, payload)
        return self._spool_file(payload)

    @contextlib.contextmanager
    def _spool_file(self, payload: memoryview) -> Iterator[str]:
        """A private file in the spool directory, deleted after the insert (and at the next open after a crash)."""
        assert self._spool is not None
        self._spool.mkdir(mode=0o700, exist_ok=True)
        path = None
        try:
            with tempfile.NamedTemporaryFile(prefix=f"traces-{os.getpid()}-", suffix=".jsonl", dir=self._spool,
                                             delete=False) as f:
                path = f.name
                f.write(payload)
            yield path
        finally:
            if path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            with contextlib.suppress(OSError):
                self._spool.rmdir()

    def _sweep_spool(self) -> None:
        """Delete batch files left by a process killed during an insert (they hold trace text). Files of this
        process are kept: other stores of this process share the directory and may be inserting."""
        if self._spool is None or not self._spool.is_dir():
            return
        mine = f"traces-{os.getpid()}-"
        for leftover in self._spool.glob("traces-*.jsonl"):
            if not leftover.name.startswith(mine):
                with contextlib.suppress(OSError):
                    leftover.unlink()

    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]], column_names: Sequence[str],
                    *, dedup_token: str | None = None) -> int:
        """Insert row-oriented data (small tables: labels, queue items, check results)."""
        if not rows:
            return 0
        columns = {name: [row[i] for row in rows] for i, name in enumerate(column_names)}
        return self.insert_columns(table, columns, dedup_token=dedup_token)

    def close(self) -> None:
        """Close a server client. The embedded engine lives as long as the process (chDB's rule)."""
        if not self.embedded:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001,S110 - closing is best effort
                pass


@contextlib.contextmanager
def _memfd_file(fd: int, payload: memoryview) -> Iterator[str]:
    """``payload`` written to the in-memory file ``fd``, as a path this process can open; ``fd`` closed after."""
    try:
        view = payload
        while view:
            view = view[os.write(fd, view):]
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)
