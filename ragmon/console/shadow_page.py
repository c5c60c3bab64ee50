"""The Shadow page's content: the configured comparisons (``shadow.comparisons``), or when none is configured the
shadow pairs found in the stored traces, or one asked for on the page — the verdict per stratum, interval plots of
the quality deltas, agreement, and the biggest wins and losses as links to the trace pairs.

Owns choosing what to compare, when (``ComparisonCache``: a comparison's window ends at the latest shadow check,
every ``shadow.interval_seconds``, and its 2,000-resample result is computed once per check and reused by every view
until the next; ``ComparisonCache.warm``, run by the console's warm-up loop in the daemon, computes the unasked ones
as soon as a check begins, so on-call's first view does not wait for it) and laying results out for the template;
the comparison itself is ``ragmon.shadow.compare`` (the same as ``ragmon shadow compare`` and the shadow role's
gauges). A comparison that fails (bad settings, a store outage) or has no pairs yet is shown with its reason, not
kept, and the others go on. Must not write or export gauges.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.config import Settings
from ragmon.console.filters import MAX_TEXT, TraceFilter, iso_time, parse_when
from ragmon.console.queries import retrievers_served
from ragmon.console.svg import ci_plot
from ragmon.errors import InputError, RagmonError
from ragmon.shadow.compare import CompareOptions, compare
from ragmon.shadow.live import options_for
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.result import ComparisonResult, Example

#: bootstrap resamples for a page view (the CLI's default): intervals as ``ragmon shadow compare`` prints them
RESAMPLES = 2000
#: wins and losses listed
TOP = 5
#: how far back the pairs are looked for, and compared, when none is configured
DERIVED_WINDOW = timedelta(hours=24)
#: the most shadow pairs found in the store that the page compares
DERIVED_PAIRS = 3
#: comparisons kept (each of one check's window)
CACHED = 16


@dataclass(frozen=True)
class Shown:
    title: str
    result: ComparisonResult | None
    problem: str
    plots: list[tuple[str, str]]  # (metric and its source, inline SVG)
    note: str = ""  # where the comparison came from, when it was not configured or asked for

    def pair_link(self, example: Example) -> str:
        """The trace list of this example's query (both sides) over the comparison's window."""
        r = self.result
        assert r is not None
        return TraceFilter(since=iso_time(r.since), until=iso_time(r.until + timedelta(seconds=1)),
                           query_id=example.query_id).query()


def asked(params: Any) -> dict[str, str]:
    """A comparison asked for on the page (``baseline``/``candidate`` as NAME or NAME@VERSION, variants, since)."""
    out = {k: str(params.get(k, "")) for k in ("baseline", "candidate", "baseline_variant", "candidate_variant",
                                               "since")}
    for k, v in out.items():
        if len(v) > MAX_TEXT:
            raise InputError(f"{k}: at most {MAX_TEXT} characters")
    return out


def check_time(now: datetime, interval_seconds: float) -> datetime:
    """The latest shadow check at ``now``: checks run every ``interval_seconds`` since the epoch."""
    step = max(interval_seconds, 1.0)
    return datetime.fromtimestamp(now.timestamp() // step * step, UTC)


def options(settings: Settings, ask: dict[str, str], now: datetime,
            derive: Callable[[datetime], list[tuple[str, CompareOptions, str]]] | None = None
            ) -> list[tuple[str, CompareOptions, str]]:
    """What to compare, as of ``now``: the one asked for, else every configured comparison, else (with ``derive``,
    e.g. ``derived`` over a store) the shadow pairs the traces hold. ``(title, options, note)``; ``InputError``
    for a bad ask."""
    if ask["baseline"] or ask["candidate"]:
        base = RetrieverRef.parse(ask["baseline"], ask["baseline_variant"] or "production", option="baseline")
        cand = RetrieverRef.parse(ask["candidate"], ask["candidate_variant"] or "shadow", option="candidate")
        opts = CompareOptions(base, cand, parse_when(ask["since"] or "24h", now, "since"), now, top=TOP,
                              n_resamples=RESAMPLES)
        opts.check()
        return [(f"{base} vs {cand}", opts, "")]
    if settings.shadow.comparisons:
        return [(f"{c.baseline} ({c.baseline_variant}) vs {c.candidate} ({c.candidate_variant})",
                 replace(options_for(c, now), top=TOP, n_resamples=RESAMPLES), "")
                for c in settings.shadow.comparisons]
    return derive(now) if derive is not None else []


def derived(store: Any, now: datetime) -> list[tuple[str, CompareOptions, str]]:
    """Each shadow retriever of the last ``DERIVED_WINDOW`` against the production retriever that served the most
    traces then (at most ``DERIVED_PAIRS``, the busiest first): what the stored traces say is running in shadow."""
    since = now - DERIVED_WINDOW
    rows = retrievers_served(store, since.replace(tzinfo=None), now.replace(tzinfo=None))
    production = next((r for r in rows if r["variant"] == "production"), None)
    if production is None:
        return []
    base = RetrieverRef(str(production["name"]), str(production["version"]), "production")
    note = ("Not configured: found in the stored traces of the last 24 hours (the busiest production retriever "
            "against each shadow one). Configure shadow.comparisons to choose, and to export the gauges.")
    out = []
    for r in [r for r in rows if r["variant"] == "shadow"][:DERIVED_PAIRS]:
        cand = RetrieverRef(str(r["name"]), str(r["version"]), "shadow")
        out.append((f"{base.name}@{base.version} (production) vs {cand.name}@{cand.version} (shadow)",
                    CompareOptions(base, cand, since, now, top=TOP, n_resamples=RESAMPLES), note))
    return out


class ComparisonCache:
    """Comparisons by title and window: each computed once (one at a time) and then reused; the ``CACHED``
    latest kept. Thread-safe."""

    def __init__(self, size: int = CACHED):
        self._size = size
        self._shown: OrderedDict[tuple[str, datetime, datetime], Shown] = OrderedDict()
        self._lock = threading.Lock()
        self._derived: tuple[datetime, list[tuple[str, CompareOptions, str]]] | None = None

    def derived(self, store: Any, now: datetime) -> list[tuple[str, CompareOptions, str]]:
        """``derived(store, now)``, looked up once per check time."""
        with self._lock:
            if self._derived is None or self._derived[0] != now:
                self._derived = (now, derived(store, now))
            return self._derived[1]

    def warm(self, store: Any, settings: Settings, now: datetime) -> None:
        """Compute what the Shadow page shows unasked (the configured comparisons, else the derived ones) for the
        latest shadow check at ``now``, unless it is cached: the console's warm-up loop calls this every few
        seconds, so the first view after a check is a cache hit rather than a comparison of 24 hours of pairs
        (5 s on 10 M traces)."""
        checked = check_time(now, settings.shadow.interval_seconds)
        self.run(store, options(settings, asked({}), checked, lambda at: self.derived(store, at)))

    def run(self, store: Any, chosen: list[tuple[str, CompareOptions, str]]) -> list[Shown]:
        out = []
        for title, opts, note in chosen:
            key = (title, opts.since, opts.until)
            with self._lock:
                shown = self._shown.get(key)
                if shown is None:
                    shown = replace(run(store, [(title, opts)])[0], note=note)
                    if shown.result is not None and shown.result.pairs:  # no pairs yet, a store outage: again
                        self._shown[key] = shown
                    while len(self._shown) > self._size:
                        self._shown.popitem(last=False)
            out.append(shown)
        return out


def run(store: Any, chosen: list[tuple[str, CompareOptions]]) -> list[Shown]:
    shown = []
    for title, opts in chosen:
        try:
            result = compare(store, opts)
        except RagmonError as exc:
            shown.append(Shown(title, None, str(exc), []))
            continue
        shown.append(Shown(title, result, "", plots(result)))
    return shown


def plots(result: ComparisonResult) -> list[tuple[str, str]]:
    """One interval plot per quality metric (and judge fingerprint): a row per stratum, then all strata."""
    by_metric: dict[tuple[str, str, str], list[tuple[str, float, float, float]]] = {}
    for s in (*result.strata, result.overall):
        for q in s.quality:
            r = q.result
            by_metric.setdefault((q.metric, q.source, q.judge_fingerprint), []).append(
                (s.stratum, r.mean_difference, r.ci_low, r.ci_high))
    return [(f"{metric} ({source}{', judge ' + fp if fp else ''})", ci_plot(rows))
            for (metric, source, fp), rows in by_metric.items()]

