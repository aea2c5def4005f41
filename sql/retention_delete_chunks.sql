-- One small batch of a finished submission's chunk rows; repeat until it deletes none.
WITH done AS (
    DELETE FROM opsq.chunks_completed
    WHERE (submission_id, chunk_index) IN (
        SELECT submission_id, chunk_index FROM opsq.chunks_completed
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
)
SELECT (SELECT count(*) FROM done) + (SELECT count(*) FROM failed)
