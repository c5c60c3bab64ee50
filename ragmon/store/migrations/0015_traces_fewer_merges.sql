-- Fewer rewrites of ``traces`` by background merges at a steady insert rate (issue 22; docs/ingest.md, "Soak").
-- An ingest process inserts about one part a second. ClickHouse's merge selector (merge_selector_base = 5) then
-- rewrites every row about once per fivefold growth of the parts, and at 1,500 traces/s those merges were the
-- embedded engine's largest cost. With base 10 a merge waits until about ten parts of similar size are there,
-- so a row is rewritten about once per tenfold growth: fewer merges, a few more active parts (a read opens up
-- to ~10 per level). Merges stay vertical from the first one (0008): a horizontal merge of ten parts at once
-- raised the peak RSS by ~200 MB in the soak. Only how future merges are chosen changes: existing parts stay as
-- they are, and valid. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    MODIFY SETTING merge_selector_base = 10;
