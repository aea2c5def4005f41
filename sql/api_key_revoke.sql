-- Revoke an API key by name; revoking it again keeps the first revocation's time.
-- Citus: the coordinator's own tables.
UPDATE opsq.api_keys
SET revoked_at = coalesce(revoked_at, now())
WHERE name = @name
RETURNING id, name, role, created_at, expires_at, revoked_at, last_used_at, tenant, tenants
