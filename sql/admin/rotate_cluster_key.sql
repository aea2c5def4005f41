-- Rotate the cluster key that signs reservation tokens: add a new key (32 bytes of the
-- server's strong randomness, never shown) with the next id. Every instance verifies it at
-- once (on the NOTIFY this sends, at the latest within 30 s) and signs with it from 1 min
-- after its creation, when all have loaded it. The previous keys keep verifying until
-- 24 h 2 min after the next newer key was created, so that reservations made before the
-- rotation (leases are at most 24 h) complete, fail and extend as usual. Rotating twice
-- within 24 h is fine: each key stays valid 24 h 2 min after its successor was created.
--
--   psql "$OPSQ_DATABASE_URL" -f sql/admin/rotate_cluster_key.sql
--
-- A leaked key: rotate, then delete the leaked row (reservations signed with it then answer
-- "unknown", and their chunks are handed out again when their leases run out):
--   DELETE FROM opsq.cluster_keys WHERE id = <leaked id>; SELECT pg_notify('opsq_cluster_keys', '');
\set ON_ERROR_STOP on
WITH added AS (
    INSERT INTO opsq.cluster_keys (id, secret)
    SELECT coalesce(max(id), 0) + 1,
           decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')
    FROM opsq.cluster_keys
    RETURNING id, created_at
)
SELECT a.id, a.created_at
FROM added a CROSS JOIN LATERAL pg_notify('opsq_cluster_keys', a.id::text) AS notified;
