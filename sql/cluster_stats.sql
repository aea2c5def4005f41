-- The cluster at a glance, for the metrics (queuer.ClusterStats). Cheap at any backlog: it
-- sums the in-progress submissions' counters (at most about 10^5 rows) and reads the claims
-- table (one row per shard) and the instances; it never counts chunks.
-- oldest_age_seconds is the age of the oldest running submission, as a user means "in
-- progress": not paused and started (no not_before, or one passed), counted from when it
-- started (its not_before, if later than its creation); a paused submission, or one
-- waiting for its not_before, is not work waiting for a consumer (issue 33, point 4).
-- Citus: multi-shard reads (U: submissions joined to its lifecycle by id, co-located), then the coordinator's own tables.
SELECT (SELECT count(*) FROM opsq.submissions)::bigint AS submissions_in_progress,
       (SELECT coalesce(sum(chunks_total - chunks_done), 0) FROM opsq.submissions)::bigint AS chunks_pending,
       coalesce((SELECT extract(epoch FROM now() - min(greatest(s.created_at, l.not_before)))
                   FROM opsq.submissions s
                   LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
                  WHERE NOT s.paused AND coalesce(l.not_before <= now(), true)), 0)::float8 AS oldest_age_seconds,
       (SELECT coalesce(sum(inflight), 0) FROM opsq.shard_claims)::bigint AS chunks_inflight,
       (SELECT count(*)
          FROM opsq.shard_claims
         WHERE NOT disabled
           AND (claimant IS NULL OR soft_expires_at < now()))::int AS shards_unserved,
       (SELECT count(*) FROM opsq.shard_claims WHERE disabled)::int AS shards_disabled,
       (SELECT coalesce(sum(owner_switches), 0) FROM opsq.shard_claims)::bigint AS owner_switches,
       (SELECT count(*)
          FROM opsq.instances
         WHERE heartbeat_at > now() - @heartbeat_timeout::interval)::int AS instances_live
