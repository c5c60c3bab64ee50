"""The ``ragmon_ingest_*`` and ``ragmon_permission_leaks_total`` metrics of the trace loop (``loop.IngestPipeline``:
intake, OTLP assembly, writes, commits), as a metric set made from the catalogue (``ragmon.telemetry.catalogue``,
owner ``ingest``). Registered when a loop is built: by the ``ingest`` and ``otlp`` roles (one set shared, told apart
by the ``loop`` label where it matters), ``ragmon ingest --file`` and the demo. Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge, Histogram

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class IngestMetrics(MetricSet):
    """The trace loop's metrics (owner ``ingest``)."""

    owner: ClassVar[str] = "ingest"
    ingest_messages_consumed: Counter
    ingest_traces_stored: Counter
    ingest_dead_letters: Counter
    ingest_traces_consumed: Counter
    ingest_traces_settled: Counter
    ingest_dead_letters_cut: Counter
    ingest_unknown_fields: Counter
    ingest_redactions: Counter
    ingest_batch_rows: Histogram
    ingest_write_seconds: Histogram
    ingest_store_retries: Counter
    ingest_consumer_lag: Gauge
    ingest_last_commit: Gauge
    ingest_commit_current: Gauge
    ingest_last_poll: Gauge
    ingest_paused: Gauge
    ingest_flush_failures: Counter
    permission_leaks: Counter
    ingest_otlp_incomplete: Counter
    ingest_otlp_skipped: Counter
    ingest_otlp_open_traces: Gauge
    ingest_otlp_repaired: Counter
    ingest_otlp_unscored: Counter
