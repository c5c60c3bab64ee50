"""Lines from a file descriptor, read without a buffered reader: standard input for ``ragmon ingest --file -``.

Owns reading lines from a raw descriptor (``os.read`` in chunks, split here) in slices of ``select`` so that the
reading thread notices ``closed`` and returns, instead of staying blocked in ``sys.stdin.buffer.readline``. A
daemon thread blocked there holds the buffered reader's lock when the interpreter exits, and the exit then
aborts (``Fatal Python error: _enter_buffered_busy``) and hangs while standard input stays open. This reader
never touches ``sys.stdin``; the one thing it may block in is ``select`` with a short timeout. It must not
interpret lines (``file_source.py`` does).
"""

from __future__ import annotations

import os
import select
import threading

#: bytes asked of the descriptor per read
CHUNK_BYTES = 1 << 16
#: how long one wait for input lasts before ``closed`` is checked again
WAIT_SECONDS = 0.1


class DescriptorLines:
    """``readline(limit)`` over a descriptor, as ``BufferedReader.readline`` behaves, ended early by ``closed``.

    One thread reads; ``closed`` may be set from any other. The descriptor is not closed here (standard input
    belongs to the process)."""

    def __init__(self, fd: int, closed: threading.Event, *, name: str = "<stdin>"):
        self.fd = fd
        self.name = name
        self._closed = closed
        self._buffer = bytearray()
        self._eof = False

    @property
    def at_eof(self) -> bool:
        """The descriptor reported its end (not merely ``closed`` being set)."""
        return self._eof and not self._buffer

    def readline(self, limit: int) -> bytes:
        """Up to ``limit`` bytes ending with the first ``b"\\n"`` if it comes within them; ``b""`` at the end of
        the input or once ``closed`` is set (tell the two apart with ``at_eof``). Raises ``OSError``."""
        while True:
            end = self._buffer.find(b"\n", 0, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self._buffer) >= limit or (self._eof and self._buffer):
                return self._take(min(limit, len(self._buffer)))
            if self._eof or not self._fill():
                return b""

    def _take(self, n: int) -> bytes:
        line = bytes(self._buffer[:n])
        del self._buffer[:n]
        return line

    def _fill(self) -> bool:
        """Read one chunk, waiting for it in slices; False once ``closed`` is set (nothing read)."""
        while not self._closed.is_set():
            ready, _, _ = select.select([self.fd], [], [], WAIT_SECONDS)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, CHUNK_BYTES)
            except BlockingIOError:  # a descriptor someone set non-blocking: wait again
                continue
            if not chunk:
                self._eof = True
            self._buffer += chunk
            return True
        return False
