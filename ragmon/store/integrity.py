"""Parts the embedded engine wrote incompletely: finding them, and putting back the data they replaced.

Why this exists: the embedded engine ignores the errors of its file writes. Where ClickHouse throws
``CANNOT_WRITE_TO_FILE_DESCRIPTOR``, chDB (4.4, engine 26.9; observed, tests/integration/test_store_disk_full.py)
goes on; the only trace left is the profile event ``WriteBufferFromFileDescriptorWriteFailed``. On a full disk (ENOSPC)
an insert or a merge therefore goes on, renames a part of empty or short files into place and reports success: reads of
the table fail (``CANNOT_READ_ALL_DATA``, "Empty marks file") until the process ends, and the next start detaches the
part as ``broken-on-start_…``, its rows gone unless the parts a merge replaced are still on disk (ClickHouse then
activates them again; ``old_parts_lifetime``, migration 0020, keeps them two minutes) or copies of them were kept.

``PartIntegrity`` watches that counter. When it rises, the parts committed since the parts were last read, and the
merges under way (whose result commits later), are suspects; so is a part named by a failed read. Each suspect is
checked with ``CHECK TABLE … PART`` once active, and the three small files CHECK does not read by their format
(``ragmon.store.part_files``). For a part that fails, hard-linked copies of the parts it replaced are
kept in ``detached/`` at once (remembered until used: detaching may have to wait for room, while the engine removes
replaced parts after ``old_parts_lifetime``); then it is detached (kept as ``broken_<name>``, which ``ATTACH PARTITION``
never attaches), and the copies are attached. ``attach_kept`` attaches, at start-up, the copies a process kept before it
ended. A part
that replaced nothing is an insert's: the rows are missing, and the insert still under way writes them again
(``ragmon.store.write_guard``); found later, they are counted as lost. ``detached_report`` says, at start-up, which
broken parts the engine detached while it opened and whether what they had replaced came back.

Embedded engine only (a server throws on a failed write). Not thread-safe: the owner calls it under one lock per
engine, the lock every insert of the process holds from before its write until its check is done. Never raises for
what it finds; SQL failures propagate as ``StoreError``.
"""

from __future__ import annotations

import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmon.errors import StoreError
from ragmon.store.part_files import unchecked_files_problem
from ragmon.store.parts import (
    BROKEN,
    BROKEN_ON_START,
    BrokenPart,
    DetachedBroken,
    Part,
    block_range,
    link_copy,
    linked,
    part_name,
    part_rows,
    qualified,
    rename_free,
    replaced,
)

log = logging.getLogger("ragmon.store.integrity")

#: the engine's count of file writes that failed and were ignored (chDB); ClickHouse itself throws instead
FAILED_WRITES_EVENT = "WriteBufferFromFileDescriptorWriteFailed"
#: the engine's own databases, never watched
_USER_DATABASES = "database NOT IN ('system', 'information_schema', 'INFORMATION_SCHEMA')"
#: (database, table, part name)
Key = tuple[str, str, str]
#: a part's directory in a read error: …/store/abc/<uuid>/<part>/…
_PART_DIR = re.compile(r"(/[^\s'\"]*/store/[0-9a-f]{3}/[0-9a-f-]{36}/)([A-Za-z0-9_-]+)/")
#: how many looks a suspect whose CHECK itself failed stays a suspect
_CHECK_ATTEMPTS = 3
#: a quiet look reads the parts every this many looks (so that the parts new at a rise are few)
REFRESH_LOOKS = 30


@dataclass
class PartIntegrity:
    """See the module docstring. ``store`` is a ``ClickHouseStore`` of the engine (its ``query``/``command``); every
    database of the engine but the system ones is watched."""

    store: Any
    #: the failed-writes count at the last look
    _counter: int = 0
    #: active parts at the last look, as (database, table, name)
    _seen: set[Key] = field(default_factory=set)
    #: parts (or merge results) to check once active, with the CHECK attempts left
    _suspects: dict[Key, int] = field(default_factory=dict)
    #: quiet looks since the parts were last read
    _looks: int = 0
    #: detached copies of replaced parts whose ATTACH failed: (database, table, name in detached/, rows), retried
    #: at each look
    pending: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: copies in detached/ of the parts an incomplete part replaced, made before it is detached: (name, rows) by
    #: the incomplete part
    _kept: dict[Key, tuple[tuple[str, int], ...]] = field(default_factory=dict)

    def baseline(self) -> None:
        """The first look: what exists now is not suspect (a part broken before the engine opened was detached by
        it, ``detached_report``)."""
        before = self.write_failures()
        self._seen = {key for key, p in self.parts().items() if p.active}
        self._counter = before
        if self.write_failures() > before:  # a write failed while the parts were read: check them all
            self._suspects = dict.fromkeys(self._seen, _CHECK_ATTEMPTS)

    def write_failures(self) -> int:
        """How many file writes the engine has ignored since it started."""
        rows = self.store.query("SELECT sum(value) FROM system.events "
                                f"WHERE event = '{FAILED_WRITES_EVENT}'").result_rows
        return int(rows[0][0] or 0) if rows else 0

    def rose(self) -> bool:
        """Whether a write failed since the last look (one small query)."""
        return self.write_failures() > self._counter

    def suspect_error(self, text: str) -> bool:
        """A query failed naming a part's directory (``CANNOT_READ_ALL_DATA``, "Empty marks file"): check that part
        at the next look. Returns whether a part of this database was named."""
        match = _PART_DIR.search(text)
        if match is None:
            return False
        prefix, name = match.group(1), match.group(2)
        for key, part in self.parts().items():
            if part.name == name and part.path.startswith(prefix):
                self._suspects.setdefault(key, _CHECK_ATTEMPTS)
                return True
        return False

    def look(self, *, full: bool = False) -> list[BrokenPart]:
        """Collect suspects when the counter rose, check those that are active, and repair those that fail. Returns
        what was found broken; retries attaching what an earlier look could not. A quiet look (the counter as it
        was, no suspect, nothing to attach) reads the counter only, and the parts every ``REFRESH_LOOKS`` looks or
        when ``full``."""
        before = self.write_failures()
        self._looks += 1
        if not (full or before > self._counter or self._suspects or self.pending or self._looks >= REFRESH_LOOKS):
            return []
        self._looks = 0
        # counter, merges, parts, counter. A part whose failed write the first reading counts has either committed
        # (it is among the parts, and was not at the last look: that one's second reading would have counted the
        # failure) or is a merge still under way; one whose failure only the second reading counts is caught now or,
        # since the counter kept is the first reading, by the next look.
        merges = self._merges()
        parts = self.parts()
        after = self.write_failures()
        active = {key for key, p in parts.items() if p.active}
        if after > self._counter:
            for key in (active - self._seen) | merges:
                self._suspects.setdefault(key, _CHECK_ATTEMPTS)
        self._counter, self._seen = max(before, self._counter), active
        self._attach_pending()
        found = []
        for key in sorted(self._suspects):
            if key not in active:
                if key not in merges:  # merged away or cancelled: nothing of it is left to read
                    del self._suspects[key]
                continue
            try:
                problem = self.problem(parts[key])
            except StoreError as exc:
                self._suspects[key] -= 1
                if self._suspects[key] <= 0:
                    del self._suspects[key]
                    log.error("cannot check part %s of %s.%s (%s); giving up on it", key[2], key[0], key[1], exc)
                continue
            if problem is None:
                del self._suspects[key]
                continue
            broken = self._repair(parts[key], problem, parts)
            if broken.detached_as:
                del self._suspects[key]
            found.append(broken)
        return found

    @property
    def suspects(self) -> int:
        return len(self._suspects)

    # -- reading the engine's state --------------------------------------------------------------------------

    def parts(self) -> dict[Key, Part]:
        """Every part of the user databases, active or not, by (database, table, name), from ``system.parts``."""
        rows = self.store.query(
            "SELECT database, table, name, active, _state, partition_id, min_block_number, max_block_number, level, "
            f"rows, path FROM system.parts WHERE {_USER_DATABASES}").result_rows
        return {(str(r[0]), str(r[1]), str(r[2])): Part(str(r[0]), str(r[1]), str(r[2]), bool(r[3]), str(r[4]),
                                                        str(r[5]), int(r[6]), int(r[7]), int(r[8]), int(r[9]),
                                                        str(r[10]))
                for r in rows}

    def _merges(self) -> set[Key]:
        rows = self.store.query(f"SELECT database, table, result_part_name FROM system.merges WHERE {_USER_DATABASES}"
                                ).result_rows
        return {(str(d), str(t), str(n)) for d, t, n in rows}

    def problem(self, part: Part) -> str | None:
        """What is wrong with an active part, or None: ``CHECK TABLE … PART``, then the files CHECK does not read
        (``ragmon.store.part_files``). ``StoreError`` when CHECK itself fails."""
        return (self._check(part.database, part.table, part.name)
                or unchecked_files_problem(Path(part.path)))

    def _check(self, database: str, table: str, name: str) -> str | None:
        """CHECK's complaint about one active part, or None when it passes."""
        rows = self.store.query(f"CHECK TABLE {qualified(database, table)} PART '{part_name(name)}' "
                                "SETTINGS check_query_single_value_result = 0").result_rows
        problems = [str(r[2]) for r in rows if str(r[1]) not in ("1", "True", "true")]
        return "; ".join(p.strip() or "check failed" for p in problems)[:500] if problems else None

    # -- repairing -------------------------------------------------------------------------------------------

    def _repair(self, part: Part, problem: str, parts: dict[Key, Part]) -> BrokenPart:
        """Keep copies of what ``part`` replaced, detach it, attach the copies. The copies are made first, and
        remembered: while the part cannot be detached (a full disk), the engine still removes the replaced parts
        after ``old_parts_lifetime``, and the copies are then all that is left of their rows."""
        key = (part.database, part.table, part.name)
        detached = Path(part.path.rstrip("/")).parent / "detached"
        kept, errors = self._keep(key, replaced(part, parts.values()), detached)
        table = qualified(part.database, part.table)
        try:
            self.store.command(f"ALTER TABLE {table} DETACH PART '{part_name(part.name)}'")
        except StoreError as exc:  # e.g. no room to detach, or being merged right now: the next look tries again
            copies = f"; copies of the {len(kept)} part(s) it replaced are kept in detached/" if kept else ""
            return BrokenPart(part.database, part.table, part.name, part.rows, problem,
                              part.min_block == part.max_block, error=f"detaching failed: {exc}{copies}")
        del self._kept[key]
        kept_as = rename_free(detached, part.name, f"{BROKEN}_{part.name}")
        restored, restored_rows, waiting_rows = [], 0, 0
        for name, rows in kept:
            if self._attach(part.database, part.table, name):
                restored.append(name)
                restored_rows += rows
            else:
                self.pending.append((part.database, part.table, name, rows))
                waiting_rows += rows
                errors.append(f"attaching {name} failed (retried at each look)")
        missing = max(0, part.rows - restored_rows - waiting_rows)
        return BrokenPart(part.database, part.table, part.name, part.rows, problem, part.min_block == part.max_block,
                          kept_as, tuple(restored), restored_rows, missing, "; ".join(errors))

    def _keep(self, key: Key, replaced: list[Part], detached: Path) -> tuple[list[tuple[str, int]], list[str]]:
        """Hard-linked copies in ``detached/`` of the ``replaced`` parts not copied yet (hard links take no data
        blocks, so this works on a full disk where the file system allows a directory); returns every copy kept for
        ``key`` as (name, rows), and what failed."""
        kept, errors = dict(self._kept.get(key, ())), []
        for source in replaced:
            if source.name in kept:
                continue
            target = detached / source.name
            try:
                link_copy(Path(source.path), target)
            except FileExistsError:  # made by an earlier look or process: kept if it is this part's files
                if not linked(Path(source.path), target):
                    errors.append(f"copying {source.name} failed: detached/{source.name} exists and holds other files")
                    continue
            except OSError as exc:  # removed meanwhile, or no room for the directory
                shutil.rmtree(target, ignore_errors=True)
                errors.append(f"copying {source.name} failed: {exc.strerror or exc}")
                continue
            kept[source.name] = source.rows
        self._kept[key] = tuple(kept.items())
        return list(kept.items()), errors

    def _attach(self, database: str, table: str, name: str) -> bool:
        try:
            self.store.command(f"ALTER TABLE {qualified(database, table)} ATTACH PART '{part_name(name)}'")
        except StoreError as exc:
            log.warning("attaching %s to %s.%s failed: %s", name, database, table, exc)
            return False
        return True

    def _attach_pending(self) -> None:
        waiting, self.pending = self.pending, []
        for database, table, name, rows in waiting:
            if self._attach(database, table, name):
                log.warning("table %s.%s: part %s (%d rows), replaced by an incomplete part, attached again",
                            database, table, name, rows)
            else:
                self.pending.append((database, table, name, rows))

    # -- start-up ------------------------------------------------------------------------------------------------

    def detached_report(self, before: set[str]) -> list[DetachedBroken]:
        """The broken parts in this database's ``detached/`` directories; ``before``: their paths as they were
        before the engine opened (``broken_on_disk``), to tell the ones it detached while opening."""
        rows = self.store.query(
            "SELECT database, table, name, reason, path, partition_id, min_block_number, max_block_number FROM "
            f"system.detached_parts WHERE {_USER_DATABASES} AND reason IN ({{a:String}}, {{b:String}}) ORDER BY "
            "database, table, name", {"a": BROKEN_ON_START, "b": BROKEN}).result_rows
        if not rows:
            return []
        active = [p for p in self.parts().values() if p.active]
        report = []
        for database, table, name, reason, path, partition, low, high in rows:
            database, table, name, path = str(database), str(table), str(name), str(path)
            low, high = block_range(name, low, high)
            inside = [p for p in active
                      if (p.database, p.table) == (database, table) and p.partition_id == str(partition)
                      and low <= p.min_block and p.max_block <= high] if low is not None else []
            report.append(DetachedBroken(database, table, name, str(reason), part_rows(path),
                                         path.rstrip("/") not in before, low is not None and low == high,
                                         sum(p.rows for p in inside)))
        return report

    def attach_kept(self, broken: DetachedBroken) -> list[str]:
        """Attach the copies a write guard kept in ``detached/`` (plain part names, ``_keep``) of the parts that
        ``broken``, a merge's part the engine detached at this start with nothing active in its place, had replaced:
        the process ended before it could detach the part, and the engine removed the replaced parts meanwhile.
        Returns the names attached. A part detached by hand inside the same block range would be attached too; none
        is, unless someone detached a part and the table merged across its range afterwards."""
        rows = self.store.query(
            "SELECT name, reason, partition_id, min_block_number, max_block_number FROM system.detached_parts WHERE "
            "database = {d:String} AND table = {t:String}", {"d": broken.database, "t": broken.table}).result_rows
        mine = next((r for r in rows if str(r[0]) == broken.name), None)
        if mine is None:
            return []
        low, high = block_range(broken.name, mine[3], mine[4])
        if low is None or high is None:
            return []
        attached = []
        for name, reason, partition, first, last in rows:
            name = str(name)
            inside = block_range(name, first, last)
            if (reason or name == broken.name or str(partition) != str(mine[2]) or inside[0] is None
                    or inside[1] is None or not low <= inside[0] <= inside[1] <= high or inside == (low, high)):
                continue
            if self._attach(broken.database, broken.table, name):
                attached.append(name)
        return attached


