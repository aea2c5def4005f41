-- Make the waiting chunks that are due reservable: up to @limit of them, oldest ready_at
-- first, move from chunks_waiting to opsq.chunks (a retry's backoff ended, or a
-- submission's not_before came). Instances may run it at once: each takes rows the others
-- have not locked. A paused submission's chunks stay: the share lock on its row orders the
-- move with a pause (submission_pause.sql locks the row first, and then moves the chunks
-- that are in opsq.chunks), so that none moved meanwhile is left reservable. Returns the
-- shard of each chunk moved, for the NOTIFY of work.
-- Citus: has a Citus form (layout.go, chunksPromoteCitus): chunks_promote_due.sql,
-- submission_share_unpaused.sql, chunks_promote_shard.sql; as it is, its multi-shard FOR
-- UPDATE is refused.
WITH due AS (
    SELECT w.submission_id, w.chunk_index
    FROM opsq.chunks_waiting w
    JOIN opsq.submissions s ON s.id = w.submission_id
    WHERE w.ready_at <= now() AND NOT s.paused
    ORDER BY w.ready_at
    LIMIT @limit
    FOR UPDATE OF w SKIP LOCKED
    FOR SHARE OF s SKIP LOCKED
), moved AS (
    DELETE FROM opsq.chunks_waiting w
    USING due
    WHERE w.submission_id = due.submission_id AND w.chunk_index = due.chunk_index
    RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
)
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
SELECT submission_id, chunk_index, shard, random_order, retries, input, attempt_base FROM moved
RETURNING shard
