-- Let go of the disabled shards @instance still holds (an operator set disabled without
-- releasing): its renewal already treats them as lost.
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
