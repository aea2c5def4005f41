-- Where a chunk is now: 'pending' (reservable, with its retries and its submission's
-- max_retries), 'finished' (completed, failed, or its submission is finished), or no row
-- (unknown).
SELECT 'pending' AS state, c.retries, s.max_retries
FROM opsq.chunks c JOIN opsq.submissions s ON s.id = c.submission_id
WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
UNION ALL
-- Completed: no longer in opsq.chunks while its submission is in progress (the branch
-- above comes first). Completions are stored a batch to a row, with no key per chunk.
SELECT 'finished', 0, 0 FROM opsq.submissions WHERE id = @submission_id AND @chunk_index < chunks_total
UNION ALL
SELECT 'finished', 0, 0 FROM opsq.chunks_failed WHERE submission_id = @submission_id AND chunk_index = @chunk_index
UNION ALL
SELECT 'finished', 0, 0 FROM opsq.submissions_completed WHERE id = @submission_id
UNION ALL
SELECT 'finished', 0, 0 FROM opsq.submissions_failed WHERE id = @submission_id
UNION ALL
SELECT 'finished', 0, 0 FROM opsq.submissions_cancelled WHERE id = @submission_id
LIMIT 1
