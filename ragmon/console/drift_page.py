"""The Drift page's content: the latest stored check (optionally one group's rows), both windows' distributions
for the drifted features (or every feature of the group asked for), and each group and feature's history.

Owns the page's records from these reads of ``drift_checks`` (the SQL is in ``queries.py``). An alert links here
with its labels (retriever, variant, stratum, feature); each drifted row links to the trace list of that group in
the check's current window. The histograms are ``ragmon.drift.check.report``'s (the same drawing as
``drift report --html``). Must not run a check or write a row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ragmon.console.filters import MAX_TEXT, TRACE_FIGURES, TraceFilter, iso_time
from ragmon.console.queries import ConsoleReads, check_history_rows, check_rows, latest_check
from ragmon.console.svg import history_plot
from ragmon.drift.check.report import histogram_svg, rate_svg, sort_rows
from ragmon.drift.method.features import FEATURES
from ragmon.errors import InputError

#: how far back the history reaches, and how many checks per group and feature it shows
HISTORY = timedelta(days=7)
HISTORY_CHECKS = 48
GROUP_KEYS = ("retriever", "variant", "stratum", "feature")


@dataclass(frozen=True)
class History:
    """One group and feature over the checks: the CUSUM of its primary test against the line that pages (the
    statistic of its first test when it has no CUSUM), and whether each check flagged it."""

    retriever: str  # name@version, as the alerts label it
    variant: str
    stratum: str
    feature: str
    checks: list[tuple[datetime, float, float, bool]]  # (checked at, value, threshold, flagged), oldest first
    measure: str  # "CUSUM" or "statistic"

    @property
    def flagged(self) -> bool:
        return bool(self.checks) and self.checks[-1][3]

    @property
    def latest(self) -> tuple[float, float] | None:
        return (self.checks[-1][1], self.checks[-1][2]) if self.checks else None

    @property
    def plot(self) -> str:
        thresholds = [t for _, _, t, _ in self.checks if math.isfinite(t)]
        return history_plot([v for _, v, _, _ in self.checks], [f for _, _, _, f in self.checks],
                            thresholds[-1] if thresholds else None,
                            self.checks[0][0] if self.checks else None, self.checks[-1][0] if self.checks else None)


@dataclass(frozen=True)
class DriftPage:
    group: dict[str, str]
    check_id: str | None
    checked_at: datetime | None
    rows: list[dict[str, Any]]  # assessed tests, drifted first
    plots: list[tuple[dict[str, Any], str]]  # (row, inline SVG)
    history: list[History] = field(default_factory=list)  # flagged groups first
    insufficient: list[dict[str, Any]] = field(default_factory=list)  # tests not run (too few traces, an error)

    @property
    def flagged_rows(self) -> list[dict[str, Any]]:
        """The rows that found drift or persistent drift, in the page's order."""
        return [r for r in self.rows if r["drifted"] or r["persistent"]]

    @property
    def quiet_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not (r["drifted"] or r["persistent"])]


def group_from_query(params: Any) -> dict[str, str]:
    """The group an alert link asks for (empty values: any); ``InputError`` for an over-long value."""
    group = {k: str(params.get(k, "")) for k in GROUP_KEYS}
    for k, v in group.items():
        if len(v) > MAX_TEXT:
            raise InputError(f"{k}: at most {MAX_TEXT} characters")
    return group


def load_drift_page(store: ConsoleReads, group: dict[str, str], now: datetime) -> DriftPage:
    latest = latest_check(store)
    if latest is None:
        return DriftPage(group, None, None, [], [])
    check_id, checked_at = str(latest["check_id"]), latest["checked_at"]
    rows = check_rows(store, group, check_id)
    for row in rows:
        row["details"] = json.loads(row["details"] or "{}")
        row["traces_query"] = traces_link(row)
    rows = sort_rows(rows)
    assessed = [r for r in rows if (r["status"] or "ok") == "ok"]
    insufficient = [r for r in rows if (r["status"] or "ok") != "ok"]
    asked = any(group.values())
    plots, seen = [], set()
    for row in assessed:
        key = (row["retriever_name"], row["variant"], row["stratum"], row["feature"])
        if key in seen or not (asked or row["drifted"] or row["persistent"]):
            continue
        seen.add(key)
        d = row["details"]
        ref, cur = d.get("reference", {}), d.get("current", {})
        plots.append((row, histogram_svg(ref, cur) if "quantiles" in ref else rate_svg(ref, cur)))
    return DriftPage(group, check_id, checked_at, assessed, plots, history(store, group, now), insufficient)


def reference_windows(row: dict[str, Any]) -> list[tuple[str, str]]:
    """The time ranges the row's reference covered (UTC, newest first): every same-hour slice of a seasonal
    reference, else its one span. Rows stored before the slices were recorded give their one span."""
    slices = row["details"].get("reference_slices")
    if isinstance(slices, list) and slices:
        return [(str(a), str(b)) for a, b in slices]
    return [(iso_time(row["reference_start"]), iso_time(row["reference_end"]))]


def reference_note(row: dict[str, Any]) -> str:
    """How a one-span reference is compared: cut into windows as long as the current one (a trailing reference),
    and the corpus snapshot it is limited to, if any ("" when there is nothing to add)."""
    notes = []
    length = (row["current_end"] - row["current_start"]).total_seconds()
    span = (row["reference_end"] - row["reference_start"]).total_seconds()
    if len(reference_windows(row)) == 1 and length > 0 and span >= 2 * length:
        notes.append(f"{span / length:.0f} windows of {_duration(length)}, each as long as the current one")
    window = str(row["details"].get("reference_window", ""))
    if "corpus snapshot" in window:
        notes.append(window[window.index("corpus snapshot"):])
    return "; ".join(notes)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min"


def traces_link(row: dict[str, Any]) -> str:
    """The trace list's query string for the row's group in the check's current window — sorted by the row's
    feature when the list can sort by it (a judge score or the trace's own figure), the way it moved first (down:
    the lowest first)."""
    f = TraceFilter(since=iso_time(row["current_start"]), until=iso_time(row["current_end"]),
                    retriever=str(row["retriever_name"]), variant=str(row["variant"]), stratum=str(row["stratum"]))
    feature = str(row["feature"])
    if feature in TRACE_FIGURES or (feature in FEATURES and FEATURES[feature].source == "scores"):
        up = row["details"].get("direction") == "up" or (not row["details"].get("direction") and _rose(row))
        f = replace(f, metric=feature, order="desc" if up else "asc")
    return f.query()


def _rose(row: dict[str, Any]) -> bool:
    ref, cur = row["details"].get("reference", {}), row["details"].get("current", {})
    return isinstance(ref.get("mean"), int | float) and isinstance(cur.get("mean"), int | float) and \
        cur["mean"] > ref["mean"]


def history(store: ConsoleReads, group: dict[str, str], now: datetime) -> list[History]:
    """Each group and feature over the checks of the last ``HISTORY``: per check its primary test (the one with a
    CUSUM) or else its first test; flagged groups first."""
    rows = check_history_rows(store, group, (now - HISTORY).replace(tzinfo=None), HISTORY_CHECKS)
    out = []
    for r in rows:
        checks = sorted(r["checks"])
        cusum = any(math.isfinite(float(c[3])) for c in checks)
        points = [(c[0], float(c[2] if cusum else c[1]), float(c[3]) if cusum else math.nan, bool(c[4]))
                  for c in checks]
        out.append(History(f"{r['retriever_name']}@{r['retriever_version']}", str(r["variant"]), str(r["category"]),
                           str(r["feature"]), points, "CUSUM" if cusum else "statistic"))
    out.sort(key=lambda h: not h.flagged)  # stable: flagged first, then in the query's order
    return out
