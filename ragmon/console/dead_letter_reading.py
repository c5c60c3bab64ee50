"""Reading the newest dead letters, read-only: from ``kafka.dead_letter_topic`` or a dead-letter file.

Owns the two readers. ``read_topic`` assigns every partition of the topic to a consumer without a group (nothing is
committed, no consumer group is joined, ingest is not disturbed), seeks to the last ``limit`` records of each and
reads up to the end or the time limit. ``read_file`` reads the last ``limit`` lines of a JSON Lines file written by
``ragmon ingest --dead-letter-file`` (at most ``MAX_FILE_TAIL_BYTES`` from its end). Both return ``Letter`` records
with the original bytes untouched; kafka-python errors become ``SourceError`` here, said once (kafka-python's
messages already start with their class name). ``CachedLetters`` reads the configured sources (the file, the topic
or both) and keeps the result, problems included, for ``console.dead_letter_cache_seconds``: a broker that does
not answer costs one bounded wait, not one per page view. Must not interpret, render or replay a letter.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragmon.config import ConsoleSettings, KafkaSettings
from ragmon.errors import SourceError
from ragmon.kafka_options import client_options

#: a file's tail is read up to this many bytes back (a line longer than that is shown as cut)
MAX_FILE_TAIL_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Letter:
    """One dead letter as stored: its reason, detail and source position, its bytes and headers, when it was
    written (None when unknown: a file line), and what a cut letter says of the original."""

    reason: str
    detail: str
    source: str
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    written_at: datetime | None
    original: dict[str, str]
    where: str  # the letter's own position: "topic/partition@offset" or "file line N"


def read_topic(settings: KafkaSettings, limit: int, timeout_seconds: float) -> list[Letter]:
    """The last ``limit`` letters of each partition of ``settings.dead_letter_topic`` (oldest first)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    topic = settings.dead_letter_topic
    try:
        # no group: nothing is committed and ingest's group is undisturbed; never ask the broker to create the topic
        consumer = KafkaConsumer(**client_options(settings, client_id="ragmon-console"), group_id=None,
                                 enable_auto_commit=False, allow_auto_create_topics=False,
                                 request_timeout_ms=int(timeout_seconds * 1000) + 1000,
                                 bootstrap_timeout_ms=int(timeout_seconds * 1000))
    except KafkaError as exc:
        raise SourceError(f"no Kafka broker answered at {settings.bootstrap_servers} within {timeout_seconds:g} s "
                          f"({_said_once(exc)})") from None
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            return []
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        for tp in tps:
            consumer.seek(tp, max(begins[tp], ends[tp] - limit))
        letters: list[Letter] = []
        pending = {tp for tp in tps if ends[tp] > max(begins[tp], ends[tp] - limit)}
        deadline = time.monotonic() + timeout_seconds
        while pending and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    if r.offset < ends[tp]:
                        letters.append(_from_record(r))
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return sorted(letters, key=lambda letter: (letter.written_at or datetime.min.replace(tzinfo=UTC)))
    except KafkaError as exc:
        raise SourceError(f"topic {topic} at {settings.bootstrap_servers} could not be read: "
                          f"{_said_once(exc)}") from None
    finally:
        consumer.close()


def _said_once(exc: BaseException) -> str:
    """``Name: message`` of a client error, its name said once (kafka-python's ``str`` already starts with it)."""
    name, text = type(exc).__name__, str(exc).strip()
    text = text.removeprefix(name).lstrip(": ").strip()
    return f"{name}: {text}" if text else name


def _from_record(r: Any) -> Letter:
    headers = tuple((str(k), bytes(v or b"")) for k, v in (r.headers or ()))
    own = {k: v.decode("utf-8", "replace") for k, v in headers if k.startswith("ragmon.")}
    source = f"{own.get('ragmon.source.topic', '?')}/{own.get('ragmon.source.partition', '?')}" \
             f"@{own.get('ragmon.source.offset', '?')}"
    original = {k.removeprefix("ragmon.original."): v for k, v in own.items() if k.startswith("ragmon.original.")}
    written = datetime.fromtimestamp(r.timestamp / 1000, UTC) if r.timestamp and r.timestamp > 0 else None
    return Letter(own.get("ragmon.reason", "(none)"), own.get("ragmon.detail", ""), source, bytes(r.value or b""),
                  tuple(h for h in headers if not h[0].startswith("ragmon.")), written, original,
                  f"{r.topic}/{r.partition}@{r.offset}")


def read_file(path: Path, limit: int) -> list[Letter]:
    """The last ``limit`` letters of a dead-letter JSON Lines file (oldest first); [] when it does not exist."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - MAX_FILE_TAIL_BYTES)
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SourceError(f"console.dead_letter_file {path}: cannot read it ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first is the end of a line that began before the tail
    lines = [line for line in lines if line.strip()][-limit:]
    return [_from_line(line, path) for line in lines]


def _from_line(line: bytes, path: Path) -> Letter:
    try:
        obj = json.loads(line)
        if not isinstance(obj, dict):
            raise ValueError("not an object")
    except ValueError:
        return Letter("(unreadable line)", "not a dead-letter JSON object", str(path), line, (), None, {},
                      f"{path.name}")
    source = obj.get("source") if isinstance(obj.get("source"), dict) else {}
    headers = tuple((str(h.get("key", "")), _bytes_of(h)) for h in obj.get("headers") or () if isinstance(h, dict))
    original = {str(k): str(v) for k, v in (obj.get("original") or {}).items()} \
        if isinstance(obj.get("original"), dict) else {}
    return Letter(str(obj.get("reason", "(none)")), str(obj.get("detail", "")),
                  f"{source.get('topic', '?')}/{source.get('partition', '?')}@{source.get('offset', '?')}",
                  _bytes_of(obj), headers, None, original, f"{path.name} line {obj.get('line', '?')}")


def _bytes_of(obj: dict[str, Any]) -> bytes:
    if isinstance(obj.get("value"), str):
        return obj["value"].encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(str(obj.get("value_base64", "")), validate=True)
    except (binascii.Error, ValueError):
        return b""


@dataclass(frozen=True)
class Reading:
    """What the page shows: the letters of every source read (oldest first), where they came from, what could not
    be read (one line per source), and when (monotonic seconds, for the page's "read N s ago")."""

    letters: list[Letter]
    sources: list[str]
    problems: list[str]
    read_at: float


@dataclass
class CachedLetters:
    """The configured sources read at most once per ``console.dead_letter_cache_seconds``; thread-safe (one read
    at a time: concurrent views wait for it and share it)."""

    console: ConsoleSettings
    kafka: KafkaSettings
    clock: Callable[[], float] = time.monotonic
    _last: Reading | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def sources(self) -> list[str]:
        out = [f"file {self.console.dead_letter_file}"] if self.console.dead_letter_file else []
        if self.console.reads_dead_letter_topic():
            out.append(f"topic {self.kafka.dead_letter_topic} at {self.kafka.bootstrap_servers}")
        return out

    def read(self, fresh: bool = False) -> Reading:
        """The last reading while it is younger than the cache time (``fresh``: read now)."""
        with self._lock:
            last = self._last
            if last is not None and not fresh and self.clock() - last.read_at < self.console.dead_letter_cache_seconds:
                return last
            self._last = self._read()
            return self._last

    def _read(self) -> Reading:
        cfg, letters, problems = self.console, [], []
        if cfg.dead_letter_file:
            try:
                letters += read_file(cfg.dead_letter_file, cfg.dead_letters_read)
            except SourceError as exc:
                problems.append(str(exc))
        if cfg.reads_dead_letter_topic():
            try:
                letters += read_topic(self.kafka, cfg.dead_letters_read, cfg.dead_letter_read_timeout_seconds)
            except SourceError as exc:
                problems.append(str(exc))
        return Reading(letters, self.sources(), problems, self.clock())
