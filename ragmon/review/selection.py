"""The weekly review sample: N production traces of one ISO week, uniformly at random, by a seeded query.

Why a seeded query and not reservoir sampling on the ingest path: ``ORDER BY cityHash64(seed, trace_id)``
over the week's distinct production traces is a pseudo-random permutation keyed by the seed, so its first N
rows are a simple random sample without replacement, the same on every run with the same seed (reproducible
from the recorded seed alone, whatever the insert order or part layout), computed once a week by ClickHouse
reading two columns. A reservoir would need state on every ingest replica that survives restarts and is merged
across the consumer group, and would see re-delivered duplicates that ``FINAL`` collapses here.

Stratified: the first ``min_per_stratum`` of each category (in the same hash order) are taken first, and the
remaining slots go to the rest of the week's traffic in hash order, so within a stratum the choice stays
uniform. The query never reads feedback or scores: complaints and judge scores must not steer the sample.
Selecting a week twice is a no-op: the first selection (seed, parameters) is recorded in ``review_selections``.
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

from ragmon.errors import InputError
from ragmon.store import ClickHouseStore

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
METHOD = "cityHash64(seed, trace_id) order over FINAL production traces of the ISO week"


def parse_week(week: str) -> tuple[datetime, datetime]:
    """``'2026-W49'`` → (Monday 00:00 UTC, next Monday 00:00 UTC); ``InputError`` for anything else."""
    m = _WEEK.match(week)
    if not m:
        raise InputError(f"week {week!r} is not an ISO week like 2026-W49")
    try:
        monday = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError:
        raise InputError(f"week {week!r} does not exist (ISO years have 52 or 53 weeks)") from None
    start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    try:
        return start, start + timedelta(days=7)
    except OverflowError:  # the last weeks of year 9999 end past the calendar
        raise InputError(f"week {week!r} is out of range: the week must end before the year 10000") from None


def iso_week(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def previous_week(now: datetime) -> str:
    """The last complete ISO week before ``now`` (the default week to select)."""
    return iso_week(now - timedelta(days=7))


@dataclass(frozen=True, slots=True)
class SampledTrace:
    trace_id: str
    query_id: str
    category: str
    position: int


@dataclass(frozen=True)
class SelectionResult:
    """One week's sample and the parameters that produced it."""

    week: str
    seed: str
    size: int
    stratified: bool
    min_per_stratum: int
    population: int
    population_by_stratum: dict[str, int]
    items: tuple[SampledTrace, ...]
    already_selected: bool = False
    written: bool = False

    def selected_by_stratum(self) -> dict[str, int]:
        return dict(Counter(item.category for item in self.items))


def sample_week(store: ClickHouseStore, week: str, size: int, seed: str, *, stratify: bool = False,
                min_per_stratum: int = 0) -> SelectionResult:
    """Compute the sample (read-only). Same arguments and traffic ⇒ same sample."""
    if size < 1:
        raise InputError(f"--size must be at least 1, got {size}")
    if not seed:
        raise InputError("the seed must not be empty")
    start, end = parse_week(week)
    params = {"start": start, "end": end, "seed": seed, "n": size, "m": min_per_stratum if stratify else 0}
    population = {
        str(r["category"]): int(r["n"])
        for r in store.query_rows(
            f"SELECT category, uniqExact(trace_id) AS n FROM {store.table('traces')} FINAL "
            "WHERE variant = 'production' AND ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)} "
            "GROUP BY category ORDER BY category", params)
    }
    m = params["m"]
    if m and sum(min(m, n) for n in population.values()) > size:
        need = sum(min(m, n) for n in population.values())
        raise InputError(f"{len(population)} strata × --min-per-stratum {m} need {need} traces but --size is {size}; "
                         "raise --size or lower --min-per-stratum")
    # stratified: rank within the stratum in hash order; the first m of each stratum sort before the rest
    rank = ", row_number() OVER (PARTITION BY category ORDER BY h, trace_id) AS r" if m else ""
    rows = store.query_rows(
        f"SELECT trace_id, query_id, category, cityHash64({{seed:String}}, trace_id) AS h{rank} "
        f"FROM {store.table('traces')} FINAL "
        "WHERE variant = 'production' AND ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)} "
        f"ORDER BY {'(r > {m:UInt32}) ASC, ' if m else ''}h ASC, trace_id ASC LIMIT {{n:UInt32}}", params)
    items = tuple(SampledTrace(str(r["trace_id"]), str(r["query_id"]), str(r["category"]), i)
                  for i, r in enumerate(rows))
    return SelectionResult(week, seed, size, stratify, m, sum(population.values()), population, items)


def recorded_selection(store: ClickHouseStore, week: str) -> dict[str, object] | None:
    rows = store.query_rows(
        f"SELECT * FROM {store.table('review_selections')} FINAL WHERE week = {{week:String}}", {"week": week})
    return rows[0] if rows else None


def select_week(store: ClickHouseStore, week: str, size: int, *, seed: str | None = None, stratify: bool = False,
                min_per_stratum: int = 0, now: datetime, selected_by: str = "cli",
                dry_run: bool = False) -> SelectionResult:
    """Select and record the week's sample; idempotent per week. ``dry_run`` only computes it (with the
    recorded seed and parameters when the week was selected and no seed is given, to reproduce it).

    When the week was selected before, its recorded sample is returned unchanged (``already_selected``) and
    nothing is written. A week without production traffic is not recorded, so it can be selected later.
    """
    parse_week(week)
    existing = recorded_selection(store, week)
    if dry_run:  # recompute, with the recorded seed unless one is given: this is how a sample is reproduced
        return sample_week(store, week, size if existing is None or seed else int(existing["size"]),
                           seed or (str(existing["seed"]) if existing else secrets.token_hex(8)),
                           stratify=stratify if existing is None or seed else bool(existing["stratified"]),
                           min_per_stratum=min_per_stratum if existing is None or seed
                           else int(existing["min_per_stratum"]))
    if existing is not None:
        items = tuple(SampledTrace(str(r["trace_id"]), str(r["query_id"]), str(r["category"]), int(r["position"]))
                      for r in store.query_rows(
                          f"SELECT trace_id, query_id, category, position FROM {store.table('review_queue')} FINAL "
                          "WHERE week = {week:String} ORDER BY position", {"week": week}))
        return SelectionResult(week, str(existing["seed"]), int(existing["size"]), bool(existing["stratified"]),
                               int(existing["min_per_stratum"]), int(existing["population"]), {}, items,
                               already_selected=True)
    # queue rows without a record: an earlier run died between the two inserts; finish it with its seed
    leftover = store.query_rows(
        f"SELECT any(seed) AS seed FROM {store.table('review_queue')} WHERE week = {{week:String}} HAVING count() > 0",
        {"week": week})
    if leftover:
        seed = str(leftover[0]["seed"])
    result = sample_week(store, week, size, seed or secrets.token_hex(8), stratify=stratify,
                         min_per_stratum=min_per_stratum)
    if not result.items:
        return result
    store.insert_rows(
        "review_queue",
        [[week, t.trace_id, t.query_id, t.category, t.position, result.seed, now] for t in result.items],
        ["week", "trace_id", "query_id", "category", "position", "seed", "selected_at"],
        dedup_token=f"review-queue-{week}-{result.seed}",
    )
    # recorded last: a crash between the two inserts leaves no record, and the retry (same seed from the
    # caller, or a new one) rewrites the queue rows, which ReplacingMergeTree collapses by (week, trace_id)
    store.insert_rows(
        "review_selections",
        [[week, result.seed, size, int(stratify), result.min_per_stratum, result.population, len(result.items),
          METHOD, selected_by, now]],
        ["week", "seed", "size", "stratified", "min_per_stratum", "population", "selected", "method",
         "selected_by", "selected_at"],
    )
    return replace(result, written=True)
