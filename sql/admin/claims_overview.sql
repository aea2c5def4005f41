-- Who owns which shards: one row per instance (live or not), per claimant that is gone
-- but whose claims have not been taken yet, and one row (instance NULL) for the unclaimed
-- shards. live: heartbeat younger than instance_heartbeat_timeout.
--
--   psql "$OPSQ_DATABASE_URL" -f sql/admin/claims_overview.sql
\set ON_ERROR_STOP on
SELECT instance, advertise_url, live, instance_draining, heartbeat_at,
       shards, draining_shards, disabled_shards, inflight,
       min_soft_expires_at, min_hard_expires_at, shard_list
FROM opsq.claims_overview
ORDER BY instance NULLS LAST;
