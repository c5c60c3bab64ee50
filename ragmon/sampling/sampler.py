"""``ScoreSampler``: which traces the live scorer judges, decided from a hash of (salt, query_id).

The hash position ``u`` of a query is a pure function of the salt and the query id, so every replica, every
process and every restart decides the same; a production trace and its shadow twins share the query id and
so share ``u``: with equal rates they are sampled together, with different per-retriever rates the samples
nest (the lower-rate sample is a subset of the higher one). A query is ``sampled`` when ``u < rate``.

Two guards are stateful and per replica (documented in docs/judges.md): a cap on sampled queries per clock
hour and a judge budget per UTC day, read from an INJECTED clock. Once a query id has been admitted in the
current hour, its twins are admitted too, so a cap never splits a pair inside the hour. Every decision has a
reason: ``sampled``, ``not_sampled``, ``capped`` or ``over_budget``. Thread-safe.

With many judge calls in flight the budget must count money not yet spent: ``decide`` may reserve what the call
may cost (``cost_estimate``), a query is admitted only while today's spend plus the reservations in flight plus
its own fits the budget, and ``settle`` swaps a reservation for what the call really cost.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

_SCALE = float(1 << 64)
_blake = hashlib.blake2b


class Decision(StrEnum):
    sampled = "sampled"
    not_sampled = "not_sampled"
    capped = "capped"
    over_budget = "over_budget"


@dataclass(frozen=True, slots=True)
class SamplingDecision:
    """One decision, with the rate applied and the query's hash position (for audits)."""

    decision: Decision
    rate: float
    position: float
    #: judge spend reserved for this trace until ``ScoreSampler.settle`` (0 without a budget)
    reserved_usd: float = 0.0

    @property
    def sampled(self) -> bool:
        return self.decision is Decision.sampled


@dataclass(frozen=True, slots=True)
class Rate:
    """A rate override: ``retriever`` and/or ``category`` None means any."""

    rate: float
    retriever: str | None = None
    category: str | None = None


def hash_position(salt: str, query_id: str) -> float:
    """Where a query falls in [0, 1): BLAKE2b-64 of salt and query id, as a fraction of 2**64."""
    digest = hashlib.blake2b(salt.encode("utf-8") + b"\x00" + query_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


class ScoreSampler:
    """Deterministic rate sampling plus per-replica hourly cap and daily budget. See the module docstring."""

    name = "score"

    def __init__(self, *, salt: str, rate: float, overrides: Iterable[Rate] = (), max_per_hour: int | None = None,
                 daily_budget_usd: float | None = None, clock: Callable[[], float] = time.time):
        for r in [rate, *(o.rate for o in overrides)]:
            if not (math.isfinite(r) and 0 <= r <= 1):
                raise ValueError(f"a sampling rate must be in [0, 1], got {r!r}")
        if not salt:
            raise ValueError("the sampling salt must not be empty")
        self.salt = salt
        self._prefix = salt.encode("utf-8") + b"\x00"
        self.rate = rate
        self.max_per_hour = max_per_hour
        self.daily_budget_usd = daily_budget_usd
        self._clock = clock
        self._both: dict[tuple[str, str], float] = {}
        self._retriever: dict[str, float] = {}
        self._category: dict[str, float] = {}
        for o in overrides:  # the first override of a given specificity wins
            if o.retriever is not None and o.category is not None:
                self._both.setdefault((o.retriever, o.category), o.rate)
            elif o.retriever is not None:
                self._retriever.setdefault(o.retriever, o.rate)
            elif o.category is not None:
                self._category.setdefault(o.category, o.rate)
            else:
                raise ValueError("a rate override needs a retriever, a category or both; use rate for the global one")
        self._lock = threading.Lock()
        self._hour = -1
        self._admitted: set[str] = set()
        self._day = -1
        self._spent = 0.0
        self._reserved = 0.0  # not reset with the day: the calls it covers are still in flight

    @classmethod
    def from_settings(cls, settings: Any, clock: Callable[[], float] = time.time) -> ScoreSampler:
        """Build from ``SamplingSettings`` (the ``sampling`` config section)."""
        return cls(salt=settings.salt, rate=settings.rate,
                   overrides=[Rate(o.rate, o.retriever, o.category) for o in settings.overrides],
                   max_per_hour=settings.max_per_hour, daily_budget_usd=settings.daily_budget_usd, clock=clock)

    def rate_for(self, retriever: str = "", category: str = "") -> float:
        """The rate in force: (retriever, category) override, else retriever, else category, else global."""
        found = self._both.get((retriever, category))
        if found is None:
            found = self._retriever.get(retriever)
        if found is None:
            found = self._category.get(category)
        return self.rate if found is None else found

    def decide(self, query_id: str, retriever: str = "", category: str = "", *,
               cost_estimate: Callable[[], float] | None = None) -> SamplingDecision:
        """Decide for one trace. Never raises for any query id (``cost_estimate`` may, if it raises).

        ``cost_estimate`` gives the most the trace's judgement may cost; it is called only when a daily budget is
        set and the trace is admitted, and the amount is reserved until ``settle``."""
        rate = self.rate_for(retriever, category)
        position = int.from_bytes(_blake(self._prefix + query_id.encode("utf-8"), digest_size=8).digest(),
                                  "big") / _SCALE  # == hash_position(self.salt, query_id), inlined: hot path
        if position >= rate:
            return SamplingDecision(Decision.not_sampled, rate, position)
        if self.max_per_hour is None and self.daily_budget_usd is None:
            return SamplingDecision(Decision.sampled, rate, position)
        estimate = cost_estimate() if cost_estimate is not None and self.daily_budget_usd is not None else 0.0
        if not (math.isfinite(estimate) and estimate >= 0):
            raise ValueError(f"a cost estimate must be a finite non-negative number, got {estimate!r}")
        now = self._clock()
        with self._lock:
            self._roll(now)
            if query_id in self._admitted:  # a twin of an admitted query: admitted even past the budget
                self._reserved += estimate
                return SamplingDecision(Decision.sampled, rate, position, estimate)
            if self.daily_budget_usd is not None:
                committed = self._spent + self._reserved
                if committed >= self.daily_budget_usd or committed + estimate > self.daily_budget_usd:
                    return SamplingDecision(Decision.over_budget, rate, position)
            if self.max_per_hour is not None and len(self._admitted) >= self.max_per_hour:
                return SamplingDecision(Decision.capped, rate, position)
            self._admitted.add(query_id)
            self._reserved += estimate
            return SamplingDecision(Decision.sampled, rate, position, estimate)

    def decide_trace(self, trace: Any) -> SamplingDecision:
        """``decide`` for a trace object or dict (query_id, retriever.name, category)."""
        if isinstance(trace, dict):
            return self.decide(trace["query_id"], (trace.get("retriever") or {}).get("name", ""),
                               trace.get("category") or "")
        return self.decide(trace.query_id, trace.retriever.name, trace.category or "")

    def record_cost(self, usd: float) -> None:
        """Add judge spend to today's total (the budget guard reads it)."""
        if not math.isfinite(usd) or usd < 0:
            raise ValueError(f"judge cost must be a finite non-negative number, got {usd!r}")
        with self._lock:
            self._roll(self._clock())
            self._spent += usd

    def settle(self, reserved_usd: float, usd: float) -> None:
        """A judgement is over: release its reservation (``SamplingDecision.reserved_usd``) and add its cost."""
        if not math.isfinite(usd) or usd < 0:
            raise ValueError(f"judge cost must be a finite non-negative number, got {usd!r}")
        with self._lock:
            self._roll(self._clock())
            self._reserved = max(0.0, self._reserved - reserved_usd)
            self._spent += usd

    @property
    def reserved_usd(self) -> float:
        """Spend reserved by judgements in flight."""
        with self._lock:
            return self._reserved

    @property
    def spent_today_usd(self) -> float:
        with self._lock:
            self._roll(self._clock())
            return self._spent

    def _roll(self, now: float) -> None:
        hour, day = int(now // 3600), int(now // 86400)
        if hour != self._hour:
            self._hour = hour
            self._admitted = set()
        if day != self._day:
            self._day = day
            self._spent = 0.0
