-- What balancing needs: the live instances (heartbeat younger than @heartbeat_timeout and
-- not drained by an operator) and the shards that may be claimed (not disabled). Each live
-- instance targets ceil(enabled_shards / live_instances) shards.
-- Citus: the coordinator's own tables.
SELECT (SELECT count(*)
          FROM opsq.instances
         WHERE heartbeat_at > now() - @heartbeat_timeout::interval
           AND NOT draining)::int AS live_instances,
       (SELECT count(*)
          FROM opsq.shard_claims
         WHERE NOT disabled)::int AS enabled_shards
