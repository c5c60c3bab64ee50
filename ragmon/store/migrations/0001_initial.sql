-- ragmon schema v1. ${db} and ${on_cluster} are filled in by the migrator; with a cluster configured,
-- every *MergeTree engine becomes its Replicated* twin. Every statement is idempotent (IF NOT EXISTS).

CREATE DATABASE IF NOT EXISTS ${db} ${on_cluster};

-- One row per trace. ReplacingMergeTree keyed by the sort key: a re-delivered message (same trace_id, same
-- content) collapses to one row; read with FINAL for exact counts. Sorted for the per-retriever, per-variant,
-- per-stratum time-window scans that drift, shadow and review run.
CREATE TABLE IF NOT EXISTS ${db}.traces ${on_cluster}
(
    trace_id               String,
    query_id               String,
    ts                     DateTime64(3, 'UTC'),
    retriever_name         LowCardinality(String),
    retriever_version      LowCardinality(String),
    variant                LowCardinality(String),
    retriever_params       String,
    corpus_snapshot        LowCardinality(String),
    index_version          LowCardinality(String),
    question               String,
    category               LowCardinality(String),
    tags                   Array(LowCardinality(String)),
    tenant                 LowCardinality(String),
    user_scope             Array(String),
    retrieved_chunk_ids    Array(String),
    retrieved_doc_ids      Array(String),
    retrieved_doc_versions Array(String),
    retrieved_scores       Array(Float64),
    retrieved_ranks        Array(UInt32),
    retrieved_texts        Array(String),
    retrieved_tenants      Array(String),
    context_chunk_ids      Array(String),
    context_tokens         Nullable(UInt32),
    answer                 String,
    behaviour              LowCardinality(String),
    citation_sentences     Array(UInt32),
    citation_chunk_ids     Array(String),
    citation_quotes        Array(String),
    model_name             LowCardinality(String),
    model_version          LowCardinality(String),
    prompt_id              LowCardinality(String),
    prompt_version         LowCardinality(String),
    latency_ms             Map(LowCardinality(String), Float64),
    latency_total_ms       Float64,
    tokens_prompt          UInt32,
    tokens_completion      UInt32,
    cost_usd               Float64,
    error                  String,
    feedback_rating        Nullable(Int8),
    feedback_comment       String,
    attributes             Map(String, String),
    source_topic           LowCardinality(String),
    source_partition       Int32,
    source_offset          Int64,
    ingested_at            DateTime64(3, 'UTC'),
    -- drift features, computed by ClickHouse at insert (retrieved arrays are sorted by rank)
    n_results              UInt32  MATERIALIZED length(retrieved_scores),
    top1_score             Float64 MATERIALIZED if(length(retrieved_scores) >= 1, retrieved_scores[1], nan),
    top2_gap               Float64 MATERIALIZED if(length(retrieved_scores) >= 2, retrieved_scores[1] - retrieved_scores[2], nan),
    mean_score             Float64 MATERIALIZED if(length(retrieved_scores) >= 1, arrayAvg(retrieved_scores), nan),
    INDEX idx_ts ts TYPE minmax GRANULARITY 4,
    INDEX idx_query query_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (retriever_name, variant, category, toDate(ts), trace_id)
TTL toDateTime(ts) + INTERVAL ${traces_ttl_days} DAY
SETTINGS non_replicated_deduplication_window = 1000;

-- Judge and metric scores. Never averaged across judge_fingerprint. status: ok | failed | not_applicable.
CREATE TABLE IF NOT EXISTS ${db}.scores ${on_cluster}
(
    trace_id           String,
    query_id           String,
    ts                 DateTime64(3, 'UTC'),
    scored_at          DateTime64(3, 'UTC'),
    retriever_name     LowCardinality(String),
    retriever_version  LowCardinality(String),
    variant            LowCardinality(String),
    category           LowCardinality(String),
    metric             LowCardinality(String),
    value              Float64,
    status             LowCardinality(String),
    error              String,
    judge_name         LowCardinality(String),
    judge_fingerprint  LowCardinality(String),
    details            String,
    INDEX idx_ts ts TYPE minmax GRANULARITY 4
)
ENGINE = ReplacingMergeTree(scored_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (judge_fingerprint, metric, retriever_name, variant, category, toDate(ts), trace_id)
TTL toDateTime(ts) + INTERVAL ${traces_ttl_days} DAY
SETTINGS non_replicated_deduplication_window = 1000;

-- Every live-scoring sampling decision with its reason (sampled, not_sampled, capped, over_budget).
CREATE TABLE IF NOT EXISTS ${db}.sampling_decisions ${on_cluster}
(
    trace_id       String,
    query_id       String,
    ts             DateTime64(3, 'UTC'),
    decided_at     DateTime64(3, 'UTC'),
    retriever_name LowCardinality(String),
    variant        LowCardinality(String),
    category       LowCardinality(String),
    sampler        LowCardinality(String),
    decision       LowCardinality(String),
    rate           Float64
)
ENGINE = ReplacingMergeTree(decided_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (sampler, decision, toDate(ts), trace_id)
TTL toDateTime(ts) + INTERVAL ${traces_ttl_days} DAY
SETTINGS non_replicated_deduplication_window = 1000;

-- The weekly random review sample. week is the ISO week ('2026-W49'); seed reproduces the selection.
CREATE TABLE IF NOT EXISTS ${db}.review_queue ${on_cluster}
(
    week         LowCardinality(String),
    trace_id     String,
    query_id     String,
    category     LowCardinality(String),
    position     UInt32,
    seed         String,
    selected_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(selected_at)
ORDER BY (week, trace_id);

-- Human labels. One row per (trace, reviewer); a reviewer's later label replaces the earlier one.
CREATE TABLE IF NOT EXISTS ${db}.review_labels ${on_cluster}
(
    week                  LowCardinality(String),
    trace_id              String,
    reviewer              LowCardinality(String),
    labelled_at           DateTime64(3, 'UTC'),
    answer_correct        Nullable(UInt8),
    grounded              Nullable(UInt8),
    citations_supported   Nullable(UInt8),
    refusal_appropriate   Nullable(UInt8),
    expected_behaviour    LowCardinality(String),
    add_to_golden         UInt8,
    note                  String
)
ENGINE = ReplacingMergeTree(labelled_at)
ORDER BY (trace_id, reviewer);

-- Every drift test result, with the parameters actually applied.
CREATE TABLE IF NOT EXISTS ${db}.drift_checks ${on_cluster}
(
    check_id           String,
    checked_at         DateTime64(3, 'UTC'),
    retriever_name     LowCardinality(String),
    retriever_version  LowCardinality(String),
    variant            LowCardinality(String),
    category           LowCardinality(String),
    feature            LowCardinality(String),
    test               LowCardinality(String),
    statistic          Float64,
    p_value            Float64,
    p_adjusted         Float64,
    effect             Float64,
    threshold          Float64,
    effect_threshold   Float64,
    drifted            UInt8,
    n_reference        UInt64,
    n_current          UInt64,
    reference_start    DateTime64(3, 'UTC'),
    reference_end      DateTime64(3, 'UTC'),
    current_start      DateTime64(3, 'UTC'),
    current_end        DateTime64(3, 'UTC'),
    details            String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(checked_at)
ORDER BY (checked_at, retriever_name, variant, category, feature, test)
TTL toDateTime(checked_at) + INTERVAL ${drift_checks_ttl_days} DAY;
