-- A new API key; the table keeps the SHA-256 of the key, never the key.
-- Citus: the coordinator's own tables.
INSERT INTO opsq.api_keys (name, role, sha256, expires_at, tenant, tenants)
VALUES (@name, @role, @sha256, @expires_at, coalesce(nullif(@tenant::text, ''), 'default'), @tenants::text[])
RETURNING id, name, role, created_at, expires_at, revoked_at, last_used_at, tenant, tenants
