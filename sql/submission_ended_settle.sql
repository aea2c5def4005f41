-- After a resumed move by slices of an ended submission (queuer/internal/submissions/slices.go):
-- when none of its chunks is left pending (in opsq.chunks or opsq.chunks_waiting) and its
-- counts still fall short of its total, the rest were skipped without being counted (a row
-- cancelled before migration 00007 counted no skipped chunks): count them, so that the row
-- leaves the resume job's index (migration 00014). Cancelled (@failed false) or failed.
-- Citus: CTEs run as subplans: reads of every shard (S, by submission, not by shard), then
-- router updates (U, by @id).
WITH gone AS (
    SELECT NOT EXISTS (SELECT FROM opsq.chunks WHERE submission_id = @id)
       AND NOT EXISTS (SELECT FROM opsq.chunks_waiting WHERE submission_id = @id) AS all_moved
), cancelled AS (
    UPDATE opsq.submissions_cancelled
    SET chunks_skipped = chunks_total - chunks_done - chunks_failed
    WHERE id = @id AND NOT @failed::boolean AND (SELECT all_moved FROM gone)
      AND chunks_done + chunks_failed + chunks_skipped < chunks_total
    RETURNING id
), failed AS (
    UPDATE opsq.submissions_failed
    SET chunks_skipped = chunks_total - chunks_done - chunks_failed
    WHERE id = @id AND @failed::boolean AND (SELECT all_moved FROM gone)
      AND chunks_done + chunks_failed + chunks_skipped < chunks_total
    RETURNING id
)
SELECT count(*) FROM (SELECT id FROM cancelled UNION ALL SELECT id FROM failed) settled
