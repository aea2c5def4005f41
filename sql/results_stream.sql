SELECT chunk_index, output
FROM opsq.chunks_completed
WHERE submission_id = @submission_id
ORDER BY chunk_index
