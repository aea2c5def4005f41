-- The first in-progress submissions of some tenants, oldest first, at most @limit, with
-- their chunks not yet finished: none means a reserve confined to those tenants has
-- nothing to scan for; a few holding few chunks are scanned one by one
-- (queuer/reserve/tenants.go). An ordered scan of submissions_tenant per tenant.
-- Citus: has a Citus form, tenant_submissions_citus.sql (layout.go): as it is, its lateral
-- join per tenant is not pushed down.
SELECT s.id, s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped AS pending
FROM unnest(@tenants::text[]) AS t(tenant)
CROSS JOIN LATERAL (
    SELECT id, chunks_total, chunks_done, chunks_failed, chunks_skipped
    FROM opsq.submissions
    WHERE tenant = t.tenant
    ORDER BY id
    LIMIT @limit
) s
ORDER BY s.id
LIMIT @limit
