-- The dashboard's own figures (api/ui); the rest of its overview is cluster_stats.sql's.
-- Counters over the in-progress submissions (at most about 10^5 rows) and the finished
-- ones of a recent window, never a count over chunks. done_finished_since is what the
-- submissions finished after @since had done: with done_in_progress of two samples it
-- gives the completions between them (queuer.Overview), so both are read together.
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
    oldest.id AS oldest_id,
    oldest.created_at AS oldest_created_at,
    now() AS now
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (SELECT id, created_at FROM opsq.submissions ORDER BY id LIMIT 1) AS oldest ON true
