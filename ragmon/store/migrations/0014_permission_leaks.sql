-- Permission leaks per trace (docs/leaks.md): how many retrieved chunks belong to a tenant that is neither the
-- asking user's nor a shared one (ingest.shared_tenants), counted by ingest on every trace with the rule in
-- force when it was stored. Traces stored before this migration read 0: they were never checked. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    ADD COLUMN IF NOT EXISTS permission_leaks UInt16 DEFAULT 0
