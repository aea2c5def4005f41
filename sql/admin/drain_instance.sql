-- Drain an instance: it stops taking chunks from its shards, releases each one as soon as
-- nothing of it is in flight (at the latest after drain_timeout), and claims no more. The
-- other instances stop counting it as live and take the shards over. The instance keeps
-- serving completions. Undo with undrain_instance.sql. Instance ids are listed by
-- claims_overview.sql.
--
--   psql "$OPSQ_DATABASE_URL" -v instance=opsq-7f3a -f sql/admin/drain_instance.sql
\set ON_ERROR_STOP on
UPDATE opsq.instances
SET draining = true
WHERE id = :'instance'
RETURNING id, advertise_url, draining;
-- It changed nothing (no such instance): fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'drain_instance.sql: no instance ' || quote_literal(:'instance') || '; nothing was drained',
              'claims_overview.sql lists the instances'))
WHERE :ROW_COUNT = 0 \gexec
