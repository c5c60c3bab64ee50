-- Outcome events (schemas/outcome.v1): what users did after a query, joined to traces by query_id for A/B
-- cohort comparisons (docs/ab.md). One row per event_id under FINAL (a re-sent event counts once); inserts carry
-- a deduplication token derived from the source positions, like traces. Idempotent.
CREATE TABLE IF NOT EXISTS ${db}.outcomes ${on_cluster}
(
    event_id     String,
    query_id     String,
    kind         LowCardinality(String),
    time         DateTime64(3, 'UTC'),
    value        Nullable(Float64),
    received_at  DateTime64(3, 'UTC'),
    source       String
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(time)
ORDER BY (query_id, kind, event_id)
TTL toDateTime(time) + INTERVAL ${traces_ttl_days} DAY
SETTINGS non_replicated_deduplication_window = 1000;
