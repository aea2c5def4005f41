-- The live owner of a shard and the URL it advertises.
-- Citus: the coordinator's own tables.
SELECT c.claimant, c.generation, i.advertise_url
FROM opsq.shard_claims c
JOIN opsq.instances i ON i.id = c.claimant
WHERE c.shard = @shard
