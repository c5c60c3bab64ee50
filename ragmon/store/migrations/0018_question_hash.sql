-- Keys for drift's query-adjusted score features (docs/drift.md, "Popular questions"): which question a trace
-- asked, as a 64-bit hash of its normalised text (trimmed, lower-cased), and which drift group it belongs to
-- (retriever name and version, variant, stratum), as a hash. Stored at insert, so a drift check reads sixteen
-- bytes per trace instead of the question and four strings to hash. Traces stored before this migration get them
-- computed when read (slower until their parts are merged). Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    ADD COLUMN IF NOT EXISTS question_hash UInt64 MATERIALIZED cityHash64(lowerUTF8(trimBoth(question))),
    ADD COLUMN IF NOT EXISTS drift_group UInt64 MATERIALIZED
        cityHash64(toString(retriever_name), toString(retriever_version), toString(variant), toString(category))
