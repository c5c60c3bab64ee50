"""The top hint of a paging drift alert: after each stored check, for every group and feature of the traces in
persistent drift, ``drift explain``'s first row — the dimension and segment that explain most of the change — as
``ragmon_drift_explain_top`` (the share of Δ that segment explains), which RagmonRetrievalScoreDrift's ``hint``
annotation reads, so the page itself says where to look.

Owns choosing which groups get a hint and publishing them (the whole set replaced each check: a group that stopped
paging loses its hint). A failure to explain one group is logged and leaves that group without a hint; it never
stops the drift role. Must not print.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime
from typing import Any

from ragmon.config import DriftSettings
from ragmon.drift.check.queries import DriftStore
from ragmon.drift.check.result import CheckResult
from ragmon.drift.explain.explain_run import run_explain
from ragmon.drift.method.features import FEATURES
from ragmon.drift.metrics import DriftMetrics
from ragmon.errors import RagmonError
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.drift")
#: groups explained per check at most (each is one query): the rest go without a hint
MAX_HINTS = 20
SEGMENT_CHARS = 80
#: resamples of the bootstrap for a hint (the ranking, not the interval, is what it shows)
DRAWS = 100


def publish_hints(store: DriftStore, settings: DriftSettings, telemetry: Telemetry, result: CheckResult) -> int:
    """Explain every paging traces feature of ``result`` and publish the hints; return how many were published."""
    paging = sorted({(r.group, r.feature) for r in result.results
                     if r.persistent and FEATURES.get(r.feature) is not None
                     and FEATURES[r.feature].source == "traces" and not r.group.judge_fingerprint})
    series: dict[tuple[str, ...], float] = {}
    at = result.checked_at if result.checked_at.tzinfo else result.checked_at.replace(tzinfo=UTC)
    for group, feature in paging[:MAX_HINTS]:
        try:
            explained = run_explain(store, settings, group, feature, at, now=datetime.now(UTC), draws=DRAWS)
        except (RagmonError, ValueError) as exc:
            log.warning("drift explain of %s %s failed; no hint for it: %s", group.retriever, feature, exc)
            continue
        except Exception:  # noqa: BLE001 - a hint is an extra: the drift role must go on without it
            log.exception("drift explain of %s %s failed unexpectedly; no hint for it", group.retriever, feature)
            continue
        top = _top(explained)
        if top is None:
            continue
        dimension, segment, share = top
        series[(group.retriever, group.variant, group.stratum, feature, dimension, segment)] = share
    metrics = telemetry.use(DriftMetrics)
    metrics.drift_explain_gauges.publish({metrics.drift_explain_top: series})
    return len(series)


def _top(explained: Any) -> tuple[str, str, float] | None:
    e = explained.explanation
    if not e.dimensions or e.n_current == 0 or e.n_reference == 0:
        return None
    first = e.dimensions[0]
    if first.top is None or not math.isfinite(first.score):
        return None
    label = " ".join(first.top.label.split())
    label = label if len(label) <= SEGMENT_CHARS else label[: SEGMENT_CHARS - 1] + "…"
    share = first.top.explained.estimate
    return first.dimension, label, share if math.isfinite(share) else 0.0
