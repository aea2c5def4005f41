-- The error recorded for one of a chunk's last failed attempts: @back 0 is the latest,
-- 1 the one before, and so on (chunk_errors keeps the last 5). No row: none recorded
-- that far back.
-- Citus: router (U, by @submission_id).
SELECT error
FROM opsq.chunk_errors
WHERE submission_id = @submission_id AND chunk_index = @chunk_index
ORDER BY attempt DESC
OFFSET @back
LIMIT 1
