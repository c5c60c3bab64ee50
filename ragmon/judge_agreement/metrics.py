"""The ``ragmon_judge_agreement_*`` gauges (``job.JudgeAgreementJob``), as a metric set made from the catalogue
(``ragmon.telemetry.catalogue``, owner ``judge_agreement``); registered when the job is built with a process's
telemetry (the ``judge_agreement`` role, the demo). Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ragmon.telemetry import GaugeSnapshot, GaugeSpec, MetricSet


@dataclass(frozen=True, slots=True)
class JudgeAgreementMetrics(MetricSet):
    """Judge agreement's gauges (owner ``judge_agreement``) and the snapshot that publishes them."""

    owner: ClassVar[str] = "judge_agreement"
    judge_agreement_kappa: GaugeSpec
    judge_agreement_calibrated_kappa: GaugeSpec
    judge_agreement_drop_interval: GaugeSpec
    judge_agreement_pairs: GaugeSpec
    judge_agreement_gauges: GaugeSnapshot
