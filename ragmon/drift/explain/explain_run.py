"""``drift explain`` for one group and feature: which check it explains, over which windows, and the result.

The windows are the drift check's: the stored check of this group and feature at or before ``at`` (default: the
latest) fixes the time, and the drift settings (the caller passes the daemon's, ``ragmon.drift.check.applied``) fix the
window plan — the current window and the reference windows the check compared. With no stored check, ``at`` (or
the caller's now) is the check time. Owns that choice and calling the query and the decomposition; must not print.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ragmon.config import DriftSettings
from ragmon.drift.check.queries import DriftStore, check_of_feature
from ragmon.drift.check.window_queries import Group
from ragmon.drift.explain.explain import Explanation, explain
from ragmon.drift.explain.explain_queries import DIMENSIONS, summarise
from ragmon.drift.method.features import FEATURES, plan_features
from ragmon.drift.method.windows import WindowPlan, plan


def parse_group(text: str) -> Group:
    """``retriever@version/variant/stratum`` (as the drift commands and alerts name a group); ``ValueError``
    saying the expected form otherwise."""
    parts = text.split("/", 2)
    if len(parts) != 3 or "@" not in parts[0] or not all(parts) or not all(parts[0].split("@", 1)):
        raise ValueError(f"a group is retriever@version/variant/stratum (e.g. hybrid@v1/production/billing), "
                         f"got {text!r}")
    name, version = parts[0].split("@", 1)
    return Group(name, version, parts[1], parts[2])


@dataclass(frozen=True, slots=True)
class ExplainResult:
    """The explanation with what it explains: the group, the check (``None``: no stored check; ``at`` used) and
    the window plan."""

    group: Group
    feature: str
    checked_at: datetime
    check: dict[str, Any] | None
    window_plan: WindowPlan
    explanation: Explanation


def stored_check(store: DriftStore, group: Group, feature: str, at: datetime | None) -> dict[str, Any] | None:
    """The latest stored check row of this group and feature at or before ``at`` (its most telling test:
    persistent, then drifted, then the largest CUSUM)."""
    row = check_of_feature(store, retriever_name=group.retriever_name, retriever_version=group.retriever_version,
                           variant=group.variant, stratum=group.stratum, feature=feature,
                           at=at or datetime(9999, 1, 1, tzinfo=UTC))
    if row is None:
        return None
    for key in ("checked_at", "reference_start", "reference_end", "current_start", "current_end"):
        if isinstance(row.get(key), datetime) and row[key].tzinfo is None:
            row[key] = row[key].replace(tzinfo=UTC)
    return row


def run_explain(store: DriftStore, settings: DriftSettings, group: Group, feature: str, at: datetime | None, *,
                now: datetime, seed: int = 0, draws: int | None = None) -> ExplainResult:
    """Explain ``feature``'s change in ``group`` at the stored check at or before ``at`` (or at ``at``/``now``
    when none is stored). ``ValueError`` for a feature that cannot be explained; ``StoreError`` from the store."""
    spec = FEATURES.get(feature)
    if spec is None:
        raise ValueError(f"unknown feature {feature!r}; known: {', '.join(FEATURES)}")
    if spec.source != "traces":
        raise ValueError(f"{feature} comes from the {spec.source} table; drift explain decomposes features of the "
                         f"traces ({', '.join(f for f, x in FEATURES.items() if x.source == 'traces')})")
    check = stored_check(store, group, feature, at)
    when = check["checked_at"] if check is not None else (at or now)
    windows = next((p.windows for p in plan_features(settings) if p.feature.name == feature), settings.windows)
    wp = plan(windows, when, lookback=0)
    summaries = summarise(store, spec, group, wp)
    rng = np.random.default_rng(seed)
    dims = [(d.name, d.description, summaries.dimensions.get(d.name, [])) for d in DIMENSIONS]
    kwargs = {} if draws is None else {"draws": draws}
    result = explain(feature, dims, summaries.reference, summaries.current, rng, **kwargs)
    return ExplainResult(group, feature, when, check, wp, result)
