-- Revoke an API key by name: every instance refuses it within a second (the table's trigger
-- notifies them). The row stays, so that its name is not reused; revoking it again keeps
-- the first revocation's time.
--
--   psql "$OPSQ_DATABASE_URL" -v name=ci-producer -f sql/admin/revoke_api_key.sql
\set ON_ERROR_STOP on
UPDATE opsq.api_keys
SET revoked_at = coalesce(revoked_at, now())
WHERE name = :'name'
RETURNING name, role, revoked_at;
-- It changed nothing (no key of that name): fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'revoke_api_key.sql: no API key named ' || quote_literal(:'name') || '; nothing was revoked',
              'list_api_keys.sql lists the keys'))
WHERE :ROW_COUNT = 0 \gexec
