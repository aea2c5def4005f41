-- Every API key: what an instance caches (apikeys.Set). Revoked
-- and expired keys come too, so that a request with one is told why it is refused.
-- Citus: the coordinator's own tables.
SELECT id, name, role, sha256, expires_at, revoked_at IS NOT NULL AS revoked, tenant, tenants
FROM opsq.api_keys
