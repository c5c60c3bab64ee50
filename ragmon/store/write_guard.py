"""``WriteGuard``: the embedded engine writes only with room on its disk, every write is checked, and what a full
disk broke anyway is repaired (docs/operations.md, "The disk").

The embedded engine ignores failed file writes (``ragmon.store.integrity``), so on a full disk it acknowledges
inserts and commits merges whose parts are incomplete. One guard per engine (per data directory), shared by every
``ClickHouseStore`` of the process on it, as the engine is:

- ``write(database, table, insert)``: under the guard's lock, refuse while the disk is below its headroom
  (``RetryableStoreError`` NOT_ENOUGH_SPACE: ingest and score back off), run the insert, and when the engine ignored
  a failed write meanwhile, look for incomplete parts; if the table has an insert's part among them, detach it and
  run the insert again (its deduplication token stores it again when the part was this insert's — detaching drops
  the token — and does nothing when it was not), up to three times, then ``RetryableStoreError``. A part that cannot
  be detached yet (detaching needs a little space too) fails the insert as retryable, and inserts into that table
  are refused until it is detached. An insert is acknowledged only once its part is known whole.
- ``tick()``, every second on a thread of its own: below the headroom ``SYSTEM STOP MERGES`` (which also cancels the
  merges under way, before they reach the last free byte), back above it ``START MERGES``; then a look for incomplete
  parts (a merge that was under way when the disk filled), repaired from the parts they replaced.
- ``startup(before)``: the broken parts the engine detached while it opened, logged loudly with their fate; where an
  insert's part was lost, the table's deduplication log is cleared so that re-sent batches are stored again (a batch
  stored twice is kept once under FINAL).
- ``readiness()``, ``attach(telemetry)``: /readyz and the ``ragmon_store_*`` disk and part metrics.

What is not guaranteed: another process can take the last free bytes between a reading and a write; the guard then
catches the incomplete part afterwards, and restores it from the parts it replaced only while those are on disk
(``old_parts_lifetime``). Must not run on a server store (a server throws on a failed write).
"""

from __future__ import annotations

import atexit
import collections
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragmon.errors import RetryableStoreError, StoreError
from ragmon.store.disk import MIB, DiskState, FreeSpaceGuard
from ragmon.store.integrity import PartIntegrity
from ragmon.store.metrics import StoreMetrics
from ragmon.store.parts import BrokenPart, DetachedBroken, qualified
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.store.guard")
T = TypeVar("T")

#: how often the thread reads the disk and looks for incomplete parts
TICK_SECONDS = 1.0
#: times an insert is written again after its part was found incomplete, before it fails as retryable
INSERT_ATTEMPTS = 3
_DEDUP_WINDOW = re.compile(r"non_replicated_deduplication_window\s*=\s*(\d+)")

_GUARDS: dict[str, WriteGuard] = {}
_GUARDS_LOCK = threading.Lock()


def guard_for(data_dir: Path, store: Any, min_free_bytes: int, *, before: set[str] | None = None) -> WriteGuard:
    """The guard of the engine on ``data_dir``: made (its start-up report logged, its thread started) by the first
    store to open it, shared by the others."""
    key = str(data_dir.resolve())
    with _GUARDS_LOCK:
        guard = _GUARDS.get(key)
        if guard is None:
            guard = WriteGuard(store, FreeSpaceGuard(data_dir, min_free_bytes))
            guard.startup(before or set())
            guard.start()
            _GUARDS[key] = guard
        return guard


def existing_guard(data_dir: Path) -> WriteGuard | None:
    with _GUARDS_LOCK:
        return _GUARDS.get(str(data_dir.resolve()))


class WriteGuard:
    """See the module docstring. Thread-safe."""

    def __init__(self, store: Any, disk: FreeSpaceGuard):
        self.store, self.disk = store, disk
        self.integrity = PartIntegrity(store)
        #: held around every insert and its check, and around each look: a look never takes an insert's failure
        #: away from the check that must see it
        self.lock = threading.RLock()
        self.state: DiskState = disk.read()
        self._merges_stopped = False
        self._metrics: StoreMetrics | None = None
        self._read_errors: collections.deque[str] = collections.deque(maxlen=100)
        #: broken parts still active (could not be detached yet), by (database, table, name): reads of them fail
        self.unrepaired: dict[tuple[str, str, str], BrokenPart] = {}
        #: incomplete parts of inserts not acknowledged (their writer writes them again): not counted as lost
        self._unacknowledged: set[tuple[str, str, str]] = set()
        #: what the start-up report found, for the metrics
        self.detached: list[DetachedBroken] = []
        self._failures_reported = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.integrity.baseline()
        self._failures_reported = self.integrity.write_failures()

    # -- writes ----------------------------------------------------------------------------------------------

    def admit(self) -> DiskState:
        """Raise ``RetryableStoreError`` (NOT_ENOUGH_SPACE, what to do) while the disk is below its headroom."""
        self.state = self.disk.read()
        self._disk_changed()
        if self.state.low:
            raise RetryableStoreError(self.state.describe())
        return self.state

    def write(self, database: str, table: str, insert: Callable[[], T]) -> T:
        """Run ``insert`` (one insert into ``database.table`` with a deduplication token, or none) when the disk has
        room, and return only once its part is whole; see the module docstring."""
        target = (database, table)
        with self.lock:
            self.admit()
            self._refuse_while_unrepaired(target)
            for attempt in range(1, INSERT_ATTEMPTS + 1):
                result = insert()
                if not self.integrity.rose():
                    return result
                mine = [b for b in self._look(inserting=target)
                        if (b.database, b.table) == target and b.single_block and not b.restored_from]
                if not mine:
                    return result
                if any(not b.detached_as for b in mine):  # still active: the same token would be taken for it
                    raise RetryableStoreError(
                        f"insert into {database}.{table}: its part was written incompletely (the disk was full) and "
                        f"cannot be detached yet ({'; '.join(b.error for b in mine if b.error)}); the insert is not "
                        "acknowledged: try it again later")
                log.warning("an insert into %s.%s was written incompletely (the disk was full); writing it again "
                            "(attempt %d of %d)", database, table, attempt + 1, INSERT_ATTEMPTS)
                self.admit()
            raise RetryableStoreError(f"insert into {database}.{table}: the embedded engine wrote it incompletely "
                                      f"{INSERT_ATTEMPTS} times (is the disk full? {self.state.describe()})")

    def _refuse_while_unrepaired(self, target: tuple[str, str]) -> None:
        """An insert's incomplete part still active in ``target``: try detaching it again; while it stays, refuse
        (``RetryableStoreError``): an insert with its token would be taken for a duplicate of it."""
        if not any((d, t) == target and b.single_block for (d, t, _), b in self.unrepaired.items()):
            return
        self._look(full=True)
        left = [f"{d}.{t}/{n}" for (d, t, n), b in self.unrepaired.items() if (d, t) == target and b.single_block]
        if left:
            raise RetryableStoreError(f"insert into {target[0]}.{target[1]} refused: an incomplete part is still "
                                      f"active ({', '.join(left)}); detaching it is retried every second")

    def startup_problem(self) -> str | None:
        """Why schema changes must not run now (the disk is below its headroom: the engine would ignore failed
        writes of table metadata), or None."""
        self.state = self.disk.read()
        return self.state.describe() if self.state.low else None

    def note_read_error(self, text: str) -> None:
        """A query failed reading a part (CANNOT_READ_ALL_DATA, an empty marks file): the next look checks it.
        Cheap and lock-free: called from the failing query's own path."""
        self._read_errors.append(text)

    # -- the thread ------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ragmon-store-guard", daemon=True)
        self._thread.start()
        atexit.register(self.stop)  # before the engine shuts down at exit (registered earlier, run later)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the guard must outlive any one failure (the engine's own included)
                log.exception("store guard: a check failed; trying again in %.0fs", TICK_SECONDS)

    def tick(self) -> None:
        """Read the disk (stop or start merges), then look for incomplete parts."""
        with self.lock:
            self.state = self.disk.read()
            self._disk_changed()
            self._look()

    def _disk_changed(self) -> None:
        low = self.state.low
        if low != self._merges_stopped:
            try:
                self.store.command("SYSTEM STOP MERGES" if low else "SYSTEM START MERGES")
            except StoreError as exc:
                log.error("store guard: %s merges failed: %s", "stopping" if low else "starting", exc)
            else:
                self._merges_stopped = low
                (log.error if low else log.warning)(
                    "%s", self.state.describe() if low else f"the store's disk has room again "
                    f"({self.state.describe()}): writes and merges resume")
        t = self._metrics
        if t is not None and not self.state.error:
            t.store_disk_free.set(self.state.free_bytes)
            t.store_writes_paused.set(1 if low else 0)

    def _look(self, inserting: tuple[str, str] | None = None, *, full: bool = False) -> list[BrokenPart]:
        """One look (under ``lock``). ``inserting``: the (database, table) of an insert not acknowledged yet, whose
        incomplete part is then the insert's to write again, not a loss."""
        while self._read_errors:
            self.integrity.suspect_error(self._read_errors.popleft())
        found = self.integrity.look(full=full)
        failures = self.integrity.write_failures()
        if self._metrics is not None and failures > self._failures_reported:
            self._metrics.store_ignored_write_errors.inc(failures - self._failures_reported)
        self._failures_reported = max(failures, self._failures_reported)
        for broken in found:
            key = (broken.database, broken.table, broken.name)
            if inserting == (broken.database, broken.table) and broken.single_block and not broken.restored_from:
                self._unacknowledged.add(key)
            if not broken.detached_as:
                if key not in self.unrepaired:
                    log.error("%s", broken.describe())
                    self._count(broken.table, "unrepaired")
                self.unrepaired[key] = broken
                continue
            self.unrepaired.pop(key, None)
            if key in self._unacknowledged:
                self._unacknowledged.discard(key)
                log.warning("%s; the insert was not acknowledged and is written again", broken.describe())
                self._count(broken.table, "retried")
            elif broken.rows_missing:
                log.error("%s: ACKNOWLEDGED ROWS LOST; re-send them (docs/operations.md, 'The disk')",
                          broken.describe())
                self._count(broken.table, "lost", broken.rows_missing)
            else:
                log.warning("%s; nothing is missing", broken.describe())
                self._count(broken.table, "restored")
        if found:
            self._publish_detached()
        return found

    def _count(self, table: str, outcome: str, rows_lost: int = 0) -> None:
        if self._metrics is not None:
            self._metrics.store_broken_parts.labels(table, outcome).inc()
            if rows_lost:
                self._metrics.store_rows_lost.labels(table).inc(rows_lost)

    # -- start-up ----------------------------------------------------------------------------------------------

    def startup(self, before: set[str]) -> list[DetachedBroken]:
        """Report the broken parts in ``detached/`` (loudly for those the engine detached while it opened); clear
        the deduplication log of a table that lost an insert's part then, so its re-sent rows are stored again."""
        try:
            self.detached = self.integrity.detached_report(before)
            again = [(p, self.integrity.attach_kept(p)) for p in self.detached
                     if p.new and not p.single_block and not p.rows_in_its_place]
            for part, names in again:
                if names:
                    log.warning("table %s.%s: the copies of the %d part(s) that %s had replaced, kept in detached/ by "
                                "the write guard before the process ended, are attached again (%s)", part.database,
                                part.table, len(names), part.name, ", ".join(names))
            if any(names for _, names in again):
                self.detached = self.integrity.detached_report(before)
        except StoreError as exc:
            log.error("cannot list the store's detached parts: %s", exc)
            return []
        lost_inserts = set()
        for part in self.detached:
            if part.new:
                log.error("the embedded engine found a broken part at start-up: %s", part.describe())
                if part.single_block and not part.rows_in_its_place:
                    lost_inserts.add((part.database, part.table))
        old = [p for p in self.detached if not p.new]
        if old:
            log.warning("%d broken part(s) from earlier starts are kept in detached/ (%s); review and drop them "
                        "(docs/operations.md, 'The disk')", len(old),
                        ", ".join(f"{p.database}.{p.table}/{p.name}" for p in old))
        for database, table in sorted(lost_inserts):
            self._reset_deduplication(database, table)
        return self.detached

    def _reset_deduplication(self, database: str, table: str) -> None:
        """Clear the table's insert deduplication log: a batch whose part was lost is still named in it, and would
        be dropped as a duplicate when it is sent again."""
        try:
            engine = self.store.query("SELECT engine_full FROM system.tables WHERE database = {db:String} AND "
                                      "name = {t:String}", {"db": database, "t": table}).result_rows
            match = _DEDUP_WINDOW.search(str(engine[0][0])) if engine else None
            if match is None or int(match.group(1)) == 0:
                return
            name = qualified(database, table)
            self.store.command(f"ALTER TABLE {name} MODIFY SETTING non_replicated_deduplication_window = 0")
            self.store.command(f"ALTER TABLE {name} MODIFY SETTING non_replicated_deduplication_window = "
                               f"{int(match.group(1))}")
        except StoreError as exc:
            log.error("table %s.%s: clearing its deduplication log failed (%s): a re-sent batch whose part was lost "
                      "may be taken for a duplicate", database, table, exc)
            return
        log.warning("table %s.%s: its insert deduplication log was cleared, so that batches sent again after the "
                    "lost part are stored (a batch stored twice is read once with FINAL)", database, table)

    # -- reporting ---------------------------------------------------------------------------------------------

    def attach(self, telemetry: Telemetry) -> None:
        """Register the ``ragmon_store_*`` disk and part metrics (``StoreMetrics``) on ``telemetry`` and publish them
        from now on."""
        with self.lock:
            self._metrics = telemetry.use(StoreMetrics)
            self._disk_changed()
            self._publish_detached()

    def _publish_detached(self) -> None:
        if self._metrics is None:
            return
        try:
            report = self.integrity.detached_report(set())
        except StoreError:
            return
        counts = collections.Counter(p.table for p in report)
        for table in set(counts) | {p.table for p in self.detached}:
            self._metrics.store_detached_broken_parts.labels(table).set(counts.get(table, 0))

    def readiness(self) -> tuple[bool, str]:
        """(False, why and what to do) while the disk is below its headroom or an incomplete part is still active."""
        if self.unrepaired:
            names = ", ".join(f"{d}.{t}/{n}" for d, t, n in sorted(self.unrepaired))
            return False, (f"incomplete part(s) still active, reads of their tables fail: {names}; detaching is "
                           "retried every second (docs/operations.md, 'The disk')")
        if self.state.low:
            return False, self.state.describe()
        free = f"; disk: {self.state.free_bytes / MIB:,.0f} MiB free" if not self.state.error else ""
        return True, f"writes admitted{free}"
