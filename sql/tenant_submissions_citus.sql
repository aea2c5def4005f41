-- On Citus, tenant_submissions.sql for one tenant: its first in-progress submissions,
-- oldest first (the lateral join per tenant is not pushed down; the caller merges the
-- tenants' pages and keeps the first @limit).
-- Citus: multi-shard read (U), ORDER BY and LIMIT pushed down.
SELECT id, chunks_total - chunks_done - chunks_failed - chunks_skipped AS pending
FROM opsq.submissions
WHERE tenant = @tenant::text
ORDER BY id
LIMIT @limit
