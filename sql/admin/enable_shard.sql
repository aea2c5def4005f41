-- Undo disable_shard.sql: the shard may be claimed again; an instance below its target
-- takes it at its next renewal.
--
--   psql "$OPSQ_DATABASE_URL" -v shard=17 -f sql/admin/enable_shard.sql
\set ON_ERROR_STOP on
UPDATE opsq.shard_claims
SET disabled = false
WHERE shard = :shard
RETURNING shard, generation, disabled;
-- It changed nothing (no such shard): fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'enable_shard.sql: no shard ' || :'shard' || '; nothing was enabled',
              (SELECT 'shards are numbered 0 to ' || value::int - 1 || ' (shard_count)' FROM opsq.settings WHERE key = 'shard_count')))
WHERE :ROW_COUNT = 0 \gexec
