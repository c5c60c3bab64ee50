"""One simulated window of one stratum as per-trace values (``Draw``), and the drift injected into it (``Shift``):
what ``ragmon.drift.simulation.traffic`` generates and the simulations and offline checks read. Pure data and numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

K = 5  # chunks per non-empty shortlist


@dataclass(frozen=True, slots=True)
class Shift:
    """A drift to inject into one window: scores + ``add`` then × ``scale``; ``extra_empty`` more empty
    shortlists (absolute share); ``stale_since``: the index stopped picking up new versions at this time (in
    days since the start of the simulation); ``since``: an onset inside the window (earlier traces unchanged)."""

    add: float = 0.0
    scale: float = 1.0
    extra_empty: float = 0.0
    stale_since: float | None = None
    since: float | None = None  # the drift touches only traces at or after this time (days); None: the whole window


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
    n_results: np.ndarray | None = None  # chunks retrieved per trace (None: K, or 0 when empty); NaN scores beyond

    def features(self) -> dict[str, np.ndarray]:
        """Per-trace feature values as the drift features define them (rates as booleans; the version share
        per retrieved chunk). ``top2_gap`` is NaN for a shortlist of one (as the traces table's column)."""
        full = ~self.empty
        chunks = self.scores[full]
        if self.n_results is None:
            counts = np.where(self.empty, 0, K).astype(float)
            mean, gap = chunks.mean(axis=1), chunks[:, 0] - chunks[:, 1]
        else:
            counts = self.n_results.astype(float)
            with np.errstate(invalid="ignore"):
                mean = np.nanmean(chunks, axis=1) if chunks.size else np.empty(0)
            gap = chunks[:, 0] - chunks[:, 1]  # NaN where only one chunk was retrieved
        out = {
            "top1_score": chunks[:, 0],
            "mean_score": mean,
            "top2_gap": gap,
            "n_results": counts,
            "latency_ms": self.latency_ms,
            "cost_usd": self.cost_usd,
            "empty_shortlist_rate": self.empty,
            "refusal_rate": self.refused,
        }
        if self.stale is not None:
            served = self.stale[full] if self.n_results is None else self.stale[full][np.isfinite(chunks)]
            out["newest_version_share"] = ~served.ravel()
        return out

    def questions(self, feature: str) -> np.ndarray | None:
        """The question of each value of ``features()[feature]`` (None: no questions, or a per-chunk feature)."""
        if self.queries is None or feature == "newest_version_share":
            return None
        return self.queries[~self.empty] if feature in _PER_SHORTLIST else self.queries

    def before(self, t: float) -> Draw:
        """The traces of this window timestamped before ``t`` (days): a window still in progress."""
        keep = self.times < t
        pick = lambda a: None if a is None else a[keep]  # noqa: E731
        return Draw(self.scores[keep], self.empty[keep], self.refused[keep], self.latency_ms[keep],
                    self.cost_usd[keep], self.times[keep], pick(self.docs), pick(self.versions), pick(self.stale),
                    pick(self.queries), pick(self.n_results))


#: features measured on non-empty shortlists only
_PER_SHORTLIST = ("top1_score", "mean_score", "top2_gap")
