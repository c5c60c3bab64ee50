-- Merge ``traces`` parts column by column (ClickHouse's vertical merge) from the first merge on, instead of
-- only past 131,072 rows. A horizontal merge reads every column of every source part at once, with read and
-- decompression buffers per column and part: with ~50 columns of ~4 KB rows that held hundreds of MB while a
-- few ingest batches were merged, and the embedded engine's merges run inside the ragmon process. A vertical
-- merge holds one column of the source parts at a time (docs/ingest.md, "Memory"). Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    MODIFY SETTING vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_bytes_to_activate = 0;
