-- Fail a chunk for good (its attempts spent, or failed without a retry) and record its
-- error; then its submission's failure policy (submission_lifecycle.max_failed; no row:
-- the default, fail at the first) decides the rest:
--   - the submission fails once more than max_failed of its chunks have failed (max_failed
--     NULL with a row: never, on_failure "continue"): it moves to submissions_failed, and
--     its other chunks, reservable or waiting, follow as skipped: here when it has at most
--     @skip_now chunks pending (this one included), else later, by slices, each counted as
--     it moves (chunks_skip_range.sql, run by the caller once this commits: sliced), so
--     that no transaction holds more than a slice (queuer/internal/outcome/fail.go);
--   - else the failure is counted, and a submission whose every chunk is now finished
--     (done + failed + skipped = total) moves to submissions_failed too;
--   - else it goes on.
-- The chunk is looked for in chunks_waiting too: one in flight when its submission was
-- paused waits there.
-- A failed or skipped chunk keeps its input, shard and random order (a retry makes it
-- reservable again). @attempt and @claimant guard the attempt and the claim as in
-- chunk_retry.sql. One row back: fence_held (false: the fence refused, nothing was
-- written), submission_id (NULL when nothing was done), finished (the submission moved to
-- submissions_failed), dropped (its failure policy failed it: its other chunks are
-- skipped), and sliced (they are left for the slices) with chunks_total (NULL unless sliced).
-- The same move of a submission row as submission_cancel.sql and
-- submissions_finish_completed.sql: one statement per ending, each with its own condition and
-- target; a column added to opsq.submissions goes into all three (and into
-- submission_reopen.sql, the way back).
-- Citus: has a Citus form, chunk_fail_citus.sql (opsq.chunk_fail_steps, migration 00020;
-- layout.go): as it is, its row locks across shards are refused.
WITH fence AS (
    SELECT @generation::bigint IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = @shard AND sc.generation = @generation::bigint
          AND (@claimant::text IS NULL OR sc.claimant = @claimant::text)) AS held
), target_ready AS (
    SELECT c.submission_id, c.chunk_index, c.retries
    FROM opsq.chunks c
    WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
      AND c.attempt_base + c.retries = @attempt
      AND (SELECT held FROM fence)
    FOR UPDATE
), target_waiting AS (
    -- A chunk in flight when its submission was paused waits in chunks_waiting (skipped
    -- whole after one probe when nothing waits).
    SELECT w.submission_id, w.chunk_index, w.retries
    FROM opsq.chunks_waiting w
    WHERE w.submission_id = @submission_id AND w.chunk_index = @chunk_index
      AND w.attempt_base + w.retries = @attempt
      AND (SELECT held FROM fence)
      AND EXISTS (SELECT FROM opsq.chunks_waiting)
      AND NOT EXISTS (SELECT FROM target_ready)
    FOR UPDATE
), target AS (
    SELECT * FROM target_ready UNION ALL SELECT * FROM target_waiting
), sub AS (
    SELECT s.id, s.chunks_total, s.chunks_done, s.chunks_failed + 1 AS failed, s.chunks_skipped,
           CASE WHEN l.id IS NULL THEN true
                ELSE l.max_failed IS NOT NULL AND s.chunks_failed + 1 > l.max_failed END AS fails,
           -- This chunk and the others to skip if it fails the submission.
           s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped AS pending
    FROM opsq.submissions s
    LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
    WHERE s.id = (SELECT submission_id FROM target)
    FOR UPDATE OF s
), gone_ready AS (
    DELETE FROM opsq.chunks c
    USING target_ready t
    WHERE c.shard = @shard AND c.submission_id = t.submission_id AND c.chunk_index = t.chunk_index
      -- Only while its submission is in progress: the chunks of a large submission being
      -- cancelled by slices are still here for a while, and are the mover's to skip and
      -- count (chunks_skip_range.sql), not a failure to record.
      AND EXISTS (SELECT FROM sub)
    RETURNING c.submission_id, c.chunk_index, c.shard, c.random_order, c.retries, c.input, c.attempt_base
), gone_waiting AS (
    DELETE FROM opsq.chunks_waiting w
    USING target_waiting t
    WHERE w.submission_id = t.submission_id AND w.chunk_index = t.chunk_index
      AND EXISTS (SELECT FROM sub)
    RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
), gone AS (
    SELECT * FROM gone_ready UNION ALL SELECT * FROM gone_waiting
), skipped_ready AS (
    DELETE FROM opsq.chunks c
    WHERE c.submission_id = (SELECT id FROM sub WHERE fails AND pending <= @skip_now::bigint)
      AND c.chunk_index <> @chunk_index
    RETURNING c.submission_id, c.chunk_index, c.shard, c.random_order, c.retries, c.input, c.attempt_base
), skipped_waiting AS (
    DELETE FROM opsq.chunks_waiting w
    WHERE w.submission_id = (SELECT id FROM sub WHERE fails AND pending <= @skip_now::bigint)
      AND w.chunk_index <> @chunk_index
    RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
), holds AS (
    DELETE FROM opsq.simultaneous_holds h WHERE h.submission_id = (SELECT id FROM sub WHERE fails)
), failed AS (
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
    SELECT submission_id, chunk_index, retries, @error, false, shard, random_order, input, attempt_base FROM gone
    UNION ALL
    SELECT submission_id, chunk_index, retries, @error, true, shard, random_order, input, attempt_base FROM skipped_ready
    UNION ALL
    SELECT submission_id, chunk_index, retries, @error, true, shard, random_order, input, attempt_base FROM skipped_waiting
), error AS (
    -- Numbered after the chunk's earlier failures, as in chunk_retry.sql; the last 5 kept.
    INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer)
    SELECT g.submission_id, g.chunk_index,
           coalesce((SELECT max(e.attempt) + 1 FROM opsq.chunk_errors e
                     WHERE e.submission_id = g.submission_id AND e.chunk_index = g.chunk_index), 0),
           @error, @consumer
    FROM gone g
    RETURNING attempt
), older AS (
    DELETE FROM opsq.chunk_errors e
    USING target t, error n
    WHERE e.submission_id = t.submission_id AND e.chunk_index = t.chunk_index AND e.attempt <= n.attempt - 5
), ends AS (
    SELECT s.id, s.fails, s.fails OR s.chunks_done + s.failed + s.chunks_skipped >= s.chunks_total AS finished,
           s.failed, (SELECT count(*) FROM skipped_ready) + (SELECT count(*) FROM skipped_waiting) AS skipped,
           s.fails AND s.pending > @skip_now::bigint AS sliced, s.chunks_total
    FROM sub s
    WHERE EXISTS (SELECT FROM gone)
), counted AS (
    UPDATE opsq.submissions s
    SET chunks_failed = e.failed
    FROM ends e
    WHERE s.id = e.id AND NOT e.finished
), moved_sub AS (
    DELETE FROM opsq.submissions s
    USING ends e
    WHERE s.id = e.id AND e.finished
    RETURNING s.*
), moved AS (
    INSERT INTO opsq.submissions_failed
        (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
         strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error, tenant, paused)
    SELECT m.id, m.chunks_total, m.chunks_done, e.failed, m.chunks_skipped + e.skipped, m.priority, m.max_retries,
           m.metadata, m.strategic_metadata, m.prefix, m.created_at, now(), @chunk_index, @error, m.tenant, m.paused
    FROM moved_sub m JOIN ends e ON e.id = m.id
    RETURNING id
)
SELECT f.held AS fence_held, (SELECT submission_id FROM gone) AS submission_id,
       EXISTS (SELECT FROM moved) AS finished, coalesce((SELECT fails FROM ends), false) AS dropped,
       coalesce((SELECT sliced FROM ends), false) AS sliced,
       (SELECT chunks_total FROM ends WHERE sliced) AS chunks_total
FROM fence f
