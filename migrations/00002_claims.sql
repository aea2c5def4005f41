-- Claims administration: the draining flag of a claim, and the overview operators read.
-- See DESIGN.md §4 and sql/admin/*.sql, the recipes that use them.

-- +goose Up

-- A Go duration string ("1m30s", "250ms") as an interval; NULL if it does not parse. The
-- settings hold Go durations, which PostgreSQL's interval input does not always read
-- ("1h0m0s", "1µs").
-- +goose StatementBegin
CREATE FUNCTION opsq.go_duration(d text) RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN d ~ '^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$'
        THEN (SELECT sum(m[1]::numeric * CASE m[2]
                            WHEN 'ns' THEN 0.001 WHEN 'ms' THEN 1000 WHEN 's' THEN 1000000
                            WHEN 'm' THEN 60000000 WHEN 'h' THEN 3600000000 ELSE 1 END)
              FROM regexp_matches(d, '([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)', 'g') AS m)
             * interval '1 microsecond'
        WHEN d = '0' THEN interval '0'
    END
$$;
-- +goose StatementEnd

-- A duration setting an instance could not read would stop it from renewing with the new
-- value; refuse it at the UPDATE instead.
ALTER TABLE opsq.settings ADD CONSTRAINT settings_duration_valid CHECK (
    key NOT IN ('claim_renew_interval', 'claim_soft_expiry', 'claim_hard_expiry',
                'instance_heartbeat_timeout', 'drain_timeout', 'retention')
    OR coalesce(opsq.go_duration(value) > interval '0', false)
);

-- A shard its owner is draining: the owner no longer hands out its chunks and releases it
-- once nothing of it is in flight (or after drain_timeout). Written at each renewal.
ALTER TABLE opsq.shard_claims ADD COLUMN draining boolean NOT NULL DEFAULT false;

-- One row per claimant: every instance in opsq.instances (with or without shards), every
-- claimant no longer in opsq.instances whose claims have not been taken yet (stopped or
-- forgotten; live is false), and one row with instance NULL for the unclaimed shards.
-- Disabled shards are counted where they sit (normally in the NULL row).
CREATE VIEW opsq.claims_overview AS
WITH per_claimant AS (
    SELECT claimant,
           count(*)                                  AS shards,
           array_agg(shard ORDER BY shard)           AS shard_list,
           count(*) FILTER (WHERE draining)          AS draining_shards,
           count(*) FILTER (WHERE available)         AS available_shards,
           count(*) FILTER (WHERE disabled)          AS disabled_shards,
           sum(inflight)                             AS inflight,
           min(soft_expires_at)                      AS min_soft_expires_at,
           min(hard_expires_at)                      AS min_hard_expires_at,
           max(renewed_at)                           AS last_renewed_at,
           sum(owner_switches)                       AS owner_switches
    FROM opsq.shard_claims
    GROUP BY claimant
),
heartbeat_timeout AS (
    SELECT opsq.go_duration(value) AS timeout FROM opsq.settings WHERE key = 'instance_heartbeat_timeout'
)
SELECT coalesce(i.id, p.claimant)                                    AS instance,
       i.advertise_url,
       i.version,
       i.started_at,
       i.heartbeat_at,
       CASE WHEN i.id IS NULL AND p.claimant IS NULL THEN NULL
            ELSE coalesce(i.heartbeat_at > now() - t.timeout, false) END AS live,
       coalesce(i.draining, false)                                   AS instance_draining,
       coalesce(p.shards, 0)::int                                    AS shards,
       coalesce(p.shard_list, '{}'::int[])                           AS shard_list,
       coalesce(p.draining_shards, 0)::int                           AS draining_shards,
       coalesce(p.available_shards, 0)::int                          AS available_shards,
       coalesce(p.disabled_shards, 0)::int                           AS disabled_shards,
       coalesce(p.inflight, 0)::bigint                               AS inflight,
       p.min_soft_expires_at,
       p.min_hard_expires_at,
       p.last_renewed_at,
       coalesce(p.owner_switches, 0)::bigint                         AS owner_switches
FROM per_claimant p
FULL JOIN opsq.instances i ON i.id = p.claimant
CROSS JOIN heartbeat_timeout t;

-- +goose Down
DROP VIEW opsq.claims_overview;
ALTER TABLE opsq.settings DROP CONSTRAINT settings_duration_valid;
DROP FUNCTION opsq.go_duration(text);
ALTER TABLE opsq.shard_claims DROP COLUMN draining;
