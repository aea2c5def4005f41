-- A page of a submission's failed (with @unfinished, also skipped) chunks that were failed
-- before migration 00007 and so have no shard nor random order: the caller computes them
-- (ShardOf, RandomOrder) and writes them with chunks_failed_place.sql before a retry.
-- Citus: router (U, by @submission_id).
SELECT f.chunk_index
FROM opsq.chunks_failed f
WHERE f.submission_id = @submission_id
  AND f.shard IS NULL
  AND (NOT f.skipped OR @unfinished::boolean)
  AND f.chunk_index > @after::int
ORDER BY f.chunk_index
LIMIT @limit
