-- Keep the parts a merge replaced on disk for two minutes (the embedded engine's default is 0, which deletes them
-- at the next cleanup; ClickHouse's own is eight minutes). The embedded engine ignores failed file writes, so a merge
-- that runs into a full disk commits an incomplete part (docs/operations.md, "The disk"): while the parts it replaced
-- are still there, ragmon's write guard, which looks every second, attaches them again (ragmon.store.integrity), and
-- at a restart ClickHouse itself activates them in place of the part it finds broken. Costs the disk space of the
-- replaced parts for two minutes after each merge (what merges rewrite in two minutes). Only how long outdated parts
-- are kept changes. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.scores ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.sampling_decisions ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.review_queue ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.review_labels ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.review_selections ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.review_signed_out ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.drift_checks ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.corpus_versions ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.triage_queue ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.triage_labels ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.question_types ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.outcomes ${on_cluster} MODIFY SETTING old_parts_lifetime = 120;
ALTER TABLE ${db}.schema_migrations ${on_cluster} MODIFY SETTING old_parts_lifetime = 120
