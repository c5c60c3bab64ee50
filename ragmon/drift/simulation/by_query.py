"""Values adjusted for the question in numpy: what ``query.traces_sql`` computes in ClickHouse for the
``Feature.by_query`` features (every feature of a trace: scores, counts, latency, cost, rates), for the simulations
(``bench/drift_null.py``) and to test the SQL against.

Popular questions repeat verbatim, and a question's retrieval scores — and its latency, its cost, how many chunks
it retrieves, whether it gets an empty shortlist or a refusal — are much the same each time it is asked, so an
hour's mean score (or empty-shortlist rate) moves with *which* questions were popular that hour. Each trace's value
is replaced by

    x − level(q) + M

where M is the group's mean over the reference windows and level(q) the mean of the trace's question over the
reference windows of the *other parity* (window index w odd → the even reference windows, and the other way
round), or M for a question those windows saw fewer than twice (the value is then left as it is). A window's summary is
then what it would have been had its questions scored as they did in the reference: the mix of questions
cancels, a retriever scoring the same questions lower does not.

**Rates** (x is 0 or 1) take the question's share shrunk towards M by ``RATE_PRIOR_ASKS`` (half an ask),
``level(q) = (k_q + a·M) / (n_q + a)``, so two empty shortlists in two asks are not taken for a question that is
*always* empty; a window's adjusted count ``Σ (x − level(q) + M)`` comes with its sampling variance
``Σ level(q)(1 − level(q))`` (``M(1 − M)`` for an unseen question): a question that always returns nothing adds
M to the count and nothing to its variance, whatever its popularity (``rate_by_query``).

Why the other parity: a level taken from the trace's own window would hold the trace's own noise (the
reference windows would look calmer than the current one, which is not in the reference), and leaving out only
the trace's own window would need a sum per question *and window*, as many as there are traces. Half the
reference is as good a level for a popular question, leaves every window out of its own levels — a reference
window and the current one are adjusted alike, down to which questions are new to them — and needs only two
sums per question. With no reference values at all the values are left as they are. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragmon.drift.method.summary import RateSummary

#: a rate's question level is its share shrunk towards the group's by this many asks at the group's share
RATE_PRIOR_ASKS = 0.5

Windows = Sequence[tuple[np.ndarray, np.ndarray]]


def question_levels(windows: Windows, reference: Sequence[int], *, min_asks: int = 2,
                    prior_asks: float = 0.0) -> tuple[list[np.ndarray], float]:
    """``windows``: (question keys, values) per window index w (0 the current window, newest first); non-finite
    values count nowhere. ``reference``: the indices of the reference windows. Returns, per window, each trace's
    question level from the other parity's reference windows (NaN: a question asked fewer than ``min_asks`` times
    there) and M, the mean over every reference value (NaN when there is none). With ``prior_asks`` the level is the
    question's mean shrunk towards M by that many asks."""
    keys = [k for k, _ in windows]
    levels, means = levels_of_features(keys, {"x": [v for _, v in windows]}, reference, {"x": prior_asks},
                                       min_asks=min_asks)
    return levels["x"], means["x"]


def levels_of_features(keys: Sequence[np.ndarray], values: dict[str, Sequence[np.ndarray]], reference: Sequence[int],
                       prior_asks: dict[str, float], *, min_asks: int = 2
                       ) -> tuple[dict[str, list[np.ndarray]], dict[str, float]]:
    """``question_levels`` of several features whose values belong to the same traces (``keys[w]`` the questions of
    window w, ``values[name][w]`` aligned with them; a feature a trace lacks is NaN there): the questions are looked
    up once for all of them."""
    parities = [[i for i in reference if i % 2 == p and i < len(keys)] for p in (0, 1)]
    known, inverse = [], []
    for ref in parities:
        if ref:
            u, inv = np.unique(np.concatenate([keys[i] for i in ref]), return_inverse=True)
        else:
            u, inv = np.empty(0, np.int64), np.empty(0, np.int64)
        known.append(u)
        inverse.append(inv)
    # where each window's questions sit among the other parity's reference questions (-1: not there)
    at: list[np.ndarray] = []
    for w, k in enumerate(keys):
        u = known[1 - w % 2]
        if u.size == 0 or k.size == 0:
            at.append(np.full(k.size, -1))
            continue
        pos = np.minimum(np.searchsorted(u, k), u.size - 1)
        at.append(np.where(u[pos] == k, pos, -1))
    levels: dict[str, list[np.ndarray]] = {}
    means: dict[str, float] = {}
    for name, per_window in values.items():
        sums, counts, pooled_sum, pooled_n = [], [], 0.0, 0
        for p, ref in enumerate(parities):
            v = np.concatenate([np.asarray(per_window[i], dtype=float) for i in ref]) if ref else np.empty(0)
            finite = np.isfinite(v)
            sums.append(np.bincount(inverse[p][finite], weights=v[finite], minlength=known[p].size))
            counts.append(np.bincount(inverse[p][finite], minlength=known[p].size))
            pooled_sum, pooled_n = pooled_sum + float(v[finite].sum()), pooled_n + int(finite.sum())
        mean = pooled_sum / pooled_n if pooled_n else float("nan")
        means[name] = mean
        prior = prior_asks.get(name, 0.0)
        out = []
        for w, where in enumerate(at):
            if not pooled_n or not (where >= 0).any():
                out.append(np.full(where.size, np.nan))
                continue
            p = 1 - w % 2
            j = np.maximum(where, 0)
            c = counts[p][j] if counts[p].size else np.zeros(where.size)
            total = sums[p][j] if sums[p].size else np.zeros(where.size)
            seen = (where >= 0) & (c >= min_asks)
            level = (total + prior * mean) / np.maximum(c + prior, 1e-300)
            out.append(np.where(seen, level, np.nan))
        levels[name] = out
    return levels, means


def adjusted(values: np.ndarray, level: np.ndarray, mean: float) -> np.ndarray:
    """``x − level(q) + M`` where the question was seen; the value as it is elsewhere (and where non-finite)."""
    return np.where(np.isfinite(level), values - level + mean, np.asarray(values, dtype=float))


def adjusted_rate(values: np.ndarray, level: np.ndarray, mean: float) -> RateSummary:
    """A window of a rate (values 0/1) as its adjusted count ``Σ (x − level(q) + M)`` out of its traces, with
    ``var = Σ level(q)(1 − level(q))`` (``M(1 − M)`` for an unseen question); without reference values (M NaN) the
    count as it is, ``var`` None."""
    x = np.asarray(values, dtype=float)
    if not np.isfinite(mean):
        return RateSummary(int(x.size), float(x.sum()))
    p = np.where(np.isfinite(level), level, mean)
    return RateSummary(int(x.size), float(np.sum(x - p + mean)), float(np.sum(p * (1 - p))))


def adjust_by_query(windows: Windows, reference: Sequence[int], *, min_asks: int = 2) -> list[np.ndarray]:
    """Every window's values adjusted, ``x − level(q) + M`` (``question_levels``); a value whose question the other
    parity did not see, and a non-finite value, stay as they are. A question with fewer than ``min_asks`` values in
    the other parity's reference windows counts as unseen (``query.MIN_ASKS`` in the SQL)."""
    levels, mean = question_levels(windows, reference, min_asks=min_asks)
    return [adjusted(values, level, mean) for (_, values), level in zip(windows, levels, strict=True)]


def rate_by_query(windows: Windows, reference: Sequence[int], *, min_asks: int = 2) -> list[RateSummary]:
    """Every window of a rate as ``adjusted_rate``, levels shrunk by ``RATE_PRIOR_ASKS``."""
    levels, mean = question_levels(windows, reference, min_asks=min_asks, prior_asks=RATE_PRIOR_ASKS)
    return [adjusted_rate(values, level, mean) for (_, values), level in zip(windows, levels, strict=True)]
