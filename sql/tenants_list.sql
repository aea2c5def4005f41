-- Every tenant that has a quota row or submissions in progress, by name, with its quotas
-- and what it has in progress.
WITH names AS (
    SELECT name FROM opsq.tenants
    UNION
    SELECT DISTINCT tenant FROM opsq.submissions
)
SELECT n.name, t.max_pending_chunks, t.max_in_progress,
       coalesce(u.in_progress, 0) AS in_progress, coalesce(u.pending_chunks, 0)::bigint AS pending_chunks
FROM names n
LEFT JOIN opsq.tenants t ON t.name = n.name
LEFT JOIN LATERAL (
    SELECT count(*) AS in_progress,
           sum(s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped) AS pending_chunks
    FROM opsq.submissions s WHERE s.tenant = n.name
) u ON true
ORDER BY n.name
