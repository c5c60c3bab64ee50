"""A week's review queue as the pages, the API, the gauges and the CLI show it: the items with their labels,
and progress per stratum.

``load_week`` assembles a ``Week`` from the store's recorded selection, queue and labels. The judge's verdicts
(``ReviewStore.verdicts``) are never part of it: handing them to a reviewer who has not labelled the item yet
is the callers' decision (they must not: no anchoring). Must not: write anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmon.review.queries import ReviewStore
from ragmon.review.records import Label, Verdict

__all__ = ["NO_STRATUM", "QueueItem", "StratumProgress", "Verdict", "Week", "load_week"]

NO_STRATUM = "(none)"


@dataclass(frozen=True)
class QueueItem:
    week: str
    trace_id: str
    category: str
    position: int
    labels: tuple[Label, ...] = ()

    def labelled_by(self, reviewer: str) -> bool:
        return any(lab.reviewer == reviewer for lab in self.labels)


@dataclass
class StratumProgress:
    stratum: str
    total: int = 0
    reviewed: int = 0
    mine: int = 0


@dataclass(frozen=True)
class Week:
    week: str
    seed: str
    size: int
    population: int
    items: tuple[QueueItem, ...]

    def reviewers(self) -> dict[str, int]:
        """Reviewer → items of this week they labelled (counts only: no label is revealed)."""
        counts: dict[str, int] = {}
        for item in self.items:
            for lab in item.labels:
                counts[lab.reviewer] = counts.get(lab.reviewer, 0) + 1
        return dict(sorted(counts.items()))

    def progress(self, reviewer: str = "") -> list[StratumProgress]:
        """Per stratum: items, items with at least one label, items this reviewer labelled."""
        by: dict[str, StratumProgress] = {}
        for item in self.items:
            p = by.setdefault(item.category or NO_STRATUM, StratumProgress(item.category or NO_STRATUM))
            p.total += 1
            p.reviewed += bool(item.labels)
            p.mine += item.labelled_by(reviewer)
        return [by[k] for k in sorted(by)]


def load_week(store: ReviewStore, week: str) -> Week | None:
    """The week's queue with every item's labels, or None if the week was never selected."""
    selection = store.selection(week)
    if selection is None:
        return None
    labels = store.labels_of_week(week)
    items = tuple(QueueItem(week, t.trace_id, t.category, t.position, tuple(labels.get(t.trace_id, ())))
                  for t in store.queue(week))
    return Week(week, selection.seed, selection.size, selection.population, items)
