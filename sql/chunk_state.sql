-- Where a chunk is now: 'pending' (reservable, with its retries, its submission's
-- max_retries, and its attempt_base: its attempt is attempt_base + retries, migrations/00016), 'finished' (completed, failed, or its submission is finished), or no row
-- (unknown).
-- Citus: has a Citus form (layout.go, chunkStatesCitus): chunk_state_shard.sql and
-- chunk_state_submission.sql, router each.
SELECT 'pending' AS state, c.retries, s.max_retries, c.attempt_base
FROM opsq.chunks c JOIN opsq.submissions s ON s.id = c.submission_id
WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
UNION ALL
-- Waiting (a retry's backoff, before not_before, paused): pending too.
SELECT 'pending', w.retries, s.max_retries, w.attempt_base
FROM opsq.chunks_waiting w JOIN opsq.submissions s ON s.id = w.submission_id
WHERE w.submission_id = @submission_id AND w.chunk_index = @chunk_index
UNION ALL
-- Completed: in neither table while its submission is in progress (the branches above
-- come first; a failed chunk of a submission that goes on is finished too). Completions
-- are stored a batch to a row, with no key per chunk.
SELECT 'finished', 0, 0, 0 FROM opsq.submissions WHERE id = @submission_id AND @chunk_index < chunks_total
UNION ALL
SELECT 'finished', 0, 0, 0 FROM opsq.chunks_failed WHERE submission_id = @submission_id AND chunk_index = @chunk_index
UNION ALL
SELECT 'finished', 0, 0, 0 FROM opsq.submissions_completed WHERE id = @submission_id
UNION ALL
SELECT 'finished', 0, 0, 0 FROM opsq.submissions_failed WHERE id = @submission_id
UNION ALL
SELECT 'finished', 0, 0, 0 FROM opsq.submissions_cancelled WHERE id = @submission_id
LIMIT 1
