-- Every drift check records the drift settings it ran with (the whole `drift` section as JSON), so read commands
-- (`drift check --at`, `drift backtest`) apply the daemon's windows, features and thresholds rather than their
-- own defaults (docs/drift.md, "Time travel"). One value per check, repeated on its rows: LowCardinality stores
-- it once per part. Rows stored before this migration have ''. Idempotent.
ALTER TABLE ${db}.drift_checks ${on_cluster}
    ADD COLUMN IF NOT EXISTS settings LowCardinality(String) DEFAULT ''
