-- Make the waiting chunks that are due reservable: up to @limit of them, oldest ready_at
-- first, move from chunks_waiting to opsq.chunks (a retry's backoff ended, or a
-- submission's not_before came). Instances may run it at once: each takes rows the others
-- have not locked. Returns the shard of each chunk moved, for the NOTIFY of work.
WITH due AS (
    SELECT submission_id, chunk_index
    FROM opsq.chunks_waiting
    WHERE ready_at <= now()
    ORDER BY ready_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM opsq.chunks_waiting w
    USING due
    WHERE w.submission_id = due.submission_id AND w.chunk_index = due.chunk_index
    RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input
)
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input)
SELECT submission_id, chunk_index, shard, random_order, retries, input FROM moved
RETURNING shard
