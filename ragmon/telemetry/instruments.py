"""The metric objects of one ragmon process, made from the catalogue (``ragmon.telemetry.catalogue``) and registered
on a ``CollectorRegistry`` passed in (a fresh one per test), never on the global default registry, so two pipelines
in one test never share counters. Owns no names or HELP texts: the catalogue does."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from ragmon import __version__
from ragmon.telemetry.catalogue import CATALOGUE, SNAPSHOTS, MetricDef
from ragmon.telemetry.snapshot import GaugeSnapshot, GaugeSpec

_MAKERS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram, "info": Info}


def _make(spec: MetricDef, registry: CollectorRegistry) -> object:
    if spec.kind == "series":
        return GaugeSpec(spec.name, spec.help, spec.labels)
    extra = {"buckets": spec.buckets} if spec.buckets is not None else {}
    return _MAKERS[spec.kind](spec.name, spec.help, spec.labels, registry=registry, **extra)


@dataclass
class Telemetry:
    """Every metric of the catalogue as an attribute (by owner below), and the snapshots serving the series."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # process
    build_info: Info = field(init=False)
    links_info: Info = field(init=False)
    # ingest
    ingest_messages_consumed: Counter = field(init=False)
    ingest_traces_stored: Counter = field(init=False)
    ingest_dead_letters: Counter = field(init=False)
    ingest_traces_consumed: Counter = field(init=False)
    ingest_traces_settled: Counter = field(init=False)
    ingest_dead_letters_cut: Counter = field(init=False)
    ingest_unknown_fields: Counter = field(init=False)
    ingest_redactions: Counter = field(init=False)
    ingest_batch_rows: Histogram = field(init=False)
    ingest_write_seconds: Histogram = field(init=False)
    ingest_store_retries: Counter = field(init=False)
    ingest_consumer_lag: Gauge = field(init=False)
    ingest_last_commit: Gauge = field(init=False)
    ingest_commit_current: Gauge = field(init=False)
    ingest_last_poll: Gauge = field(init=False)
    ingest_paused: Gauge = field(init=False)
    ingest_flush_failures: Counter = field(init=False)
    permission_leaks: Counter = field(init=False)
    # outcomes
    outcomes_consumed: Counter = field(init=False)
    outcomes_stored: Counter = field(init=False)
    outcomes_already_stored: Counter = field(init=False)
    outcomes_dead_letters: Counter = field(init=False)
    outcomes_store_retries: Counter = field(init=False)
    # otlp
    ingest_otlp_incomplete: Counter = field(init=False)
    ingest_otlp_skipped: Counter = field(init=False)
    ingest_otlp_open_traces: Gauge = field(init=False)
    ingest_otlp_repaired: Counter = field(init=False)
    ingest_otlp_unscored: Counter = field(init=False)
    ingest_otlp_http_requests: Counter = field(init=False)
    ingest_otlp_http_spans_rejected: Counter = field(init=False)
    # store
    store_disk_free: Gauge = field(init=False)
    store_writes_paused: Gauge = field(init=False)
    store_ignored_write_errors: Counter = field(init=False)
    store_broken_parts: Counter = field(init=False)
    store_rows_lost: Counter = field(init=False)
    store_detached_broken_parts: Gauge = field(init=False)
    # review
    review_signin_failures: Counter = field(init=False)
    review_items_due: Gauge = field(init=False)
    review_items_reviewed: Gauge = field(init=False)
    # judge
    judge_calls: Counter = field(init=False)
    judge_info: Gauge = field(init=False)
    judge_tokens: Counter = field(init=False)
    judge_cost_usd: Counter = field(init=False)
    judge_in_flight: Gauge = field(init=False)
    judge_adaptive_limit: Gauge = field(init=False)
    judge_concurrency_limit: Gauge = field(init=False)
    judge_queue_wait: Histogram = field(init=False)
    judge_rate_limited: Counter = field(init=False)
    # score
    score_traces_scored: Counter = field(init=False)
    score_failures: Counter = field(init=False)
    score_sampling_decisions: Counter = field(init=False)
    score_last_batch: Gauge = field(init=False)
    score_backlog: Gauge = field(init=False)
    # drift
    drift_statistic: GaugeSpec = field(init=False)
    drift_p_value: GaugeSpec = field(init=False)
    drift_effect: GaugeSpec = field(init=False)
    drift_detected: GaugeSpec = field(init=False)
    drift_sample_size: GaugeSpec = field(init=False)
    drift_feature_value: GaugeSpec = field(init=False)
    drift_cusum: GaugeSpec = field(init=False)
    drift_persistent: GaugeSpec = field(init=False)
    drift_pooled_windows: GaugeSpec = field(init=False)
    drift_last_assessed: GaugeSpec = field(init=False)
    drift_watch_alarm: GaugeSpec = field(init=False)
    drift_watch_statistic: GaugeSpec = field(init=False)
    drift_watch_boundary: GaugeSpec = field(init=False)
    drift_time_to_page: GaugeSpec = field(init=False)
    drift_watch_gauges: GaugeSnapshot = field(init=False)
    drift_last_look: Gauge = field(init=False)
    drift_looks: Counter = field(init=False)
    drift_gauges: GaugeSnapshot = field(init=False)
    drift_explain_top: GaugeSpec = field(init=False)
    drift_explain_gauges: GaugeSnapshot = field(init=False)
    drift_cusum_threshold: Gauge = field(init=False)
    drift_blind_after: Gauge = field(init=False)
    drift_last_check: Gauge = field(init=False)
    drift_check_duration: Gauge = field(init=False)
    drift_checks: Counter = field(init=False)
    # judge_agreement
    judge_agreement_kappa: GaugeSpec = field(init=False)
    judge_agreement_calibrated_kappa: GaugeSpec = field(init=False)
    judge_agreement_drop_interval: GaugeSpec = field(init=False)
    judge_agreement_pairs: GaugeSpec = field(init=False)
    judge_agreement_gauges: GaugeSnapshot = field(init=False)
    # coverage
    coverage_distance: Gauge = field(init=False)
    coverage_diverged: Gauge = field(init=False)
    coverage_under_represented: Gauge = field(init=False)
    coverage_last_check: Gauge = field(init=False)
    # shadow
    shadow_overlap_at_k: Gauge = field(init=False)
    shadow_latency_delta: Gauge = field(init=False)
    shadow_quality_delta: Gauge = field(init=False)
    shadow_pairs: Gauge = field(init=False)
    shadow_last_run: Gauge = field(init=False)
    shadow_runs: Counter = field(init=False)

    def __post_init__(self) -> None:
        for spec in CATALOGUE:
            setattr(self, spec.attr, _make(spec, self.registry))
        for attr, members in SNAPSHOTS.items():
            snapshot = GaugeSnapshot(*(getattr(self, m) for m in members))
            self.registry.register(snapshot)
            setattr(self, attr, snapshot)
        self.build_info.info({"version": __version__})

    def counter_totals(self, *prefixes: str) -> dict[str, float]:
        """The current value of every counter whose name starts with one of ``prefixes``, one entry per labelled
        series, keyed as Prometheus prints it (``ragmon_ingest_dead_letters_total{reason="schema"}``): what a
        process reports when it stops, since its counters die with it."""
        totals = {}
        for family in self.registry.collect():
            if family.type != "counter" or not family.name.startswith(prefixes):
                continue
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    totals[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
        return totals
