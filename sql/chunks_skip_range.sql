-- One slice of the cancel of a large submission (queuer/submissions/cancel.go): its
-- pending chunks @from to @to (excluded), reservable or waiting, become skipped chunks of
-- chunks_failed, as chunks_skip_submission.sql moves them all, and are counted on the
-- cancelled submission. Run after submission_cancelled_lock.sql in the same transaction.
-- One row back: the submission's chunks skipped so far. One primary-key range per shard.
WITH ready AS (
    DELETE FROM opsq.chunks
    WHERE submission_id = @submission_id AND chunk_index >= @from::int AND chunk_index < @to::int
    RETURNING submission_id, chunk_index, shard, random_order, retries, input
), waiting AS (
    DELETE FROM opsq.chunks_waiting
    WHERE submission_id = @submission_id AND chunk_index >= @from::int AND chunk_index < @to::int
    RETURNING submission_id, chunk_index, shard, random_order, retries, input
), moved AS (
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input)
    SELECT submission_id, chunk_index, retries, 'submission cancelled', true, shard, random_order, input FROM ready
    UNION ALL
    SELECT submission_id, chunk_index, retries, 'submission cancelled', true, shard, random_order, input FROM waiting
    RETURNING 1
)
UPDATE opsq.submissions_cancelled
SET chunks_skipped = chunks_skipped + (SELECT count(*) FROM moved)
WHERE id = @submission_id
RETURNING chunks_skipped
