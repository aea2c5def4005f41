-- What a consumer gets with each chunk of these in-progress submissions.
SELECT id, metadata, strategic_metadata, prefix, max_retries, tenant
FROM opsq.submissions
WHERE id = ANY(@ids::bigint[])
