-- What a consumer gets with each chunk of these in-progress submissions.
-- Citus: a read of the shards (U) that hold @ids, joined to submission_traces, co-located.
SELECT s.id, s.metadata, s.strategic_metadata, s.prefix, s.max_retries, s.tenant, t.traceparent
FROM opsq.submissions s
LEFT JOIN opsq.submission_traces t ON t.id = s.id
WHERE s.id = ANY(@ids::bigint[])
