-- Give a submission's failed chunks (with @unfinished, its skipped ones too; with
-- @chunk_indexes, only those of them, failed or skipped, named there) a fresh attempt
-- budget: out of chunks_failed, with retries 0 and their input, into opsq.chunks, or into
-- opsq.chunks_waiting when they may not be handed out yet (@paused: until resumed; the
-- submission's not_before still ahead: until then). Their errors stay (chunk_errors numbers
-- a chunk's failures in order, across retries; the last 5 are kept). A fresh budget is not
-- a fresh attempt: attempt_base grows by the attempts of the budget that ends (retries + 1),
-- so that the chunk's attempt (attempt_base + retries) is one no earlier token names, and
-- a stale token's fail or extend is lost (migrations/00016). The caller holds the submission's lock
-- (submission_lock_any.sql) and fixes its counters. One row per shard and kind of chunk
-- moved: the shard, skipped, how many, and whether they are reservable now.
-- Citus: CTEs run as subplans: router (U, by @submission_id) reads and deletes, whose rows
-- pass through the coordinator into inserts routed by shard (S).
WITH lc AS (
    SELECT l.not_before FROM opsq.submission_lifecycle l
    WHERE l.id = @submission_id AND l.not_before > now()
), moved AS (
    DELETE FROM opsq.chunks_failed f
    WHERE f.submission_id = @submission_id
      AND (@chunk_indexes::int[] IS NULL AND (NOT f.skipped OR @unfinished::boolean)
           OR f.chunk_index = ANY(@chunk_indexes::int[]))
    RETURNING f.chunk_index, f.shard, f.random_order, f.input, f.skipped, f.attempt_base + f.retries + 1 AS attempt_base
), ready AS (
    INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
    SELECT @submission_id, m.chunk_index, m.shard, m.random_order, 0, m.input, m.attempt_base
    FROM moved m
    WHERE NOT @paused::boolean AND NOT EXISTS (SELECT FROM lc)
), waiting AS (
    INSERT INTO opsq.chunks_waiting (submission_id, chunk_index, shard, random_order, retries, input, attempt_base, ready_at)
    SELECT @submission_id, m.chunk_index, m.shard, m.random_order, 0, m.input, m.attempt_base,
           CASE WHEN @paused::boolean THEN 'infinity'::timestamptz ELSE (SELECT not_before FROM lc) END
    FROM moved m
    WHERE @paused::boolean OR EXISTS (SELECT FROM lc)
)
SELECT m.shard, m.skipped, count(*) AS n,
       NOT @paused::boolean AND NOT EXISTS (SELECT FROM lc) AS reservable
FROM moved m
GROUP BY m.shard, m.skipped
