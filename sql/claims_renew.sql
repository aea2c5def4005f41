-- Renew the shards this instance holds: push both expiries forward and publish, per shard,
-- the owner's count of live reservations, whether it knows of reservable chunks there, and
-- whether it is draining the shard. Fenced: a row is renewed only while @instance still
-- holds it under the generation it knows. A shard not returned is lost; a disabled shard is
-- never renewed, so its owner treats it as lost.
-- Citus: the coordinator's own tables.
UPDATE opsq.shard_claims AS c
SET soft_expires_at = now() + @soft_expiry::interval,
    hard_expires_at = now() + @hard_expiry::interval,
    renewed_at      = now(),
    inflight        = r.inflight,
    available       = r.available,
    draining        = r.draining
FROM unnest(@shards::int[], @generations::bigint[], @inflight::int[], @available::boolean[],
            @draining::boolean[]) AS r (shard, generation, inflight, available, draining)
WHERE c.shard = r.shard
  AND c.claimant = @instance
  AND c.generation = r.generation
  AND NOT c.disabled
RETURNING c.shard
