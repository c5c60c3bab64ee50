"""The store's disk, made briefly unwritable for real.

Preferred (root, ``mount`` allowed): the store's directory is a size-limited tmpfs of its own; ``fill`` takes
every free block with a ballast file (``posix_fallocate``), so the engine's next insert or merge fails for lack
of space (ClickHouse: NOT_ENOUGH_SPACE) exactly as on a full disk; ``free`` deletes the ballast. Fallback (not
root): the directory on the ordinary disk, its directories made read-only (``chmod a-w``) by ``fill`` and
writable again by ``free`` (root ignores file modes, so this only works without root). Neither possible (root
without ``mount``): ``DiskUnavailable``. ``close`` frees the disk and unmounts it; call it after every process
using the directory has stopped. Test plumbing only.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path


class DiskUnavailable(Exception):
    """The disk fault cannot be injected on this machine (the message says why)."""


class Disk:
    def __init__(self, path: Path, megabytes: int):
        self.path, self.megabytes = path, megabytes
        self.how = ""
        self._ballast = path / "ballast.fill"
        self._modes: dict[Path, int] = {}

    def open(self) -> Disk:
        self.path.mkdir(parents=True, exist_ok=True)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.megabytes}m,mode=0755", "tmpfs",
                                  str(self.path)], capture_output=True, text=True)
        if mounted.returncode == 0:
            self.how = f"tmpfs of {self.megabytes} MiB filled with a ballast file"
        elif os.geteuid() != 0:
            self.how = "directories made read-only (chmod a-w; no mount without root)"
        else:
            raise DiskUnavailable(f"cannot mount a tmpfs for the store ({mounted.stderr.strip()}) and, as root, "
                                  "cannot make a directory unwritable with file modes either")
        return self

    @property
    def tmpfs(self) -> bool:
        return self.how.startswith("tmpfs")

    def fill(self) -> str:
        """Make writes fail; returns what was done."""
        if self.tmpfs:
            fd = os.open(self._ballast, os.O_CREAT | os.O_WRONLY, 0o600)
            try:
                for _ in range(20):  # the engine may free or take blocks meanwhile: fill until nothing is left
                    st = os.statvfs(self.path)
                    free = st.f_bavail * st.f_frsize
                    if free <= 0:
                        break
                    try:
                        os.posix_fallocate(fd, os.fstat(fd).st_size, free)
                    except OSError:
                        continue
            finally:
                os.close(fd)
            st = os.statvfs(self.path)
            return f"ballast {self._ballast.stat().st_size >> 20} MiB, {st.f_bavail * st.f_frsize} bytes left"
        for d in [self.path, *(p for p in self.path.rglob("*") if p.is_dir())]:
            mode = d.stat().st_mode
            self._modes[d] = mode
            d.chmod(stat.S_IMODE(mode) & ~0o222)
        return f"{len(self._modes)} directories made read-only"

    def free(self) -> None:
        if self.tmpfs:
            self._ballast.unlink(missing_ok=True)
            return
        for d, mode in self._modes.items():
            try:
                d.chmod(stat.S_IMODE(mode))
            except OSError:
                pass
        self._modes = {}

    def close(self) -> None:
        self.free()
        if self.tmpfs:
            out = subprocess.run(["umount", str(self.path)], capture_output=True, text=True)
            if out.returncode != 0:  # still busy (a process that would not die): detach it anyway
                subprocess.run(["umount", "-l", str(self.path)], capture_output=True, text=True)
