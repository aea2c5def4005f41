-- Change the claim timings. Every instance re-reads opsq.settings at each renewal, so the
-- new values apply within one renew interval; no restart. Values are Go durations ("500ms",
-- "10s", "1m30s"). Keep claim_renew_interval < claim_soft_expiry <= claim_hard_expiry and
-- claim_renew_interval < instance_heartbeat_timeout: an instance that reads values breaking
-- these rules (or that do not parse) logs an error and keeps the values it had.
--
--   claim_renew_interval        how often an instance renews its claims and heartbeats (2s)
--   claim_soft_expiry           silence after which a shard with nothing in flight may be
--                               taken (10s)
--   claim_hard_expiry           silence after which a shard may be taken regardless (60s)
--   instance_heartbeat_timeout  silence after which an instance no longer counts as live
--                               when shards are balanced (10s)
--   drain_timeout               how long a draining shard waits for its in-flight
--                               reservations before it is released anyway (60s)
--
--   psql "$OPSQ_DATABASE_URL" -v renew_interval=2s -v soft_expiry=10s -v hard_expiry=60s \
--        -v heartbeat_timeout=10s -v drain_timeout=60s -f sql/admin/set_timings.sql
--
-- To change a single value:
--   UPDATE opsq.settings SET value = '30s' WHERE key = 'claim_soft_expiry';
\set ON_ERROR_STOP on
UPDATE opsq.settings AS s
SET value = v.value
FROM (VALUES ('claim_renew_interval',       :'renew_interval'),
             ('claim_soft_expiry',          :'soft_expiry'),
             ('claim_hard_expiry',          :'hard_expiry'),
             ('instance_heartbeat_timeout', :'heartbeat_timeout'),
             ('drain_timeout',              :'drain_timeout')) AS v (key, value)
WHERE s.key = v.key
RETURNING s.key, s.value;
