"""The corpus's version feed: which document versions were published when (``ragmon corpus load``).

``newest_version_share`` calls a retrieved chunk stale when a newer version of its document was known
``drift.index_lag_seconds`` before it was served. A version some trace served is known from then on; the feed
tells ragmon about versions no trace has served yet — the only way to see an index that every retriever shares go
stale. One JSON object per line: ``{"doc_id": "…", "doc_version": "…", "published_at": "2026-12-01T10:00:00Z"}``.
Versions compare as strings, so name them so that later sorts later (ISO dates, zero-padded numbers).

``read_versions`` parses and validates (one line per problem, with its line number; a bad line never stops the
good ones from being read); ``load_versions`` inserts them in batches (re-loading a file is a no-op: the table is
a ReplacingMergeTree keyed by document and version).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from ragmon.drift.check.queries import DriftStore

#: longest accepted document id / version (the traces contract allows the same)
MAX_ID_CHARS = 1024
BATCH_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class Version:
    doc_id: str
    doc_version: str
    published_at: datetime


@dataclass(frozen=True, slots=True)
class Problem:
    line: int
    message: str


def read_versions(lines: Iterable[str | bytes]) -> Iterator[Version | Problem]:
    """Each line's version, or the problem with it (blank lines are skipped)."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield Problem(number, "not UTF-8 text")
                continue
        text = raw.strip()
        if not text:
            continue
        yield _parse(number, text)


def _parse(number: int, text: str) -> Version | Problem:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return Problem(number, f"not JSON ({exc.__class__.__name__}: {str(exc)[:80]})")
    if not isinstance(obj, dict):
        return Problem(number, f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - {"doc_id", "doc_version", "published_at"})
    if unknown:
        return Problem(number, f"unknown field(s) {', '.join(repr(k)[:40] for k in unknown[:3])}; expected doc_id, "
                               "doc_version, published_at")
    values = []
    for key in ("doc_id", "doc_version"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            return Problem(number, f"{key} must be a non-empty string")
        if len(value) > MAX_ID_CHARS:
            return Problem(number, f"{key} is longer than {MAX_ID_CHARS} characters")
        values.append(value)
    stamp = obj.get("published_at")
    if not isinstance(stamp, str):
        return Problem(number, "published_at must be an ISO 8601 time string, e.g. 2026-12-01T10:00:00Z")
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return Problem(number, f"published_at {stamp[:40]!r} is not an ISO 8601 time")
    if when.tzinfo is None:
        return Problem(number, "published_at needs a time zone (…Z or …+00:00)")
    when = when.astimezone(UTC)
    if not datetime(1970, 1, 1, tzinfo=UTC) <= when < datetime(2300, 1, 1, tzinfo=UTC):
        return Problem(number, "published_at is outside 1970–2299, the store's range")
    return Version(values[0], values[1], when)


def load_versions(store: DriftStore, versions: Iterable[Version]) -> int:
    """Insert versions in batches of ``BATCH_ROWS``; return how many."""
    total = 0
    batch: list[Version] = []

    def flush() -> int:
        if not batch:
            return 0
        n = store.insert_columns("corpus_versions", {
            "doc_id": [v.doc_id for v in batch], "doc_version": [v.doc_version for v in batch],
            "published_at": [v.published_at for v in batch]})
        batch.clear()
        return n

    for version in versions:
        batch.append(version)
        if len(batch) >= BATCH_ROWS:
            total += flush()
    return total + flush()
