"""The Drift page's content: the latest stored check (optionally one group's rows), both windows' distributions
for the drifted features (or every feature of the group asked for), and each group and feature's history.

Owns these reads of ``drift_checks``. An alert links here with its labels (retriever, variant, stratum, feature);
each drifted row links to the trace list of that group in the check's current window. Values travel as
``{name:Type}`` parameters through ``Where``. The histograms are ``ragmon.drift.report``'s (the same drawing as
``drift report --html``). Must not run a check or write a row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ragmon.console.filters import MAX_TEXT, TraceFilter, iso_time
from ragmon.console.svg import sparkline
from ragmon.console.traces import RowStore
from ragmon.drift.report import COLUMNS, histogram_svg, rate_svg, sort_rows
from ragmon.errors import InputError
from ragmon.where import Where

#: how far back the history reaches, and how many checks per group and feature it shows
HISTORY = timedelta(days=7)
HISTORY_CHECKS = 48
GROUP_KEYS = ("retriever", "variant", "stratum", "feature")
_WINDOW_COLUMNS = "current_start, current_end, reference_start, reference_end"


@dataclass(frozen=True)
class History:
    retriever: str
    variant: str
    stratum: str
    feature: str
    checks: list[tuple[datetime, float, bool]]  # oldest first

    @property
    def plot(self) -> str:
        return sparkline([s for _, s, _ in self.checks], [d for _, _, d in self.checks])


@dataclass(frozen=True)
class DriftPage:
    group: dict[str, str]
    check_id: str | None
    checked_at: datetime | None
    rows: list[dict[str, Any]]
    plots: list[tuple[dict[str, Any], str]]  # (row, inline SVG)
    history: list[History] = field(default_factory=list)


def group_from_query(params: Any) -> dict[str, str]:
    """The group an alert link asks for (empty values: any); ``InputError`` for an over-long value."""
    group = {k: str(params.get(k, "")) for k in GROUP_KEYS}
    for k, v in group.items():
        if len(v) > MAX_TEXT:
            raise InputError(f"{k}: at most {MAX_TEXT} characters")
    return group


def _where(group: dict[str, str]) -> Where:
    return (Where().optional("variant", "=", "String", group["variant"] or None)
            .optional("category", "=", "String", group["stratum"] or None, name="stratum")
            .optional("feature", "=", "String", group["feature"] or None))


def _clause(group: dict[str, str], where: Where) -> tuple[str, dict[str, Any]]:
    """``where`` plus the retriever, which an alert names as ``name@version`` (its label) and a person by name."""
    sql, params = where.clause()
    if group["retriever"]:
        sql += (" AND (retriever_name = {retriever:String} OR "
                "concat(retriever_name, '@', retriever_version) = {retriever:String})")
        params["retriever"] = group["retriever"]
    return sql, params


def load_drift_page(store: RowStore, group: dict[str, str], now: datetime) -> DriftPage:
    table = store.table("drift_checks")
    latest = store.query_rows(f"SELECT check_id, checked_at FROM {table} ORDER BY checked_at DESC LIMIT 1")
    if not latest:
        return DriftPage(group, None, None, [], [])
    check_id, checked_at = str(latest[0]["check_id"]), latest[0]["checked_at"]
    sql, params = _clause(group, _where(group).require("check_id", "=", "String", check_id))
    rows = store.query_rows(f"SELECT {', '.join(COLUMNS)}, {_WINDOW_COLUMNS} FROM {table} WHERE {sql}", params)
    for row in rows:
        row["details"] = json.loads(row["details"] or "{}")
        row["traces_query"] = traces_link(row)
    rows = sort_rows(rows)
    asked = any(group.values())
    plots, seen = [], set()
    for row in rows:
        key = (row["retriever_name"], row["variant"], row["stratum"], row["feature"])
        if key in seen or not (asked or row["drifted"] or row["persistent"]):
            continue
        seen.add(key)
        d = row["details"]
        ref, cur = d.get("reference", {}), d.get("current", {})
        plots.append((row, histogram_svg(ref, cur) if "quantiles" in ref else rate_svg(ref, cur)))
    return DriftPage(group, check_id, checked_at, rows, plots, history(store, group, now))


def traces_link(row: dict[str, Any]) -> str:
    """The trace list's query string for the row's group in the check's current window."""
    return TraceFilter(since=iso_time(row["current_start"]), until=iso_time(row["current_end"]),
                       retriever=str(row["retriever_name"]), variant=str(row["variant"]),
                       stratum=str(row["stratum"])).query()



def history(store: RowStore, group: dict[str, str], now: datetime) -> list[History]:
    """Each group and feature's statistic over the checks of the last ``HISTORY`` (the first test per feature)."""
    where = _where(group).require("checked_at", ">=", "DateTime64(3)", (now - HISTORY).replace(tzinfo=None),
                                  name="since")
    sql, params = _clause(group, where)
    rows = store.query_rows(
        "SELECT retriever_name, variant, category, feature, "
        "arraySlice(arrayReverseSort(c -> c.1, groupArray((checked_at, statistic, drifted OR persistent))), 1, "
        f"{HISTORY_CHECKS}) AS checks "
        f"FROM (SELECT * FROM {store.table('drift_checks')} WHERE {sql} ORDER BY checked_at DESC LIMIT 1 BY "
        "check_id, retriever_name, variant, category, feature) "
        "GROUP BY retriever_name, variant, category, feature ORDER BY retriever_name, variant, category, feature "
        "LIMIT 500", params)
    return [History(str(r["retriever_name"]), str(r["variant"]), str(r["category"]), str(r["feature"]),
                    sorted((c[0], float(c[1]), bool(c[2])) for c in r["checks"])) for r in rows]
