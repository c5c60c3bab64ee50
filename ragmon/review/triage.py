"""Weekly negative-feedback triage: the week's thumbs-down traces in their own queue, each given one cause from the
failure taxonomy, and the weekly counts per cause and stratum.

The random review sample (``selection.py``) is chosen without reading feedback, because complaints are biased
towards the failures users noticed; triage is the complement: every complaint of the week (or a seeded random
sample of ``max_items`` when there are more), read against the taxonomy rather than as sentiment. The two are
kept in separate tables, so nothing triage does can steer the random sample.

Selection: production traces of the ISO week with ``feedback.rating = -1`` or a negative ``feedback`` outcome
event (``schemas/outcome.v1``, value < 0, up to ``GRACE`` — a day — after the week), ordered by
``cityHash64(seed, trace_id)`` (a seeded permutation: the first N are a simple random sample) and capped;
recorded with the population and seed. Until a selection has run after the grace (``final_after``) the queue is
**provisional**: selecting the week again, with the seed recorded first, adds the thumbs-down traces that arrived
since and that the seeded order puts among the first N of the population now (nothing queued is taken away: a
reviewer may have labelled it), and records the population; the first run after the grace makes it final, and
from then on selecting the week again is a no-op. The review role runs it hourly for the last week
(``role.py``); ``ragmon review triage`` warns while a week is provisional (``selection_warning``). Labels: one
cause per (trace, reviewer); the newest label of a trace is its cause. Owns the taxonomy, the selection and the
label check; the SQL is ``triage_queries.py``, the report ``triage_report.py``, the pages ``triage_web.py``.
"""

from __future__ import annotations

import secrets
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ragmon.errors import InputError
from ragmon.review import triage_queries as tq
from ragmon.review.queries import ReviewRows
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
#: negative feedback events count up to this long after the week (late feedback); a queue selected before the
#: week's end plus this is provisional
GRACE = timedelta(days=1)
#: Unicode categories a note may not hold (but newline and tab): controls, format characters such as bidi
#: overrides, surrogates, private and unassigned code points — they let a note forge what a later reader sees
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
DEFAULT_MAX_ITEMS = 200


@dataclass(frozen=True, slots=True)
class TriageItem:
    trace_id: str
    category: str
    ts: datetime
    cause: str | None  # the newest label's cause; None while nobody triaged it
    reviewer: str | None


@dataclass(frozen=True, slots=True)
class TriageWeek:
    """One week's triage queue: what was chosen from how many thumbs-down traces, and each item's cause so far.

    ``final``: a selection ran after ``final_after`` (the week's end plus ``GRACE``), so no late thumbs-down can
    be added any more; before that the queue is provisional. ``already_selected``: the week had a queue before
    this selection; ``added``: what this selection queued."""

    week: str
    population: int
    seed: str
    items: tuple[TriageItem, ...]
    already_selected: bool = False
    final: bool = False
    final_after: datetime | None = None
    added: int = 0
    #: when a selection last ran over the week (None: never)
    selected_at: datetime | None = None

    @property
    def labelled(self) -> int:
        return sum(1 for i in self.items if i.cause is not None)


def final_after(week: str) -> datetime:
    """When the week's thumbs-down are all in: its end plus ``GRACE`` (late feedback events count until then)."""
    return parse_week(week)[1] + GRACE


def selection_warning(week: str, now: datetime) -> str | None:
    """What to tell someone selecting ``week`` at ``now`` when its queue cannot be final yet (None: it can)."""
    until = final_after(week)
    if now >= until:
        return None
    when = until.strftime("%Y-%m-%d %H:%M UTC")
    head = (f"{week} is not over" if now < parse_week(week)[1]
            else f"negative feedback events for {week} count until {when} (a day after the week)")
    return (f"{head}: this queue is provisional. Thumbs-down that arrive later are queued when the selection runs "
            f"again after they arrive: run again after {when}, or let the review role of `ragmon review` / `ragmon "
            "run` do it (it runs every hour and makes the queue final after then).")


def select_triage(store: ReviewRows, week: str, *, max_items: int = DEFAULT_MAX_ITEMS, seed: str | None = None,
                  now: datetime, selected_by: str = "cli") -> TriageWeek:  # fmt: skip
    """Queue the week's thumbs-down production traces; on a provisional queue, add the ones that arrived since
    (with the seed recorded first); on a final one, change nothing (see the module docstring)."""
    start, end = parse_week(week)
    if max_items < 1:
        raise InputError(f"--max-items must be at least 1, got {max_items}")
    until = end + GRACE
    existing = load_triage(store, week)
    if existing is not None and existing.final:
        return replace(existing, already_selected=True)
    seed = existing.seed if existing is not None else seed or secrets.token_hex(8)
    population = tq.thumbs_down_count(store, start, end, until)
    rows = tq.thumbs_down_first(store, start, end, until, seed, max_items)
    final = now >= until
    queued = {i.trace_id: i for i in existing.items} if existing is not None else {}
    new = [r for r in rows if r["trace_id"] not in queued]
    changed = bool(new) or existing is not None and population != existing.population
    # a provisional queue is written again whole when it changed (the population on every row) or when this is
    # the first run after the grace (selected_at then marks it final); a week without thumbs-down writes nothing
    if new or queued and (changed or final):
        keep = [[week, i.trace_id, i.category, i.ts, population, seed, selected_by, now] for i in queued.values()]
        tq.write_queue(store, keep + [[week, r["trace_id"], r["category"], r["ts"], population, seed, selected_by, now]
                                      for r in new])
    items = tuple(queued.values()) + tuple(TriageItem(r["trace_id"], r["category"], r["ts"], None, None) for r in new)
    return TriageWeek(week, population, seed, items, already_selected=existing is not None,
                      final=final and bool(items), final_after=until, added=len(new),
                      selected_at=now if items else None)


def load_triage(store: ReviewRows, week: str) -> TriageWeek | None:
    """The week's triage queue with each item's current cause, or None when the week was not selected (or had no
    thumbs-down traffic)."""
    rows = tq.queue_with_causes(store, week)
    if not rows:
        return None
    items = tuple(TriageItem(r["trace_id"], r["category"], r["ts"], r["cause"] or None, r["reviewer"] or None)
                  for r in rows)  # fmt: skip
    # the newest run wrote every row with the population it counted (a top-up rewrites the whole queue)
    newest = max(rows, key=lambda r: r["selected_at"])
    last = newest["selected_at"] if newest["selected_at"].tzinfo is not None \
        else newest["selected_at"].replace(tzinfo=UTC)
    until = final_after(week)
    return TriageWeek(week, int(newest["population"]), rows[0]["seed"], items, final=last >= until,
                      final_after=until, selected_at=last)


def triage_weeks(store: ReviewRows) -> list[str]:
    """Weeks with a triage queue, newest first."""
    return tq.queued_weeks(store)


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


def save_triage_label(store: ReviewRows, week: str, trace_id: str, reviewer: str, cause: str, note: str,
                      at: datetime) -> None:  # fmt: skip
    """Record ``reviewer``'s cause for a queued trace (``InputError`` when it is not in the week's queue)."""
    cause, note = check_label(cause, note)
    if not tq.is_queued(store, week, trace_id):
        raise InputError(f"trace {trace_id[:80]!r} is not in the triage queue of {week}")
    tq.write_label(store, week, trace_id, reviewer, cause, note, at)
