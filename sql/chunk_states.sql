-- Which of a batch of chunks opsq knows (the completer's answer for completions that
-- completed nothing): a known chunk is pending or finished (completed, failed, or its
-- submission finished), so the completion is already_finished; any other is unknown. One
-- row per input, by its position (ord, from 1). One statement for the whole batch, however
-- many stale tokens it holds; each input is looked up by primary keys (the LIMIT keeps the
-- planner from hashing whole tables instead).
-- Citus: has a Citus form (layout.go, chunkStatesCitus): chunk_state_shard.sql and
-- chunk_state_submission.sql per chunk, router each; as it is, its joins across the groups
-- are refused.
SELECT t.ord, k.known IS NOT NULL AS known
FROM unnest(@shards::int[], @submission_ids::bigint[], @chunk_indexes::int[])
    WITH ORDINALITY AS t(shard, submission_id, chunk_index, ord)
LEFT JOIN LATERAL (
    SELECT true AS known FROM opsq.chunks c
    WHERE c.shard = t.shard AND c.submission_id = t.submission_id AND c.chunk_index = t.chunk_index
    UNION ALL
    -- Completed: no longer in opsq.chunks while its submission is in progress (the branch
    -- above comes first). Completions are stored a batch to a row, with no key per chunk.
    SELECT true FROM opsq.submissions s WHERE s.id = t.submission_id AND t.chunk_index < s.chunks_total
    UNION ALL
    SELECT true FROM opsq.chunks_failed c WHERE c.submission_id = t.submission_id AND c.chunk_index = t.chunk_index
    UNION ALL
    SELECT true FROM opsq.submissions_completed s WHERE s.id = t.submission_id
    UNION ALL
    SELECT true FROM opsq.submissions_failed s WHERE s.id = t.submission_id
    UNION ALL
    SELECT true FROM opsq.submissions_cancelled s WHERE s.id = t.submission_id
    LIMIT 1
) k ON true
