"""Query-adjusted score values in numpy: what ``query.traces_sql`` computes in ClickHouse for a
``Feature.by_query`` feature, for the simulations (``bench/drift_null.py``) and to test the SQL against.

Popular questions repeat verbatim, and a question's retrieval scores are much the same each time it is asked, so
an hour's mean score moves with *which* questions were popular that hour. Each trace's value is replaced by

    x − level(q) + M

where M is the group's mean over the reference windows and level(q) the mean of the trace's question over the
reference windows of the *other parity* (window index w odd → the even reference windows, and the other way
round), or M for a question those windows saw fewer than twice (the value is then left as it is). A window's summary is
then what it would have been had its questions scored as they did in the reference: the mix of questions
cancels, a retriever scoring the same questions lower does not.

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

#: integer keys below this are indexed directly rather than sorted (the simulations number their questions)
DENSE_KEYS = 1 << 23


def adjust_by_query(windows: Sequence[tuple[np.ndarray, np.ndarray]], reference: Sequence[int], *,
                    min_asks: int = 2) -> list[np.ndarray]:
    """``windows``: (question keys, values) per window index w (0 the current window, newest first); non-finite
    values stay as they are and count nowhere. ``reference``: the indices of the reference windows. Returns every
    window's adjusted values. A question with fewer than ``min_asks`` values in the other parity's reference
    windows counts as unseen (``query.MIN_ASKS`` in the SQL)."""
    levels = []
    pooled: list[np.ndarray] = []
    every_key = [keys for keys, _ in windows if keys.size]
    top = max((int(k.max()) for k in every_key), default=0)
    dense = all(k.dtype.kind in "iu" and (k.size == 0 or k.min() >= 0) for k, _ in windows) and top < DENSE_KEYS
    for parity in (0, 1):
        keys = [windows[i][0][np.isfinite(windows[i][1])] for i in reference if i % 2 == parity]
        values = [windows[i][1][np.isfinite(windows[i][1])] for i in reference if i % 2 == parity]
        keys_all = np.concatenate(keys) if keys else np.empty(0, np.int64)
        values_all = np.concatenate(values) if values else np.empty(0)
        if dense:  # small non-negative integer keys (the simulations): index by the key itself
            known = np.arange(top + 1)
            levels.append((known, np.bincount(keys_all, weights=values_all, minlength=top + 1),
                           np.bincount(keys_all, minlength=top + 1)))
        else:
            known, inverse = np.unique(keys_all, return_inverse=True)
            levels.append((known, np.bincount(inverse, weights=values_all, minlength=known.size),
                           np.bincount(inverse, minlength=known.size)))
        pooled.append(values_all)
    everything = np.concatenate(pooled)
    if everything.size == 0:
        return [values.astype(float) for _, values in windows]
    mean = float(everything.mean())
    out = []
    for w, (keys, values) in enumerate(windows):
        values = values.astype(float)
        known, sums, counts = levels[1 - w % 2]
        if known.size == 0:
            out.append(values)
            continue
        at = keys if dense else np.minimum(np.searchsorted(known, keys), known.size - 1)
        seen = (known[at] == keys) & (counts[at] >= min_asks)
        level = np.where(seen, sums[at] / np.maximum(counts[at], 1), mean)
        out.append(values - level + mean)
    return out
