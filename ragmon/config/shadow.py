"""The ``shadow`` section: the running comparisons of a candidate retriever with production, and their schedule.

Owns the models and the check that a comparison's two sides differ. Running a comparison is
``ragmon.shadow``. Must not query the store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ragmon.config.section import Section


class ShadowComparisonSettings(Section):
    baseline: str = Field(
        pattern=r"^[^@\s]{1,256}(@[^@\s]{0,256})?$", description="Production retriever as NAME or NAME@VERSION."
    )
    candidate: str = Field(
        pattern=r"^[^@\s]{1,256}(@[^@\s]{0,256})?$", description="Candidate retriever as NAME or NAME@VERSION."
    )
    baseline_variant: Literal["production", "shadow", "canary"] = Field("production", description="Baseline variant.")
    candidate_variant: Literal["production", "shadow", "canary"] = Field("shadow", description="Candidate variant.")
    window_seconds: float = Field(3600.0, ge=60, le=90 * 86400,
                                  description="Each run compares the last this-many seconds.")
    k: int | None = Field(None, ge=1, le=1000, description="Top k compared (default: the smaller usual list length).")
    latency_stage: str = Field("retrieve", min_length=1, max_length=256,
                               description="latency_ms key compared, or 'total'.")

    @model_validator(mode="after")
    def _sides_differ(self) -> ShadowComparisonSettings:
        if (self.baseline, self.baseline_variant) == (self.candidate, self.candidate_variant):
            raise ValueError(f"baseline and candidate both select {self.baseline} ({self.baseline_variant}); "
                             "give the candidate's name, version or variant")
        return self


class ShadowSettings(Section):
    interval_seconds: float = Field(300.0, ge=5, le=86400,
                                    description="Time between runs of the configured comparisons.")
    comparisons: list[ShadowComparisonSettings] = Field(
        default_factory=list, description="Running shadow comparisons exported as ragmon_shadow_* gauges."
    )
