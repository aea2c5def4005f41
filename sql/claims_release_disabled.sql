-- Let go of the disabled shards @instance still holds (an operator set disabled without
-- releasing): its renewal already treats them as lost.
-- The same release (the same SET list) as claims_release.sql and the operators'
-- admin/force_release_shard.sql, each with its own fence: the recipe stays a file an
-- operator runs alone with psql. A column added to the release goes into all three.
-- Citus: the coordinator's own tables.
UPDATE opsq.shard_claims
SET claimant = NULL,
    generation = generation + 1,
    soft_expires_at = NULL,
    hard_expires_at = NULL,
    inflight = 0,
    draining = false
WHERE claimant = @instance
  AND disabled
RETURNING shard
