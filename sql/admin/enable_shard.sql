-- Undo disable_shard.sql: the shard may be claimed again; an instance below its target
-- takes it at its next renewal.
--
--   psql "$OPSQ_DATABASE_URL" -v shard=17 -f sql/admin/enable_shard.sql
UPDATE opsq.shard_claims
SET disabled = false
WHERE shard = :shard
RETURNING shard, generation, disabled;
