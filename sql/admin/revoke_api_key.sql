-- Revoke an API key by name: every instance refuses it within a second (the table's trigger
-- notifies them). The row stays, so that its name is not reused; revoking it again keeps
-- the first revocation's time.
--
--   psql "$OPSQ_DATABASE_URL" -v name=ci-producer -f sql/admin/revoke_api_key.sql
UPDATE opsq.api_keys
SET revoked_at = coalesce(revoked_at, now())
WHERE name = :'name'
RETURNING name, role, revoked_at;
