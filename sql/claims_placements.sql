-- Where the chunks of each of opsq's shards live on Citus: per shard of the claims table,
-- the node (pg_dist_node's nodename:nodeport) holding the placement of its Citus shard of
-- opsq.chunks, and whether the shard may be acquired now (free, or expired as
-- claims_acquire.sql takes it). Read by an instance with a home (OPSQ_CITUS_HOME) at each
-- claim round, so that its claims prefer its home node's shards and follow a shard move.
-- Only on a Citus coordinator: the functions and catalogs are Citus's.
-- The Citus shard of each opsq shard is looked up once per shard (a materialized CTE): in
-- the join's condition the lookup ran once per pair of a claim and a placement, 47 ms a
-- read, at every claim round of every homed instance.
-- Citus: the coordinator's own tables and Citus's metadata; coordinator-local.
WITH c AS MATERIALIZED (
    SELECT c.shard, get_shard_id_for_distribution_column('opsq.chunks', c.shard) AS shardid,
           (NOT c.disabled
            AND (c.claimant IS NULL
                 OR c.hard_expires_at <= now()
                 OR (c.soft_expires_at <= now() AND c.inflight = 0))) AS free
    FROM opsq.shard_claims AS c
)
SELECT c.shard, n.nodename || ':' || n.nodeport AS node, c.free
FROM c
JOIN pg_dist_placement AS p ON p.shardid = c.shardid
JOIN pg_dist_node AS n ON n.groupid = p.groupid
WHERE n.noderole = 'primary'
ORDER BY c.shard
