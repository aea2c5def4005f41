-- On Citus, the first step of chunks_complete.sql for the chunks of one submission on one
-- opsq shard: the reservable chunks among them deleted, then (the next statement, sent for
-- the keys the first did not find, if any) the waiting ones; those deleted come back (the
-- first completion of each). Per submission,
-- and two statements, so that each is Citus's fast path (one table, the distribution
-- column equal to a parameter, no CTE, no join): the one statement of both deletes joined
-- to the keys cost the coordinator 0.38 ms of planning each, a tenth of its CPU in a
-- burn-down.
-- Citus: router (S, by @shard), fast path: both tables are on the node of @shard.
DELETE FROM opsq.chunks c
WHERE c.shard = @shard::int AND c.submission_id = @submission_id::bigint AND c.chunk_index = ANY(@chunk_indexes::int[])
RETURNING c.submission_id, c.chunk_index
-- next statement
DELETE FROM opsq.chunks_waiting w
WHERE w.shard = @shard::int AND w.submission_id = @submission_id::bigint AND w.chunk_index = ANY(@chunk_indexes::int[])
RETURNING w.submission_id, w.chunk_index
