"""The ``ragmon_outcomes_*`` metrics of the outcome-event loop (``loop.OutcomeLoop``), as a metric set made from the
catalogue (``ragmon.telemetry.catalogue``, owner ``outcomes``); registered when the loop is built (the ``outcomes``
role, ``ragmon ingest --outcomes``). Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class OutcomesMetrics(MetricSet):
    """The outcome-event loop's metrics (owner ``outcomes``)."""

    owner: ClassVar[str] = "outcomes"
    outcomes_consumed: Counter
    outcomes_stored: Counter
    outcomes_already_stored: Counter
    outcomes_dead_letters: Counter
    outcomes_store_retries: Counter
