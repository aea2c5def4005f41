-- The finished chunks of a submission from chunk index @from on, in chunk order: completed
-- ones with their output (completed_batches, as the view opsq.chunks_completed unnests it),
-- failed ones with their error, skipped ones. The chunks in neither are pending: the caller
-- fills those gaps. With @until_pending, only the chunks before the first pending chunk at
-- or after @from (in opsq.chunks, reserved or not, or in opsq.chunks_waiting): what a
-- follower may write now, read in one snapshot with the bound. A completed batch whose
-- first index is past the bound is not unnested (first_index is its smallest index).
-- Citus: router (U, by @submission_id), its bound read from the chunks (S) first.
WITH bound AS (
    SELECT CASE WHEN @until_pending::boolean THEN least(
        (SELECT min(c.chunk_index) FROM opsq.chunks c
          WHERE c.submission_id = @submission_id AND c.chunk_index >= @from::int),
        (SELECT min(w.chunk_index) FROM opsq.chunks_waiting w
          WHERE w.submission_id = @submission_id AND w.chunk_index >= @from::int))
    END AS until
)
SELECT c.chunk_index, 'completed' AS state, c.output, NULL::text AS error
FROM opsq.completed_batches b, unnest(b.chunk_indexes, b.outputs) AS c(chunk_index, output)
WHERE b.submission_id = @submission_id
  AND b.first_index < coalesce((SELECT until FROM bound), 2147483647)
  AND c.chunk_index >= @from::int
  AND c.chunk_index < coalesce((SELECT until FROM bound), 2147483647)
UNION ALL
SELECT f.chunk_index, CASE WHEN f.skipped THEN 'skipped' ELSE 'failed' END, NULL,
       CASE WHEN f.skipped THEN NULL ELSE f.error END
FROM opsq.chunks_failed f
WHERE f.submission_id = @submission_id
  AND f.chunk_index >= @from::int
  AND f.chunk_index < coalesce((SELECT until FROM bound), 2147483647)
ORDER BY chunk_index
