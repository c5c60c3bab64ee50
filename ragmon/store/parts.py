"""Parts of the embedded engine's tables as ``PartIntegrity`` sees them: a part's row of ``system.parts``, the
reports of broken ones, their names and block ranges, and hard-linked copies of their directories. Pure data and
file-system helpers: no SQL is run here (``qualified`` and ``part_name`` check the names that go into SQL text)."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmon.errors import StoreError

#: ClickHouse's prefix for a part it detached itself as unreadable at start-up
BROKEN_ON_START = "broken-on-start"
#: the prefix ragmon gives a part it detached as incomplete (one of ClickHouse's own detach reasons)
BROKEN = "broken"
_PART_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: partition_min_max_level[_mutation]
_BLOCKS = re.compile(r"^(?P<partition>.+)_(?P<min>\d+)_(?P<max>\d+)_(?P<level>\d+)(?:_\d+)?$")


@dataclass(frozen=True, slots=True)
class Part:
    database: str
    table: str
    name: str
    active: bool
    state: str
    partition_id: str
    min_block: int
    max_block: int
    level: int
    rows: int
    path: str


@dataclass(frozen=True)
class BrokenPart:
    """A part that failed ``CHECK TABLE`` while active, and what was done about it."""

    database: str
    table: str
    name: str
    rows: int
    #: what CHECK said
    problem: str
    #: one block: an insert's part (or a one-part merge), not a merge of several
    single_block: bool = False
    #: its name in ``detached/`` ('' while it could not be detached: it is still active and reads fail)
    detached_as: str = ""
    #: the parts it had replaced, attached again (under new names)
    restored_from: tuple[str, ...] = ()
    rows_restored: int = 0
    #: rows no copy was found for (an insert's part: all of them; the writer still holding it writes them again)
    rows_missing: int = 0
    error: str = ""

    @property
    def repaired(self) -> bool:
        return bool(self.detached_as) and not self.error

    def describe(self) -> str:
        what = (f"table {self.database}.{self.table}: part {self.name} ({self.rows:,} rows) was written incompletely "
                f"({self.problem})")
        if not self.detached_as:
            return f"{what}; it could not be detached yet ({self.error}): reads of {self.table} fail until it is"
        done = f"{what}; detached as detached/{self.detached_as}"
        if self.restored_from:
            done += (f"; the {len(self.restored_from)} part(s) it had replaced were attached again "
                     f"({self.rows_restored:,} rows: {', '.join(self.restored_from)})")
        if self.rows_missing:
            done += f"; {self.rows_missing:,} rows had no other copy"
        return done + (f"; {self.error}" if self.error else "")


@dataclass(frozen=True)
class DetachedBroken:
    """A broken part found in ``detached/`` at start-up (``detached_report``)."""

    database: str
    table: str
    #: its directory name in detached/ (with the reason's prefix)
    name: str
    reason: str
    #: rows it held, from its count.txt; None when that file is unreadable (as it is in a part written on a full disk)
    rows: int | None
    #: the engine detached it while this process opened the store
    new: bool
    #: one block (an insert's part) rather than a merge of several
    single_block: bool
    #: rows of active parts inside its block range: what ClickHouse activated again in its place
    rows_in_its_place: int

    def describe(self) -> str:
        rows = "rows unknown (its count.txt is unreadable)" if self.rows is None else f"{self.rows:,} rows"
        if self.rows_in_its_place:
            fate = (f"the parts it had replaced are active again ({self.rows_in_its_place:,} rows): nothing of it is "
                    "missing unless those rows are fewer")
        elif self.single_block:
            fate = ("an insert's part with no other copy: its rows are missing unless they are sent again (ingest "
                    "re-reads what it had not committed; docs/operations.md, 'The disk')")
        else:
            fate = "nothing it had replaced is left: its rows are missing"
        return f"table {self.database}.{self.table}: detached/{self.name} ({self.reason}; {rows}): {fate}"


def broken_on_disk(data_dir: Path) -> set[str]:
    """Paths of the broken parts in every ``detached/`` directory under an embedded engine's data directory, read
    from the file system (before the engine opens, so that ``detached_report`` can tell the ones it adds)."""
    found = set()
    for pattern in (f"store/*/*/detached/{BROKEN_ON_START}_*", f"store/*/*/detached/{BROKEN}_*"):
        found.update(str(Path(p)) for p in glob.glob(str(data_dir / pattern)))
    return found


def replaced(part: Part, parts: Any) -> list[Part]:
    """The parts ``part`` replaced that are still on disk: inactive, of its partition, inside its block range, of a
    lower level, with rows; the largest of them (one covering others is taken instead of them)."""
    inside = [p for p in parts
              if (p.database, p.table) == (part.database, part.table) and not p.active and p.state == "Outdated"
              and p.partition_id == part.partition_id
              and part.min_block <= p.min_block and p.max_block <= part.max_block
              and p.level < part.level and p.rows > 0 and os.path.isdir(p.path)]
    return sorted((p for p in inside if not any(q is not p and q.min_block <= p.min_block and p.max_block <= q.max_block
                                                 and q.level > p.level for q in inside)), key=lambda p: p.min_block)


def link_copy(source: Path, target: Path) -> None:
    """``source``'s files hard-linked into a new directory ``target`` (a part's files are never rewritten in place)."""
    target.mkdir()
    for entry in os.scandir(source):
        if entry.is_dir(follow_symlinks=False):  # a projection
            link_copy(Path(entry.path), target / entry.name)
        else:
            os.link(entry.path, target / entry.name)


def linked(source: Path, target: Path) -> bool:
    """Whether ``target`` holds hard links of every file of ``source`` (a copy ``_link_copy`` made)."""
    try:
        return all(entry.is_dir(follow_symlinks=False) and linked(Path(entry.path), target / entry.name)
                   or os.stat(target / entry.name).st_ino == entry.inode() for entry in os.scandir(source))
    except OSError:
        return False


def rename_free(directory: Path, name: str, wanted: str) -> str:
    """Rename ``directory/name`` to ``wanted`` (``wanted_tryN`` if taken); returns the name it has. A rename that
    fails leaves the name as it is."""
    for n in range(100):
        target = wanted if n == 0 else f"{wanted}_try{n}"
        if not (directory / target).exists():
            try:
                os.rename(directory / name, directory / target)
            except OSError:
                return name
            return target
    return name


def qualified(database: str, table: str) -> str:
    """``database.table``, both checked to be plain identifiers (they go into SQL text)."""
    for name in (database, table):
        if not _IDENTIFIER.match(name):
            raise StoreError(f"unexpected identifier {name!r}")
    return f"{database}.{table}"


def part_name(name: str) -> str:
    if not _PART_NAME.match(name):
        raise StoreError(f"unexpected part name {name!r}")
    return name


def block_range(name: str, low: Any, high: Any) -> tuple[int | None, int | None]:
    if low is not None and high is not None and (int(low) or int(high)):
        return int(low), int(high)
    bare = name.split("_", 1)[1] if "_" in name else name  # after the reason's prefix
    match = _BLOCKS.match(bare)
    return (int(match.group("min")), int(match.group("max"))) if match else (None, None)


def part_rows(path: str) -> int | None:
    try:
        return int(Path(path, "count.txt").read_text().strip())
    except (OSError, ValueError):
        return None
