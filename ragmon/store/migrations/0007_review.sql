-- Review: the record of each weekly selection (seed and parameters, so a sample can be reproduced and
-- re-running a selection is a no-op), and label columns the golden-set export needs.

CREATE TABLE IF NOT EXISTS ${db}.review_selections ${on_cluster}
(
    week             LowCardinality(String),
    seed             String,
    size             UInt32,
    stratified       UInt8,
    min_per_stratum  UInt32,
    population       UInt64,
    selected         UInt32,
    method           String,
    selected_by      String,
    selected_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(selected_at)
ORDER BY week;

-- chunk ids the reviewer marked as answering the question (→ golden reference passages), and the answer a
-- competent human would give when the system's answer was wrong (→ golden reference_answer)
ALTER TABLE ${db}.review_labels ${on_cluster} ADD COLUMN IF NOT EXISTS relevant_chunk_ids Array(String);
ALTER TABLE ${db}.review_labels ${on_cluster} ADD COLUMN IF NOT EXISTS reference_answer String
