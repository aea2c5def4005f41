-- Lift a consumer's throttle before its end (POST /v1/throttle set it; DELETE
-- /v1/throttle and the dashboard's Lift do the same): the chunks of key = value are handed
-- out again. Without tenant, the throttles of key = value in every tenant are lifted; with
-- tenant=acme only acme's (those a consumer confined to acme set), and with tenant= (empty)
-- only the one of every tenant (set by a consumer not confined to tenants). value is the
-- value's JSON: 42 the integer, '"42"' the string.
--
--   psql "$OPSQ_DATABASE_URL" -v key=company_id -v value=42 -f sql/admin/lift_throttle.sql
--   psql "$OPSQ_DATABASE_URL" -v key=mode -v value='"preview"' -v tenant=acme \
--        -f sql/admin/lift_throttle.sql
--
-- It lists the throttles it lifted, and who had set them, then NOTIFYs the instances:
-- each reads the throttles again at once (or at its next reload, within 5 s, if it missed
-- the notification). Unlike the API, it does not wait for their acknowledgements. A
-- throttle not in force (ended, lifted, never set) is an error.
\set ON_ERROR_STOP on
\if :{?tenant}
\else
\set tenant '@every'
\endif
DELETE FROM opsq.throttles
WHERE key = :'key' AND value = :'value'::jsonb AND until > now()
  AND (:'tenant' = '@every' OR tenant = :'tenant')
RETURNING key, value, CASE tenant WHEN '' THEN '(every tenant)' ELSE tenant END AS tenant, until, set_by, set_at;
\set lifted :ROW_COUNT
SELECT pg_notify('opsq_throttles', '') AS instances_told WHERE :lifted > 0;
-- It lifted nothing: fail, so that psql exits non-zero.
SELECT format('DO %L', format('BEGIN RAISE EXCEPTION USING MESSAGE = %L, HINT = %L; END',
              'lift_throttle.sql: no throttle of ' || :'key' || ' = ' || :'value' || ' in force'
              || CASE :'tenant' WHEN '@every' THEN '' WHEN '' THEN ' of every tenant' ELSE ' in tenant ' || :'tenant' END
              || '; nothing was lifted',
              'the dashboard''s overview lists the throttles in force, with their values as JSON'))
WHERE :lifted = 0 \gexec
