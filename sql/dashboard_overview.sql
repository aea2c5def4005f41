-- The dashboard's own figures (api/ui); the rest of its overview is cluster_stats.sql's.
-- Counters over the in-progress submissions (at most about 10^5 rows) and the finished
-- ones of a recent window, never a count over chunks. done_finished_since is what the
-- submissions finished after @since had done: with done_in_progress of two samples it
-- gives the completions between them (queuer.Overview), so both are read together.
-- The in-progress submissions are counted by phase, as GET /v1/submissions?state= has
-- them: paused; scheduled (not paused, before not_before); running (the others). The
-- chunks they have left, and the oldest one, are of the running ones only: a held
-- submission is not work waiting for a consumer.
-- Citus: multi-shard reads (U), aggregated on the coordinator.
SELECT
    (SELECT coalesce(sum(chunks_done), 0) FROM opsq.submissions)::bigint AS done_in_progress,
    (SELECT count(*) FROM opsq.submissions_failed
      WHERE finished_at > now() - interval '1 hour') AS failed_last_hour,
    (SELECT coalesce(sum(chunks_done), 0) FROM opsq.submissions_completed
      WHERE finished_at > coalesce(@since::timestamptz, now()))
  + (SELECT coalesce(sum(chunks_done), 0) FROM opsq.submissions_failed
      WHERE finished_at > coalesce(@since::timestamptz, now()))
  + (SELECT coalesce(sum(chunks_done), 0) FROM opsq.submissions_cancelled
      WHERE finished_at > coalesce(@since::timestamptz, now())) AS done_finished_since,
    phases.running, phases.paused, phases.scheduled,
    phases.running_chunks_left, phases.paused_chunks_left, phases.scheduled_chunks_left,
    phases.next_scheduled_at,
    oldest.id AS oldest_id,
    oldest.created_at AS oldest_created_at,
    now() AS now
FROM (SELECT 1) AS one
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE p.phase = 'running') AS running,
           count(*) FILTER (WHERE p.phase = 'paused') AS paused,
           count(*) FILTER (WHERE p.phase = 'scheduled') AS scheduled,
           coalesce(sum(p.chunks_left) FILTER (WHERE p.phase = 'running'), 0)::bigint AS running_chunks_left,
           coalesce(sum(p.chunks_left) FILTER (WHERE p.phase = 'paused'), 0)::bigint AS paused_chunks_left,
           coalesce(sum(p.chunks_left) FILTER (WHERE p.phase = 'scheduled'), 0)::bigint AS scheduled_chunks_left,
           min(p.not_before) FILTER (WHERE p.phase = 'scheduled') AS next_scheduled_at
    FROM (SELECT s.chunks_total - s.chunks_done AS chunks_left, l.not_before,
                 CASE WHEN s.paused THEN 'paused'
                      WHEN l.not_before > now() THEN 'scheduled'
                      ELSE 'running' END AS phase
          FROM opsq.submissions s
          LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id) AS p
) AS phases
LEFT JOIN LATERAL (
    SELECT s.id, s.created_at
    FROM opsq.submissions s
    LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
    WHERE NOT s.paused AND coalesce(l.not_before <= now(), true)
    ORDER BY s.id
    LIMIT 1
) AS oldest ON true
