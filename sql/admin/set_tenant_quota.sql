-- Set a tenant's quotas (DESIGN.md §8): a submission that would take the tenant past
-- max_pending_chunks chunks not yet finished (pending, reserved or waiting, over its
-- submissions in progress), or past max_in_progress submissions in progress, is refused
-- with 429 quota_exceeded. "none" is no limit. Every instance reads the quotas at each
-- submission of the tenant; no restart. The same as "opsq tenants set".
--
--   psql "$OPSQ_DATABASE_URL" -v tenant=acme -v max_pending_chunks=1000000 \
--        -v max_in_progress=50 -f sql/admin/set_tenant_quota.sql
--
-- Tenant names are 1 to 64 characters of a-z, 0-9, _ and -.
\set ON_ERROR_STOP on
INSERT INTO opsq.tenants (name, max_pending_chunks, max_in_progress)
VALUES (:'tenant', nullif(:'max_pending_chunks', 'none')::bigint, nullif(:'max_in_progress', 'none')::int)
ON CONFLICT (name) DO UPDATE
SET max_pending_chunks = excluded.max_pending_chunks, max_in_progress = excluded.max_in_progress
RETURNING name, max_pending_chunks, max_in_progress;
