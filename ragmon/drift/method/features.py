"""The drift features, and the per-feature plan (tests, thresholds, windows) resolved from the config.

A feature is computed per group = (retriever name and version, variant, stratum), and for judge scores also
per judge fingerprint: scores from different judges are never compared. Feature expressions are code
constants; the config can only pick features by name. No I/O.

feature | kind | source | family
--- | --- | --- | ---
top1_score, mean_score (mean of the top-k), top2_gap, n_results | continuous | traces (materialized columns) | traces
latency_ms (total), cost_usd | continuous | traces | traces
empty_shortlist_rate (no chunk retrieved), refusal_rate (behaviour = refuse) | rate | traces | traces
newest_version_share (retrieved chunks from the newest version of their document) | rate | retrieved chunks | versions
faithfulness, citation_precision, answer_relevance | continuous | scores (status ok, per judge fingerprint) | judge
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ragmon.config import DriftSettings, DriftWindowSettings
from ragmon.drift.method.registry import DEFAULT_TESTS, DriftTest, get_test
from ragmon.errors import ConfigError

Source = Literal["traces", "chunks", "scores"]
#: a feature's family, by its source: the features of one family count the same observations (each trace, each
#: retrieved chunk, each judged trace), so they are assessed alike (their minimum samples aside), and a group is blind
#: per family (``RagmonDriftBlind{family}``): a stratum whose trace features cannot be assessed is blind whatever
#: its chunks' version share says
FAMILIES: dict[str, str] = {"traces": "traces", "chunks": "versions", "scores": "judge"}


@dataclass(frozen=True, slots=True)
class Feature:
    """One monitored quantity. ``expr`` is a SQL expression over ``source`` (a value, or a condition for rates)."""

    name: str
    kind: Literal["continuous", "rate"]
    source: Source
    expr: str
    description: str
    tests: tuple[str, ...] = ()  # default tests when not the kind's (DEFAULT_TESTS)
    #: tested as each trace's value against its own question's reference level (``drift.by_query``): every feature of
    #: a trace — a question has its own scores, latency, cost, shortlist length, and may always be empty or refused
    by_query: bool = False
    #: never NaN (a count, a flag, latency and cost, validated finite at ingest): the SQL needs no finiteness test
    always_finite: bool = False

    @property
    def default_tests(self) -> tuple[str, ...]:
        return self.tests or DEFAULT_TESTS[self.kind]

    @property
    def family(self) -> str:
        """``traces`` (scores, counts, rates, latency and cost of each trace), ``versions``
        (newest_version_share, per retrieved chunk) or ``judge`` (judge scores, per judged trace)."""
        return FAMILIES[self.source]


#: retrieval scores also get their tails tested: a subset of queries losing its documents is a heavier left
#: tail before it moves the mean much
_SCORE_TESTS = ("window_mean", "window_quantiles")

FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("top1_score", "continuous", "traces", "top1_score", "Score of the best retrieved chunk.",
                tests=_SCORE_TESTS, by_query=True),
        Feature("mean_score", "continuous", "traces", "mean_score", "Mean score of the retrieved top-k.",
                tests=_SCORE_TESTS, by_query=True),
        Feature("top2_gap", "continuous", "traces", "top2_gap", "Top-1 minus top-2 score (how decisive retrieval is).",
                by_query=True),
        Feature("n_results", "continuous", "traces", "n_results", "Number of chunks retrieved before truncation.",
                by_query=True, always_finite=True),
        Feature("latency_ms", "continuous", "traces", "latency_total_ms", "End-to-end latency in milliseconds.",
                by_query=True, always_finite=True),
        Feature("cost_usd", "continuous", "traces", "cost_usd", "Cost of the request in US dollars.", by_query=True,
                always_finite=True),
        Feature("empty_shortlist_rate", "rate", "traces", "n_results = 0", "Share of queries that retrieved nothing.",
                by_query=True, always_finite=True),
        Feature("refusal_rate", "rate", "traces", "behaviour = 'refuse'", "Share of queries the system refused.",
                by_query=True, always_finite=True),
        Feature("newest_version_share", "rate", "chunks", "newest",
                "Share of retrieved chunks from the newest version of their document seen in either window."),
        Feature("faithfulness", "continuous", "scores", "faithfulness", "Judge: claims supported by the context."),
        Feature("citation_precision", "continuous", "scores", "citation_precision", "Judge: citations that hold."),
        Feature("answer_relevance", "continuous", "scores", "answer_relevance",
                "Judge: answer addresses the question."),
    )
}


@dataclass(frozen=True, slots=True)
class TestPlan:
    """One test of one feature with the thresholds it will be judged by."""

    test: DriftTest
    threshold: float
    effect_threshold: float
    min_samples: int


@dataclass(frozen=True, slots=True)
class FeaturePlan:
    """A feature, its tests and the windows it is compared over."""

    feature: Feature
    tests: tuple[TestPlan, ...]
    windows: DriftWindowSettings


def significance(settings: DriftSettings, name: str) -> float:
    """The level feature ``name``'s tests are declared at: its ``drift.overrides.<name>.threshold``, else
    ``drift.alpha``."""
    override = settings.overrides.get(name)
    return _pick(override and override.threshold, settings.alpha)


def plan_features(settings: DriftSettings) -> list[FeaturePlan]:
    """Resolve the features to check, with per-feature overrides; ``ConfigError`` lists every problem."""
    problems: list[str] = []
    names: Sequence[str] = settings.features if settings.features is not None else list(FEATURES)
    for name in [*names, *settings.overrides]:
        if name not in FEATURES:
            problems.append(f"drift: unknown feature {name!r}; known: {', '.join(FEATURES)}")
    plans: list[FeaturePlan] = []
    for name in names:
        feature = FEATURES.get(name)
        if feature is None:
            continue
        override = settings.overrides.get(name)
        if override is not None and not override.enabled:
            continue
        test_names = (override.tests if override and override.tests is not None else feature.default_tests)
        tests: list[TestPlan] = []
        for test_name in test_names:
            try:
                test = get_test(test_name)
            except ValueError as exc:
                problems.append(f"drift.overrides.{name}.tests: {exc}")
                continue
            if feature.kind not in test.kinds:
                problems.append(f"drift.overrides.{name}.tests: {test_name!r} applies to {sorted(test.kinds)} "
                                f"features; {name} is {feature.kind}")
                continue
            tests.append(TestPlan(
                test,
                threshold=significance(settings, name),
                effect_threshold=_pick(override and override.effect_threshold, test.default_effect_threshold),
                min_samples=int(_pick(override and override.min_samples,
                                      _pick(settings.min_samples, test.default_min_samples))),
            ))
        windows = override.windows if override and override.windows is not None else settings.windows
        problems.extend(_window_problems(name, windows))
        if tests:
            plans.append(FeaturePlan(feature, tuple(tests), windows))
    if problems:
        raise ConfigError(sorted(set(problems)))
    return plans


def _pick(value: float | int | None | bool, default: float) -> float:
    return default if value is None or value is False else float(value)


def _window_problems(name: str, w: DriftWindowSettings) -> list[str]:
    if w.reference != "pinned":
        return []
    has_dates = w.reference_start is not None and w.reference_end is not None
    if not has_dates and not w.reference_corpus_snapshot:
        return [f"drift windows for {name}: a pinned reference needs reference_start and reference_end, or "
                "reference_corpus_snapshot"]
    if has_dates and w.reference_start >= w.reference_end:  # type: ignore[operator]
        return [f"drift windows for {name}: reference_start must be before reference_end"]
    return []
