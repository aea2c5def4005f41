-- The ended submissions whose move by slices was cut (migrations 00014): cancelled or
-- failed over @after_secs seconds ago (by the database's clock), their counts short of their total, oldest first, up to @limit.
-- Each is read through its partial index, which holds only such rows.
-- Citus: multi-shard read (U), ORDER BY and LIMIT pushed down.
(SELECT id, chunks_total, false AS failed, finished_at FROM opsq.submissions_cancelled
 WHERE chunks_done + chunks_failed + chunks_skipped < chunks_total AND finished_at < now() - make_interval(secs => @after_secs)
 ORDER BY finished_at LIMIT @limit)
UNION ALL
(SELECT id, chunks_total, true AS failed, finished_at FROM opsq.submissions_failed
 WHERE chunks_done + chunks_failed + chunks_skipped < chunks_total AND finished_at < now() - make_interval(secs => @after_secs)
 ORDER BY finished_at LIMIT @limit)
ORDER BY finished_at
LIMIT @limit
