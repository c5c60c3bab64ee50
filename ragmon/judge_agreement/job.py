"""Judge drift: weekly judge-vs-human agreement from review labels, exported for alerting.

Owns the pairs (read through ``queries.py``: a human label in ``review_labels`` joined with the judge's ``ok``
score of the same trace and the metric that label is compared with, binarized at
``judge.calibrate.LABEL_METRICS``), grouping them by the review week of the labelled trace, and publishing the
trends of ``ragmon.judge.agreement_trend`` as the ``ragmon_judge_agreement_*`` gauges that
``RagmonJudgeAgreementLow`` reads.

It runs in one process only (review may run several web replicas), by default wherever the drift role runs
(``roles.judge_agreement``). Labels arrive during the week after the one they review, so the computation is cheap
to repeat hourly (``drift.judge_agreement.interval_seconds``) and idempotent. Must not write to the store.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.config.drift import JudgeAgreementSettings
from ragmon.judge.agreement_trend import AgreementTrend, agreement_trends
from ragmon.judge.calibrate import LABEL_METRICS, Pair, binarize
from ragmon.judge_agreement.metrics import JudgeAgreementMetrics
from ragmon.judge_agreement.queries import labelled_scores
from ragmon.telemetry import GaugeSpec, Telemetry

log = logging.getLogger("ragmon.judge_agreement")

def iso_week(at: datetime) -> str:
    year, week, _ = at.isocalendar()
    return f"{year}-W{week:02d}"


def weekly_pairs(rows: list[Mapping[str, Any]],
                 thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS) -> list[tuple[str, Pair]]:  # fmt: skip
    """``(week, pair)`` for every label a reviewer gave that the judge's score of the same trace answers."""
    out = []
    for row in rows:
        for label, (metric, _) in thresholds.items():
            human = row.get(label)
            if row["metric"] == metric and human is not None:
                out.append((row["week"], Pair(row["trace_id"], row["category"], label, int(human),
                                              binarize(label, float(row["value"]), thresholds), row["fingerprint"],
                                              row["judge_name"], row["reviewer"], float(row["value"]))))  # fmt: skip
    return out


class JudgeAgreementJob:
    """Recomputes and publishes the weekly agreement. ``run_once`` blocks on two queries; not thread-safe."""

    def __init__(self, store: Any, settings: JudgeAgreementSettings, telemetry: Telemetry | None,
                 clock: Any = lambda: datetime.now(UTC)):  # fmt: skip
        self.store = store
        self.settings = settings
        #: the agreement gauges, registered on ``telemetry`` when given (None: compute only, as the CLI does)
        self.metrics = telemetry.use(JudgeAgreementMetrics) if telemetry is not None else None
        self.clock = clock
        self.last: list[AgreementTrend] = []

    def compute(self) -> list[AgreementTrend]:
        cfg = self.settings
        since = iso_week(self.clock() - timedelta(weeks=cfg.lookback_weeks))
        rows = labelled_scores(self.store, since, sorted({m for m, _ in LABEL_METRICS.values()}))
        return agreement_trends(weekly_pairs(rows), calibration_weeks=cfg.calibration_weeks, min_pairs=cfg.min_pairs)

    def run_once(self) -> list[AgreementTrend]:
        self.last = trends = self.compute()
        if self.metrics is not None:
            self.metrics.judge_agreement_gauges.publish(series(self.metrics, trends))
        for t in trends:
            if t.low and t.latest is not None and t.calibrated is not None:
                log.warning("judge agreement low: fingerprint %s, %s, stratum %s: kappa %.3f in %s vs calibrated "
                            "%.3f (%s)", t.fingerprint, t.label, t.stratum, t.latest.kappa, t.latest.week,
                            t.calibrated.kappa, t.calibrated.week)  # fmt: skip
        return trends


def series(t: JudgeAgreementMetrics, trends: list[AgreementTrend]) -> dict[GaugeSpec, dict[tuple[str, ...], float]]:
    """The gauges' series: a (fingerprint, label, stratum) appears once it has both a calibration and a later
    week with enough pairs and defined kappas (nothing to compare otherwise, and an absent series never fires)."""
    out: dict[GaugeSpec, dict[tuple[str, ...], float]] = {
        t.judge_agreement_kappa: {}, t.judge_agreement_calibrated_kappa: {}, t.judge_agreement_drop_interval: {},
        t.judge_agreement_pairs: {}}  # fmt: skip
    for trend in trends:
        cal, last, margin = trend.calibrated, trend.latest, trend.drop_interval
        if cal is None or last is None or cal.kappa is None or last.kappa is None or margin is None:
            continue
        key = (trend.fingerprint, trend.label, trend.stratum)
        out[t.judge_agreement_kappa][key] = last.kappa
        out[t.judge_agreement_calibrated_kappa][key] = cal.kappa
        out[t.judge_agreement_drop_interval][key] = margin
        out[t.judge_agreement_pairs][key] = float(last.n)
    return out
