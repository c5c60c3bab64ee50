"""The OTLP/HTTP receiver's write-ahead log: each accepted request body, on local disk before it is answered 200,
until the ingest loop has stored or dead-lettered every trace that used it.

Owns the files under ``otlp.spool_dir``: segments ``<offset of the first record, 20 digits>.seg`` of records,
``committed`` (the offset to replay from; replaced atomically) and ``lock`` (one process at a time). A record is a
header (``RECORD``: body length, CRC-32 of the rest of the header and the body, offset, format) and the request
body as parsed (decompressed). Offsets count up across restarts and are the messages' offsets in the ingest loop,
so the commit rule (``offsets.py``) decides what may be forgotten exactly as for Kafka: ``commit`` records the
position, then deletes the segments wholly before it. ``append`` refuses past ``max_bytes`` (``SpoolFull``: the
receiver answers 503 and the exporter retries).

At open every segment still needed is read through: a record cut short or failing its CRC (a ``kill -9`` in the
middle of a write, a damaged disk) ends what is replayed of its segment, is reported in ``problems``, and does not
stop the other segments; a damaged tail of the last segment is cut off. New records go to a new segment.

Durability: a record is written with one ``writev`` before the answer. The page cache survives the process
(``kill -9``, the OOM killer), not the machine: ``fsync`` flushes each record and commit to the disk as well, at
the cost of a disk flush per request. Thread-safe (``append`` from the receiver's threads, the rest from the ingest
loop). It must not parse OTLP (``http_source`` does) nor answer HTTP.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

#: body length, CRC-32 (of the header's remaining fields, then the body), offset, format
RECORD = struct.Struct("<IIQB")
FORMATS = ("otlp_proto", "otlp_json")
#: a new segment is started once the current one is this large: the granularity of deleting what is committed
SEGMENT_BYTES = 8 * 1024 * 1024
_SEGMENT = re.compile(r"^(\d{20})\.seg$")


class SpoolError(Exception):
    """The spool cannot be used or written (the message says where and why)."""


class SpoolFull(SpoolError):
    """Appending would take the spool past its bound; retry once the ingest loop committed more."""


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    offset: int
    fmt: str
    body: bytes


@dataclass
class _Segment:
    first: int   # offset of its first record (its name)
    path: Path
    size: int    # bytes of its readable records (the file may be longer when damaged)
    last: int    # offset of its last readable record; first - 1 while empty


class HttpSpool:
    """An append-only log of request bodies in ``directory``; raises ``SpoolError`` when it cannot be opened."""

    def __init__(self, directory: Path, *, max_bytes: int, fsync: bool = False, segment_bytes: int = SEGMENT_BYTES):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        #: what was found damaged at open, one line each (reported by the caller)
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._lock_fd = self._take_lock()
        try:
            self.committed = self._read_committed()
            self._segments = self._scan()
        except OSError as exc:
            os.close(self._lock_fd)
            raise SpoolError(f"cannot read {self.directory}: {exc.strerror or exc}") from None
        self._bytes = sum(s.size for s in self._segments)
        last = max((s.last for s in self._segments), default=-1)
        self._next = max(self.committed, last + 1)
        #: the records to replay: from ``committed`` to the end of what the last process wrote
        self.replay_records = sum(max(0, s.last - max(s.first, self.committed) + 1) for s in self._segments)
        self._replay_plan, self._replay_from = list(self._segments), self.committed
        self._active: _Segment | None = None
        self._fd = -1
        self._closed = False

    # -- the receiver's side --------------------------------------------------------------------------------

    def append(self, body: bytes, fmt: str) -> int:
        """Write one request body; return its offset once written. ``SpoolFull`` past the bound (a body larger
        than the bound alone still goes into an empty spool), ``SpoolError`` when the write fails (nothing of it
        is left behind)."""
        size = RECORD.size + len(body)
        with self._lock:
            if self._closed:
                raise SpoolError("the spool is closed")
            if self._bytes and self._bytes + size > self.max_bytes:
                raise SpoolFull(f"{self.directory} holds {self._bytes} bytes not yet stored (otlp.max_spool_bytes "
                                f"{self.max_bytes})")
            if self._active is None or self._active.size >= self.segment_bytes:
                self._roll()
            assert self._active is not None
            offset = self._next
            tail = struct.pack("<QB", offset, FORMATS.index(fmt))
            header = RECORD.pack(len(body), zlib.crc32(body, zlib.crc32(tail)), offset, FORMATS.index(fmt))
            start = self._active.size
            try:
                _write_all(self._fd, header, body)
                if self.fsync:
                    os.fsync(self._fd)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, start)  # a cut record would end the segment's replay
                except OSError:
                    self._close_active()  # the next append starts a new segment; the open scan reports this one
                raise SpoolError(f"cannot write to {self._active_name(start)}: {exc.strerror or exc}") from None
            self._active.size += size
            self._active.last = offset
            self._bytes += size
            self._next = offset + 1
            return offset

    # -- the ingest loop's side -----------------------------------------------------------------------------

    def replay(self) -> Iterator[SpoolRecord]:
        """The records from ``committed`` on that were written before this open, in offset order (read lazily)."""
        start = self._replay_from
        for seg in self._replay_plan:
            if seg.last < start:
                continue
            with open(seg.path, "rb") as f:  # noqa: PTH123 - a raw binary read
                for record, _ in _records(f, seg.first, seg.size):
                    if record.offset >= start:
                        yield record

    def commit(self, offset: int) -> None:
        """Everything before ``offset`` is stored or dead-lettered: record it, delete the segments wholly before
        it. ``SpoolError`` when the position cannot be written (it stays where it was: more is replayed)."""
        if offset <= self.committed:
            return
        path, tmp = self.directory / "committed", self.directory / "committed.tmp"
        try:
            with open(tmp, "w", encoding="ascii") as f:  # noqa: PTH123
                f.write(f"{offset}\n")
                if self.fsync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise SpoolError(f"cannot record the committed position in {path}: {exc.strerror or exc}") from None
        with self._lock:
            self.committed = offset
            for seg in [s for s in self._segments if s.last < offset]:
                if seg is self._active:
                    if seg.last < seg.first:  # empty: keep appending to it
                        continue
                    self._close_active()
                self._segments.remove(seg)
                self._bytes -= seg.size
                try:
                    seg.path.unlink()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.warning("cannot delete the committed spool segment %s: %s", seg.path, exc.strerror or exc)

    def size_bytes(self) -> int:
        """Bytes of records not yet committed away (whole segments)."""
        with self._lock:
            return self._bytes

    def close(self) -> None:
        """Close the files and give the directory up to the next process."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_active()
            os.close(self._lock_fd)

    # -- internals --------------------------------------------------------------------------------------------

    def _take_lock(self) -> int:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SpoolError(f"cannot use {self.directory}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise SpoolError(f"{self.directory} is in use by another ragmon process (pid {holder}); give each "
                             "receiver its own directory") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            os.close(fd)
            raise SpoolError(f"cannot write in {self.directory}: {exc.strerror or exc}") from None
        return fd

    def _read_committed(self) -> int:
        path = self.directory / "committed"
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except (UnicodeDecodeError, ValueError):
            text = ""
        if text.isdigit():
            return int(text)
        self.problems.append(f"{path} does not hold an offset ({text[:40]!r}): everything in the spool is replayed "
                             "(stored traces are replaced by themselves)")
        return 0

    def _scan(self) -> list[_Segment]:
        """The segments still needed, their readable parts checked; wholly committed ones deleted."""
        named = sorted((int(m.group(1)), p) for p in self.directory.iterdir() if (m := _SEGMENT.match(p.name)))
        out: list[_Segment] = []
        for i, (first, path) in enumerate(named):
            following = named[i + 1][0] if i + 1 < len(named) else None
            if following is not None and following <= self.committed:
                path.unlink()  # wholly committed: a crash came between the commit and the delete
                continue
            size = path.stat().st_size
            seg = _Segment(first, path, 0, first - 1)
            with open(path, "rb") as f:  # noqa: PTH123
                for record, end in _records(f, first, size):
                    seg.last, seg.size = record.offset, end
            if seg.size < size:
                self._report_damage(seg, size, last=following is None)
            if seg.last < self.committed and following is None and seg.size == size:
                path.unlink()  # the last segment, wholly committed
                continue
            out.append(seg)
        return out

    def _report_damage(self, seg: _Segment, size: int, *, last: bool) -> None:
        lost = size - seg.size
        what = (f"{seg.path}: {lost} byte(s) after record {seg.last} (byte {seg.size}) are cut short or fail "
                "their checksum")
        if last:
            with open(seg.path, "r+b") as f:  # noqa: PTH123
                f.truncate(seg.size)
            self.problems.append(f"{what}: a write interrupted by a crash (never answered 200); cut off, the "
                                 "records before it are replayed")
        else:
            self.problems.append(f"{what}: the rest of this segment cannot be read and is not replayed; the "
                                 "records before it and the later segments are")

    def _roll(self) -> None:
        self._close_active()
        path = self.directory / f"{self._next:020d}.seg"
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SpoolError(f"cannot create {path}: {exc.strerror or exc}") from None
        self._active = _Segment(self._next, path, 0, self._next - 1)
        self._segments.append(self._active)

    def _close_active(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd, self._active = -1, None

    def _active_name(self, at: int) -> str:
        return f"{self._active.path} at byte {at}" if self._active is not None else str(self.directory)


def _write_all(fd: int, header: bytes, body: bytes) -> None:
    parts = [memoryview(header), memoryview(body)]
    while parts:
        n = os.writev(fd, parts)
        while parts and n >= len(parts[0]):
            n -= len(parts[0])
            parts.pop(0)
        if parts and n:
            parts[0] = parts[0][n:]


def _records(f: BinaryIO, first: int, size: int) -> Iterator[tuple[SpoolRecord, int]]:
    """The readable records of one segment in order, each with the byte position after it; stops at the first
    record cut short, failing its checksum or out of sequence."""
    at, expected = 0, first
    while at + RECORD.size <= size:
        header = f.read(RECORD.size)
        if len(header) < RECORD.size:
            return
        length, crc, offset, fmt = RECORD.unpack(header)
        if offset != expected or fmt >= len(FORMATS) or at + RECORD.size + length > size:
            return
        body = f.read(length)
        if len(body) < length or zlib.crc32(body, zlib.crc32(header[8:])) != crc:
            return
        at += RECORD.size + length
        expected += 1
        yield SpoolRecord(offset, FORMATS[fmt], body), at
