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
  versions up);
* ``composite`` — all of these together, as a new user's traffic has them (issue 31): 70 % of the traffic from
  ``COMPOSITE_POOL`` recurring questions per stratum whose Zipf popularity walks hour by hour, each question with
  its own habits — its score level, latency and cost, how many chunks it retrieves, and for some of them *always*
  an empty shortlist (``HABIT_EMPTY``) or *always* a refusal (``HABIT_REFUSE``); 30 % new questions; bursts of new
  questions (``BURST_*``: a new topic asked many times for a few hours); hour-of-day and weekend seasonality of
  the volume and the mix; a daily document update (``DAILY_UPDATE_HOUR``) that a healthy index serves within
  minutes;
* ``composite_churn`` — ``composite`` whose daily update also moves the score level of the questions whose
  documents changed (``DAILY_UPDATED_QUESTIONS`` of them, by ``DAILY_UPDATE_SD``): a popular question then scores
  differently from its reference level for up to a week, which the question adjustment cannot tell from drift.

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

from ragmon.drift.simulation.draw import NO_SHIFT, Draw, K, Shift

SHAPES = ("iid", "mix", "trending", "seasonal", "doc_updates", "composite", "composite_churn")
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
# composite: recurring questions per stratum, their share of traffic, and their own habits
COMPOSITE_POOL = 3000
RECURRING_SHARE = 0.7
HABIT_EMPTY = 0.02      # share of recurring questions that always get an empty shortlist
HABIT_REFUSE = 0.03     # ... that are always refused
HABIT_FEW = 0.10        # ... that retrieve fewer than K chunks (1–4), always the same number
QUESTION_LATENCY_SD = 0.3   # a question's own log-latency offset (long questions, long answers)
QUESTION_COST_SD = 0.25     # its own log-cost offset
BURST_PER_HOUR = 1 / 36     # chance a burst of new questions starts in a stratum-hour (about every 1.5 days)
BURST_HOURS = (1, 4)        # a burst lasts 1–4 hours ...
BURST_SHARE = (0.05, 0.20)  # ... takes 5–20 % of the traffic ...
BURST_QUESTIONS = 20        # ... spread over 20 new questions (Zipf 1.0)
WEEKEND_VOLUME = 0.6        # volume on Saturdays and Sundays (days 5 and 6 of each week)
WEEKEND_MIX = np.array([1.4, 1.0, 0.9, 0.8])  # the weekend's tilt of the type mix
DAILY_UPDATE_HOUR = 3       # the daily document update, at 03:00
DAILY_UPDATED_QUESTIONS = 0.02  # composite_churn: share of recurring questions whose documents the daily update
DAILY_UPDATE_SD = 0.03          # changes, moving their score level by this much


_DAYS_SCALE = 1_000_000.0  # keys of different documents never overlap (simulations last under 1e6 days)


@dataclass
class Corpus:
    """``CORPUS_DOCS`` documents with Zipf popularity, each updated as a Poisson process (``UPDATES_PER_DAY``)
    over ``days`` (with ``daily_at``, the updates of a day all published at that time of day); a version is named by
    its publication day."""

    days: float
    rng: np.random.Generator
    daily_at: float | None = None  # all of a day's updates published at this time of day (days), else any time
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
        if self.daily_at is not None:  # one batch a day
            published = np.floor(published) + self.daily_at
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
class _Burst:
    """A burst of new questions: asked from ``start`` to ``end`` (hours), ``share`` of the traffic, by weight."""

    end: int
    share: float
    ids: np.ndarray
    weights: np.ndarray
    types: np.ndarray
    offsets: np.ndarray


@dataclass
class _Pool:
    """The composite shape's recurring questions and their own habits."""

    types: np.ndarray
    offsets: np.ndarray
    latency: np.ndarray   # log-latency offset
    cost: np.ndarray      # log-cost offset
    n_results: np.ndarray  # chunks it retrieves when not empty
    habit: np.ndarray     # 0 none, 1 always empty, 2 always refused
    zipf: np.ndarray
    log_pop: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, size: int) -> _Pool:
        types = rng.choice(len(TYPE_SHARE), size=size, p=TYPE_SHARE)
        habit = rng.choice(3, size=size, p=[1 - HABIT_EMPTY - HABIT_REFUSE, HABIT_EMPTY, HABIT_REFUSE])
        few = rng.random(size) < HABIT_FEW
        n_results = np.where(few, rng.integers(1, K, size=size), K)
        ranks = rng.permutation(size) + 1.0
        return cls(types, rng.normal(0.0, QUERY_SD, size), rng.normal(0.0, QUESTION_LATENCY_SD, size),
                   rng.normal(0.0, QUESTION_COST_SD, size), n_results, habit, np.log(ranks ** -ZIPF_EXPONENT),
                   rng.normal(0.0, TREND_SD / np.sqrt(1 - TREND_PHI ** 2), size))


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
    _pool: _Pool | None = field(init=False, default=None)
    _bursts: list[_Burst] = field(init=False, default_factory=list)
    _updated_day: int = field(init=False, default=-1)

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown traffic shape {self.shape!r}; known: {', '.join(SHAPES)}")
        ranks = np.arange(1, POOL_SIZE + 1, dtype=float)
        self._zipf = np.log(ranks ** -ZIPF_EXPONENT)
        self._query_offsets = self.rng.normal(0.0, QUERY_SD, size=(len(TYPE_SHARE), POOL_SIZE))
        # start from the walk's stationary distribution, so the first simulated hours are like any other
        self._log_pop = self.rng.normal(0.0, TREND_SD / np.sqrt(1 - TREND_PHI ** 2), size=(len(TYPE_SHARE), POOL_SIZE))
        if self.shape.startswith("composite"):
            self._pool = _Pool.draw(self.rng, COMPOSITE_POOL)
            self._next_query = COMPOSITE_POOL

    def _mix(self, hour_of_day: int, day: float = 0.0) -> np.ndarray:
        if self.shape in ("iid", "trending", "doc_updates"):
            return TYPE_SHARE
        mean = TYPE_SHARE
        if self.shape in ("seasonal", "composite", "composite_churn"):  # types peak at different times of day
            phase = np.array([0.0, 6.0, 12.0, 18.0])
            mean = TYPE_SHARE * np.exp(0.5 * np.sin(2 * np.pi * (hour_of_day + phase) / 24))
            if self.shape.startswith("composite") and _weekend(day):
                mean = mean * WEEKEND_MIX
            mean = mean / mean.sum()
        return self.rng.dirichlet(MIX_CONCENTRATION * mean)

    def volume(self, n: int, hour_of_day: int, day: float = 0.0) -> int:
        """Traces in a window of nominal size ``n`` at this hour (the seasonal and composite shapes' volume follows
        the day, the composite's also the week)."""
        if self.shape not in ("seasonal", "composite", "composite_churn"):
            return n
        factor = 1 + 0.6 * np.sin(2 * np.pi * (hour_of_day - 8) / 24)
        if self.shape.startswith("composite") and _weekend(day):
            factor *= WEEKEND_VOLUME
        return max(1, int(round(n * factor)))

    def window(self, n: int, hour_of_day: int, day: float, shift: Shift = NO_SHIFT) -> dict[str, np.ndarray]:
        """Per-trace feature values of one window (``draw(...).features()``)."""
        return self.draw(n, hour_of_day, day, shift).features()

    def draw(self, n: int, hour_of_day: int, day: float, shift: Shift = NO_SHIFT) -> Draw:
        """One window of ``n`` traces (before ``volume``) starting at ``day`` (days since the start)."""
        if self.shape.startswith("composite"):
            draw = self._draw_composite(n, hour_of_day, day, shift)
            return self._versions(draw, shift) if self.corpus is not None else draw
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
        noise = rng.normal(0.0, CHUNK_SD, size=(n, K))
        u_empty, u_refuse = rng.random(n), rng.random(n)
        latency = rng.lognormal(np.log(600) + 0.1 * types, 0.35)
        cost = 0.002 * (1 + 0.2 * types) * rng.lognormal(0.0, 0.25, size=n)
        times = day + rng.random(n) / 24
        hit = np.ones(n, bool) if shift.since is None else times >= shift.since
        chunks = _shifted(-np.sort(-(level[:, None] + noise - RANK_DECAY * np.arange(K)), axis=1), shift, hit)
        empty = u_empty < np.minimum(1.0, TYPE_EMPTY[types] + shift.extra_empty * hit)
        chunks[empty] = np.nan
        refused = u_refuse < TYPE_REFUSE[types]
        draw = Draw(chunks, empty, refused, latency, cost, times, queries=query_ids)
        return self._versions(draw, shift) if self.corpus is not None else draw

    def _draw_composite(self, n: int, hour_of_day: int, day: float, shift: Shift) -> Draw:
        """The composite shape's window: recurring questions with their habits, new ones, bursts, seasonality, the
        daily document update."""
        rng, pool = self.rng, self._pool
        assert pool is not None
        hour = int(round(day * 24))
        if self.shape == "composite_churn" and hour_of_day == DAILY_UPDATE_HOUR and int(day) != self._updated_day:
            self._updated_day = int(day)  # the update changed the documents of a few questions: their scores move
            moved = rng.random(pool.offsets.size) < DAILY_UPDATED_QUESTIONS
            pool.offsets[moved] += rng.normal(0.0, DAILY_UPDATE_SD, int(moved.sum()))
        pool.log_pop = TREND_PHI * pool.log_pop + rng.normal(0.0, TREND_SD, size=pool.log_pop.size)
        self._bursts = [b for b in self._bursts if b.end > hour]
        if rng.random() < BURST_PER_HOUR:
            size = BURST_QUESTIONS
            ids = self._next_query + np.arange(size, dtype=np.int64)
            self._next_query += size
            weights = 1.0 / np.arange(1, size + 1)
            self._bursts.append(_Burst(hour + int(rng.integers(BURST_HOURS[0], BURST_HOURS[1] + 1)),
                                       float(rng.uniform(*BURST_SHARE)), ids, weights / weights.sum(),
                                       rng.choice(len(TYPE_SHARE), size=size, p=TYPE_SHARE),
                                       rng.normal(0.0, QUERY_SD, size)))
        n = self.volume(n, hour_of_day, day)
        mix = self._mix(hour_of_day, day)
        burst_share = min(0.5, sum(b.share for b in self._bursts))
        kind = rng.choice(3, size=n, p=[burst_share, (1 - burst_share) * RECURRING_SHARE,
                                        (1 - burst_share) * (1 - RECURRING_SHARE)])
        types = rng.choice(len(mix), size=n, p=mix)
        offsets = rng.normal(0.0, QUERY_SD, size=n)
        lat_off = rng.normal(0.0, QUESTION_LATENCY_SD, size=n)
        cost_off = rng.normal(0.0, QUESTION_COST_SD, size=n)
        n_res = np.where(rng.random(n) < HABIT_FEW, rng.integers(1, K, size=n), K)
        habit = np.zeros(n, np.int64)
        query_ids = self._next_query + np.arange(n, dtype=np.int64)
        self._next_query += n
        recurring = np.flatnonzero(kind == 1)
        if recurring.size:  # by popularity, tilted by the hour's mix of question types
            weights = np.exp(pool.zipf + pool.log_pop) * (mix / TYPE_SHARE)[pool.types]
            q = rng.choice(pool.types.size, size=recurring.size, p=weights / weights.sum())
            query_ids[recurring], types[recurring], offsets[recurring] = q, pool.types[q], pool.offsets[q]
            lat_off[recurring], cost_off[recurring] = pool.latency[q], pool.cost[q]
            n_res[recurring], habit[recurring] = pool.n_results[q], pool.habit[q]
        bursting = np.flatnonzero(kind == 0)
        if bursting.size:
            shares = np.array([b.share for b in self._bursts])
            which = rng.choice(len(self._bursts), size=bursting.size, p=shares / shares.sum())
            for i, b in enumerate(self._bursts):
                idx = bursting[which == i]
                j = rng.choice(b.ids.size, size=idx.size, p=b.weights)
                query_ids[idx], types[idx], offsets[idx] = b.ids[j], b.types[j], b.offsets[j]
        level = self.base + TYPE_OFFSET[types] + offsets
        noise = rng.normal(0.0, CHUNK_SD, size=(n, K))
        u_empty, u_refuse = rng.random(n), rng.random(n)
        latency = rng.lognormal(np.log(600) + 0.1 * types + lat_off, 0.35)
        cost = 0.002 * (1 + 0.2 * types) * np.exp(cost_off) * rng.lognormal(0.0, 0.25, size=n)
        times = day + rng.random(n) / 24
        hit = np.ones(n, bool) if shift.since is None else times >= shift.since
        chunks = _shifted(-np.sort(-(level[:, None] + noise - RANK_DECAY * np.arange(K)), axis=1), shift, hit)
        empty = (habit == 1) | (u_empty < np.minimum(1.0, TYPE_EMPTY[types] + shift.extra_empty * hit))
        refused = (habit == 2) | (u_refuse < TYPE_REFUSE[types])
        chunks[np.arange(K)[None, :] >= n_res[:, None]] = np.nan
        chunks[empty] = np.nan
        return Draw(chunks, empty, refused, latency, cost, times, queries=query_ids,
                    n_results=np.where(empty, 0, n_res))

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
                    versions, known > versions, draw.queries, draw.n_results)


def _weekend(day: float) -> bool:
    return int(day) % 7 >= 5


def _shifted(chunks: np.ndarray, shift: Shift, hit: np.ndarray) -> np.ndarray:
    """Chunk scores with the drift applied to the traces it touches (``hit``)."""
    if shift.add == 0.0 and shift.scale == 1.0:
        return chunks
    return np.where(hit[:, None], (chunks + shift.add) * shift.scale, chunks)


def strata(shape: str, count: int, seed: int, *, days: float = 30.0) -> list[Stratum]:
    """``count`` strata of one shape with different score levels, seeded independently (``doc_updates`` and
    ``composite``: one corpus with ``days`` of updates, shared by the strata; the composite's updated daily)."""
    seeds = np.random.SeedSequence(seed).spawn(count + 1)
    corpus = (Corpus(days, np.random.default_rng(seeds[-1]),
                     daily_at=DAILY_UPDATE_HOUR / 24 if shape.startswith("composite") else None)
              if shape == "doc_updates" or shape.startswith("composite") else None)
    return [Stratum(shape, 0.55 + 0.05 * i, np.random.default_rng(s), corpus) for i, s in enumerate(seeds[:-1])]
