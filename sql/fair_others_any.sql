-- In-progress submissions whose strategic metadata has no value of @key among @known (the
-- values a weighted_fair ring has turns for), or no @key at all, oldest first, at most
-- @limit: what the ring's turn of "the others" may hand out. None means the turn has
-- nothing to scan for; a few are scanned one by one (the others' scan of the whole backlog
-- would read past every chunk of the known values to find them).
-- Citus: multi-shard read (U) probing the reference table on each node, ORDER BY and LIMIT
-- pushed down.
SELECT s.id
FROM opsq.submissions s
WHERE NOT EXISTS (
    SELECT 1 FROM opsq.strategic_metadata m
    WHERE m.key = @key AND m.value = ANY(@known::text[]::jsonb[]) AND m.submission_id = s.id)
ORDER BY s.id
LIMIT @limit
