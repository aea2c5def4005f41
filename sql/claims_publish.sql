-- Publish non-zero in-flight counts for shards before their first reservation since a
-- renewal published 0, so that no other instance takes such a shard at its soft expiry
-- while that reservation lives (DESIGN.md §4, two-phase expiry). Fenced like a renewal:
-- a row is written only while @instance still holds the shard under the generation it
-- knows. A count already higher is kept. A shard not returned is lost.
-- Citus: the coordinator's own tables.
UPDATE opsq.shard_claims AS c
SET inflight = GREATEST(c.inflight, p.inflight)
FROM unnest(@shards::int[], @generations::bigint[], @inflight::int[]) AS p (shard, generation, inflight)
WHERE c.shard = p.shard
  AND c.claimant = @instance
  AND c.generation = p.generation
  AND NOT c.disabled
RETURNING c.shard
