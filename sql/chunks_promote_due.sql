-- On Citus, the first step of chunks_promote.sql: the waiting chunks of @shards (the
-- instance's own) that are due, oldest ready_at first, with their shard (a read over those
-- shards, merged by ready_at; no lock: the move per shard is what claims them,
-- chunks_promote_shard.sql). Only the instance's shards: a read of all of them is a task
-- per Citus shard, at every tick of every instance, a tenth of a burn-down's PostgreSQL
-- CPU on a coordinator and 2 workers when no chunk waits at all.
-- Citus: multi-shard read (S, pruned to the shards of @shards), ORDER BY and LIMIT pushed down.
SELECT w.shard, w.submission_id, w.chunk_index
FROM opsq.chunks_waiting w
WHERE w.ready_at <= now()
  AND w.shard = ANY(@shards::int[])
ORDER BY w.ready_at
LIMIT @limit
