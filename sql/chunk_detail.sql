-- One chunk of a submission, for the dashboard's chunk page (read only): where it is and
-- the first @max_bytes of what it holds, with the whole sizes. 'pending' (in opsq.chunks:
-- reservable, or reserved: reservations are in memory only), 'waiting' (in
-- opsq.chunks_waiting until ready_at: a retry's backoff, or not_before; NULL while its
-- submission is paused, until resumed), 'failed' or 'skipped' (in opsq.chunks_failed, with its last
-- error), 'completed' (its output, from the completed batch that holds it). No row: none
-- of these (a skipped chunk its submission counted without a row, or one not stored yet).
-- Each branch is a primary-key probe but the last, which walks the submission's batches
-- down from @chunk_index (a batch is named by its smallest index) to the one holding it.
-- Citus: multi-shard: the chunk on @shard's node (S), the waiting one on every shard (S,
-- not read by shard), the failed and completed ones by @submission_id (U).
SELECT 'pending' AS state, c.retries, substring(c.input FROM 1 FOR @max_bytes) AS input,
       octet_length(c.input) AS input_size, NULL::bytea AS output, NULL::int AS output_size,
       NULL::timestamptz AS ready_at, NULL::text AS error
FROM opsq.chunks c
WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
UNION ALL
SELECT 'waiting', w.retries, substring(w.input FROM 1 FOR @max_bytes), octet_length(w.input),
       NULL, NULL, CASE WHEN w.ready_at <> 'infinity' THEN w.ready_at END, NULL
FROM opsq.chunks_waiting w
WHERE w.submission_id = @submission_id AND w.chunk_index = @chunk_index
UNION ALL
SELECT CASE WHEN f.skipped THEN 'skipped' ELSE 'failed' END, f.retries,
       substring(f.input FROM 1 FOR @max_bytes), octet_length(f.input), NULL, NULL, NULL,
       CASE WHEN f.skipped THEN NULL ELSE f.error END
FROM opsq.chunks_failed f
WHERE f.submission_id = @submission_id AND f.chunk_index = @chunk_index
UNION ALL
(SELECT 'completed', 0, NULL, NULL, substring(o.output FROM 1 FOR @max_bytes), octet_length(o.output), NULL, NULL
 FROM opsq.completed_batches b, unnest(b.chunk_indexes, b.outputs) AS o(chunk_index, output)
 WHERE b.submission_id = @submission_id AND b.first_index <= @chunk_index AND o.chunk_index = @chunk_index
 ORDER BY b.first_index DESC
 LIMIT 1)
LIMIT 1
