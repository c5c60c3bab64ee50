-- Keep the parts a merge replaced on disk for eight minutes, ClickHouse's own default (the embedded engine's is 0,
-- which deletes them at the next cleanup). The embedded engine ignores failed file writes, so a merge that runs into
-- a full disk commits an incomplete part (docs/operations.md, "The disk"): while the parts it replaced are still
-- there, ragmon's write guard, which looks every second, detaches it and attaches them again
-- (ragmon.store.integrity), and at a restart ClickHouse itself activates them in place of the part it finds broken.
-- Detaching needs a little free space, so the repair waits for the disk to have room again; the guard keeps
-- hard-linked copies of the replaced parts meanwhile, and where the file system cannot take even those, eight
-- minutes is how long the disk may stay full. Costs the disk space of the replaced parts for eight minutes after
-- each merge. Only how long outdated parts are kept changes; on a server it is the default.
-- Idempotent.
ALTER TABLE ${db}.traces ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.scores ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.sampling_decisions ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.review_queue ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.review_labels ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.review_selections ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.review_signed_out ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.drift_checks ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.corpus_versions ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.triage_queue ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.triage_labels ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.question_types ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.outcomes ${on_cluster} MODIFY SETTING old_parts_lifetime = 480;
ALTER TABLE ${db}.schema_migrations ${on_cluster} MODIFY SETTING old_parts_lifetime = 480
