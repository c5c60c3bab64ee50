-- TTLs that never wrap. 0001 computed them as toDateTime(ts) + INTERVAL n DAY: ClickHouse's DateTime ends at
-- 2106-02-07 06:28:15, after which toDateTime wraps to an early date, so an accepted trace dated past that (or
-- within n days of it) counted as expired and was deleted at its part's first merge. The expiry is now computed
-- in DateTime64 and capped at DateTime's last second: a row dated near or past the end is kept until then, never
-- deleted early. (Servers from 25.7 accept DateTime64 in TTL; this form works on every version.) Ingest accepts
-- timestamps from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15.999Z, where the table's DateTime and Date key
-- expressions (toDate in the sort key, the TTL) agree with the DateTime64 column. Idempotent.
ALTER TABLE ${db}.traces ${on_cluster}
    MODIFY TTL toDateTime(least(ts + INTERVAL ${traces_ttl_days} DAY, toDateTime64('2106-02-07 06:28:15', 3, 'UTC')));
ALTER TABLE ${db}.scores ${on_cluster}
    MODIFY TTL toDateTime(least(ts + INTERVAL ${traces_ttl_days} DAY, toDateTime64('2106-02-07 06:28:15', 3, 'UTC')));
ALTER TABLE ${db}.sampling_decisions ${on_cluster}
    MODIFY TTL toDateTime(least(ts + INTERVAL ${traces_ttl_days} DAY, toDateTime64('2106-02-07 06:28:15', 3, 'UTC')))
