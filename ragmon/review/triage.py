"""Weekly negative-feedback triage: the week's thumbs-down traces in their own queue, each given one cause from the
failure taxonomy, and the weekly counts per cause and stratum.

The random review sample (``selection.py``) is chosen without reading feedback, because complaints are biased
towards the failures users noticed; triage is the complement: every complaint of the week (or a seeded random
sample of ``max_items`` when there are more), read against the taxonomy rather than as sentiment. The two are
kept in separate tables, so nothing triage does can steer the random sample.

Selection: production traces of the ISO week with ``feedback.rating = -1`` or a negative ``feedback`` outcome
event (``schemas/outcome.v1``, value < 0, up to a day after the week), ordered by ``cityHash64(seed,
trace_id)`` (a seeded permutation: the first N are a simple random sample) and capped; recorded with the
population and seed; selecting a selected week again is a no-op. Labels: one cause per (trace, reviewer); the
newest label of a trace is its cause. Owns the taxonomy, the queries and the label check; the report is
``triage_report.py``, the pages ``triage_web.py``.
"""

from __future__ import annotations

import secrets
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from ragmon.errors import InputError
from ragmon.review.records import parse_week

#: the failure taxonomy a thumbs-down is triaged against (docs/review.md), in the order the form lists it
CAUSES: Mapping[str, str] = {
    "retrieval_miss": "Retrieval miss: the passage that answers it was not retrieved",
    "wrong_passage_first": "Wrong passage ranked first: the answer came from a worse passage than one retrieved",
    "stale_document": "Stale document: the answer followed an outdated version",
    "unsupported_claim": "Unsupported claim: the answer says what the passages do not",
    "wrong_refusal": "Wrong refusal: it declined a question it could answer",
    "should_have_refused": "Should have refused: it answered what it should have declined",
    "out_of_scope": "Out of scope: the question is outside what the system is for",
    "other": "Other (say what in the note)",
}
MAX_NOTE_CHARS = 2_000
#: Unicode categories a note may not hold (but newline and tab): controls, format characters such as bidi
#: overrides, surrogates, private and unassigned code points — they let a note forge what a later reader sees
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
DEFAULT_MAX_ITEMS = 200


class RowStore(Protocol):
    def table(self, name: str) -> str: ...

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def insert_rows(self, table: str, rows: list[list[Any]], columns: list[str]) -> Any: ...


@dataclass(frozen=True, slots=True)
class TriageItem:
    trace_id: str
    category: str
    ts: datetime
    cause: str | None  # the newest label's cause; None while nobody triaged it
    reviewer: str | None


@dataclass(frozen=True, slots=True)
class TriageWeek:
    """One week's triage queue: what was chosen from how many thumbs-down traces, and each item's cause so far."""

    week: str
    population: int
    seed: str
    items: tuple[TriageItem, ...]
    already_selected: bool = False

    @property
    def labelled(self) -> int:
        return sum(1 for i in self.items if i.cause is not None)


def select_triage(store: RowStore, week: str, *, max_items: int = DEFAULT_MAX_ITEMS, seed: str | None = None,
                  now: datetime, selected_by: str = "cli") -> TriageWeek:  # fmt: skip
    """Queue the week's thumbs-down production traces (a no-op when the week already has a triage queue)."""
    start, end = parse_week(week)
    if max_items < 1:
        raise InputError(f"--max-items must be at least 1, got {max_items}")
    existing = load_triage(store, week)
    if existing is not None:
        return TriageWeek(existing.week, existing.population, existing.seed, existing.items, already_selected=True)
    seed = seed or secrets.token_hex(8)
    traces = store.table("traces")
    # a thumbs-down is the trace's own rating, or a negative `feedback` outcome event for its query (an app that
    # sends feedback later, as schemas/outcome.v1); events are read up to a day after the week, for late ones
    where = ("ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)} AND variant = 'production' "
             "AND (feedback_rating = -1 OR query_id IN (SELECT query_id FROM "
             f"{store.table('outcomes')} FINAL WHERE kind = 'feedback' AND value < 0 "
             "AND time >= {start:DateTime64(3)} AND time < {late:DateTime64(3)}))")
    params = {"start": start, "end": end, "late": end + timedelta(days=1), "seed": seed, "cap": max_items}
    [total] = store.query_rows(f"SELECT count() AS n FROM {traces} FINAL WHERE {where}", params)
    rows = store.query_rows(f"SELECT trace_id, category, ts FROM {traces} FINAL WHERE {where} "
                            "ORDER BY cityHash64({seed:String}, trace_id), trace_id LIMIT {cap:UInt32}", params)
    population = int(total["n"])
    if rows:
        store.insert_rows("triage_queue", [[week, r["trace_id"], r["category"], r["ts"], population, seed, selected_by,
                                             now] for r in rows],
                          ["week", "trace_id", "category", "ts", "population", "seed", "selected_by", "selected_at"])
    return TriageWeek(week, population, seed, tuple(TriageItem(r["trace_id"], r["category"], r["ts"], None, None)
                                                    for r in rows))  # fmt: skip


def load_triage(store: RowStore, week: str) -> TriageWeek | None:
    """The week's triage queue with each item's current cause, or None when the week was not selected (or had no
    thumbs-down traffic)."""
    rows = store.query_rows(
        f"SELECT q.trace_id AS trace_id, q.category AS category, q.ts AS ts, q.population AS population, "
        f"q.seed AS seed, l.cause AS cause, l.reviewer AS reviewer "
        f"FROM (SELECT * FROM {store.table('triage_queue')} FINAL WHERE week = {{week:String}}) AS q "
        f"LEFT JOIN (SELECT trace_id, argMax(cause, labelled_at) AS cause, argMax(reviewer, labelled_at) AS reviewer "
        f"           FROM {store.table('triage_labels')} FINAL WHERE week = {{week:String}} GROUP BY trace_id) AS l "
        f"ON q.trace_id = l.trace_id ORDER BY cityHash64(q.seed, q.trace_id), q.trace_id",
        {"week": week})  # fmt: skip
    if not rows:
        return None
    items = tuple(TriageItem(r["trace_id"], r["category"], r["ts"], r["cause"] or None, r["reviewer"] or None)
                  for r in rows)  # fmt: skip
    return TriageWeek(week, int(rows[0]["population"]), rows[0]["seed"], items)


def triage_weeks(store: RowStore) -> list[str]:
    """Weeks with a triage queue, newest first."""
    rows = store.query_rows(f"SELECT DISTINCT week FROM {store.table('triage_queue')} FINAL ORDER BY week DESC")
    return [r["week"] for r in rows]


def check_label(cause: str, note: str) -> tuple[str, str]:
    """The cause and note of a triage label, or ``InputError`` saying what is wrong."""
    if cause not in CAUSES:
        raise InputError(f"cause {cause[:40]!r} is not one of {', '.join(CAUSES)}")
    note = note.strip()
    if any(unicodedata.category(ch) in _INVISIBLE and ch not in "\n\t" for ch in note):
        raise InputError("the note holds control or invisible characters (e.g. a right-to-left override); write it "
                         "as plain text")
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(f"the note is {len(note)} characters; at most {MAX_NOTE_CHARS}")
    if cause == "other" and not note:
        raise InputError("cause 'other' needs a note saying what went wrong")
    return cause, note


def save_triage_label(store: RowStore, week: str, trace_id: str, reviewer: str, cause: str, note: str,
                      at: datetime) -> None:  # fmt: skip
    """Record ``reviewer``'s cause for a queued trace (``InputError`` when it is not in the week's queue)."""
    cause, note = check_label(cause, note)
    queued = store.query_rows(f"SELECT count() AS n FROM {store.table('triage_queue')} FINAL "
                              "WHERE week = {week:String} AND trace_id = {t:String}", {"week": week, "t": trace_id})
    if not queued or not int(queued[0]["n"]):
        raise InputError(f"trace {trace_id[:80]!r} is not in the triage queue of {week}")
    store.insert_rows("triage_labels", [[week, trace_id, reviewer, cause, note, at]],
                      ["week", "trace_id", "reviewer", "cause", "note", "labelled_at"])
