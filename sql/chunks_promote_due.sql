-- On Citus, the first step of chunks_promote.sql: the waiting chunks that are due, oldest
-- ready_at first, with their shard (a read over the shards, merged by ready_at; no lock:
-- the move per shard is what claims them, chunks_promote_shard.sql).
-- Citus: multi-shard read (S), ORDER BY and LIMIT pushed down.
SELECT w.shard, w.submission_id, w.chunk_index
FROM opsq.chunks_waiting w
WHERE w.ready_at <= now()
ORDER BY w.ready_at
LIMIT @limit
