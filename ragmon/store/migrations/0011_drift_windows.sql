-- Drift checks compare windows (docs/drift.md): each result records its status, how many windows were pooled
-- for a low-traffic group, and the persistent-drift rule (CUSUM statistic, threshold, verdict). Old rows take
-- their status from the details JSON. Idempotent.
ALTER TABLE ${db}.drift_checks ${on_cluster}
    ADD COLUMN IF NOT EXISTS status LowCardinality(String) DEFAULT JSONExtractString(details, 'status'),
    ADD COLUMN IF NOT EXISTS pooled_windows UInt16 DEFAULT 1,
    ADD COLUMN IF NOT EXISTS cusum Float64 DEFAULT nan,
    ADD COLUMN IF NOT EXISTS cusum_threshold Float64 DEFAULT nan,
    ADD COLUMN IF NOT EXISTS persistent UInt8 DEFAULT 0;

-- Document versions as the corpus publishes them (``ragmon corpus load``): newest_version_share calls a
-- retrieved chunk stale when a newer version of its document was published drift.index_lag_seconds before it
-- was served. Versions some trace served are known without this feed.
CREATE TABLE IF NOT EXISTS ${db}.corpus_versions ${on_cluster}
(
    doc_id        String,
    doc_version   String,
    published_at  DateTime64(3, 'UTC'),
    loaded_at     DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(loaded_at)
ORDER BY (doc_id, doc_version);
