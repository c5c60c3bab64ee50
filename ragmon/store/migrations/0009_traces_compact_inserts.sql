-- Store ``traces`` parts below 128 MiB (uncompressed) in ClickHouse's compact format: all columns in one data
-- file with one marks file, instead of a data and a marks file per column and per substream (array sizes, null
-- maps, map keys and values): ~60 files per inserted part instead of ~670. Each ingest batch is one such part, and
-- creating and deleting those files (inserts, merges, and the parts they replace) cost the embedded engine
-- ~3–5 µs of CPU per trace in the file system. Parts that merges grow past 128 MiB are written wide, as before
-- (docs/ingest.md, "Where the time goes"). ClickHouse's default threshold is 10 MiB. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    MODIFY SETTING min_bytes_for_wide_part = 134217728;
