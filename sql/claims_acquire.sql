-- Take up to @want shards for @instance: shards nobody holds, shards past their soft expiry
-- with nothing in flight (the owner is silent and nothing of it is at risk), and shards past
-- their hard expiry regardless. Picked at random, so that instances starting together do
-- not fight over the same rows, but those in @prefer (an instance's home shards on Citus;
-- empty for none) first; never a disabled shard nor one in @held (the shards the
-- instance already holds, which only a renewal may extend). Every change of owner bumps the
-- fencing generation.
-- Citus: the coordinator's own tables.
WITH candidate AS (
    SELECT shard
    FROM opsq.shard_claims
    WHERE NOT disabled
      AND shard <> ALL (@held::int[])
      AND (claimant IS NULL
           OR hard_expires_at <= now()
           OR (soft_expires_at <= now() AND inflight = 0))
    ORDER BY shard = ANY (@prefer::int[]) DESC, random()
    LIMIT @want
)
UPDATE opsq.shard_claims AS c
SET claimant        = @instance,
    generation      = c.generation + 1,
    soft_expires_at = now() + @soft_expiry::interval,
    hard_expires_at = now() + @hard_expiry::interval,
    inflight        = 0,
    draining        = false,
    acquired_at     = now(),
    renewed_at      = now(),
    owner_switches  = c.owner_switches + 1
FROM candidate
WHERE c.shard = candidate.shard
RETURNING c.shard, c.generation
