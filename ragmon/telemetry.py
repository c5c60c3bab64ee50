"""Every ``ragmon_*`` Prometheus metric, defined in one catalogue.

Metrics are created on a ``CollectorRegistry`` passed in (a fresh one per test), never on the global default
registry, so two pipelines in one test never share counters. Names follow Prometheus conventions:
``ragmon_<subsystem>_<thing>_<unit>``, counters end in ``_total``, base units (seconds, bytes), and label
values are bounded (retriever, variant, stratum, reason, partition — never a trace id, user or query text).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ragmon import __version__

#: one published set of series: for each gauge, label values (in the gauge's label order) → value
Series = Mapping["GaugeSpec", Mapping[tuple[str, ...], float]]


@dataclass(frozen=True, slots=True)
class GaugeSpec:
    """A labelled gauge family whose series come from a ``GaugeSnapshot``: its name, HELP text and label names."""

    name: str
    documentation: str
    labels: tuple[str, ...]


class GaugeSnapshot(Collector):
    """Gauge families whose series are replaced all at once, as a collector registered like any metric.

    ``publish`` swaps in a whole new set of series: a series the last publish did not name is gone from the
    next scrape by construction (nothing to remove by hand), and a scrape sees either the old set or the new
    one, never a mix or a gap that would reset an alert's ``for`` timer. The swap is one reference assignment,
    so a scrape on the HTTP thread needs no lock.
    """

    def __init__(self, *specs: GaugeSpec):
        self._specs = specs
        self._series: Series = {}

    def publish(self, series: Series) -> None:
        """Replace every series; a gauge left out has none. ``ValueError`` if a key does not fit its gauge."""
        for spec, values in series.items():
            if spec not in self._specs:
                raise ValueError(f"expected one of {[s.name for s in self._specs]}, got gauge {spec.name}")
            for key in values:
                if len(key) != len(spec.labels):
                    raise ValueError(f"{spec.name}: expected values for {spec.labels}, got {key}")
        self._series = series

    def collect(self) -> Iterator[GaugeMetricFamily]:
        series = self._series
        for spec in self._specs:
            family = GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels)
            for key, value in series.get(spec, {}).items():
                family.add_metric(key, value)
            yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples: lets the registry refuse a second metric of the same name."""
        for spec in self._specs:
            yield GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels)


@dataclass
class Telemetry:
    """The metric objects of one ragmon process, registered on ``registry``."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.build_info = Info("ragmon_build", "ragmon build information.", registry=r)
        self.build_info.info({"version": __version__})
        # the alert rules' runbook_url and dashboard_url templates read these (settings console.*); one value each
        self.links_info = Info("ragmon_links", "Where the alert rules' runbook and console links point.", registry=r)

        # -- ingest ---------------------------------------------------------------------------------------
        self.ingest_messages_consumed = Counter(
            "ragmon_ingest_messages_consumed_total", "Messages read from the traces topic.", ["topic"], registry=r
        )
        self.ingest_traces_stored = Counter(
            "ragmon_ingest_traces_stored_total",
            "Trace rows written to the store (acknowledged inserts), per delivery: "
            "a trace delivered again is written, and counted, again (the store keeps it once under FINAL; "
            "ragmon_permission_leaks_total counts a trace once).", registry=r
        )
        self.ingest_dead_letters = Counter(
            "ragmon_ingest_dead_letters_total", "Messages sent to the dead-letter topic, by reason.", ["reason"],
            registry=r,
        )
        self.ingest_traces_consumed = Counter(
            "ragmon_ingest_traces_consumed_total",
            "Traces taken in by the ingest loop, by kind: message (a message that is one trace, or is rejected "
            "whole) or otlp_trace (an OTLP trace whose first span arrived). Each ends in exactly one outcome of "
            "ragmon_ingest_traces_settled_total.", ["kind"], registry=r,
        )
        self.ingest_traces_settled = Counter(
            "ragmon_ingest_traces_settled_total",
            "Traces by final outcome, counted once each: stored (first write acknowledged), dead_lettered, skipped "
            "(an OTLP trace that is not a RAG query, once its repair window closed) or released (given back "
            "uncommitted to be read again: stopped or revoked before its outcome), by kind as in "
            "ragmon_ingest_traces_consumed_total.", ["kind", "outcome"], registry=r,
        )
        self.ingest_dead_letters_cut = Counter(
            "ragmon_ingest_dead_letters_cut_total",
            "Dead letters too large for the dead-letter topic, produced cut (reason too_large).", registry=r,
        )
        self.ingest_unknown_fields = Counter(
            "ragmon_ingest_unknown_fields_total", "Valid traces that carried unknown top-level fields, per delivery (a "
            "producer-evolution signal: a trace delivered again counts again).", registry=r
        )
        self.ingest_redactions = Counter(
            "ragmon_ingest_redactions_total", "Redactions applied before storage, by pattern.", ["pattern"],
            registry=r,
        )
        self.ingest_batch_rows = Histogram(
            "ragmon_ingest_batch_rows", "Traces per insert batch.",
            buckets=(1, 10, 100, 500, 1000, 2000, 5000, 10000, 20000, 50000), registry=r,
        )
        self.ingest_write_seconds = Histogram(
            "ragmon_ingest_write_duration_seconds", "Time to insert one batch into the store.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r,
        )
        self.ingest_store_retries = Counter(
            "ragmon_ingest_store_retries_total", "Store writes retried after a retryable failure.", registry=r
        )
        self.outcomes_consumed = Counter(
            "ragmon_outcomes_consumed_total", "Outcome events (schemas/outcome.v1) read and settled: stored or "
            "dead-lettered.", registry=r,
        )
        self.outcomes_stored = Counter(
            "ragmon_outcomes_stored_total", "Outcome events new to the store (acknowledged inserts); an event stored "
            "already (a replay, a file loaded again) counts in ragmon_outcomes_already_stored_total instead.",
            registry=r,
        )
        self.outcomes_already_stored = Counter(
            "ragmon_outcomes_already_stored_total", "Valid outcome events read again that the store already held "
            "(same event_id): re-deliveries, counted once in the store.", registry=r,
        )
        self.outcomes_dead_letters = Counter(
            "ragmon_outcomes_dead_letters_total", "Outcome events sent to ab.outcomes_dead_letter_topic, by reason.",
            ["reason"], registry=r,
        )
        self.outcomes_store_retries = Counter(
            "ragmon_outcomes_store_retries_total", "Outcome batches retried after a failed write or dead-letter "
            "send.", registry=r,
        )
        self.ingest_consumer_lag = Gauge(
            "ragmon_ingest_consumer_lag_messages", "Messages behind the partition end.", ["topic", "partition"],
            registry=r,
        )
        self.ingest_last_commit = Gauge(
            "ragmon_ingest_last_commit_timestamp_seconds", "Unix time of the last successful offset commit.",
            registry=r,
        )
        self.ingest_commit_current = Gauge(
            "ragmon_ingest_commit_current_timestamp_seconds",
            "Unix time the committed offsets were last as far as the commit rule allows: a commit succeeded, or "
            "nothing more was safe to commit (what is left is held by OTLP traces still assembling, by design). "
            "Old while writes or commits fail. By loop: ingest (Kafka, a file) or otlp (OTLP/HTTP).", ["loop"],
            registry=r,
        )
        self.ingest_last_poll = Gauge(
            "ragmon_ingest_last_poll_timestamp_seconds", "Unix time the consume loop last polled.", registry=r
        )
        self.ingest_paused = Gauge(
            "ragmon_ingest_paused", "1 while consumption is paused for backpressure (store unavailable).",
            registry=r,
        )
        self.ingest_flush_failures = Counter(
            "ragmon_ingest_flush_failures_total",
            "Failed writes of a batch, by stage (store, dead_letter, commit) and kind (retryable, permanent).",
            ["stage", "kind"], registry=r,
        )
        self.permission_leaks = Counter(
            "ragmon_permission_leaks_total",
            "Retrieved chunks of another tenant (neither the user's nor ingest.shared_tenants) in stored traces, by "
            "retriever (name@version), variant and stratum; checked on every trace, counted once per trace: a trace "
            "delivered again (a retry, a replay) is not counted again. Target: zero. List them with `ragmon leaks "
            "list`.", ["retriever", "variant", "stratum"], registry=r,
        )
        self.ingest_otlp_incomplete = Counter(
            "ragmon_ingest_otlp_incomplete_traces_total",
            "OTLP traces emitted or dead-lettered before all their spans arrived, and late spans dead-lettered, by "
            "outcome.", ["outcome"], registry=r,
        )
        self.ingest_otlp_skipped = Counter(
            "ragmon_ingest_otlp_traces_skipped_total",
            "OTLP traces not stored because they are not RAG queries (no retriever span), by reason; counted when "
            "the trace's repair window closes with it still skipped.", ["reason"], registry=r,
        )
        self.ingest_otlp_open_traces = Gauge(
            "ragmon_ingest_otlp_open_traces",
            "OTLP traces whose outcome is not final yet: assembling (waiting for their root or parent spans), or "
            "skipped with their repair window open. By loop: ingest (Kafka, a file) or otlp (OTLP/HTTP).", ["loop"],
            registry=r,
        )
        self.ingest_otlp_repaired = Counter(
            "ragmon_ingest_otlp_repaired_traces_total",
            "OTLP traces stored again (a new version) because spans of theirs arrived after they were emitted.",
            registry=r,
        )
        self.ingest_otlp_unscored = Counter(
            "ragmon_ingest_otlp_unscored_documents_total",
            "Retrieved documents of OTLP traces stored without a score (the instrumentation sent none).", registry=r,
        )
        self.ingest_otlp_http_requests = Counter(
            "ragmon_ingest_otlp_http_requests_total",
            "OTLP/HTTP export requests on /v1/traces, by outcome (accepted, partial, invalid, unauthorized, "
            "too_large, unsupported, busy, spool_full, spool_error).", ["outcome"], registry=r,
        )
        self.ingest_otlp_http_spans_rejected = Counter(
            "ragmon_ingest_otlp_http_spans_rejected_total",
            "Spans refused in OTLP/HTTP requests that were otherwise accepted (reported as partial_success).",
            registry=r,
        )

        # -- the embedded store's disk and parts (ragmon.store.write_guard; docs/operations.md, "The disk") -----
        self.store_disk_free = Gauge(
            "ragmon_store_disk_free_bytes", "Free bytes on the embedded store's file system.", registry=r
        )
        self.store_writes_paused = Gauge(
            "ragmon_store_writes_paused", "1 while the embedded store's disk is below its headroom "
            "(store.min_free_disk_mb): writes are refused as retryable and merges stopped.", registry=r,
        )
        self.store_ignored_write_errors = Counter(
            "ragmon_store_ignored_write_errors_total", "File writes that failed and that the embedded engine ignored "
            "(its WriteBufferFromFileDescriptorWriteFailed event): each may have left an incomplete part.", registry=r,
        )
        self.store_broken_parts = Counter(
            "ragmon_store_broken_parts_total", "Parts the embedded engine wrote incompletely, by table and outcome: "
            "restored (the parts it replaced were attached again), retried (an insert's part, found before the insert "
            "was acknowledged: the insert is written again), lost (rows with no other copy), unrepaired (could not be "
            "detached yet: reads of the table fail meanwhile).",
            ["table", "outcome"], registry=r,
        )
        self.store_rows_lost = Counter(
            "ragmon_store_rows_lost_total", "Rows of incomplete parts that had no other copy, by table: acknowledged "
            "data gone from the store (re-send it; docs/operations.md, 'The disk').", ["table"], registry=r,
        )
        self.store_detached_broken_parts = Gauge(
            "ragmon_store_detached_broken_parts", "Broken parts kept in the embedded store's detached/ directories "
            "(found at start-up or detached since), by table: review and drop them (docs/operations.md, 'The disk').",
            ["table"], registry=r,
        )

        # -- review ---------------------------------------------------------------------------------------
        self.review_signin_failures = Counter(
            "ragmon_review_signin_failures_total",
            "Failed review sign-ins by reason: bad_credentials (wrong user name or password), locked_out (refused "
            "while too many recent failures), bad_token (unknown API bearer token).", ["reason"], registry=r,
        )
        self.review_items_due = Gauge(
            "ragmon_review_items_due", "Items in the newest selected review week's queue, by stratum.", ["stratum"],
            registry=r,
        )
        self.review_items_reviewed = Gauge(
            "ragmon_review_items_reviewed", "Items of that queue with at least one human label, by stratum.",
            ["stratum"], registry=r,
        )

        # -- judge and live scoring -------------------------------------------------------------------------
        self.judge_calls = Counter(
            "ragmon_judge_calls_total", "Judge calls by judge kind and outcome (ok, error, retry).",
            ["judge", "outcome"], registry=r,
        )
        self.judge_info = Gauge(
            "ragmon_judge_info", "1 for the judge fingerprint in force (model, prompt, temperature, parser).",
            ["fingerprint", "judge", "model"], registry=r,
        )
        self.judge_tokens = Counter(
            "ragmon_judge_tokens_total", "Tokens spent by the judge, by kind (prompt, completion).", ["kind"],
            registry=r,
        )
        self.judge_cost_usd = Counter("ragmon_judge_cost_usd_total", "Judge spend in US dollars.", registry=r)
        self.score_traces_scored = Counter(
            "ragmon_score_traces_scored_total", "Sampled traces scored successfully.", registry=r
        )
        self.score_failures = Counter(
            "ragmon_score_failures_total", "Sampled traces the judge failed on after retries (recorded as failed).",
            registry=r,
        )
        self.score_sampling_decisions = Counter(
            "ragmon_score_sampling_decisions_total",
            "Live-scoring sampling decisions by decision (sampled, not_sampled, capped, over_budget).",
            ["decision"], registry=r,
        )
        self.score_last_batch = Gauge(
            "ragmon_score_last_batch_timestamp_seconds", "Unix time the score loop last stored a batch.", registry=r
        )
        self.judge_in_flight = Gauge(
            "ragmon_judge_calls_in_flight", "Judge HTTP requests sent and not yet answered.", registry=r
        )
        self.judge_adaptive_limit = Gauge(
            "ragmon_judge_adaptive_limit_requests_per_second",
            "Request rate the judge allows itself: the smaller of judge.requests_per_minute / 60 and the rate "
            "learnt from 429 answers (AIMD); +Inf while neither applies.", registry=r,
        )
        self.judge_concurrency_limit = Gauge(
            "ragmon_judge_concurrency_limit",
            "Judge HTTP requests allowed at once: the limit learnt from the endpoint's latency (it grows while "
            "answers come back as fast, shrinks when they slow down), at most judge.max_in_flight; "
            "judge.max_in_flight itself when judge.adaptive_concurrency is off.", registry=r,
        )
        self.judge_queue_wait = Histogram(
            "ragmon_judge_queue_wait_seconds",
            "Time a judge call waited before it ran, by stage: pool (for a free slot of judge.max_in_flight), "
            "rate_limit (for the request and token buckets, or a Retry-After pause).", ["stage"],
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120), registry=r,
        )
        self.judge_rate_limited = Counter(
            "ragmon_judge_rate_limited_total", "Judge HTTP requests the endpoint answered with 429 (rate limited).",
            registry=r,
        )
        self.score_backlog = Gauge(
            "ragmon_score_backlog_traces",
            "Sampled traces not yet judged, by where they wait: read (in this process, waiting for or in a judge "
            "call) or unread (an estimate: this replica's consumer lag on the traces topic times sampling.rate).",
            ["where"], registry=r,
        )

        # -- drift --------------------------------------------------------------------------------------------
        # labels: retriever = "<name>@<version>", stratum = the trace category; bounded by drift.max_groups.
        # Each is the last check's results as a whole (``drift_gauges.publish``), never a gauge kept by hand.
        drift_labels = ("retriever", "variant", "stratum", "feature", "test")
        window_labels = ("retriever", "variant", "stratum", "feature", "window")
        self.drift_statistic = GaugeSpec(
            "ragmon_drift_statistic", "Test statistic of the last drift check (window z, KS D, PSI, z, chi-square).",
            drift_labels,
        )
        self.drift_p_value = GaugeSpec(
            "ragmon_drift_p_value", "Benjamini–Hochberg adjusted p-value of the last drift check.", drift_labels,
        )
        self.drift_effect = GaugeSpec(
            "ragmon_drift_effect",
            "Effect size of the last drift check (shift or Wasserstein in reference σ, PSI, Cohen's h).",
            drift_labels,
        )
        self.drift_detected = GaugeSpec(
            "ragmon_drift_detected",
            "1 when the last check declared drift (significant, effect over threshold, enough samples), else 0.",
            drift_labels,
        )
        self.drift_sample_size = GaugeSpec(
            "ragmon_drift_sample_size", "Observations in the reference or current window of the last check.",
            window_labels,
        )
        self.drift_feature_value = GaugeSpec(
            "ragmon_drift_feature_value", "Feature mean (or rate) in the reference or current window.",
            window_labels,
        )
        series_labels = ("retriever", "variant", "stratum", "feature")
        self.drift_cusum = GaugeSpec(
            "ragmon_drift_cusum",
            "CUSUM of the feature's window z-scores over the last drift.sequential.lookback_windows windows "
            "(the larger side); persistent drift when it reaches ragmon_drift_cusum_threshold.", series_labels,
        )
        self.drift_persistent = GaugeSpec(
            "ragmon_drift_persistent",
            "1 when the feature's CUSUM reached its threshold in the last check (persistent drift: what pages), "
            "else 0.", series_labels,
        )
        self.drift_pooled_windows = GaugeSpec(
            "ragmon_drift_pooled_windows",
            "Windows pooled into one for the last check (1 = the current window alone; more for low traffic).",
            series_labels,
        )
        self.drift_last_assessed = GaugeSpec(
            "ragmon_drift_last_assessed_timestamp_seconds",
            "Unix time a check last assessed any feature of the family (traces, versions, judge) in the group (when "
            "never, the first check that saw it); RagmonDriftBlind fires when it is older than "
            "ragmon_drift_blind_after_seconds.",
            ("retriever", "variant", "stratum", "family"),
        )
        # the watch (ragmon.drift.watch): the window in progress, looked at between checks; published as a whole at
        # every look and every check (a check closes the window: its looks' alarms are gone with it)
        self.drift_watch_alarm = GaugeSpec(
            "ragmon_drift_watch_alarm",
            "1 when a look at the window in progress crossed its boundary since the last check (a large shift, paged "
            "within minutes; reset by the next check), else 0.", series_labels,
        )
        self.drift_watch_statistic = GaugeSpec(
            "ragmon_drift_watch_statistic",
            "z of the window in progress at the last look (the feature's primary window test on its traces so far).",
            series_labels,
        )
        self.drift_watch_boundary = GaugeSpec(
            "ragmon_drift_watch_boundary",
            "The |z| the last look had to reach to page: its share of the false-alarm budget as a two-sided z.",
            series_labels,
        )
        self.drift_time_to_page = GaugeSpec(
            "ragmon_drift_time_to_page_seconds",
            "For a feature paging now (persistent drift or a watch alarm): seconds from the estimated onset of the "
            "shift (the start of the window a look paged in; the start of the CUSUM's run) to the check or look that "
            "raised the page.", series_labels,
        )
        self.drift_watch_gauges = GaugeSnapshot(self.drift_watch_alarm, self.drift_watch_statistic,
                                                self.drift_watch_boundary, self.drift_time_to_page)
        r.register(self.drift_watch_gauges)
        self.drift_last_look = Gauge(
            "ragmon_drift_last_look_timestamp_seconds",
            "Unix time of the last look at the window in progress (drift.watch); 0 when none ran in this process.",
            registry=r,
        )
        self.drift_looks = Counter(
            "ragmon_drift_looks_total", "Looks at the window in progress, by outcome (ok, error).", ["outcome"],
            registry=r,
        )
        self.drift_gauges = GaugeSnapshot(self.drift_statistic, self.drift_p_value, self.drift_effect,
                                          self.drift_detected, self.drift_sample_size, self.drift_feature_value,
                                          self.drift_cusum, self.drift_persistent, self.drift_pooled_windows,
                                          self.drift_last_assessed)
        # what changed (drift role, ragmon.drift.explain_hint): for each group and feature in persistent drift, the
        # dimension and segment that explain most of the change (ragmon drift explain's first row); the alert's
        # `hint` annotation reads it. One series per paging group and feature; the segment is cut to 80 characters.
        self.drift_explain_top = GaugeSpec(
            "ragmon_drift_explain_top",
            "Share of the change of a feature in persistent drift that its top dimension's top segment explains "
            "(ragmon drift explain), labelled with that dimension and segment.",
            ("retriever", "variant", "stratum", "feature", "dimension", "segment"),
        )
        self.drift_explain_gauges = GaugeSnapshot(self.drift_explain_top)
        # judge drift (the judge_agreement role, ragmon.judge_agreement): the latest week with enough labels per
        # (fingerprint, label, stratum), replaced as a whole at every computation
        agreement_labels = ("fingerprint", "label", "stratum")
        self.judge_agreement_kappa = GaugeSpec(
            "ragmon_judge_agreement_kappa",
            "Cohen's kappa of the judge's verdicts vs human review labels in the latest review week with enough pairs.",
            agreement_labels,
        )
        self.judge_agreement_calibrated_kappa = GaugeSpec(
            "ragmon_judge_agreement_calibrated_kappa",
            "Kappa over the fingerprint's calibration weeks (drift.judge_agreement.calibration_weeks): the level the "
            "judge was accepted at.", agreement_labels,
        )
        self.judge_agreement_drop_interval = GaugeSpec(
            "ragmon_judge_agreement_drop_interval",
            "Half-width of the 95% interval of calibrated minus latest kappa: a larger drop is not sampling noise.",
            agreement_labels,
        )
        self.judge_agreement_pairs = GaugeSpec(
            "ragmon_judge_agreement_pairs", "Label/verdict pairs behind ragmon_judge_agreement_kappa.",
            agreement_labels,
        )
        self.judge_agreement_gauges = GaugeSnapshot(self.judge_agreement_kappa, self.judge_agreement_calibrated_kappa,
                                                    self.judge_agreement_drop_interval, self.judge_agreement_pairs)
        r.register(self.judge_agreement_gauges)
        self.drift_cusum_threshold = Gauge(
            "ragmon_drift_cusum_threshold",
            "CUSUM threshold of the last drift check, set by the CUSUM's share of "
            "drift.sequential.false_alarms_per_day over the series it assessed.", registry=r,
        )
        self.drift_blind_after = Gauge(
            "ragmon_drift_blind_after_seconds",
            "drift.blind_after_seconds: how long a group with traffic may go unassessed before RagmonDriftBlind.",
            registry=r,
        )
        r.register(self.drift_gauges)
        r.register(self.drift_explain_gauges)
        # -- golden-set coverage (docs/coverage.md) -------------------------------------------------------------
        self.coverage_distance = Gauge(
            "ragmon_golden_coverage_distance",
            "Total variation distance between the golden set's and live traffic's question-type shares (last check).",
            ["stratum"], registry=r,
        )
        self.coverage_diverged = Gauge(
            "ragmon_golden_coverage_diverged",
            "1 when the golden set no longer describes the stratum's live question types (last check), else 0.",
            ["stratum"], registry=r,
        )
        self.coverage_under_represented = Gauge(
            "ragmon_golden_coverage_under_represented_share",
            "Traffic share minus golden-set share of a question type the golden set under-represents (last check).",
            ["stratum", "question_type"], registry=r,
        )
        self.coverage_last_check = Gauge(
            "ragmon_golden_coverage_last_check_timestamp_seconds",
            "Unix time the last golden-set coverage check completed; 0 when none ran in this process.", registry=r,
        )
        self.drift_last_check = Gauge(
            "ragmon_drift_last_check_timestamp_seconds",
            "Unix time the last drift check completed; the drift role's start time until its first check completes; "
            "0 in a process without the drift role.",
            registry=r,
        )
        self.drift_check_duration = Gauge(
            "ragmon_drift_check_duration_seconds", "Wall time of the last drift check.", registry=r
        )
        self.drift_checks = Counter(
            "ragmon_drift_checks_total", "Drift checks run, by outcome (ok, error).", ["outcome"], registry=r
        )

        # -- shadow comparisons -------------------------------------------------------------------------------
        shadow_labels = ["baseline", "candidate", "stratum"]
        self.shadow_overlap_at_k = Gauge(
            "ragmon_shadow_overlap_at_k", "Mean Jaccard overlap of the top-k lists of paired queries (last run).",
            shadow_labels, registry=r,
        )
        self.shadow_latency_delta = Gauge(
            "ragmon_shadow_latency_delta_seconds", "Candidate minus baseline latency quantile over paired queries.",
            [*shadow_labels, "quantile"], registry=r,
        )
        self.shadow_quality_delta = Gauge(
            "ragmon_shadow_quality_delta", "Mean paired difference (candidate - baseline) of a quality metric.",
            [*shadow_labels, "metric"], registry=r,
        )
        self.shadow_pairs = Gauge(
            "ragmon_shadow_pairs", "Paired queries in the last comparison window.", shadow_labels, registry=r
        )
        self.shadow_last_run = Gauge(
            "ragmon_shadow_last_run_timestamp_seconds", "Unix time a configured comparison last completed.",
            ["baseline", "candidate"], registry=r,
        )
        self.shadow_runs = Counter(
            "ragmon_shadow_runs_total", "Configured comparison runs, by outcome (ok, error).", ["outcome"],
            registry=r,
        )

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
