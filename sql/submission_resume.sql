-- Resume an in-progress submission (the caller holds its lock, submission_lock_any.sql):
-- paused = false, and its chunks held by the pause (ready_at 'infinity') back into
-- opsq.chunks, reservable at once, or, while its not_before is still ahead, left waiting
-- until then. Chunks that waited out a backoff when paused are reservable at once too. A
-- child still waiting on its parents (migrations/00022) keeps them held: only its pause goes;
-- dependent_start.sql's caller runs this again when its parents let it start.
-- Like a pause, it moves one row per chunk held. One row per shard of the chunks made
-- reservable, with how many.
-- Citus: CTEs run as subplans: a router update and read (U, by @id), the waiting chunks
-- moved on every shard (S, by submission, not by shard), their rows through the
-- coordinator; parents selects a column (1) because Citus reads a CTE's rows back as an
-- intermediate result, which cannot have none (42601 otherwise); the plan on one
-- PostgreSQL is the same.
WITH sub AS (
    UPDATE opsq.submissions SET paused = false WHERE id = @id
), lc AS (
    SELECT l.not_before FROM opsq.submission_lifecycle l
    WHERE l.id = @id AND l.not_before > now()
), parents AS (
    SELECT 1 FROM opsq.submission_after a WHERE a.id = @id AND a.waiting
), moved AS (
    DELETE FROM opsq.chunks_waiting w
    WHERE w.submission_id = @id AND w.ready_at = 'infinity' AND NOT EXISTS (SELECT FROM lc)
      AND NOT EXISTS (SELECT FROM parents)
    RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
), ready AS (
    INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
    SELECT submission_id, chunk_index, shard, random_order, retries, input, attempt_base FROM moved
), delayed AS (
    UPDATE opsq.chunks_waiting w
    SET ready_at = (SELECT not_before FROM lc)
    WHERE w.submission_id = @id AND w.ready_at = 'infinity' AND EXISTS (SELECT FROM lc)
      AND NOT EXISTS (SELECT FROM parents)
)
SELECT shard, count(*) AS n FROM moved GROUP BY shard
