"""``FreeSpaceGuard``: the headroom, its cap at a tenth of the file system, the hysteresis, and a file system that
cannot be read, with an injected ``statvfs``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragmon.store.disk import MIB, FreeSpaceGuard


class FileSystem:
    """A file system of ``total_mib`` whose free space the test sets; ``statvfs`` as the guard calls it."""

    def __init__(self, total_mib: int, free_mib: float):
        self.total, self.free = total_mib * MIB, int(free_mib * MIB)
        self.error: OSError | None = None

    def statvfs(self, path: str) -> SimpleNamespace:
        if self.error is not None:
            raise self.error
        return SimpleNamespace(f_frsize=4096, f_blocks=self.total // 4096, f_bavail=self.free // 4096)


def guard(fs: FileSystem, headroom_mib: int = 128) -> FreeSpaceGuard:
    return FreeSpaceGuard("/data/chdb", headroom_mib * MIB, statvfs=fs.statvfs)  # type: ignore[arg-type]


def test_below_the_headroom_it_is_low_and_says_what_to_do():
    fs = FileSystem(10_000, 500)
    g = guard(fs)
    assert not g.read().low
    fs.free = 100 * MIB
    state = g.read()
    assert state.low and state.min_free_bytes == 128 * MIB and state.resume_bytes == 160 * MIB
    text = state.describe()
    assert text.startswith("NOT_ENOUGH_SPACE") and "100 MiB free" in text and "store.min_free_disk_mb" in text
    assert "160 MiB" in text and "docs/operations.md" in text


def test_it_resumes_only_a_quarter_above_the_headroom():
    fs = FileSystem(10_000, 100)
    g = guard(fs)
    assert g.read().low
    fs.free = 150 * MIB  # above the headroom, below the quarter more: still low (no flapping at the line)
    assert g.read().low
    fs.free = 160 * MIB
    assert not g.read().low
    fs.free = 130 * MIB  # above the headroom again: room
    assert not g.read().low


def test_the_headroom_is_at_most_a_tenth_of_the_file_system():
    fs = FileSystem(16, 8)  # a 16 MiB volume: 1.6 MiB of headroom, not 128
    state = guard(fs).read()
    assert state.min_free_bytes == 16 * MIB // 10 and not state.low
    fs.free = 1 * MIB
    assert guard(fs).read().low


def test_zero_switches_the_guard_off():
    fs = FileSystem(1000, 0)
    assert not guard(fs, 0).read().low


def test_an_unreadable_file_system_keeps_the_last_decision():
    fs = FileSystem(10_000, 10)
    g = guard(fs)
    assert g.read().low
    fs.error = FileNotFoundError(2, "No such file or directory")
    state = g.read()
    assert state.low and "No such file or directory" in state.describe()
    fs.error, fs.free = None, 9_000 * MIB
    assert not g.read().low
    fs.error = PermissionError(13, "Permission denied")
    assert not g.read().low


def test_a_negative_headroom_is_refused():
    with pytest.raises(ValueError, match="got -1"):
        FreeSpaceGuard("/x", -1)
