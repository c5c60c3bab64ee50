"""The ``ragmon_review_*`` metrics (sign-in failures, the week's queue), as a metric set made from the catalogue
(``ragmon.telemetry.catalogue``, owner ``review``); registered when the review context is built with a process's
telemetry (the ``review`` role). Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class ReviewMetrics(MetricSet):
    """The review role's metrics (owner ``review``)."""

    owner: ClassVar[str] = "review"
    review_signin_failures: Counter
    review_items_due: Gauge
    review_items_reviewed: Gauge
