"""Every ``ragmon_*`` Prometheus metric, as data: one ``MetricDef`` per metric with the field that holds it in its
owner's metric set, its kind, name, owner (the part that moves it), label names, buckets and HELP text; and the gauge
families published together as snapshots. Each owner's set (``ragmon.telemetry.instruments.MetricSet``, declared
next to the code that moves it) is made from its entries here; ``docs/metrics.md`` is generated from them (``python3
-m ragmon.telemetry.reference --write``). Owns no metric objects and no registry.

Names follow Prometheus conventions: ``ragmon_<subsystem>_<thing>_<unit>``, counters end in ``_total``, base
units (seconds, bytes), and label values are bounded (retriever, variant, stratum, reason, partition — never a
trace id, user or query text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram", "info", "series"]
COUNTER: Kind = "counter"
GAUGE: Kind = "gauge"
HISTOGRAM: Kind = "histogram"
INFO: Kind = "info"
#: a labelled gauge family whose series a ``GaugeSnapshot`` publishes as a whole (``SNAPSHOTS``)
SERIES: Kind = "series"


@dataclass(frozen=True, slots=True)
class MetricDef:
    """One metric: ``attr`` on its owner's metric set, ``kind``, Prometheus ``name``, ``owner`` and the rest as
    registered."""

    attr: str
    kind: Kind
    name: str
    owner: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None


CATALOGUE: tuple[MetricDef, ...] = (
    # -- process -------------------------------------------------------------------------------------------------------
    MetricDef("build_info", INFO, "ragmon_build", "process",
              help="ragmon build information."),
    MetricDef("links_info", INFO, "ragmon_links", "process",
              help="Where the alert rules' runbook and console links point."),
    # -- ingest --------------------------------------------------------------------------------------------------------
    MetricDef("ingest_messages_consumed", COUNTER, "ragmon_ingest_messages_consumed_total", "ingest", labels=("topic",),
              help="Messages read from the traces topic."),
    MetricDef("ingest_traces_stored", COUNTER, "ragmon_ingest_traces_stored_total", "ingest",
              help="Trace rows written to the store (acknowledged inserts), per delivery: a trace delivered again is "
                   "written, and counted, again (the store keeps it once under FINAL; ragmon_permission_leaks_total "
                   "counts a trace once)."),
    MetricDef("ingest_dead_letters", COUNTER, "ragmon_ingest_dead_letters_total", "ingest", labels=("reason",),
              help="Messages sent to the dead-letter topic, by reason."),
    MetricDef("ingest_traces_consumed", COUNTER, "ragmon_ingest_traces_consumed_total", "ingest", labels=("kind",),
              help="Traces taken in by the ingest loop, by kind: message (a message that is one trace, or is "
                   "rejected whole) or otlp_trace (an OTLP trace whose first span arrived). Each ends in exactly one "
                   "outcome of ragmon_ingest_traces_settled_total."),
    MetricDef("ingest_traces_settled", COUNTER, "ragmon_ingest_traces_settled_total", "ingest",
              labels=("kind", "outcome"),
              help="Traces by final outcome, counted once each: stored (first write acknowledged), dead_lettered, "
                   "skipped (an OTLP trace that is not a RAG query, once its repair window closed) or released "
                   "(given back uncommitted to be read again: stopped or revoked before its outcome), by kind as in "
                   "ragmon_ingest_traces_consumed_total."),
    MetricDef("ingest_dead_letters_cut", COUNTER, "ragmon_ingest_dead_letters_cut_total", "ingest",
              help="Dead letters too large for the dead-letter topic, produced cut (reason too_large)."),
    MetricDef("ingest_unknown_fields", COUNTER, "ragmon_ingest_unknown_fields_total", "ingest",
              help="Valid traces that carried unknown top-level fields, per delivery (a producer-evolution signal: a "
                   "trace delivered again counts again)."),
    MetricDef("ingest_redactions", COUNTER, "ragmon_ingest_redactions_total", "ingest", labels=("pattern",),
              help="Redactions applied before storage, by pattern."),
    MetricDef("ingest_batch_rows", HISTOGRAM, "ragmon_ingest_batch_rows", "ingest",
              buckets=(1, 10, 100, 500, 1000, 2000, 5000, 10000, 20000, 50000),
              help="Traces per insert batch."),
    MetricDef("ingest_write_seconds", HISTOGRAM, "ragmon_ingest_write_duration_seconds", "ingest",
              buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
              help="Time to insert one batch into the store."),
    MetricDef("ingest_store_retries", COUNTER, "ragmon_ingest_store_retries_total", "ingest",
              help="Store writes retried after a retryable failure."),
    MetricDef("ingest_consumer_lag", GAUGE, "ragmon_ingest_consumer_lag_messages", "ingest",
              labels=("topic", "partition"),
              help="Messages behind the partition end."),
    MetricDef("ingest_last_commit", GAUGE, "ragmon_ingest_last_commit_timestamp_seconds", "ingest",
              help="Unix time of the last successful offset commit."),
    MetricDef("ingest_commit_current", GAUGE, "ragmon_ingest_commit_current_timestamp_seconds", "ingest",
              labels=("loop",),
              help="Unix time the committed offsets were last as far as the commit rule allows: a commit succeeded, "
                   "or nothing more was safe to commit (what is left is held by OTLP traces still assembling, by "
                   "design). Old while writes or commits fail. By loop: ingest (Kafka, a file) or otlp (OTLP/HTTP)."),
    MetricDef("ingest_last_poll", GAUGE, "ragmon_ingest_last_poll_timestamp_seconds", "ingest",
              help="Unix time the consume loop last polled."),
    MetricDef("ingest_paused", GAUGE, "ragmon_ingest_paused", "ingest",
              help="1 while consumption is paused for backpressure (store unavailable)."),
    MetricDef("ingest_flush_failures", COUNTER, "ragmon_ingest_flush_failures_total", "ingest",
              labels=("stage", "kind"),
              help="Failed writes of a batch, by stage (store, dead_letter, commit) and kind (retryable, permanent)."),
    MetricDef("permission_leaks", COUNTER, "ragmon_permission_leaks_total", "ingest",
              labels=("retriever", "variant", "stratum"),
              help="Retrieved chunks of another tenant (neither the user's nor ingest.shared_tenants) in stored "
                   "traces, by retriever (name@version), variant and stratum; checked on every trace, counted once "
                   "per trace: a trace delivered again (a retry, a replay) is not counted again. Target: zero. List "
                   "them with `ragmon leaks list`."),
    # the ingest loop's OTLP input (assembled from spans, on the traces topic or from the otlp role's receiver)
    MetricDef("ingest_otlp_incomplete", COUNTER, "ragmon_ingest_otlp_incomplete_traces_total", "ingest",
              labels=("outcome",),
              help="OTLP traces emitted or dead-lettered before all their spans arrived, and late spans "
                   "dead-lettered, by outcome."),
    MetricDef("ingest_otlp_skipped", COUNTER, "ragmon_ingest_otlp_traces_skipped_total", "ingest", labels=("reason",),
              help="OTLP traces not stored because they are not RAG queries (no retriever span), by reason; counted "
                   "when the trace's repair window closes with it still skipped."),
    MetricDef("ingest_otlp_open_traces", GAUGE, "ragmon_ingest_otlp_open_traces", "ingest", labels=("loop",),
              help="OTLP traces whose outcome is not final yet: assembling (waiting for their root or parent spans), "
                   "or skipped with their repair window open. By loop: ingest (Kafka, a file) or otlp (OTLP/HTTP)."),
    MetricDef("ingest_otlp_repaired", COUNTER, "ragmon_ingest_otlp_repaired_traces_total", "ingest",
              help="OTLP traces stored again (a new version) because spans of theirs arrived after they were "
                   "emitted."),
    MetricDef("ingest_otlp_unscored", COUNTER, "ragmon_ingest_otlp_unscored_documents_total", "ingest",
              help="Retrieved documents of OTLP traces stored without a score (the instrumentation sent none); once "
                   "per trace, its repaired versions adding only documents it gained."),
    # -- outcomes ------------------------------------------------------------------------------------------------------
    MetricDef("outcomes_consumed", COUNTER, "ragmon_outcomes_consumed_total", "outcomes",
              help="Outcome events (schemas/outcome.v1) read and settled: stored or dead-lettered."),
    MetricDef("outcomes_stored", COUNTER, "ragmon_outcomes_stored_total", "outcomes",
              help="Outcome events new to the store (acknowledged inserts); an event stored already (a replay, a "
                   "file loaded again) counts in ragmon_outcomes_already_stored_total instead."),
    MetricDef("outcomes_already_stored", COUNTER, "ragmon_outcomes_already_stored_total", "outcomes",
              help="Valid outcome events read again that the store already held (same event_id): re-deliveries, "
                   "counted once in the store."),
    MetricDef("outcomes_dead_letters", COUNTER, "ragmon_outcomes_dead_letters_total", "outcomes", labels=("reason",),
              help="Outcome events sent to ab.outcomes_dead_letter_topic, by reason."),
    MetricDef("outcomes_store_retries", COUNTER, "ragmon_outcomes_store_retries_total", "outcomes",
              help="Outcome batches retried after a failed write or dead-letter send."),
    # -- otlp ----------------------------------------------------------------------------------------------------------
    MetricDef("ingest_otlp_http_requests", COUNTER, "ragmon_ingest_otlp_http_requests_total", "otlp",
              labels=("outcome",),
              help="OTLP/HTTP export requests on /v1/traces, by outcome (accepted, partial, invalid, unauthorized, "
                   "too_large, unsupported, busy, spool_full, spool_error)."),
    MetricDef("ingest_otlp_http_spans_rejected", COUNTER, "ragmon_ingest_otlp_http_spans_rejected_total", "otlp",
              help="Spans refused in OTLP/HTTP requests that were otherwise accepted (reported as partial_success)."),
    # -- store ---------------------------------------------------------------------------------------------------------
    MetricDef("store_disk_free", GAUGE, "ragmon_store_disk_free_bytes", "store",
              help="Free bytes on the embedded store's file system."),
    MetricDef("store_writes_paused", GAUGE, "ragmon_store_writes_paused", "store",
              help="1 while the embedded store's disk is below its headroom (store.min_free_disk_mb): writes are "
                   "refused as retryable and merges stopped."),
    MetricDef("store_ignored_write_errors", COUNTER, "ragmon_store_ignored_write_errors_total", "store",
              help="File writes that failed and that the embedded engine ignored (its "
                   "WriteBufferFromFileDescriptorWriteFailed event): each may have left an incomplete part."),
    MetricDef("store_broken_parts", COUNTER, "ragmon_store_broken_parts_total", "store", labels=("table", "outcome"),
              help="Parts the embedded engine wrote incompletely, by table and outcome: restored (the parts it "
                   "replaced were attached again), retried (an insert's part, found before the insert was "
                   "acknowledged: the insert is written again), lost (rows with no other copy), unrepaired (could "
                   "not be detached yet: reads of the table fail meanwhile)."),
    MetricDef("store_rows_lost", COUNTER, "ragmon_store_rows_lost_total", "store", labels=("table",),
              help="Rows of incomplete parts that had no other copy, by table: acknowledged data gone from the store "
                   "(re-send it; docs/operations.md, 'The disk')."),
    MetricDef("store_detached_broken_parts", GAUGE, "ragmon_store_detached_broken_parts", "store", labels=("table",),
              help="Broken parts kept in the embedded store's detached/ directories (found at start-up or detached "
                   "since), by table: review and drop them (docs/operations.md, 'The disk')."),
    # -- review --------------------------------------------------------------------------------------------------------
    MetricDef("review_signin_failures", COUNTER, "ragmon_review_signin_failures_total", "review", labels=("reason",),
              help="Failed review sign-ins by reason: bad_credentials (wrong user name or password), locked_out "
                   "(refused while too many recent failures), bad_token (unknown API bearer token)."),
    MetricDef("review_items_due", GAUGE, "ragmon_review_items_due", "review", labels=("stratum",),
              help="Items in the newest selected review week's queue, by stratum."),
    MetricDef("review_items_reviewed", GAUGE, "ragmon_review_items_reviewed", "review", labels=("stratum",),
              help="Items of that queue with at least one human label, by stratum."),
    # -- judge ---------------------------------------------------------------------------------------------------------
    MetricDef("judge_calls", COUNTER, "ragmon_judge_calls_total", "judge", labels=("judge", "outcome"),
              help="Judge calls by judge kind and outcome (ok, error, retry)."),
    MetricDef("judge_info", GAUGE, "ragmon_judge_info", "judge", labels=("fingerprint", "judge", "model"),
              help="1 for the judge fingerprint in force (model, prompt, temperature, parser)."),
    MetricDef("judge_tokens", COUNTER, "ragmon_judge_tokens_total", "judge", labels=("kind",),
              help="Tokens spent by the judge, by kind (prompt, completion)."),
    MetricDef("judge_cost_usd", COUNTER, "ragmon_judge_cost_usd_total", "judge",
              help="Judge spend in US dollars."),
    MetricDef("judge_in_flight", GAUGE, "ragmon_judge_calls_in_flight", "judge",
              help="Judge HTTP requests sent and not yet answered."),
    MetricDef("judge_adaptive_limit", GAUGE, "ragmon_judge_adaptive_limit_requests_per_second", "judge",
              help="Request rate the judge allows itself: the smaller of judge.requests_per_minute / 60 and the rate "
                   "learnt from 429 answers (AIMD); +Inf while neither applies."),
    MetricDef("judge_concurrency_limit", GAUGE, "ragmon_judge_concurrency_limit", "judge",
              help="Judge HTTP requests allowed at once: the limit learnt from the endpoint's latency (it grows "
                   "while answers come back as fast, shrinks when they slow down), at most judge.max_in_flight; "
                   "judge.max_in_flight itself when judge.adaptive_concurrency is off."),
    MetricDef("judge_queue_wait", HISTOGRAM, "ragmon_judge_queue_wait_seconds", "judge",
              labels=("stage",),
              buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
              help="Time a judge call waited before it ran, by stage: pool (for a free slot of judge.max_in_flight), "
                   "rate_limit (for the request and token buckets, or a Retry-After pause)."),
    MetricDef("judge_rate_limited", COUNTER, "ragmon_judge_rate_limited_total", "judge",
              help="Judge HTTP requests the endpoint answered with 429 (rate limited)."),
    # -- score ---------------------------------------------------------------------------------------------------------
    MetricDef("score_traces_scored", COUNTER, "ragmon_score_traces_scored_total", "score",
              help="Sampled traces scored successfully."),
    MetricDef("score_failures", COUNTER, "ragmon_score_failures_total", "score",
              help="Sampled traces the judge failed on after retries (recorded as failed)."),
    MetricDef("score_sampling_decisions", COUNTER, "ragmon_score_sampling_decisions_total", "score",
              labels=("decision",),
              help="Live-scoring sampling decisions by decision (sampled, not_sampled, capped, over_budget)."),
    MetricDef("score_last_batch", GAUGE, "ragmon_score_last_batch_timestamp_seconds", "score",
              help="Unix time the score loop last stored a batch."),
    MetricDef("score_backlog", GAUGE, "ragmon_score_backlog_traces", "score", labels=("where",),
              help="Sampled traces not yet judged, by where they wait: read (in this process, waiting for or in a "
                   "judge call) or unread (an estimate: this replica's consumer lag on the traces topic times "
                   "sampling.rate)."),
    # -- drift ---------------------------------------------------------------------------------------------------------
    MetricDef("drift_statistic", SERIES, "ragmon_drift_statistic", "drift",
              labels=("retriever", "variant", "stratum", "feature", "test"),
              help="Test statistic of the last drift check (window z, KS D, PSI, z, chi-square)."),
    MetricDef("drift_p_value", SERIES, "ragmon_drift_p_value", "drift",
              labels=("retriever", "variant", "stratum", "feature", "test"),
              help="Benjamini–Hochberg adjusted p-value of the last drift check."),
    MetricDef("drift_effect", SERIES, "ragmon_drift_effect", "drift",
              labels=("retriever", "variant", "stratum", "feature", "test"),
              help="Effect size of the last drift check (shift or Wasserstein in reference σ, PSI, Cohen's h)."),
    MetricDef("drift_detected", SERIES, "ragmon_drift_detected", "drift",
              labels=("retriever", "variant", "stratum", "feature", "test"),
              help="1 when the last check declared drift (significant, effect over threshold, enough samples), else "
                   "0."),
    MetricDef("drift_sample_size", SERIES, "ragmon_drift_sample_size", "drift",
              labels=("retriever", "variant", "stratum", "feature", "window"),
              help="Observations in the reference or current window of the last check."),
    MetricDef("drift_feature_value", SERIES, "ragmon_drift_feature_value", "drift",
              labels=("retriever", "variant", "stratum", "feature", "window"),
              help="Feature mean (or rate) in the reference or current window."),
    MetricDef("drift_cusum", SERIES, "ragmon_drift_cusum", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="CUSUM of the feature's window z-scores over the last drift.sequential.lookback_windows windows "
                   "(the larger side); persistent drift when it reaches ragmon_drift_cusum_threshold."),
    MetricDef("drift_persistent", SERIES, "ragmon_drift_persistent", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="1 when the feature's CUSUM reached its threshold in the last check (persistent drift: what "
                   "pages), else 0."),
    MetricDef("drift_pooled_windows", SERIES, "ragmon_drift_pooled_windows", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="Windows pooled into one for the last check (1 = the current window alone; more for low traffic)."),
    MetricDef("drift_last_assessed", SERIES, "ragmon_drift_last_assessed_timestamp_seconds", "drift",
              labels=("retriever", "variant", "stratum", "family"),
              help="Unix time a check last assessed any feature of the family (traces, versions, judge) in the group "
                   "(when never, the first check that saw it); RagmonDriftBlind fires when it is older than "
                   "ragmon_drift_blind_after_seconds."),
    MetricDef("drift_watch_alarm", SERIES, "ragmon_drift_watch_alarm", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="1 when a look at the window in progress crossed its boundary since the last check (a large "
                   "shift, paged within minutes; reset by the next check), else 0."),
    MetricDef("drift_watch_statistic", SERIES, "ragmon_drift_watch_statistic", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="z of the window in progress at the last look (the feature's primary window test on its traces so "
                   "far)."),
    MetricDef("drift_watch_boundary", SERIES, "ragmon_drift_watch_boundary", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="The |z| the last look had to reach to page: its share of the false-alarm budget as a two-sided "
                   "z."),
    MetricDef("drift_time_to_page", SERIES, "ragmon_drift_time_to_page_seconds", "drift",
              labels=("retriever", "variant", "stratum", "feature"),
              help="For a feature paging now (persistent drift or a watch alarm): seconds from the estimated onset "
                   "of the shift (the start of the window a look paged in; the start of the CUSUM's run) to the "
                   "check or look that raised the page."),
    MetricDef("drift_last_look", GAUGE, "ragmon_drift_last_look_timestamp_seconds", "drift",
              help="Unix time of the last look at the window in progress (drift.watch); 0 when none ran in this "
                   "process."),
    MetricDef("drift_looks", COUNTER, "ragmon_drift_looks_total", "drift", labels=("outcome",),
              help="Looks at the window in progress, by outcome (ok, error)."),
    MetricDef("drift_explain_top", SERIES, "ragmon_drift_explain_top", "drift",
              labels=("retriever", "variant", "stratum", "feature", "dimension", "segment"),
              help="Share of the change of a feature in persistent drift that its top dimension's top segment "
                   "explains (ragmon drift explain), labelled with that dimension and segment."),
    MetricDef("drift_cusum_threshold", GAUGE, "ragmon_drift_cusum_threshold", "drift",
              help="CUSUM threshold of the last drift check, set by the CUSUM's share of "
                   "drift.sequential.false_alarms_per_day over the series it assessed."),
    MetricDef("drift_blind_after", GAUGE, "ragmon_drift_blind_after_seconds", "drift",
              help="drift.blind_after_seconds: how long a group with traffic may go unassessed before "
                   "RagmonDriftBlind."),
    MetricDef("drift_last_check", GAUGE, "ragmon_drift_last_check_timestamp_seconds", "drift",
              help="Unix time the last drift check completed; the drift role's start time until its first check "
                   "completes (a process without the drift role does not have it)."),
    MetricDef("drift_check_duration", GAUGE, "ragmon_drift_check_duration_seconds", "drift",
              help="Wall time of the last drift check."),
    MetricDef("drift_checks", COUNTER, "ragmon_drift_checks_total", "drift", labels=("outcome",),
              help="Drift checks run, by outcome (ok, error)."),
    # -- judge_agreement -----------------------------------------------------------------------------------------------
    MetricDef("judge_agreement_kappa", SERIES, "ragmon_judge_agreement_kappa", "judge_agreement",
              labels=("fingerprint", "label", "stratum"),
              help="Cohen's kappa of the judge's verdicts vs human review labels in the latest review week with "
                   "enough pairs."),
    MetricDef("judge_agreement_calibrated_kappa", SERIES, "ragmon_judge_agreement_calibrated_kappa", "judge_agreement",
              labels=("fingerprint", "label", "stratum"),
              help="Kappa over the fingerprint's calibration weeks (drift.judge_agreement.calibration_weeks): the "
                   "level the judge was accepted at."),
    MetricDef("judge_agreement_drop_interval", SERIES, "ragmon_judge_agreement_drop_interval", "judge_agreement",
              labels=("fingerprint", "label", "stratum"),
              help="Half-width of the 95% interval of calibrated minus latest kappa: a larger drop is not sampling "
                   "noise."),
    MetricDef("judge_agreement_pairs", SERIES, "ragmon_judge_agreement_pairs", "judge_agreement",
              labels=("fingerprint", "label", "stratum"),
              help="Label/verdict pairs behind ragmon_judge_agreement_kappa."),
    # -- coverage ------------------------------------------------------------------------------------------------------
    MetricDef("coverage_distance", GAUGE, "ragmon_golden_coverage_distance", "coverage", labels=("stratum",),
              help="Total variation distance between the golden set's and live traffic's question-type shares (last "
                   "check)."),
    MetricDef("coverage_diverged", GAUGE, "ragmon_golden_coverage_diverged", "coverage", labels=("stratum",),
              help="1 when the golden set no longer describes the stratum's live question types (last check), else "
                   "0."),
    MetricDef("coverage_under_represented", GAUGE, "ragmon_golden_coverage_under_represented_share", "coverage",
              labels=("stratum", "question_type"),
              help="Traffic share minus golden-set share of a question type the golden set under-represents (last "
                   "check)."),
    MetricDef("coverage_last_check", GAUGE, "ragmon_golden_coverage_last_check_timestamp_seconds", "coverage",
              help="Unix time the last golden-set coverage check completed; 0 when none ran in this process."),
    # -- shadow --------------------------------------------------------------------------------------------------------
    MetricDef("shadow_overlap_at_k", GAUGE, "ragmon_shadow_overlap_at_k", "shadow",
              labels=("baseline", "candidate", "stratum"),
              help="Mean Jaccard overlap of the top-k lists of paired queries (last run)."),
    MetricDef("shadow_latency_delta", GAUGE, "ragmon_shadow_latency_delta_seconds", "shadow",
              labels=("baseline", "candidate", "stratum", "quantile"),
              help="Candidate minus baseline latency quantile over paired queries."),
    MetricDef("shadow_quality_delta", GAUGE, "ragmon_shadow_quality_delta", "shadow",
              labels=("baseline", "candidate", "stratum", "metric"),
              help="Mean paired difference (candidate - baseline) of a quality metric."),
    MetricDef("shadow_pairs", GAUGE, "ragmon_shadow_pairs", "shadow", labels=("baseline", "candidate", "stratum"),
              help="Paired queries in the last comparison window."),
    MetricDef("shadow_last_run", GAUGE, "ragmon_shadow_last_run_timestamp_seconds", "shadow",
              labels=("baseline", "candidate"),
              help="Unix time a configured comparison last completed."),
    MetricDef("shadow_runs", COUNTER, "ragmon_shadow_runs_total", "shadow", labels=("outcome",),
              help="Configured comparison runs, by outcome (ok, error)."),
)

#: the ``SERIES`` families served together, each by one ``GaugeSnapshot`` on their owner's set (attribute → members):
#: a drift check publishes its results as a whole, a look at the window in progress its own, and so on
SNAPSHOTS: dict[str, tuple[str, ...]] = {
    "drift_gauges": ("drift_statistic", "drift_p_value", "drift_effect", "drift_detected", "drift_sample_size",
                     "drift_feature_value", "drift_cusum", "drift_persistent", "drift_pooled_windows",
                     "drift_last_assessed"),
    "drift_watch_gauges": ("drift_watch_alarm", "drift_watch_statistic", "drift_watch_boundary",
                           "drift_time_to_page"),
    "drift_explain_gauges": ("drift_explain_top",),
    "judge_agreement_gauges": ("judge_agreement_kappa", "judge_agreement_calibrated_kappa",
                               "judge_agreement_drop_interval", "judge_agreement_pairs"),
}
