"""``compare``: the canary cohort against production, per stratum, on user outcomes, latency and judged quality.

Owns joining each arm's traces to their outcome events by query id with a bounded wait (an event counts when it
happened within ``join_wait_seconds`` after the trace; traces younger than the wait are left out, their outcomes
may still come), deriving reformulation (an explicit ``reformulated`` event, or the same session asking again
within ``reformulation_seconds``), the per-stratum intervals (``ab.stats``) and the verdict: **reject** when an
interval lies wholly on the harmful side beyond its tolerance, **promote** when every interval rules such harm
out, **hold** otherwise — a measure without data (no feedback, nothing judged) holds, by the rule ``shadow
compare`` shares (``ragmon.metrics.promotion``) — and hold with "cohort too small" below ``min_per_arm`` traces in
either arm. Feedback is judged against its own tolerance (``max_feedback_drop``), sized for its −1..1 scale. The
SQL is ``ab.queries``. Must not write to the store.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.ab.queries import AbStore, arm_traces, outcomes_of, quality_of, session_asks
from ragmon.ab.stats import Delta, mean_delta, rate_delta
from ragmon.metrics.promotion import verdict

RATES = ("citation_opened", "reformulated", "escalated", "resolved")
#: rates where more is worse; every other measure is better higher, except latency
WORSE_HIGHER = frozenset({"reformulated", "escalated", "latency_ms"})
QUALITY = ("faithfulness", "answer_relevance")
PROMOTE, HOLD, REJECT = "promote", "hold", "reject"
EXIT = {PROMOTE: 0, REJECT: 1, HOLD: 4}
ALL = "all"


@dataclass(frozen=True)
class Arm:
    name: str
    version: str | None
    variant: str

    @classmethod
    def parse(cls, text: str, variant: str) -> Arm:
        name, at, version = text.partition("@")
        if not name or (at and not version) or "@" in version or text != text.strip():
            raise ValueError(f"{text[:80]!r}: expected NAME or NAME@VERSION (one '@', both sides non-empty)")
        return cls(name, version or None, variant)

    def __str__(self) -> str:
        return f"{self.name}@{self.version or '*'} ({self.variant})"


@dataclass(frozen=True)
class AbOptions:
    baseline: Arm
    candidate: Arm
    since: datetime
    until: datetime
    join_wait_seconds: float = 1800.0
    reformulation_seconds: float = 120.0
    min_per_arm: int = 200
    max_rate_harm: float = 0.02
    max_latency_increase_ms: float = 50.0
    max_quality_drop: float = 0.02
    #: on feedback's −1..1 scale (0.1: five points of thumbs-up share when every value is ±1)
    max_feedback_drop: float = 0.1
    confidence: float = 0.95

    @classmethod
    def of(cls, settings: Any, baseline: Arm, candidate: Arm, since: datetime, until: datetime, *,
           min_per_arm: int | None = None, confidence: float = 0.95) -> AbOptions:
        """The comparison the ``ab`` settings section configures, for these arms and window."""
        a = settings
        return cls(baseline, candidate, since, until, a.join_wait_seconds, a.reformulation_seconds,
                   min_per_arm or a.min_per_arm, a.max_rate_harm, a.max_latency_increase_ms, a.max_quality_drop,
                   a.max_feedback_drop, confidence)


@dataclass(frozen=True)
class Measure:
    name: str
    delta: Delta
    tolerance: float
    status: str  # ok | harm | inconclusive | no_data

    @property
    def worse_higher(self) -> bool:
        return self.name in WORSE_HIGHER


@dataclass(frozen=True)
class StratumResult:
    stratum: str
    n_baseline: int
    n_candidate: int
    measures: tuple[Measure, ...]
    decision: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class AbResult:
    options: AbOptions
    judge_fingerprint: str | None
    strata: tuple[StratumResult, ...]
    decision: str
    too_small: tuple[str, ...] = field(default=())
    #: the span of the candidate's traces in the window (aware, UTC); the baseline is compared over it only (None:
    #: no cohort)
    cohort: tuple[datetime, datetime] | None = None
    #: the arms with no trace at all in the window (a typo in a name or version looks like this)
    empty_arms: tuple[str, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        return EXIT[self.decision]


def judge(name: str, d: Delta, tolerance: float) -> Measure:
    """ok: the interval rules out harm beyond ``tolerance``; harm: it lies wholly beyond it; else inconclusive."""
    if math.isnan(d.low) or math.isnan(d.high):
        return Measure(name, d, tolerance, "no_data")
    worse_high = name in WORSE_HIGHER
    harm_low, harm_high = (d.low, d.high) if worse_high else (-d.high, -d.low)  # harm as a positive number
    if harm_low > tolerance:
        status = "harm"
    elif harm_high <= tolerance:
        status = "ok"
    else:
        status = "inconclusive"
    return Measure(name, d, tolerance, status)


def _utc(t: datetime) -> datetime:
    """A time read from the store (UTC, returned without a zone by some drivers) as an aware UTC datetime."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _traces(store: AbStore, arm: Arm, o: AbOptions, end: datetime) -> list[dict[str, Any]]:
    rows = arm_traces(store, arm.name, arm.version, arm.variant, o.since, end)
    for r in rows:
        r["ts"] = _utc(r["ts"])
    wait = timedelta(seconds=o.join_wait_seconds)
    events: dict[str, list[dict]] = defaultdict(list)
    for e in outcomes_of(store, [r["query_id"] for r in rows], o.since, o.until):
        e["time"] = _utc(e["time"])
        events[e["query_id"]].append(e)
    asks: dict[str, list[datetime]] = defaultdict(list)
    if o.reformulation_seconds > 0:
        sessions = sorted({r["session_id"] for r in rows if r["session_id"]})
        for a in session_asks(store, sessions, o.since, o.until):
            asks[a["session_id"]].append(_utc(a["ts"]))
    for r in rows:
        ts = r["ts"]
        mine = [e for e in events.get(r["query_id"], ()) if ts <= e["time"] < ts + wait]
        kinds = {e["kind"] for e in mine}
        r["outcomes"] = {k: k in kinds for k in RATES}
        times = asks.get(r["session_id"], [])
        i = bisect.bisect_right(times, ts)
        if i < len(times) and (times[i] - ts).total_seconds() <= o.reformulation_seconds:
            r["outcomes"]["reformulated"] = True
        r["feedback"] = [e["value"] for e in mine if e["kind"] == "feedback" and e["value"] is not None]
    return rows


def _stratum(name: str, base: list[dict], cand: list[dict], quality: dict[str, dict[str, float]],
             o: AbOptions) -> StratumResult:
    measures = []
    for kind in RATES:
        d = rate_delta(sum(r["outcomes"][kind] for r in base), len(base), sum(r["outcomes"][kind] for r in cand),
                       len(cand), o.confidence)
        measures.append(judge(kind, d, o.max_rate_harm))
    fb = mean_delta([v for r in base for v in r["feedback"]], [v for r in cand for v in r["feedback"]], o.confidence)
    measures.append(judge("feedback", fb, o.max_feedback_drop))
    lat = mean_delta([r["latency_total_ms"] for r in base if math.isfinite(r["latency_total_ms"])],
                     [r["latency_total_ms"] for r in cand if math.isfinite(r["latency_total_ms"])], o.confidence)
    measures.append(judge("latency_ms", lat, o.max_latency_increase_ms))
    for metric in QUALITY:
        q = mean_delta([quality[r["trace_id"]][metric] for r in base if metric in quality.get(r["trace_id"], {})],
                       [quality[r["trace_id"]][metric] for r in cand if metric in quality.get(r["trace_id"], {})],
                       o.confidence)
        measures.append(judge(metric, q, o.max_quality_drop))
    if len(base) < o.min_per_arm or len(cand) < o.min_per_arm:
        reason = (f"cohort too small: {len(base)} baseline and {len(cand)} candidate traces, need at least "
                  f"{o.min_per_arm} in each arm")
        return StratumResult(name, len(base), len(cand), tuple(measures), HOLD, (reason,))
    decision = verdict(m.status for m in measures)  # type: ignore[misc]
    if decision == REJECT:
        reasons = tuple(f"{m.name} worse beyond {m.tolerance:g}" for m in measures if m.status == "harm")
    elif decision == HOLD:
        reasons = tuple(_why_not(m) for m in measures if m.status != "ok")
    else:
        reasons = ("every measure ok: its interval rules out harm beyond its tolerance",)
    return StratumResult(name, len(base), len(cand), tuple(measures), decision, reasons)


#: what each measure is counted from, for the reason a measure has no data
_SOURCE = {"feedback": "feedback events with a value", "latency_ms": "traces with a total latency",
           **{m: f"traces judged for {m} (one judge fingerprint)" for m in QUALITY}}


def _why_not(m: Measure) -> str:
    """Why a measure holds: inconclusive (the interval straddles the tolerance) or no data (and how little)."""
    d = m.delta
    if m.status == "inconclusive":
        return f"{m.name} inconclusive: the interval crosses the tolerance {m.tolerance:g}"
    need = "at least 1 trace" if m.name in RATES else "at least 2 values"
    return (f"{m.name}: no data ({d.n_baseline} baseline and {d.n_candidate} candidate "
            f"{_SOURCE.get(m.name, 'traces')}; {need} in each arm)")


def compare(store: AbStore, o: AbOptions) -> AbResult:
    """Compare the arms per stratum (and over all) in [since, until − join wait)."""
    end = o.until - timedelta(seconds=o.join_wait_seconds)
    base, cand = _traces(store, o.baseline, o, end), _traces(store, o.candidate, o, end)
    empty = tuple(str(arm) for arm, rows in ((o.baseline, base), (o.candidate, cand)) if not rows)
    cohort = None
    if cand:  # the same hours on both sides: production before (or after) the cohort ran is not its baseline
        cohort = (min(r["ts"] for r in cand), max(r["ts"] for r in cand))
        base = [r for r in base if cohort[0] <= r["ts"] <= cohort[1]]
    fp, rows = quality_of(store, [r["trace_id"] for r in base + cand], QUALITY)
    quality: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        quality[row["trace_id"]][row["metric"]] = row["value"]
    by_b, by_c = defaultdict(list), defaultdict(list)
    for r in base:
        by_b[r["category"]].append(r)
    for r in cand:
        by_c[r["category"]].append(r)
    strata = [_stratum(s, by_b[s], by_c[s], quality, o) for s in sorted(set(by_b) | set(by_c))]
    overall = _stratum(ALL, base, cand, quality, o)
    decisions = {s.decision for s in strata} or {HOLD}
    decision = REJECT if REJECT in decisions else HOLD if HOLD in decisions else PROMOTE
    too_small = tuple(s.stratum for s in strata if s.reasons and s.reasons[0].startswith("cohort too small"))
    return AbResult(o, fp, (*strata, overall), decision, too_small, cohort, empty)
