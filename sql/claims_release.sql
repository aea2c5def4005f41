-- Release shards @instance holds, each fenced by the generation it holds it under. The
-- generation is bumped so that anything still carrying the old one is refused. A shard not
-- returned was no longer held.
-- Citus: the coordinator's own tables.
UPDATE opsq.shard_claims AS c
SET claimant        = NULL,
    generation      = c.generation + 1,
    soft_expires_at = NULL,
    hard_expires_at = NULL,
    inflight        = 0,
    draining        = false
FROM unnest(@shards::int[], @generations::bigint[]) AS r (shard, generation)
WHERE c.shard = r.shard
  AND c.claimant = @instance
  AND c.generation = r.generation
RETURNING c.shard
