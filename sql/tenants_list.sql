-- Every tenant that has a quota row or submissions in progress, by name, with its quotas
-- and what it has in progress. The submissions in progress are counted once per tenant
-- (usage), not probed per name: one scan either way, and on Citus a probe per name (a
-- lateral join from the coordinator's table) is refused.
-- Citus: a multi-shard read (U), aggregated per tenant, then the coordinator's own table.
WITH usage AS (
    SELECT s.tenant AS name, count(*) AS in_progress,
           sum(s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped) AS pending_chunks
    FROM opsq.submissions s
    GROUP BY s.tenant
), names AS (
    SELECT name FROM opsq.tenants
    UNION
    SELECT name FROM usage
)
SELECT n.name, t.max_pending_chunks, t.max_in_progress,
       coalesce(u.in_progress, 0) AS in_progress, coalesce(u.pending_chunks, 0)::bigint AS pending_chunks
FROM names n
LEFT JOIN opsq.tenants t ON t.name = n.name
LEFT JOIN usage u ON u.name = n.name
ORDER BY n.name
