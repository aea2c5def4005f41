-- What the failures page says of each of its chunks (chunk_errors_page.sql; @shards their
-- shards, for one primary-key probe into opsq.chunks each): "failed" when its attempts are
-- spent (in chunks_failed, not skipped), "skipped" (in chunks_failed, skipped: its
-- submission failed or was cancelled), "retrying" (still to be handed out or in flight),
-- else "completed" (it failed before and then completed); its retries count wherever the
-- chunk is (a completed chunk's: how many of its failures are kept); its last @kept
-- errors, newest first, as three arrays in the same order.
-- Citus: multi-shard, recursively planned: the chunks and the waiting ones on every shard
-- (S), the failed ones and the errors (U) read as subplans through the coordinator.
SELECT i.chunk_index,
       CASE WHEN f.skipped = false THEN 'failed'
            WHEN f.skipped THEN 'skipped'
            WHEN c.chunk_index IS NOT NULL OR w.chunk_index IS NOT NULL THEN 'retrying'
            ELSE 'completed' END AS state,
       coalesce(c.retries, w.retries, f.retries, e.kept, 0) AS retries,
       e.errors, e.consumers, e.ats
FROM unnest(@chunk_indexes::int[], @shards::int[]) AS i(chunk_index, shard)
LEFT JOIN opsq.chunks c
       ON c.shard = i.shard AND c.submission_id = @submission_id AND c.chunk_index = i.chunk_index
LEFT JOIN opsq.chunks_waiting w
       ON w.submission_id = @submission_id AND w.chunk_index = i.chunk_index
LEFT JOIN opsq.chunks_failed f
       ON f.submission_id = @submission_id AND f.chunk_index = i.chunk_index
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(t.error ORDER BY t.attempt DESC), '{}') AS errors,
           coalesce(array_agg(t.consumer ORDER BY t.attempt DESC), '{}') AS consumers,
           coalesce(array_agg(t.at ORDER BY t.attempt DESC), '{}') AS ats,
           count(*)::int AS kept
    FROM (SELECT ce.error, ce.consumer, ce.at, ce.attempt
          FROM opsq.chunk_errors ce
          WHERE ce.submission_id = @submission_id AND ce.chunk_index = i.chunk_index
          ORDER BY ce.attempt DESC
          LIMIT @kept) t
) e
ORDER BY i.chunk_index
