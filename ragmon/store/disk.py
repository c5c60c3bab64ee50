"""``FreeSpaceGuard``: whether the embedded store's file system has room for the engine to write.

The embedded engine (chDB) ignores the errors of its file writes (``ragmon.store.integrity``): on a full disk an
insert or a merge reports success and leaves a part with empty or short files. So ragmon keeps the engine away from
the last free bytes: below a headroom (``store.min_free_disk_mb``, at most a tenth of the file system, so that a
small volume is not paused from the start) the guard reads *low*, and stays low until a quarter more than the
headroom is free again (hysteresis: a disk hovering at the line does not flap). What low means — writes refused,
merges stopped — is ``ragmon.store.write_guard``'s business.

Pure decision logic over an injected ``statvfs``: no SQL, no threads, no clock. Not thread-safe (one owner).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class DiskState:
    """One reading of the file system and what it means; ``low`` includes the hysteresis."""

    path: str
    free_bytes: int
    total_bytes: int
    #: the headroom in force (``store.min_free_disk_mb``, capped at a tenth of the file system); 0: guard off
    min_free_bytes: int
    #: free bytes at which a low disk counts as having room again
    resume_bytes: int
    low: bool
    #: why the file system could not be read (then ``low`` keeps its last value)
    error: str = ""

    def describe(self) -> str:
        """One line for /readyz, logs and errors: what is free, the line, and what to do."""
        if self.error:
            return f"cannot read the free space of {self.path}: {self.error}"
        free = f"{self.free_bytes / MIB:,.0f} MiB free of {self.total_bytes / MIB:,.0f} MiB on {self.path}"
        if not self.low:
            return free
        return (f"NOT_ENOUGH_SPACE: the store's disk has {free}, below the headroom of "
                f"{self.min_free_bytes / MIB:,.0f} "
                "MiB (store.min_free_disk_mb); writes are paused and merges stopped until "
                f"{self.resume_bytes / MIB:,.0f} "
                "MiB are free: free space or grow the volume (docs/operations.md, 'The disk'); writes resume by "
                "themselves, and will be tried again")


class FreeSpaceGuard:
    """Reads the free space of ``path``'s file system and decides, with hysteresis, whether it is low.

    ``min_free_bytes`` 0 switches the guard off (never low). ``statvfs`` is ``os.statvfs`` unless a test injects
    one returning an object with ``f_bavail``, ``f_blocks`` and ``f_frsize``."""

    def __init__(self, path: Path, min_free_bytes: int, *, statvfs: Callable[[str], Any] = os.statvfs):
        if min_free_bytes < 0:
            raise ValueError(f"min_free_bytes must be >= 0, got {min_free_bytes}")
        self.path, self.min_free_bytes, self._statvfs = str(path), min_free_bytes, statvfs
        self.low = False

    def read(self) -> DiskState:
        """Measure now and update ``low``. Never raises: an unreadable file system keeps the last decision."""
        try:
            st = self._statvfs(self.path)
        except OSError as exc:
            return DiskState(self.path, 0, 0, self.min_free_bytes, self.min_free_bytes, self.low,
                             exc.strerror or str(exc))
        free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
        line = min(self.min_free_bytes, total // 10)
        resume = line + line // 4
        if line <= 0:
            self.low = False
        elif self.low:
            self.low = free < resume
        else:
            self.low = free < line
        return DiskState(self.path, free, total, line, resume, self.low)
