-- The session a trace belongs to in its own column: OpenInference's ``session.id`` (a conversation's id), which
-- OTLP ingest keeps in the trace's attributes and never uses as its query_id (two turns of one conversation are
-- two queries). Computed from the attributes, so traces stored before this migration have it too, and a native
-- trace that sets attributes["session.id"] gets it as well. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    ADD COLUMN IF NOT EXISTS session_id String MATERIALIZED attributes['session.id']
