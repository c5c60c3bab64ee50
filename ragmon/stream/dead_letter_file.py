"""Dead letters as JSON Lines: a ``DeadLetterSink`` for ``ragmon ingest --file ... --dead-letter-file PATH``.

Owns the file format and writing it. One JSON object per line, the same facts as a dead letter on Kafka::

    {"reason": "schema", "detail": "Object missing required field `question`",
     "source": {"topic": "file:traces.jsonl", "partition": 0, "offset": 41}, "line": 42,
     "headers": [], "value": "{\\"trace_id\\": ..."}

``value`` is the original line when it is UTF-8 text, ``value_base64`` otherwise (likewise for each header's
value); a letter cut to fit (a line over ``ingest.max_message_bytes``) also has ``original``. ``send`` returns
once the lines are written and flushed (and, for a regular file, on disk: the offsets are committed only after
it). A full or failing disk raises ``RetryableSourceError`` (the batch is retried); a closed pipe, or a file that
cannot be written at all, ``SourceError``. There is no size limit: every letter is written whole. It must not
decide what is invalid.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ragmon.errors import InputError, RetryableSourceError, SourceError
from ragmon.stream.dead_letter import DeadLetter

#: errors a later write may not hit again (the disk filled up, a network file system hiccuped)
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR})


def letter_json(d: DeadLetter) -> dict[str, Any]:
    """One dead letter as the JSON object of its line."""
    out: dict[str, Any] = {"reason": d.reason, "detail": d.detail_text(),
                           "source": {"topic": d.topic, "partition": d.partition, "offset": d.offset},
                           "line": d.offset + 1,
                           # a producer's own ragmon.* headers never pass for ragmon's, as on Kafka
                           "headers": [{"key": k, **_bytes_field(v)} for k, v in d.headers
                                       if not k.startswith("ragmon.")]}
    out.update(_bytes_field(d.value))
    if d.original is not None:
        reason, size, sha256 = d.original
        out["original"] = {"reason": reason, "bytes": size, "sha256": sha256}
    return out


def _bytes_field(value: bytes) -> dict[str, str]:
    try:
        return {"value": value.decode("utf-8")}
    except UnicodeDecodeError:
        return {"value_base64": base64.b64encode(value).decode("ascii")}


class FileDeadLetterSink:
    """Appends dead letters to a file (``-``: standard output) or an open binary stream. Not thread-safe."""

    def __init__(self, target: str | Path | BinaryIO):
        self.name = str(target) if isinstance(target, str | Path) else getattr(target, "name", "stream")
        self._owned = isinstance(target, str | Path) and str(target) != "-"
        if not isinstance(target, str | Path):
            self._out = target
        elif str(target) == "-":
            self._out = sys.stdout.buffer
        else:
            try:
                # unbuffered: a failed write leaves nothing behind in a buffer (see _forget_partial_write)
                self._out = open(target, "ab", buffering=0)  # noqa: SIM115 - closed by close()
            except OSError as exc:
                raise InputError(f"--dead-letter-file {target}: cannot write it ({exc.strerror or exc})") from None
        self._sync = self._is_regular_file()
        self._closed = False

    def _is_regular_file(self) -> bool:
        try:
            return stat.S_ISREG(os.fstat(self._out.fileno()).st_mode)
        except (OSError, AttributeError, ValueError):
            return False

    def send(self, letters: Sequence[DeadLetter]) -> list[DeadLetter]:
        if not letters:
            return []
        if self._closed:
            raise SourceError(f"the dead-letter file {self.name} is closed")
        data = b"".join(json.dumps(letter_json(d), ensure_ascii=False).encode() + b"\n" for d in letters)
        start = self._out.tell() if self._sync else None
        try:
            view = memoryview(data)
            while view:  # an unbuffered write may take part of it
                view = view[self._out.write(view) or 0:]
            self._out.flush()
            if self._sync:
                os.fsync(self._out.fileno())
        except OSError as exc:
            self._forget_partial_write(start)
            what = f"writing {len(letters)} dead letter(s) to {self.name} failed: {exc.strerror or exc}"
            raise (RetryableSourceError if exc.errno in TRANSIENT_ERRNOS else SourceError)(what) from None
        return list(letters)

    def _forget_partial_write(self, start: int | None) -> None:
        """A failed write may have left half a line: cut a regular file back (the retry writes them all again)."""
        if start is None:
            return
        try:
            self._out.truncate(start)
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._out.flush()
        except (OSError, ValueError):
            pass
        if self._owned:
            self._out.close()
