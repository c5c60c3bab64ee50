"""Synthetic retrieval traffic generated *inside* ClickHouse, for benchmarks, demos and drift tests.

``insert_synthetic`` writes ``n`` traces with ``INSERT … SELECT … FROM numbers(n)`` (the statement is
``synthetic_queries``'s) — the values are seeded hashes of the row number turned into uniform, normal and exponential
draws inside ClickHouse, so ten million traces never pass through Python and the same ``seed`` always gives the same
traces. Scores are the top-k of a per-query level (normal around ``score_mean``) plus per-chunk noise, sorted by
rank; ``shift`` adds to every score (the drift to detect). Every per-chunk array has one entry per chunk (short
synthetic texts, no tenant), so each row reads back as a valid trace (the console's trace page, ``ragmon trace
show``). Every value is a query parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ragmon.drift.simulation.synthetic_queries import TrafficStore, insert_slice


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """What to generate. Timestamps are uniform over ``[start, end)``."""

    n: int
    start: datetime
    end: datetime
    shift: float = 0.0
    score_mean: float = 0.7
    score_sd: float = 0.08
    k: int = 5
    empty_rate: float = 0.01
    refusal_rate: float = 0.05
    retrievers: tuple[str, ...] = ("hybrid@v1",)
    variant: str = "production"
    strata: tuple[str, ...] = ("billing", "consent", "security")
    corpus_snapshot: str = "2026-11-01"
    seed: int = 1
    run_id: str = field(default="syn")
    #: 0: every trace asks 'synthetic question' and draws its own level. Otherwise questions are Zipf-popular
    #: (P(question i) ∝ 1/i over 1 … ``questions``) and each question has its own level, the same
    #: whatever the seed (a question scores alike every day).
    questions: int = 0

    def __post_init__(self) -> None:
        if self.n < 0 or self.k < 1 or self.questions < 0 or not self.start < self.end:
            raise ValueError(f"need n ≥ 0, k ≥ 1 and start < end, got n={self.n}, k={self.k}, "
                             f"{self.start.isoformat()}..{self.end.isoformat()}")
        if not all("@" in r for r in self.retrievers) or not self.strata:
            raise ValueError("retrievers are 'name@version' strings and strata a non-empty list")


#: rows per INSERT: every row is a function of its number alone, so inserting in slices gives the same rows, and
#: each INSERT … SELECT stays well inside the embedded engine's memory (``store.embedded_memory_mb``)
INSERT_ROWS = 250_000


def insert_synthetic(store: TrafficStore, spec: SyntheticSpec) -> int:
    """Insert ``spec.n`` synthetic traces into ``traces`` (in slices of ``INSERT_ROWS``); return how many."""
    start_ms = int(spec.start.timestamp() * 1000)
    span_ms = int(spec.end.timestamp() * 1000) - start_ms
    for offset in range(0, spec.n, INSERT_ROWS):
        insert_slice(store, {
            "run": spec.run_id, "seed": spec.seed, "start_ms": start_ms, "span_ms": span_ms,
            "retrievers": list(spec.retrievers), "variant": spec.variant, "snapshot": spec.corpus_snapshot,
            "strata": list(spec.strata), "score_sd": spec.score_sd, "score_mean": spec.score_mean,
            "shift": spec.shift, "refuse": int(round(spec.refusal_rate * 10000)),
            "empty": int(round(spec.empty_rate * 10000)), "k": spec.k, "offset": offset,
            "n": min(INSERT_ROWS, spec.n - offset), "questions": spec.questions,
        })
    return spec.n
