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
Selecting a week twice is a no-op: the first selection (seed, parameters) is recorded with it. The query is
``ReviewStore.sample`` (SQL in ``queries.py``); this module owns the checks, the seed and the recording order.
"""

from __future__ import annotations

import secrets
from collections import Counter
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from ragmon.errors import InputError
from ragmon.review.queries import ReviewStore
from ragmon.review.records import SampledTrace, SelectionRecord, iso_week, parse_week, previous_week

__all__ = ["METHOD", "SampledTrace", "SelectionResult", "iso_week", "parse_week", "previous_week",
           "recorded_selection", "sample_week", "select_week"]

METHOD = "cityHash64(seed, trace_id) order over FINAL production traces of the ISO week"


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


def sample_week(store: ReviewStore, week: str, size: int, seed: str, *, stratify: bool = False,
                min_per_stratum: int = 0) -> SelectionResult:
    """Compute the sample (read-only). Same arguments and traffic ⇒ same sample."""
    if size < 1:
        raise InputError(f"--size must be at least 1, got {size}")
    if not seed:
        raise InputError("the seed must not be empty")
    parse_week(week)
    m = min_per_stratum if stratify else 0
    population = store.population(week)
    if m and sum(min(m, n) for n in population.values()) > size:
        need = sum(min(m, n) for n in population.values())
        raise InputError(f"{len(population)} strata × --min-per-stratum {m} need {need} traces but --size is {size}; "
                         "raise --size or lower --min-per-stratum")
    items = tuple(store.sample(week, seed, size, m))
    return SelectionResult(week, seed, size, stratify, m, sum(population.values()), population, items)


def recorded_selection(store: ReviewStore, week: str) -> dict[str, object] | None:
    """The week's recorded selection as a dict (``ReviewStore.selection`` gives the record itself)."""
    record = store.selection(week)
    return asdict(record) if record else None


def select_week(store: ReviewStore, week: str, size: int, *, seed: str | None = None, stratify: bool = False,
                min_per_stratum: int = 0, now: datetime, selected_by: str = "cli",
                dry_run: bool = False) -> SelectionResult:
    """Select and record the week's sample; idempotent per week. ``dry_run`` only computes it (with the
    recorded seed and parameters when the week was selected and no seed is given, to reproduce it).

    When the week was selected before, its recorded sample is returned unchanged (``already_selected``) and
    nothing is written. A week without production traffic is not recorded, so it can be selected later.
    """
    parse_week(week)
    existing = store.selection(week)
    if dry_run:  # recompute, with the recorded seed unless one is given: this is how a sample is reproduced
        recorded = existing if existing is not None and not seed else None
        return sample_week(store, week, recorded.size if recorded else size,
                           seed or (existing.seed if existing else secrets.token_hex(8)),
                           stratify=recorded.stratified if recorded else stratify,
                           min_per_stratum=recorded.min_per_stratum if recorded else min_per_stratum)
    if existing is not None:
        return SelectionResult(week, existing.seed, existing.size, existing.stratified, existing.min_per_stratum,
                               existing.population, {}, tuple(store.queue(week)), already_selected=True)
    # queue rows without a record: an earlier run died between the two writes; finish it with its seed
    seed = store.leftover_seed(week) or seed
    result = sample_week(store, week, size, seed or secrets.token_hex(8), stratify=stratify,
                         min_per_stratum=min_per_stratum)
    if not result.items:
        return result
    store.add_to_queue(week, result.items, result.seed, now)
    # recorded last: a crash between the two writes leaves no record, and the retry (same seed from the
    # caller, or a new one) rewrites the queue rows, which replace the earlier ones by (week, trace_id)
    store.record_selection(SelectionRecord(week, result.seed, size, stratify, result.min_per_stratum,
                                           result.population, len(result.items), METHOD, selected_by, now))
    return replace(result, written=True)
