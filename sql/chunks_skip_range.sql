-- One slice of the move of a large cancelled or failed submission's pending chunks
-- (queuer/internal/submissions/slices.go): its pending chunks @from to @to (excluded), reservable or
-- waiting, become skipped chunks of chunks_failed, recording @error, as
-- chunks_skip_submission.sql (a cancel) and chunk_fail.sql (a fail) move them all, and are
-- counted on the submission's row in submissions_cancelled (@failed false) or
-- submissions_failed (@failed true). Run after submission_ended_lock.sql in the same
-- transaction. One row back: the submission's chunks skipped so far. One primary-key
-- range per shard.
-- Citus: CTEs run as subplans: deletes on every shard (S, by submission, not by shard),
-- whose rows pass through the coordinator into router inserts and updates (U, by
-- @submission_id).
WITH ready AS (
    DELETE FROM opsq.chunks
    WHERE submission_id = @submission_id AND chunk_index >= @from::int AND chunk_index < @to::int
    RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base
), waiting AS (
    DELETE FROM opsq.chunks_waiting
    WHERE submission_id = @submission_id AND chunk_index >= @from::int AND chunk_index < @to::int
    RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base
), moved AS (
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
    SELECT submission_id, chunk_index, retries, @error::text, true, shard, random_order, input, attempt_base FROM ready
    UNION ALL
    SELECT submission_id, chunk_index, retries, @error::text, true, shard, random_order, input, attempt_base FROM waiting
    RETURNING 1
), cancelled AS (
    UPDATE opsq.submissions_cancelled
    SET chunks_skipped = chunks_skipped + (SELECT count(*) FROM moved)
    WHERE id = @submission_id AND NOT @failed::boolean
    RETURNING chunks_skipped
), failed AS (
    UPDATE opsq.submissions_failed
    SET chunks_skipped = chunks_skipped + (SELECT count(*) FROM moved)
    WHERE id = @submission_id AND @failed::boolean
    RETURNING chunks_skipped
)
SELECT chunks_skipped FROM cancelled
UNION ALL
SELECT chunks_skipped FROM failed
