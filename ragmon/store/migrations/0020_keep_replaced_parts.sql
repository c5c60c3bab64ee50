-- Keep the parts a merge replaced on disk for two minutes (the embedded engine's default is 0, which deletes them at
-- the next cleanup; ClickHouse's own is eight minutes). The embedded engine ignores failed file writes, so a merge
-- that runs into a full disk commits an incomplete part (docs/operations.md, "The disk"): ragmon's write guard, which
-- looks every second, keeps hard-linked copies of the parts it replaced, detaches it once there is room and attaches
-- them again (ragmon.store.integrity); at a restart ClickHouse itself activates replaced parts still on disk in place
-- of a part it finds broken. Two minutes cover the guard's look, a process that ends before it, and a file system
-- that cannot take the copies while full. Not eight: a table merging a growing part every few seconds keeps a copy
-- of it per merge, and eight minutes of those filled 90 % of bench/disk_full_reads.py's 400 MiB store (362 MiB used
-- by ~100 MiB of data). Only how long outdated parts are kept changes. Idempotent.
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
