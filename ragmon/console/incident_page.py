"""The incident page (``/review/console/incident?retriever=…&variant=…&stratum=…&feature=…``): one page per drift
alert group — what fired and since when, how far past its threshold, the CUSUM path against the line that pages,
what changed (``ragmon.drift.explain.explain``) with each top segment one click from its traces sorted by the feature,
and the runbook's steps with the commands filled in for this group and time.

Owns that page's data (stored checks, the explanation, one segment's traces; the SQL is in ``queries.py``) and
drawing the CUSUM path (every label escaped: segment values come from producers). The explanation of a stored
check is computed once
(``ExplanationCache``: one pass over a week of the group's traces, about a second on a 10 M-trace store) and reused
by every view until the next check of the group is stored, as the Shadow page reuses its comparison; with no
stored check it is computed on each view. Must not write anything.
"""

from __future__ import annotations

import math
import shlex
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import urlencode

from ragmon.config import Settings
from ragmon.console import runbooks
from ragmon.console.filters import MAX_TEXT, iso_time
from ragmon.console.queries import group_check_rows, segment_trace_rows, versions_served_sql
from ragmon.drift.check.applied import applied_settings, record
from ragmon.drift.check.window_queries import Group
from ragmon.drift.explain.explain_queries import DIMENSIONS, OTHER, parameters, window_condition
from ragmon.drift.explain.explain_run import ExplainResult, run_explain, stored_check
from ragmon.drift.method.features import FEATURES
from ragmon.drift.method.windows import plan
from ragmon.errors import InputError

#: checks of the CUSUM path shown (the newest)
HISTORY = 72
SEGMENT_TRACES = 50
#: bootstrap draws of the page's intervals
DRAWS = 200
RUNBOOK = "RagmonRetrievalScoreDrift"
#: explanations kept (each of one stored check of one group and feature)
CACHED = 32
#: the features an incident page explains (those of the traces)
FEATURES_EXPLAINED = frozenset(f for f, x in FEATURES.items() if x.source == "traces")


@dataclass(frozen=True, slots=True)
class IncidentPage:
    group: Group
    feature: str
    check: dict[str, Any] | None
    since: datetime | None
    history: list[dict[str, Any]]
    result: ExplainResult | None
    commands: list[tuple[str, str]]
    runbook: runbooks.Runbook | None

    @property
    def past_threshold(self) -> float:
        """CUSUM over its threshold (1 = on the line that pages); NaN without a stored check."""
        if self.check is None or not self.check["cusum_threshold"] or not math.isfinite(self.check["cusum_threshold"]):
            return math.nan
        return float(self.check["cusum"]) / float(self.check["cusum_threshold"])

    def segment_link(self, dimension: str, value: str) -> str | None:
        """The query string of a segment's traces page; ``None`` for the summed rest."""
        if value == OTHER or self.result is None:
            return None
        return urlencode({"retriever": self.group.retriever, "variant": self.group.variant,
                          "stratum": self.group.stratum, "feature": self.feature, "dimension": dimension,
                          "segment": value, "at": iso_time(self.result.checked_at)})


def group_from_query(params: Mapping[str, str]) -> tuple[Group, str]:
    """The group and feature a query string names; ``InputError`` saying what is expected."""
    values = {k: params.get(k, "") for k in ("retriever", "variant", "stratum", "feature")}
    if any(len(v) > MAX_TEXT for v in values.values()):
        raise InputError(f"retriever, variant, stratum and feature: at most {MAX_TEXT} characters each")
    if "@" not in values["retriever"] or not values["variant"] or not values["feature"]:
        raise InputError("an incident is one alert's group: retriever (name@version), variant, stratum and feature, "
                         "as the alert's labels name them")
    feature = FEATURES.get(values["feature"])
    if feature is None or feature.source != "traces":
        raise InputError(f"feature: expected one of {', '.join(f for f, x in FEATURES.items() if x.source == 'traces')}"
                         f", got {values['feature']!r}")
    name, version = values["retriever"].split("@", 1)
    return Group(name, version, values["variant"], values["stratum"]), values["feature"]


class ExplanationCache:
    """The explanation of each stored check (by group, feature, check and the drift settings applied): computed
    once, one at a time, then reused; the ``CACHED`` latest kept. Thread-safe."""

    def __init__(self, size: int = CACHED):
        self._size = size
        self._kept: OrderedDict[tuple[Any, ...], ExplainResult] = OrderedDict()
        self._lock = threading.Lock()

    def explain(self, store: Any, drift: Any, group: Group, feature: str, now: datetime) -> ExplainResult:
        check = stored_check(store, group, feature, None)
        if check is None:  # the windows of a check run now: they move with the clock
            return run_explain(store, drift, group, feature, None, now=now, draws=DRAWS)
        key = (group, feature, str(check["check_id"]), check["checked_at"], record(drift))
        with self._lock:
            found = self._kept.get(key)
            if found is None:  # at the check's time: the check the key names, even if another is stored meanwhile
                found = run_explain(store, drift, group, feature, check["checked_at"], now=now, draws=DRAWS)
                self._kept[key] = found
                while len(self._kept) > self._size:
                    self._kept.popitem(last=False)
            else:
                self._kept.move_to_end(key)
            return found


def load_incident(store: Any, settings: Settings, group: Group, feature: str, now: datetime,
                  cache: ExplanationCache | None = None) -> IncidentPage:
    drift = applied_settings(store, settings.drift).settings
    history = _history(store, group, feature)
    result = (cache.explain(store, drift, group, feature, now) if cache is not None
              else run_explain(store, drift, group, feature, None, now=now, draws=DRAWS))
    if result.explanation.n_current == 0 or result.explanation.n_reference == 0:
        result = None  # type: ignore[assignment]
    check = history[-1] if history else None
    return IncidentPage(group, feature, check, _since(history), history, result,
                        _commands(store, group, feature, check["checked_at"] if check else now),
                        runbooks.load(RUNBOOK))


def _history(store: Any, group: Group, feature: str) -> list[dict[str, Any]]:
    """One row per stored check of this group and feature, oldest first: its largest CUSUM and whether it paged."""
    rows = group_check_rows(store, group, feature, HISTORY)
    for row in rows:
        row["cusum"], row["cusum_threshold"] = row.pop("c_max"), row.pop("h_max")
        at = row["checked_at"]
        row["checked_at"] = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    return rows[::-1]


def _since(history: Sequence[dict[str, Any]]) -> datetime | None:
    """When the latest unbroken run of paging checks began (``None``: the latest check does not page)."""
    since = None
    for row in reversed(history):
        if not row["persistent"]:
            break
        since = row["checked_at"]
    return since


def _commands(store: Any, group: Group, feature: str, at: datetime) -> list[tuple[str, str]]:
    g = shlex.quote(f"{group.retriever}/{group.variant}/{group.stratum}")
    t = iso_time(at)
    before = iso_time(at - timedelta(days=2))
    query = versions_served_sql(store, group, iso_time(at - timedelta(days=1))[:19].replace('T', ' '))
    return [
        ("What changed, in the terminal", f"ragmon drift explain --group {g} --feature {feature} --at {t}"),
        ("Both windows' histograms and the thresholds", "ragmon drift report --html drift.html"),
        ("When it started (runbook step 2)", f"ragmon drift backtest --from {before} --to {t}"),
        ("The check as it ran", f"ragmon drift check --at {t} --all"),
        ("Corpus and index versions served in the last day (runbook step 4; in clickhouse-client)", query),
    ]


def cusum_plot(history: Sequence[dict[str, Any]], width: int = 640, height: int = 160) -> str:
    """The CUSUM of each check (oldest left) as a line, the threshold that pages as a dashed red line, paging checks
    as red dots."""
    pts = [(i, float(r["cusum"])) for i, r in enumerate(history)
           if r["cusum"] is not None and math.isfinite(r["cusum"])]
    lines = [float(r["cusum_threshold"]) for r in history
             if r["cusum_threshold"] is not None and math.isfinite(r["cusum_threshold"])]
    if not pts:
        return '<p class="meta">no CUSUM stored for this group and feature</p>'
    h = lines[-1] if lines else math.nan
    top = max([v for _, v in pts] + ([h] if math.isfinite(h) else [])) * 1.1 or 1.0
    left, bottom = 44, 22
    n = max(len(history) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + i / n * (width - left - 8), height - bottom - max(v, 0.0) / top * (height - bottom - 8)

    out = [f'<svg class="plot cusum" id="cusum-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" role="img" aria-label="CUSUM against its threshold">',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - 8}" y2="{height - bottom}" stroke="#888"/>']
    if math.isfinite(h):
        _, y = xy(0, h)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 8}" y2="{y:.1f}" stroke="#c53030" '
                   'stroke-dasharray="5,4"/>')
        out.append(f'<text x="{width - 10}" y="{y - 4:.1f}" text-anchor="end" fill="#c53030">pages at '
                   f'{escape(f"{h:.3g}")}</text>')
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in (xy(i, v) for i, v in pts))
    out.append(f'<polyline points="{line}" fill="none" stroke="#243b53" stroke-width="1.5"/>')
    for i, v in pts:
        if history[i]["persistent"]:
            a, b = xy(i, v)
            out.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="#c53030"/>')
    out.append(f'<text x="{left - 4}" y="{height - bottom:.1f}" text-anchor="end">0</text>')
    first, last = history[0]["checked_at"], history[-1]["checked_at"]
    out.append(f'<text x="{left}" y="{height - 6}">{escape(f"{first:%m-%d %H:%M}")}</text>')
    out.append(f'<text x="{width - 8}" y="{height - 6}" text-anchor="end">{escape(f"{last:%m-%d %H:%M}")} UTC</text>')
    out.append("</svg>")
    return "".join(out)


def segment_traces(store: Any, settings: Settings, params: Mapping[str, str], now: datetime) -> dict[str, Any]:
    """The current window's traces of one segment of one dimension, lowest feature value first."""
    group, feature = group_from_query(params)
    dimension, segment = params.get("dimension", ""), params.get("segment", "")
    dims = {d.name: d for d in DIMENSIONS}
    if dimension not in dims:
        raise InputError(f"dimension: expected one of {', '.join(dims)}, got {dimension[:MAX_TEXT]!r}")
    if len(segment) > 4096:
        raise InputError("segment: at most 4096 characters")
    at_text = params.get("at", "")
    try:
        at = datetime.fromisoformat(at_text.replace("Z", "+00:00")) if at_text else now
    except ValueError:
        raise InputError(f"at: expected an ISO 8601 time, got {at_text[:MAX_TEXT]!r}") from None
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    drift = applied_settings(store, settings.drift).settings
    wp = plan(drift.windows, at, lookback=0)
    current, reference = window_condition(wp)
    rows = segment_trace_rows(store, dimension, FEATURES[feature].expr, current, reference,
                              {**parameters(group, wp), "seg": segment}, SEGMENT_TRACES)
    return {"group": group, "feature": feature, "dimension": dimension, "segment": segment, "rows": rows,
            "window": wp.windows.current.describe()}
