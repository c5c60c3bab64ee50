-- Permission leaks per trace (docs/leaks.md): how many retrieved chunks belong to a tenant that is neither the
-- asking user's nor a shared one (ingest.shared_tenants), counted by ingest on every trace with the rule in
-- force when it was stored. Traces stored before this migration read 0: they were never checked. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    ADD COLUMN IF NOT EXISTS permission_leaks UInt16 DEFAULT 0;

-- Weekly negative-feedback triage (docs/review.md, "Negative-feedback triage"): the week's thumbs-down
-- production traces, all or a capped seeded random sample, in their own queue. Kept apart from review_queue
-- so that the random review sample never depends on feedback. Selecting a week twice is a no-op.
CREATE TABLE IF NOT EXISTS ${db}.triage_queue ${on_cluster}
(
    week         LowCardinality(String),
    trace_id     String,
    category     LowCardinality(String),
    ts           DateTime64(3, 'UTC'),
    population   UInt32,
    seed         String,
    selected_by  String,
    selected_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(selected_at)
ORDER BY (week, trace_id);

-- One cause per triaged trace and reviewer, from the failure taxonomy; the newest label of a trace counts.
CREATE TABLE IF NOT EXISTS ${db}.triage_labels ${on_cluster}
(
    week         LowCardinality(String),
    trace_id     String,
    reviewer     LowCardinality(String),
    cause        LowCardinality(String),
    note         String,
    labelled_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(labelled_at)
ORDER BY (week, trace_id, reviewer)
