-- In-progress submissions that have key = value, oldest first, at most @limit: none means
-- a select_only has nothing to scan for; a few are scanned one by one (a filter over the
-- whole backlog would read past every chunk of every other submission to find them). Only
-- submissions from the oldest in progress on are looked at (finished ones stay in
-- strategic_metadata until retention).
-- Citus: multi-shard read (U) joined with the reference table on each node; min(id) read
-- first.
SELECT m.submission_id
FROM opsq.strategic_metadata m
JOIN opsq.submissions s ON s.id = m.submission_id
WHERE m.key = @key AND m.value = @value::jsonb
  AND m.submission_id >= (SELECT coalesce(min(id), 0) FROM opsq.submissions)
ORDER BY m.submission_id
LIMIT @limit
