-- Review sessions ended by signing out. A session is a signed cookie (no session table), so signing out records
-- the session's digest here and every replica refuses the cookie from then on, even if it was copied before.
-- Rows expire a day after the session would have.
CREATE TABLE IF NOT EXISTS ${db}.review_signed_out ${on_cluster}
(
    session_sha256  String,
    username        String,
    signed_out_at   DateTime64(3, 'UTC'),
    expires_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(signed_out_at)
ORDER BY session_sha256
TTL toDateTime(expires_at) + INTERVAL 1 DAY
