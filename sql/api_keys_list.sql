-- The API keys, without their hashes.
-- Citus: the coordinator's own tables.
SELECT id, name, role, created_at, expires_at, revoked_at, last_used_at, tenant, tenants
FROM opsq.api_keys
ORDER BY name
