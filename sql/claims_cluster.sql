-- The whole claims table and every instance, in one snapshot: one row per (instance, shard)
-- it holds, an instance without shards with NULL shard columns, and an unclaimed shard with
-- NULL instance columns. A claimant missing from opsq.instances (stopped or forgotten, its
-- claims not yet taken) has NULL instance columns but a claimant.
-- Citus: the coordinator's own tables.
SELECT (SELECT value::int FROM opsq.settings WHERE key = 'shard_count') AS shard_count,
       coalesce(i.id, c.claimant) AS instance,
       coalesce(i.advertise_url, '') AS advertise_url,
       i.started_at,
       i.heartbeat_at,
       coalesce(i.draining, false) AS instance_draining,
       coalesce(i.heartbeat_at > now() - (SELECT opsq.go_duration(value)
                                            FROM opsq.settings
                                           WHERE key = 'instance_heartbeat_timeout'),
                false) AS live,
       c.shard,
       c.generation,
       c.draining,
       c.inflight,
       c.available,
       c.soft_expires_at,
       c.hard_expires_at,
       c.disabled
FROM opsq.instances AS i
FULL JOIN opsq.shard_claims AS c ON c.claimant = i.id
ORDER BY coalesce(i.id, c.claimant) NULLS LAST, c.shard
