"""The Shadow page's content: the configured comparisons (``shadow.comparisons``), or one asked for on the page,
recomputed over their window — the verdict per stratum, interval plots of the quality deltas, agreement, and the
biggest wins and losses as links to the trace pairs.

Owns choosing what to compare and laying results out for the template; the comparison itself is
``ragmon.shadow.compare`` (the same as ``ragmon shadow compare`` and the shadow role's gauges). A comparison that
fails (bad settings, no pairs) is shown with its reason and the others go on. Must not write or export gauges.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ragmon.config import Settings
from ragmon.console.filters import MAX_TEXT, TraceFilter, iso_time, parse_when
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


@dataclass(frozen=True)
class Shown:
    title: str
    result: ComparisonResult | None
    problem: str
    plots: list[tuple[str, str]]  # (metric and its source, inline SVG)

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


def options(settings: Settings, ask: dict[str, str], now: datetime) -> list[tuple[str, CompareOptions]]:
    """What to compare: the one asked for, else every configured comparison. ``InputError`` for a bad ask."""
    if ask["baseline"] or ask["candidate"]:
        base = RetrieverRef.parse(ask["baseline"], ask["baseline_variant"] or "production", option="baseline")
        cand = RetrieverRef.parse(ask["candidate"], ask["candidate_variant"] or "shadow", option="candidate")
        opts = CompareOptions(base, cand, parse_when(ask["since"] or "24h", now, "since"), now, top=TOP,
                              n_resamples=RESAMPLES)
        opts.check()
        return [(f"{base} vs {cand}", opts)]
    return [(f"{c.baseline} ({c.baseline_variant}) vs {c.candidate} ({c.candidate_variant})",
             replace(options_for(c, now), top=TOP, n_resamples=RESAMPLES)) for c in settings.shadow.comparisons]


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

