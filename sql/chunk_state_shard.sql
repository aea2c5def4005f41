-- On Citus, the part of chunk_state.sql on the chunks' node: the chunk, reservable or
-- waiting, with its retries and attempt_base (a chunk never changes shard, so the waiting
-- one is looked for on @shard too).
-- Citus: router (S, by @shard).
SELECT c.retries, c.attempt_base FROM opsq.chunks c
WHERE c.shard = @shard::int AND c.submission_id = @submission_id::bigint AND c.chunk_index = @chunk_index::int
UNION ALL
SELECT w.retries, w.attempt_base FROM opsq.chunks_waiting w
WHERE w.shard = @shard::int AND w.submission_id = @submission_id::bigint AND w.chunk_index = @chunk_index::int
LIMIT 1
