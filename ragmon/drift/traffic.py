"""Simulated RAG traffic with the shapes production traffic has, one window at a time, as raw per-trace values.

Drift detectors that count traces as independent draws alarm on real traffic because real traffic is not
independent draws (docs/drift.md, "Traffic is not independent draws"). This module generates traffic whose
windows differ the way production hours do, so the detector can be measured on it (``bench/drift_null.py``,
the unit tests, ``ragmon drift simulate --shape``):

* ``iid`` — every trace an independent draw from one fixed distribution (the textbook case);
* ``mix`` — each window's mix of query types drawn around a fixed mean (Dirichlet), as hours differ;
* ``trending`` — queries repeat with Zipf popularity, and which queries are popular drifts from hour to hour
  (an AR(1) walk on log-popularity), so a window holds clusters of identical retrievals;
* ``seasonal`` — the mix and the volume follow the hour of day, plus the ``mix`` noise;
* ``doc_updates`` — 20,000 documents with Zipf popularity, 0.5 % of them get a new version each day, and a
  healthy index serves it within minutes (``Shift.stale_since`` injects an index that stops picking new
  versions up).

A stratum has four query types with different score levels, empty-shortlist and refusal rates. Per trace
(``Draw``): a query level (type level + the query's own offset), five chunk scores (level + noise − a rank
decay), whence ``top1_score``, ``mean_score`` (mean of the top 5), ``top2_gap``, ``n_results``; latency and
cost; empty shortlist and refusal flags; the retrieved chunks' documents and versions, and whether each was
superseded when served. Drifts to inject are a ``Shift`` (added to, or multiplying, every score; extra empty
shortlists; a frozen index). ``ragmon drift simulate`` writes the same draws into ClickHouse.

Pure: numpy only, every draw from the ``numpy.random.Generator`` passed in; no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SHAPES = ("iid", "mix", "trending", "seasonal", "doc_updates")
K = 5  # chunks per non-empty shortlist
#: per query type: score level offset, empty-shortlist rate, refusal rate, mean share of traffic
TYPE_OFFSET = np.array([-0.06, -0.02, 0.02, 0.06])
TYPE_EMPTY = np.array([0.03, 0.01, 0.005, 0.002])
TYPE_REFUSE = np.array([0.15, 0.05, 0.03, 0.02])
TYPE_SHARE = np.array([0.15, 0.35, 0.30, 0.20])
QUERY_SD = 0.05         # a query's own score offset
CHUNK_SD = 0.03         # per-chunk noise around the query level
RANK_DECAY = 0.03       # score lost per rank
MIX_CONCENTRATION = 60  # Dirichlet concentration of an hour's type mix (smaller: hours differ more)
POOL_SIZE = 3000        # queries per type in the trending shape
ZIPF_EXPONENT = 1.1
TREND_PHI, TREND_SD = 0.9, 0.6  # hourly AR(1) walk of each query's log-popularity
CORPUS_DOCS = 20_000
UPDATES_PER_DAY = 0.005  # share of documents that get a new version each day
INDEX_LAG_DAYS = 20 / 1440   # mean time a healthy index takes to serve a new version
INDEX_GRACE_DAYS = 1 / 24    # drift.index_lag_seconds: a version this young may still be missing from the index


@dataclass(frozen=True, slots=True)
class Shift:
    """A drift to inject into one window: scores + ``add`` then × ``scale``; ``extra_empty`` more empty
    shortlists (absolute share); ``stale_since``: the index stopped picking up new versions at this time (in
    days since the start of the simulation)."""

    add: float = 0.0
    scale: float = 1.0
    extra_empty: float = 0.0
    stale_since: float | None = None


NO_SHIFT = Shift()


@dataclass(frozen=True, slots=True)
class Draw:
    """One window of one stratum as per-trace values: ``scores`` (n × K chunk scores, best first; rows of
    empty shortlists are NaN), flags, latency and cost, ``times`` (days since the start); for ``doc_updates``
    each chunk's document, served version (its publication day, −1 the original) and whether it was stale
    (a newer version published ``INDEX_GRACE_DAYS`` before it was served)."""

    scores: np.ndarray
    empty: np.ndarray
    refused: np.ndarray
    latency_ms: np.ndarray
    cost_usd: np.ndarray
    times: np.ndarray
    docs: np.ndarray | None = None
    versions: np.ndarray | None = None
    stale: np.ndarray | None = None
    queries: np.ndarray | None = None

    def features(self) -> dict[str, np.ndarray]:
        """Per-trace feature values as the drift features define them (rates as booleans; the version share
        per retrieved chunk)."""
        full = ~self.empty
        chunks = self.scores[full]
        out = {
            "top1_score": chunks[:, 0],
            "mean_score": chunks.mean(axis=1),
            "top2_gap": chunks[:, 0] - chunks[:, 1],
            "n_results": np.where(self.empty, 0, K).astype(float),
            "latency_ms": self.latency_ms,
            "cost_usd": self.cost_usd,
            "empty_shortlist_rate": self.empty,
            "refusal_rate": self.refused,
        }
        if self.stale is not None:
            out["newest_version_share"] = ~self.stale[full].ravel()
        return out


_DAYS_SCALE = 1_000_000.0  # keys of different documents never overlap (simulations last under 1e6 days)


@dataclass
class Corpus:
    """``CORPUS_DOCS`` documents with Zipf popularity, each updated as a Poisson process (``UPDATES_PER_DAY``)
    over ``days``; a version is named by its publication day."""

    days: float
    rng: np.random.Generator
    popularity: np.ndarray = field(init=False)
    doc_of: np.ndarray = field(init=False)
    published: np.ndarray = field(init=False)
    _keys: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        ranks = np.arange(1, CORPUS_DOCS + 1, dtype=float)
        self.popularity = ranks ** -0.8 / np.sum(ranks ** -0.8)
        counts = self.rng.poisson(UPDATES_PER_DAY * self.days, size=CORPUS_DOCS)
        doc_of = np.repeat(np.arange(CORPUS_DOCS), counts)
        published = self.rng.uniform(0.0, self.days, size=doc_of.size)
        order = np.lexsort((published, doc_of))
        self.doc_of, self.published = doc_of[order], published[order]
        self._keys = self.doc_of * _DAYS_SCALE + self.published

    def newest(self, docs: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Publication day of each document's newest version at ``at`` (−1: the original version)."""
        i = np.searchsorted(self._keys, docs * _DAYS_SCALE + np.maximum(at, -0.5), side="right") - 1
        j = np.maximum(i, 0)
        ok = (i >= 0) & (self.doc_of[j] == docs) if self.doc_of.size else np.zeros(docs.shape, bool)
        return np.where(ok, self.published[j] if self.published.size else -1.0, -1.0)


@dataclass
class Stratum:
    """One stratum's traffic generator. ``base`` is its score level; each ``draw`` advances the hour state."""

    shape: str
    base: float
    rng: np.random.Generator
    corpus: Corpus | None = None
    _log_pop: np.ndarray = field(init=False)
    _zipf: np.ndarray = field(init=False)
    _query_offsets: np.ndarray = field(init=False)
    _next_query: int = field(init=False, default=len(TYPE_SHARE) * POOL_SIZE)

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown traffic shape {self.shape!r}; known: {', '.join(SHAPES)}")
        ranks = np.arange(1, POOL_SIZE + 1, dtype=float)
        self._zipf = np.log(ranks ** -ZIPF_EXPONENT)
        self._query_offsets = self.rng.normal(0.0, QUERY_SD, size=(len(TYPE_SHARE), POOL_SIZE))
        # start from the walk's stationary distribution, so the first simulated hours are like any other
        self._log_pop = self.rng.normal(0.0, TREND_SD / np.sqrt(1 - TREND_PHI ** 2), size=(len(TYPE_SHARE), POOL_SIZE))

    def _mix(self, hour_of_day: int) -> np.ndarray:
        if self.shape in ("iid", "trending", "doc_updates"):
            return TYPE_SHARE
        mean = TYPE_SHARE
        if self.shape == "seasonal":  # questions of each type peak at a different time of day
            phase = np.array([0.0, 6.0, 12.0, 18.0])
            mean = TYPE_SHARE * np.exp(0.5 * np.sin(2 * np.pi * (hour_of_day + phase) / 24))
            mean = mean / mean.sum()
        return self.rng.dirichlet(MIX_CONCENTRATION * mean)

    def volume(self, n: int, hour_of_day: int) -> int:
        """Traces in a window of nominal size ``n`` at this hour (the seasonal shape's volume follows the day)."""
        if self.shape != "seasonal":
            return n
        return max(1, int(round(n * (1 + 0.6 * np.sin(2 * np.pi * (hour_of_day - 8) / 24)))))

    def window(self, n: int, hour_of_day: int, day: float, shift: Shift = NO_SHIFT) -> dict[str, np.ndarray]:
        """Per-trace feature values of one window (``draw(...).features()``)."""
        return self.draw(n, hour_of_day, day, shift).features()

    def draw(self, n: int, hour_of_day: int, day: float, shift: Shift = NO_SHIFT) -> Draw:
        """One window of ``n`` traces (before ``volume``) starting at ``day`` (days since the start)."""
        rng = self.rng
        n = self.volume(n, hour_of_day)
        mix = self._mix(hour_of_day)
        types = rng.choice(len(mix), size=n, p=mix)
        if self.shape == "trending":
            self._log_pop = TREND_PHI * self._log_pop + rng.normal(0.0, TREND_SD, size=self._log_pop.shape)
            offsets = np.empty(n)
            query_ids = np.empty(n, dtype=np.int64)
            for t in range(len(mix)):
                idx = np.flatnonzero(types == t)
                if idx.size:
                    weights = np.exp(self._zipf + self._log_pop[t])
                    queries = rng.choice(POOL_SIZE, size=idx.size, p=weights / weights.sum())
                    offsets[idx] = self._query_offsets[t, queries]
                    query_ids[idx] = t * POOL_SIZE + queries
        else:  # every trace a question of its own
            offsets = rng.normal(0.0, QUERY_SD, size=n)
            query_ids = self._next_query + np.arange(n, dtype=np.int64)
            self._next_query += n
        level = self.base + TYPE_OFFSET[types] + offsets
        chunks = level[:, None] + rng.normal(0.0, CHUNK_SD, size=(n, K)) - RANK_DECAY * np.arange(K)
        chunks = (-np.sort(-chunks, axis=1) + shift.add) * shift.scale
        empty = rng.random(n) < np.minimum(1.0, TYPE_EMPTY[types] + shift.extra_empty)
        chunks[empty] = np.nan
        refused = rng.random(n) < TYPE_REFUSE[types]
        latency = rng.lognormal(np.log(600) + 0.1 * types, 0.35)
        cost = 0.002 * (1 + 0.2 * types) * rng.lognormal(0.0, 0.25, size=n)
        draw = Draw(chunks, empty, refused, latency, cost, day + rng.random(n) / 24, queries=query_ids)
        return self._versions(draw, shift) if self.corpus is not None else draw

    def _versions(self, draw: Draw, shift: Shift) -> Draw:
        """Which document and version each chunk served: a healthy index serves a new version after an
        exponential lag (mean ``INDEX_LAG_DAYS``); a frozen one (``stale_since``) nothing newer than its freeze."""
        corpus, rng = self.corpus, self.rng
        assert corpus is not None
        n = draw.times.size
        docs = rng.choice(CORPUS_DOCS, size=(n, K), p=corpus.popularity)
        served_at = np.repeat(draw.times[:, None], K, axis=1)
        indexed = served_at - rng.exponential(INDEX_LAG_DAYS, size=(n, K))
        if shift.stale_since is not None:
            indexed = np.minimum(indexed, shift.stale_since)
        versions = corpus.newest(docs.ravel(), indexed.ravel()).reshape(n, K)
        known = corpus.newest(docs.ravel(), (served_at - INDEX_GRACE_DAYS).ravel()).reshape(n, K)
        return Draw(draw.scores, draw.empty, draw.refused, draw.latency_ms, draw.cost_usd, draw.times, docs,
                    versions, known > versions, draw.queries)


def strata(shape: str, count: int, seed: int, *, days: float = 30.0) -> list[Stratum]:
    """``count`` strata of one shape with different score levels, seeded independently (``doc_updates``: one
    corpus with ``days`` of updates, shared by the strata)."""
    seeds = np.random.SeedSequence(seed).spawn(count + 1)
    corpus = Corpus(days, np.random.default_rng(seeds[-1])) if shape == "doc_updates" else None
    return [Stratum(shape, 0.55 + 0.05 * i, np.random.default_rng(s), corpus) for i, s in enumerate(seeds[:-1])]
