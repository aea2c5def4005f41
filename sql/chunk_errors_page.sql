-- A page of the chunks of a submission that failed at least one attempt (those with an
-- error kept), in chunk order after @after, at most @limit.
-- Citus: router (U, by @submission_id).
SELECT DISTINCT e.chunk_index
FROM opsq.chunk_errors e
WHERE e.submission_id = @submission_id AND e.chunk_index > @after::int
ORDER BY e.chunk_index
LIMIT @limit
