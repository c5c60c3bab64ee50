"""The demo's judge drift (issue #21 part 5): SIMULATED reviewers label the review samples of the history weeks,
then the real ``JudgeAgreementJob`` computes the weekly judge-vs-human kappa against the calibrated level.

The demo has no human reviewers, so this module stands in for them, and says so in everything it writes (the
reviewer names and each label's note). Each history week is selected by the real ``select_week`` and its queue
labelled through the review store seam the review UI writes through (``ClickHouseReviewQueries.save_labels``).
A simulated reviewer reads what a person would: whether the answer asserts something its passages do not
(``scenario.unsupported``), and answers ``grounded`` / ``citations_supported`` accordingly, getting it wrong with
a small probability (``Scenario.reviewer_disagreement``), except in the latest history week in
``judge_drift_stratum``, where reviewers and judge part ways (``drifted_disagreement``): the drop the job reports.

Must not: write scores, or touch the two days' traffic (the history weeks end before it; a week it overlaps is
sampled as a whole, as any week would be).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ragmon.config.drift import JudgeAgreementSettings
from ragmon.demo.scenario import Scenario, share_of, unsupported
from ragmon.judge.agreement_trend import AgreementTrend
from ragmon.judge_agreement.job import JudgeAgreementJob
from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.records import Label, iso_week
from ragmon.review.selection import select_week
from ragmon.telemetry import Telemetry

#: simulated reviewers take turns over a week's queue (two, so the review UI shows more than one name)
REVIEWERS = ("simulated-reviewer-1", "simulated-reviewer-2")
NOTE = "simulated by ragmon demo: no person gave this label"
#: the weekly review sample of a history week: most of its thin traffic, the same number per stratum
SAMPLE_PER_STRATUM = 100


@dataclass(frozen=True)
class JudgeDriftDemo:
    """What was simulated and what the agreement job made of it."""

    weeks: tuple[str, ...]  # the history weeks, oldest first; the last is where the drop was simulated
    labels: int  # simulated labels written
    stratum: str  # where the drop was simulated
    agreement: float  # simulated reviewers' rate of agreeing with the truth elsewhere
    drifted_agreement: float  # … in ``stratum`` in the last week
    trends: tuple[AgreementTrend, ...]


def run_judge_drift(store: Any, settings: JudgeAgreementSettings, telemetry: Telemetry | None, scenario: Scenario,
                    traces: Iterable[Mapping[str, Any]], now: datetime) -> JudgeDriftDemo:  # fmt: skip
    """Select each history week's review sample, label it with the simulated reviewers, run the agreement job.
    ``traces`` are every generated trace (history and the two days), for what a reviewer would see in each."""
    review = ClickHouseReviewQueries(store)
    truth = {t["trace_id"]: (not unsupported(t), t["behaviour"]) for t in traces}
    starts = scenario.history_week_starts(now)
    weeks = tuple(iso_week(s) for s in starts)
    size = SAMPLE_PER_STRATUM * len(scenario.strata)
    labels: list[Label] = []
    for k, (start, week) in enumerate(zip(starts, weeks, strict=True)):
        selection = select_week(review, week, size, seed=f"demo-{scenario.seed}-history", stratify=True,
                                min_per_stratum=SAMPLE_PER_STRATUM, now=now, selected_by="demo")
        at = min(start + timedelta(days=8), now)  # labels come in the week after the one reviewed
        for n, item in enumerate(selection.items):
            drifted = week == weeks[-1] and item.category == scenario.judge_drift_stratum
            flip = scenario.drifted_disagreement if drifted else scenario.reviewer_disagreement
            supported, behaviour = truth[item.trace_id]
            grounded, cited = (supported != (share_of(f"{label}/{k}/{item.trace_id}") < flip)
                               for label in ("grounded", "citations_supported"))  # fmt: skip
            labels.append(Label(week, item.trace_id, REVIEWERS[n % len(REVIEWERS)], at, None, grounded, cited, None,
                                behaviour, note=NOTE))
    review.save_labels(labels)
    job = JudgeAgreementJob(store, settings, telemetry, clock=lambda: now)
    return JudgeDriftDemo(weeks, len(labels), scenario.judge_drift_stratum, 1 - scenario.reviewer_disagreement,
                          1 - scenario.drifted_disagreement, tuple(job.run_once()))
