"""The allocator tuning every long-running daemon applies before its roles start (glibc only)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# a fresh interpreter: the first 8 MiB block is mmap-ed under glibc's defaults (threshold 128 KiB), and taken
# from the heap once the daemon raised the threshold; mallinfo2().hblks counts the mmap-ed blocks in use
PROBE = """
import ctypes, sys
from ragmon.daemon import tune_malloc

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
tuned = tune_malloc() if sys.argv[1] == "tuned" else None
before = libc.mallinfo2().hblks
block = libc.malloc(8 << 20)
print(tuned, libc.mallinfo2().hblks - before)
libc.free(block)
"""


def _mmapped_blocks(mode: str, **env: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, **env})
    tuned, blocks = out.stdout.split()
    return tuned, int(blocks)


def test_tune_malloc_takes_large_buffers_from_the_heap():
    assert _mmapped_blocks("default") == ("None", 1)  # glibc's default: a fresh mapping for the block
    assert _mmapped_blocks("tuned") == ("True", 0)


def test_ragmon_tune_malloc_0_leaves_glibc_alone():
    assert _mmapped_blocks("tuned", RAGMON_TUNE_MALLOC="0") == ("False", 1)
