-- Take a shard away from its owner at once. The generation is bumped, so the owner's next
-- renewal misses the shard: it stops serving it and drops its reservations; any instance
-- below its target then claims it (with a higher generation again). Reservations on the
-- shard are lost, so their chunks may be handed out a second time; prefer drain_instance.sql
-- when the owner is healthy.
--
--   psql "$OPSQ_DATABASE_URL" -v shard=17 -f sql/admin/force_release_shard.sql
\set ON_ERROR_STOP on
UPDATE opsq.shard_claims
SET claimant = NULL,
    generation = generation + 1,
    soft_expires_at = NULL,
    hard_expires_at = NULL,
    inflight = 0,
    draining = false
WHERE shard = :shard
RETURNING shard, generation;
-- It changed nothing (no such shard): fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'force_release_shard.sql: no shard ' || :'shard' || '; nothing was released',
              (SELECT 'shards are numbered 0 to ' || value::int - 1 || ' (shard_count)' FROM opsq.settings WHERE key = 'shard_count')))
WHERE :ROW_COUNT = 0 \gexec
