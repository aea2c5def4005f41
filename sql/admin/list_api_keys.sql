-- List the API keys: name, role, and when each was created, expires, was revoked and was
-- last used (recorded at most once a minute per instance). Neither keys nor hashes.
--
--   psql "$OPSQ_DATABASE_URL" -f sql/admin/list_api_keys.sql
\set ON_ERROR_STOP on
SELECT name, role, created_at, expires_at, revoked_at, last_used_at,
       CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
            WHEN expires_at <= now() THEN 'expired'
            ELSE 'active' END AS state
FROM opsq.api_keys
ORDER BY name;
