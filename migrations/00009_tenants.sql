-- Tenants (DESIGN.md §1 and §8): every submission belongs to one tenant, a producer key to
-- one tenant, and a consumer key to some tenants (NULL: all of them). Existing submissions
-- and keys belong to "default".
--
-- - opsq.tenants holds the quotas of a tenant; a tenant needs no row (no row: no quota).
-- - The tenant is a column of each of the four submission tables, so that it moves with
--   the row between them (a retry's move back included): statements that move a row name
--   it like the other columns.
-- - The tenant is also a row of opsq.strategic_metadata under the reserved key "@tenant"
--   (value: the tenant as a JSON string), kept for every state until retention like the
--   other keys. That row is how a reserve is confined to a consumer's tenants and how
--   "@tenant" works as a strategy key: the candidate scans probe the (key, value,
--   submission_id) primary key exactly as for a select_only, and a tenant with few
--   submissions in progress is scanned one submission at a time (select_only_any.sql).
--   It also makes "list a tenant's submissions, newest first" a backward index scan.
-- - Idempotency keys are unique per tenant.

-- +goose Up
CREATE TABLE opsq.tenants (
    name               text PRIMARY KEY CHECK (name ~ '^[a-z0-9_-]{1,64}$'),
    -- At most this many chunks not yet finished (pending, reserved or waiting) over the
    -- tenant's submissions in progress; NULL: no limit.
    max_pending_chunks bigint CHECK (max_pending_chunks >= 0),
    -- At most this many submissions in progress; NULL: no limit.
    max_in_progress    int CHECK (max_in_progress >= 0)
);

-- A constant default: no table rewrite.
ALTER TABLE opsq.submissions ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE opsq.submissions_completed ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE opsq.submissions_failed ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE opsq.submissions_cancelled ADD COLUMN tenant text NOT NULL DEFAULT 'default';

-- A tenant's submissions in progress, oldest first: counted at each submit of a tenant
-- that has a quota (tenant_usage.sql), and read by a reserve confined to tenants
-- (tenant_submissions.sql).
CREATE INDEX submissions_tenant ON opsq.submissions (tenant, id);

-- "@tenant" is reserved from now on (the API refuses it in strategic_metadata).
DELETE FROM opsq.strategic_metadata WHERE key = '@tenant';
INSERT INTO opsq.strategic_metadata (key, value, submission_id)
SELECT '@tenant', to_jsonb(tenant), id FROM opsq.submissions
UNION ALL SELECT '@tenant', to_jsonb(tenant), id FROM opsq.submissions_completed
UNION ALL SELECT '@tenant', to_jsonb(tenant), id FROM opsq.submissions_failed
UNION ALL SELECT '@tenant', to_jsonb(tenant), id FROM opsq.submissions_cancelled;

ALTER TABLE opsq.idempotency_keys ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE opsq.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE opsq.idempotency_keys ADD PRIMARY KEY (tenant, key);

-- A producer key's tenant (ignored for the other roles), and the tenants a consumer key
-- may reserve from (NULL: all; ignored for the other roles).
ALTER TABLE opsq.api_keys
    ADD COLUMN tenant  text NOT NULL DEFAULT 'default' CHECK (tenant ~ '^[a-z0-9_-]{1,64}$'),
    ADD COLUMN tenants text[] CHECK (tenants IS NULL OR (cardinality(tenants) > 0
        AND array_to_string(tenants, ',') ~ '^[a-z0-9_-]{1,64}(,[a-z0-9_-]{1,64})*$'));
DROP TRIGGER api_keys_notify ON opsq.api_keys;
CREATE TRIGGER api_keys_notify
AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF name, role, sha256, expires_at, revoked_at, tenant, tenants
ON opsq.api_keys
FOR EACH STATEMENT EXECUTE FUNCTION opsq.api_keys_notify();

CREATE OR REPLACE VIEW opsq.submission_status AS
    SELECT id, 'in_progress'::text AS state, chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           NULL::timestamptz AS finished_at, NULL::int AS failed_chunk_index, NULL::text AS error,
           chunks_skipped, paused, tenant
      FROM opsq.submissions
    UNION ALL
    SELECT id, 'completed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL, chunks_skipped, false, tenant
      FROM opsq.submissions_completed
    UNION ALL
    SELECT id, 'failed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, failed_chunk_index, error, chunks_skipped, false, tenant
      FROM opsq.submissions_failed
    UNION ALL
    SELECT id, 'cancelled', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL, chunks_skipped, false, tenant
      FROM opsq.submissions_cancelled;

-- +goose Down
-- Everything goes back to one tenant: two tenants' idempotency keys of the same text keep
-- the newest submission.
DROP VIEW opsq.submission_status;
CREATE VIEW opsq.submission_status AS
    SELECT id, 'in_progress'::text AS state, chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           NULL::timestamptz AS finished_at, NULL::int AS failed_chunk_index, NULL::text AS error,
           chunks_skipped, paused
      FROM opsq.submissions
    UNION ALL
    SELECT id, 'completed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL, chunks_skipped, false
      FROM opsq.submissions_completed
    UNION ALL
    SELECT id, 'failed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, failed_chunk_index, error, chunks_skipped, false
      FROM opsq.submissions_failed
    UNION ALL
    SELECT id, 'cancelled', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL, chunks_skipped, false
      FROM opsq.submissions_cancelled;
DROP TRIGGER api_keys_notify ON opsq.api_keys;
CREATE TRIGGER api_keys_notify
AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF name, role, sha256, expires_at, revoked_at
ON opsq.api_keys
FOR EACH STATEMENT EXECUTE FUNCTION opsq.api_keys_notify();
ALTER TABLE opsq.api_keys DROP COLUMN tenant, DROP COLUMN tenants;
DELETE FROM opsq.idempotency_keys k
USING opsq.idempotency_keys n
WHERE n.key = k.key AND n.submission_id > k.submission_id;
ALTER TABLE opsq.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE opsq.idempotency_keys DROP COLUMN tenant;
ALTER TABLE opsq.idempotency_keys ADD PRIMARY KEY (key);
DELETE FROM opsq.strategic_metadata WHERE key = '@tenant';
ALTER TABLE opsq.submissions DROP COLUMN tenant;
ALTER TABLE opsq.submissions_completed DROP COLUMN tenant;
ALTER TABLE opsq.submissions_failed DROP COLUMN tenant;
ALTER TABLE opsq.submissions_cancelled DROP COLUMN tenant;
DROP TABLE opsq.tenants;
