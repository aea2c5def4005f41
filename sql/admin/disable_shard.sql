-- Disable a shard: nobody claims it until enable_shard.sql, and it is taken from its owner
-- at once (the owner's next renewal misses it and drops its reservations). Its chunks stay
-- in the database and are not handed out while it is disabled. The remaining shards are
-- balanced over the instances as usual.
--
--   psql "$OPSQ_DATABASE_URL" -v shard=17 -f sql/admin/disable_shard.sql
\set ON_ERROR_STOP on
UPDATE opsq.shard_claims
SET disabled = true,
    claimant = NULL,
    generation = generation + 1,
    soft_expires_at = NULL,
    hard_expires_at = NULL,
    inflight = 0,
    draining = false
WHERE shard = :shard
RETURNING shard, generation, disabled;
-- It changed nothing (no such shard): fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'disable_shard.sql: no shard ' || :'shard' || '; nothing was disabled',
              (SELECT 'shards are numbered 0 to ' || value::int - 1 || ' (shard_count)' FROM opsq.settings WHERE key = 'shard_count')))
WHERE :ROW_COUNT = 0 \gexec
