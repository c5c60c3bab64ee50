"""Traces from JSON Lines files or standard input: a ``TraceSource`` for ``ragmon ingest --file``.

Owns reading lines in the background and handing them to the ingest loop as messages: input ``i`` is partition
``i`` of one "topic" (``file:<path>``, or ``file:-`` for standard input) and a line's offset is its index in the
file (0-based; the dead letter's ``ragmon.source.offset``). Lines are read by one thread per input into a bounded
queue, so a slow pipe never blocks the loop and memory stays bounded; a paused source stops taking from the
queue. Blank lines are skipped and counted; a line over ``max_line_bytes`` is never held whole: its first bytes
go on as a ``too_large`` message with its size and SHA-256. Commits are kept in memory (``committed``): a new
source given them as ``start`` skips what was committed, as a consumer group would. Without ``follow`` the input
ends at end of file (``exhausted``); with it a file is read on as it grows. ``finished()`` says whether every
input was read to its end and every line of it committed; ``resume_line`` where a run that did not finish
should start again. Standard input is read through ``DescriptorLines`` (``fd_lines.py``), never through
``sys.stdin.buffer``: a reader thread blocked there would make the process abort at exit while the pipe stays
open. It must not decode or store (the pipeline does).
"""

from __future__ import annotations

import hashlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from ragmon.errors import InputError
from ragmon.stream.dead_letter import CUT_VALUE_BYTES
from ragmon.stream.fd_lines import DescriptorLines
from ragmon.stream.source import LocalPosition, Partition, RawMessage, RevokeHandler

log = logging.getLogger(__name__)

#: lines read ahead of the loop, per source (bounded memory: at most this many lines of max_line_bytes)
QUEUE_LINES = 2_000
#: how often a followed file is checked for new lines at its end
FOLLOW_SECONDS = 0.05


def topic_of(path: str) -> str:
    """The source topic recorded for lines of ``path`` (``-`` is standard input)."""
    return f"file:{path}"


class FileTraceSource(LocalPosition):
    """Reads JSON Lines inputs (paths, ``-`` for standard input, or open binary streams). Not thread-safe: the
    loop thread calls every method; the reader threads only fill the queue."""

    def __init__(self, inputs: Sequence[str | Path | BinaryIO], *, topic: str, max_line_bytes: int,
                 follow: bool = False, start: Mapping[Partition, int] | None = None):
        self.topic = topic
        self.committed: dict[Partition, int] = dict(start or {})
        self.blank_lines = 0
        self.lines_read = 0
        self._max = max_line_bytes
        self._follow = follow
        self._queue: queue.Queue[RawMessage | int] = queue.Queue(QUEUE_LINES)
        self._inputs = len(inputs)
        self._open = set(range(len(inputs)))      # partitions whose input has not ended
        self._handler: RevokeHandler | None = None
        self._paused = False
        self._closed = threading.Event()
        self._lock = threading.Lock()
        #: per input read to its end: one past the offset of its last line handed on (what must be committed)
        self._ends: dict[int, int] = {}
        #: why reading an input stopped before its end, if it did
        self.read_error: str | None = None
        streams = [self._open_input(i) for i in inputs]
        for part, stream in enumerate(streams):
            threading.Thread(target=self._read, args=(part, stream), name=f"ragmon-file-{part}", daemon=True).start()

    def _open_input(self, source: str | Path | BinaryIO) -> BinaryIO | DescriptorLines:
        if not isinstance(source, str | Path):
            return source
        if str(source) == "-":
            return DescriptorLines(sys.stdin.fileno(), self._closed)
        try:
            return open(source, "rb")  # noqa: SIM115 - closed by its reader thread
        except OSError as exc:
            raise InputError(f"--file {source}: cannot read it ({exc.strerror or exc})") from None

    # -- the reader threads ---------------------------------------------------------------------------------

    def _read(self, part: int, stream: BinaryIO | DescriptorLines) -> None:
        skip = self.committed.get((self.topic, part), 0)
        index = end = 0
        piped = isinstance(stream, DescriptorLines)
        try:
            while not self._closed.is_set():
                line = stream.readline(self._max + 2)  # the limit, a "\r\n", and one byte to see it is over
                if not line:
                    if self._closed.is_set() or (piped and not stream.at_eof):
                        break  # closed while waiting: this input did not end
                    if self._follow and not piped:
                        time.sleep(FOLLOW_SECONDS)
                        continue
                    self._ends[part] = max(end, skip)
                    break
                message = self._message(part, index, line, stream)
                if index >= skip:
                    if message is None:
                        with self._lock:
                            self.blank_lines += 1
                    else:
                        self._put(message)
                        end = index + 1
                index += 1
        except OSError as exc:
            self.read_error = f"reading {'standard input' if piped else 'the input'} stopped at line {index + 1}: {exc}"
            log.error("%s", self.read_error)
        finally:
            self._put(part)  # its end
            if not piped:
                stream.close()

    def _put(self, item: RawMessage | int) -> None:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _message(self, part: int, index: int, line: bytes, stream: BinaryIO | DescriptorLines) -> RawMessage | None:
        if not line.endswith(b"\n") and len(line) > self._max:  # over the limit: never held whole
            return self._too_long(part, index, line, stream)
        body = line.rstrip(b"\r\n")
        if not body.strip():
            return None
        return RawMessage(self.topic, part, index, body)

    def _too_long(self, part: int, index: int, head: bytes, stream: BinaryIO | DescriptorLines) -> RawMessage:
        digest, size, chunk = hashlib.sha256(head), len(head), head
        while not chunk.endswith(b"\n"):
            chunk = stream.readline(1 << 20)
            if not chunk:
                break
            body = chunk.rstrip(b"\r\n")
            digest.update(body)
            size += len(body)
        detail = (f"line {index + 1} is {size} bytes (SHA-256 {digest.hexdigest()}), over ingest.max_message_bytes "
                  f"({self._max}); the dead letter keeps its first {CUT_VALUE_BYTES} bytes")
        return RawMessage(self.topic, part, index, head[:CUT_VALUE_BYTES], (), -1, detail, "too_large")

    # -- TraceSource ----------------------------------------------------------------------------------------

    @property
    def exhausted(self) -> bool:
        """Every input ended and every line was handed on (never true while following)."""
        return not self._open and self._queue.empty()

    def finished(self) -> bool:
        """Every input was read to its end (not stopped, not failed) and every line of it is committed: stored or
        dead-lettered. Meant for after the loop ended (the commits it made are all in ``committed``)."""
        ends = dict(self._ends)
        return len(ends) == self._inputs and all(self.committed.get((self.topic, p), 0) >= e for p, e in ends.items())

    def resume_line(self, part: int = 0) -> int:
        """The 1-based number of input ``part``'s first line not known to be stored or dead-lettered: every line
        before it is (``committed``); a run started again from this line (``start``) misses nothing."""
        return self.committed.get((self.topic, part), 0) + 1

    def set_revoke_handler(self, handler: RevokeHandler) -> None:
        self._handler = handler

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawMessage]:
        out: list[RawMessage] = []
        if self._paused or self.exhausted:
            time.sleep(timeout_seconds)  # nothing to read: block as a consumer would, never spin
            return out
        try:
            item = self._queue.get(timeout=max(0.0, timeout_seconds))
        except queue.Empty:
            return out
        while True:
            if isinstance(item, int):
                self._open.discard(item)
            else:
                out.append(item)
            if len(out) >= max_records:
                break
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        self.lines_read += len(out)
        return out

    def assignment(self) -> set[Partition]:
        return {(self.topic, p) for p in range(self._inputs)}

    def lag(self) -> dict[Partition, int]:
        return {}  # the lines still to come are not known in advance

    def close(self) -> None:
        """Give every partition up (the revoke handler flushes and says what to commit), then stop reading."""
        if self._closed.is_set():
            return
        if self._handler is not None:
            self.commit(self._handler(self.assignment()))
        self._closed.set()
