"""Loading a JSON Lines file (or standard input) into the store: ``ragmon ingest --file PATH|-``.

Owns one run of the ingest loop over a ``FileTraceSource`` with a ``FileDeadLetterSink``: the same intake
(decoding, validation, redaction), batching, insert deduplication token and store as Kafka input, until the
input ends and every line is stored or dead-lettered, then a summary that says whether that happened
(``complete``, read from what was committed, never from what is still buffered) and, when it did not, from which
line to start again and what was given up unwritten. For backfills, replaying dead letters
after a fix, and trying ragmon on one's own traces without a broker. Loading the same file twice stores each
trace once as read with FINAL: the same lines give the same source positions and trace ids (the table is a
ReplacingMergeTree keyed by trace id, and a batch repeated whole carries the same dedup token). It must not parse
command-line options (``cli/ingest_cmd.py`` does) nor install signal handlers (the caller sets ``stop``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmon.config import Settings
from ragmon.pipeline.loop import IngestPipeline
from ragmon.pipeline.writer import StoreTraceWriter
from ragmon.stream.dead_letter_file import FileDeadLetterSink
from ragmon.stream.file_source import FileTraceSource, topic_of
from ragmon.telemetry import Telemetry


@dataclass
class FileLoadResult:
    """What one load did. ``complete`` when the input was read to its end and every line of it was stored or
    dead-lettered (committed: its write acknowledged). Otherwise every line before ``resume_from_line`` is,
    and from there on ``not_stored`` traces read were not stored and ``dead_letters_not_written`` dead letters
    were not written (dropped when the run stopped while writes failed: ``writes_failed``), and the rest of the
    input was not read."""

    input: str
    lines: int = 0
    blank_lines: int = 0
    stored: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    retries: int = 0
    seconds: float = 0.0
    complete: bool = False
    resume_from_line: int | None = None
    not_stored: int = 0
    dead_letters_not_written: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    #: reading the input failed before its end
    read_error: str | None = None

    @property
    def writes_failed(self) -> bool:
        """The run stopped while writes were failing: traces or dead letters it read were given up unwritten."""
        return bool(self.not_stored or self.dead_letters_not_written)

    def summary(self) -> dict[str, Any]:
        return {"input": self.input, "lines": self.lines, "blank_lines": self.blank_lines, "stored": self.stored,
                "dead_letters": self.dead_letters, "batches": self.batches, "retries": self.retries,
                "seconds": round(self.seconds, 3), "complete": self.complete,
                "resume_from_line": self.resume_from_line, "not_stored": self.not_stored,
                "dead_letters_not_written": self.dead_letters_not_written}


def load_file(settings: Settings, store: Any, path: str, dead_letter_path: str, *, from_line: int = 1,
              stop: threading.Event | None = None, telemetry: Telemetry | None = None) -> FileLoadResult:
    """Ingest the JSON Lines at ``path`` (``-``: standard input) from line ``from_line`` on (the lines before it
    are read and skipped); dead letters go to ``dead_letter_path`` (``-``: standard output). Blocks until the input
    is done or ``stop`` is set. Raises ``InputError`` when either file cannot be opened."""
    stop = stop or threading.Event()
    started = time.monotonic()
    sink = FileDeadLetterSink(dead_letter_path)
    topic = topic_of(path)
    try:
        source = FileTraceSource([path], topic=topic, max_line_bytes=settings.ingest.max_message_bytes,
                                 start={(topic, 0): from_line - 1} if from_line > 1 else None)
    except Exception:
        sink.close()
        raise
    pipeline = IngestPipeline(source, StoreTraceWriter(store), sink, settings.ingest, telemetry or Telemetry(),
                              input_format=settings.kafka.input_format, retention_days=settings.store.traces_ttl_days)
    done = lambda: source.exhausted and pipeline.idle()  # noqa: E731 - read once per loop step
    stats = pipeline.run(stop, until=done)  # its shutdown writes (once more) what it holds, commits, closes
    complete = source.finished()  # from the commits: what a shutdown dropped unwritten is never counted done
    return FileLoadResult(
        input=str(Path(path)) if path != "-" else "-", lines=source.lines_read, blank_lines=source.blank_lines,
        stored=stats.stored, dead_letters=dict(stats.dead_letters), batches=stats.batches, retries=stats.retries,
        seconds=time.monotonic() - started, complete=complete,
        resume_from_line=None if complete else source.resume_line(), not_stored=stats.abandoned_traces,
        dead_letters_not_written=dict(stats.abandoned_dead_letters), last_error=stats.last_error,
        read_error=source.read_error)
