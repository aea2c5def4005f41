-- Finished submissions past retention, a few at a time.
-- Citus: multi-shard read (U).
SELECT id FROM (
    SELECT id FROM opsq.submissions_completed WHERE finished_at < @cutoff
    UNION ALL
    SELECT id FROM opsq.submissions_failed WHERE finished_at < @cutoff
    UNION ALL
    SELECT id FROM opsq.submissions_cancelled WHERE finished_at < @cutoff
) AS expired
LIMIT @limit
