"""The ``drift`` section: the schedule, windows, false-discovery rate and per-feature overrides of drift checks.

Owns the models only; turning windows into time ranges is ``ragmon.drift.method.windows``. Must not read a clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from ragmon.config.section import Section


class DriftWindowSettings(Section):
    current_seconds: int = Field(3600, ge=60, le=30 * 86400, description="Length of the current window, ending now.")
    reference: Literal["trailing", "pinned"] = Field(
        "trailing",
        description="'trailing': the reference is the previous reference_days before the current window; "
        "'pinned': a fixed baseline given by reference_start/reference_end or reference_corpus_snapshot.",
    )
    reference_days: int = Field(7, ge=1, le=90, description="Trailing reference length in days.")
    same_hours: bool = Field(
        True,
        description="Trailing reference uses only the same hours of day as the current window (daily seasonality).",
    )
    reference_start: datetime | None = Field(None, description="Pinned baseline start (UTC, ISO 8601).")
    reference_end: datetime | None = Field(None, description="Pinned baseline end (UTC, ISO 8601), exclusive.")
    reference_corpus_snapshot: str | None = Field(
        None, min_length=1, description="Pinned baseline: the traces served from this corpus snapshot."
    )


class DriftFeatureOverride(Section):
    enabled: bool = Field(True, description="Run this feature at all.")
    tests: list[str] | None = Field(None, description="Test names (ks, psi, two_proportion, chi_square).")
    threshold: float | None = Field(None, gt=0, lt=1, description="Significance level on the BH-adjusted p-value.")
    effect_threshold: float | None = Field(None, ge=0, description="Minimum effect size to declare drift.")
    min_samples: int | None = Field(None, ge=1, description="Minimum observations in each window.")
    windows: DriftWindowSettings | None = Field(None, description="Windows for this feature (default: drift.windows).")


class DriftSequentialSettings(Section):
    false_alarms_per_day: float = Field(
        0.1, gt=0, le=24,
        description="Budget of persistent-drift alarms a day, across every monitored series, when nothing drifts: "
        "sets the CUSUM threshold (docs/drift.md, 'Persistence').",
    )
    k: float = Field(
        1.0, gt=0, le=5,
        description="CUSUM reference value in z units: tuned to catch a persistent shift of about 2k standard "
        "deviations of a window's statistic fastest.",
    )
    lookback_windows: int = Field(
        24, ge=1, le=720, description="Windows the CUSUM accumulates over (recomputed at every check)."
    )
    arl_margin: float = Field(
        10.0, ge=1, le=100,
        description="The threshold is set for this many times the run length the budget asks for: the textbook "
        "formula assumes independent N(0, 1) z-scores, and on trending popular queries at 5,000 traces an hour "
        "the measured false alarms were 2–3 times the budget with 4 (bench/drift_null.py).",
    )


class DriftWatchSettings(Section):
    enabled: bool = Field(
        True,
        description="Between checks, look at the window in progress every interval_seconds and page on a large "
        "shift within minutes (docs/drift.md, 'Pages within minutes').",
    )
    interval_seconds: float = Field(
        300.0, ge=30, le=86400, description="Time between looks at the window in progress (from each check on)."
    )
    budget_share: float = Field(
        0.5, gt=0, lt=1,
        description="Share of drift.sequential.false_alarms_per_day the looks may spend (the CUSUM gets the rest): "
        "spent over each window's looks, Pocock-type.",
    )


class JudgeAgreementSettings(Section):
    enabled: bool = Field(
        True, description="Track judge-vs-human agreement (Cohen's kappa) week by week in the judge_agreement role "
        "(roles.judge_agreement) and export it for RagmonJudgeAgreementLow (docs/judges.md, 'Judge drift').",
    )
    interval_seconds: float = Field(
        3600.0, ge=60, le=7 * 86400, description="How often the weekly agreement is recomputed from review labels."
    )
    calibration_weeks: int = Field(
        4, ge=1, le=52,
        description="A judge fingerprint's first labelled weeks whose pooled kappa is its calibrated level.",
    )
    min_pairs: int = Field(
        20, ge=1, le=100_000,
        description="Label/verdict pairs a (label, stratum) needs in a week (and in the calibration) to be compared.",
    )
    lookback_weeks: int = Field(
        26, ge=2, le=520, description="Review weeks read: the calibration must fall inside them to be found."
    )


class DriftSettings(Section):
    interval_seconds: float = Field(3600.0, ge=5, le=7 * 86400, description="Time between scheduled drift checks.")
    windows: DriftWindowSettings = Field(
        default_factory=DriftWindowSettings, description="Reference and current windows."
    )
    alpha: float = Field(
        0.016, gt=0, lt=1,
        description="Per-check significance: Benjamini–Hochberg within each stratum at alpha / strata (a stratum "
        "without drift alarms in at most that share of checks, whatever the others hold; a check without drift in "
        "at most alpha). The default keeps an incident of three hourly checks from declaring healthy strata in "
        "more than 3 × 0.016 = 4.8 % of incidents.",
    )
    min_samples: int | None = Field(
        None, ge=1, description="Minimum observations per window for every test (default: each test's own, 30–200)."
    )
    features: list[str] | None = Field(
        None, description="Features to check (default: all; see `ragmon drift features`)."
    )
    overrides: dict[str, DriftFeatureOverride] = Field(default_factory=dict, description="Per-feature settings.")
    max_groups: int = Field(
        200, ge=1, le=10_000,
        description="Upper bound on (retriever, variant, stratum) groups per check (label cardinality).",
    )
    sequential: DriftSequentialSettings = Field(
        default_factory=DriftSequentialSettings, description="The persistent-drift rule (CUSUM) that pages."
    )
    watch: DriftWatchSettings = Field(
        default_factory=DriftWatchSettings,
        description="Pages within minutes: the window in progress watched between checks.",
    )
    max_pool_windows: int = Field(
        24, ge=1, le=168,
        description="A group whose current window holds too few traces is assessed over up to this many windows "
        "pooled (2, 3, 4, 6, … hours).",
    )
    blind_after_seconds: float = Field(
        6 * 3600.0, ge=600, le=30 * 86400,
        description="A feature family (traces, versions, judge) of a group with traffic that no check could assess "
        "for this long is 'blind' (RagmonDriftBlind).",
    )
    judge_agreement: JudgeAgreementSettings = Field(
        default_factory=JudgeAgreementSettings, description="Judge drift: weekly judge-vs-human agreement."
    )
    by_query: bool = Field(
        True,
        description="Test every feature of a trace (scores, n_results, latency, cost, empty shortlists, refusals) "
        "as its value against its own question's reference level (questions keyed by their trimmed, lower-cased "
        "text), so a popular question with its own habits trending from hour to hour does not read as drift. Off: "
        "the values as served.",
    )
    questions_as_clusters: bool = Field(
        True,
        description="With by_query: widen the current window's tests of a continuous feature by its design effect "
        "with the questions as clusters, so a burst of a few new questions asked many times does not read as "
        "drift (docs/drift.md, 'Questions as clusters'). Costs a per-question sum of the current window's "
        "traces in the traces query. Off: the window's traces count as independent.",
    )
    index_lag_seconds: float = Field(
        3600.0, ge=0, le=30 * 86400,
        description="newest_version_share: how long a new document version may take to reach the index before "
        "serving the older one counts as stale.",
    )
