-- One small batch of a finished submission's chunk rows; repeat until it deletes none.
-- (completed_batches' rows hold up to 1 000 chunks each: a batch of its rows is deleted as
-- cheaply as one of chunks_failed's, a heap tuple each and their TOAST.)
-- Citus: CTEs run as subplans, each router (U, by @submission_id).
WITH done AS (
    DELETE FROM opsq.completed_batches
    WHERE (submission_id, first_index) IN (
        SELECT submission_id, first_index FROM opsq.completed_batches
        WHERE submission_id = @submission_id
        LIMIT @batch)
    RETURNING 1
), failed AS (
    DELETE FROM opsq.chunks_failed
    WHERE (submission_id, chunk_index) IN (
        SELECT submission_id, chunk_index FROM opsq.chunks_failed
        WHERE submission_id = @submission_id
        LIMIT @batch)
    RETURNING 1
), errors AS (
    DELETE FROM opsq.chunk_errors
    WHERE (submission_id, chunk_index, attempt) IN (
        SELECT submission_id, chunk_index, attempt FROM opsq.chunk_errors
        WHERE submission_id = @submission_id
        LIMIT @batch)
    RETURNING 1
)
SELECT (SELECT count(*) FROM done) + (SELECT count(*) FROM failed) + (SELECT count(*) FROM errors)
