"""Writing simulated traffic with a realistic shape into the store: ``ragmon drift simulate --shape``.

``insert_shaped`` draws hourly windows from ``ragmon.drift.simulation.traffic`` (heterogeneous hourly mixes, trending
popular queries, daily seasonality, routine document updates, all of them together with questions that have
their own habits, or independent draws) for ``days`` days up to ``now`` plus the current hour, and inserts them
into ``traces`` — and, for ``doc_updates`` and ``composite``, the corpus's version feed into ``corpus_versions`` —
through the same store as real traffic, so the drift check, ``drift check
--at`` and ``drift backtest`` run on them as on production. A drift (``Shift``) can be injected into the last
``drift_hours`` hours. Seeded: the same arguments write the same traces. Never point it at production data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ragmon.drift.simulation.draw import NO_SHIFT, Draw, K, Shift
from ragmon.drift.simulation.synthetic_queries import TrafficStore
from ragmon.drift.simulation.traffic import Corpus, strata

#: the version every document has before its first update (sorts before every ISO timestamp)
ORIGINAL_VERSION = "1970-01-01T00:00:00"
_TRACE_COLUMNS = ("trace_id", "query_id", "ts", "retriever_name", "retriever_version", "variant", "corpus_snapshot",
                  "category", "question", "retrieved_chunk_ids", "retrieved_doc_ids", "retrieved_doc_versions",
                  "retrieved_scores", "retrieved_ranks", "behaviour", "latency_total_ms", "cost_usd", "ingested_at")


@dataclass(frozen=True, slots=True)
class ShapedSpec:
    """What to write: ``per_hour`` traces per stratum per hour (the daily mean for ``seasonal``) over ``days``
    days before ``now`` and the hour up to it; ``shift`` in the last ``drift_hours`` hours of ``drift_strata``
    (default: all)."""

    shape: str
    per_hour: int
    days: int
    now: datetime
    strata: tuple[str, ...] = ("billing", "consent", "security", "returns")
    retriever: str = "hybrid@v1"
    variant: str = "production"
    shift: Shift = NO_SHIFT
    drift_hours: int = 1
    drift_strata: tuple[str, ...] | None = None  # None: every stratum drifts
    seed: int = 1
    run_id: str = "shape"

    def __post_init__(self) -> None:
        if self.per_hour < 1 or self.days < 1 or self.drift_hours < 0 or not self.strata or "@" not in self.retriever:
            raise ValueError("need per_hour ≥ 1, days ≥ 1, drift_hours ≥ 0, at least one stratum and a "
                             "retriever as name@version")

    @property
    def hours(self) -> int:
        return self.days * 24 + 1


def insert_shaped(store: TrafficStore, spec: ShapedSpec,
                  progress: Callable[[int, int], None] | None = None) -> int:
    """Insert the traffic; return how many traces. ``progress(done_hours, hours)`` after each hour."""
    hours = spec.hours
    start = spec.now - timedelta(hours=hours)
    gens = strata(spec.shape, len(spec.strata), spec.seed, days=hours / 24 + 1)
    total = 0
    for i in range(hours):
        window_start = start + timedelta(hours=i)
        drifting = i >= hours - spec.drift_hours
        shift = spec.shift if drifting else NO_SHIFT
        if shift.stale_since is not None:  # the index froze when the drift began
            shift = Shift(shift.add, shift.scale, shift.extra_empty, (hours - spec.drift_hours) / 24)
        for s, (name, gen) in enumerate(zip(spec.strata, gens, strict=True)):
            mine = shift if spec.drift_strata is None or name in spec.drift_strata else NO_SHIFT
            draw = gen.draw(spec.per_hour, window_start.hour, i / 24, mine)
            total += store.insert_columns("traces", _columns(spec, draw, name, start, (i, s)))
        if progress is not None:
            progress(i + 1, hours)
    corpus = gens[0].corpus
    if corpus is not None:
        _insert_corpus(store, corpus, start, spec.now)
    return total


def _columns(spec: ShapedSpec, draw: Draw, stratum: str, start: datetime,
             key: tuple[int, int]) -> dict[str, Sequence[Any]]:
    n = draw.times.size
    name, version = spec.retriever.split("@", 1)
    ts = [start + timedelta(days=float(t)) for t in draw.times]
    ids = [f"{spec.run_id}-{spec.seed}-{key[0]}-{key[1]}-{j}" for j in range(n)]
    # a shortlist holds the chunks retrieved (n_results; NaN scores beyond), nothing when empty
    scores = [[] if draw.empty[j] else [float(v) for v in draw.scores[j] if np.isfinite(v)] for j in range(n)]
    if draw.docs is not None and draw.versions is not None:
        docs = [[f"doc{d}" for d in row] for row in draw.docs]
        versions = [[_version(start, v) for v in row] for row in draw.versions]
    else:
        rng = np.random.default_rng([spec.seed, *key])
        docs = [[f"doc{d}" for d in row] for row in rng.integers(0, 5000, size=(n, K))]
        versions = [[ORIGINAL_VERSION] * K for _ in range(n)]
    docs = [docs[j][:len(scores[j])] for j in range(n)]
    versions = [versions[j][:len(scores[j])] for j in range(n)]
    now = datetime.now(UTC)
    return {
        "trace_id": ids, "query_id": ids, "ts": ts, "retriever_name": [name] * n, "retriever_version": [version] * n,
        "variant": [spec.variant] * n, "corpus_snapshot": ["simulated"] * n, "category": [stratum] * n,
        "question": ([f"simulated question {q}" for q in draw.queries] if draw.queries is not None
                     else ["simulated question"] * n),
        "retrieved_chunk_ids": [[f"{d}#c{r}" for r, d in enumerate(row)] for row in docs],
        "retrieved_doc_ids": docs, "retrieved_doc_versions": versions, "retrieved_scores": scores,
        "retrieved_ranks": [list(range(1, len(row) + 1)) for row in scores],
        "behaviour": ["refuse" if r else "answer" for r in draw.refused],
        "latency_total_ms": [float(x) for x in draw.latency_ms], "cost_usd": [float(x) for x in draw.cost_usd],
        "ingested_at": [now] * n,
    }


def _version(start: datetime, published_day: float) -> str:
    if published_day < 0:
        return ORIGINAL_VERSION
    return (start + timedelta(days=float(published_day))).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _insert_corpus(store: TrafficStore, corpus: Corpus, start: datetime, end: datetime) -> None:
    """The corpus's version feed: every update published before ``end``."""
    keep = corpus.published <= (end - start).total_seconds() / 86400
    docs, days = corpus.doc_of[keep], corpus.published[keep]
    store.insert_columns("corpus_versions", {
        "doc_id": [f"doc{d}" for d in docs],
        "doc_version": [_version(start, float(x)) for x in days],
        "published_at": [start + timedelta(days=float(x)) for x in days],
    })
