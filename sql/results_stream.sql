-- Citus: router (U, by @submission_id).
SELECT chunk_index, output
FROM opsq.chunks_completed
WHERE submission_id = @submission_id
ORDER BY chunk_index
