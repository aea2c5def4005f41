-- The other live instances, the shards each owns, and those of them with reservable chunks
-- as their owners last published (at renewal): where a consumer with nothing local is
-- forwarded.
-- Citus: the coordinator's own tables.
SELECT i.id, i.advertise_url,
       array_agg(c.shard ORDER BY c.shard) AS owned,
       coalesce(array_agg(c.shard ORDER BY c.shard) FILTER (WHERE c.available), '{}') AS available
FROM opsq.shard_claims c
JOIN opsq.instances i ON i.id = c.claimant
WHERE NOT c.disabled
  AND i.id <> @me
  AND i.heartbeat_at > now() - @heartbeat_timeout::interval
GROUP BY i.id, i.advertise_url
