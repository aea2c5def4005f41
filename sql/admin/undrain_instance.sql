-- Undo drain_instance.sql: the instance counts as live again and claims its share of the
-- shards at its next renewal (the others drain their surplus to make room).
--
--   psql "$OPSQ_DATABASE_URL" -v instance=opsq-7f3a -f sql/admin/undrain_instance.sql
\set ON_ERROR_STOP on
UPDATE opsq.instances
SET draining = false
WHERE id = :'instance'
RETURNING id, advertise_url, draining;
-- It changed nothing (no such instance): fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'undrain_instance.sql: no instance ' || quote_literal(:'instance') || '; nothing was undrained',
              'claims_overview.sql lists the instances'))
WHERE :ROW_COUNT = 0 \gexec
