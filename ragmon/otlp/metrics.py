"""The OTLP/HTTP receiver's metrics (``receiver.otlp_router``), as a metric set made from the catalogue
(``ragmon.telemetry.catalogue``, owner ``otlp``); registered when the ``otlp`` role builds its receiver. What the
loop behind it moves is the trace loop's (``ragmon.pipeline.metrics``). Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class OtlpMetrics(MetricSet):
    """The OTLP/HTTP receiver's metrics (owner ``otlp``)."""

    owner: ClassVar[str] = "otlp"
    ingest_otlp_http_requests: Counter
    ingest_otlp_http_spans_rejected: Counter
