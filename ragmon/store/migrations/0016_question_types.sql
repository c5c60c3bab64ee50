-- The question type of each scored trace (docs/coverage.md): one of the closed list of coverage.question_types
-- (or 'other'), written by the score role beside the trace's scores and stamped with the classifier's
-- fingerprint like any score. Counts of different fingerprints are never added together. status: ok | failed.
CREATE TABLE IF NOT EXISTS ${db}.question_types ${on_cluster}
(
    trace_id               String,
    query_id               String,
    ts                     DateTime64(3, 'UTC'),
    classified_at          DateTime64(3, 'UTC'),
    retriever_name         LowCardinality(String),
    variant                LowCardinality(String),
    category               LowCardinality(String),
    question_type          LowCardinality(String),
    status                 LowCardinality(String),
    error                  String,
    classifier_name        LowCardinality(String),
    classifier_fingerprint LowCardinality(String)
)
ENGINE = ReplacingMergeTree(classified_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (classifier_fingerprint, category, toDate(ts), trace_id)
TTL toDateTime(ts) + INTERVAL ${traces_ttl_days} DAY
SETTINGS non_replicated_deduplication_window = 1000;
