-- On Citus, candidates_custom_priority.sql in steps, as the lateral join it does in one
-- statement (submissions, U, each joined to its own chunks, S) is refused there ("complex
-- joins are only supported when all distributed tables are co-located"). First, this
-- statement: the in-progress submissions in priority order (the negated priority, then the
-- id), a page of @limit of them (the one statement's outer scan goes on as long as it must
-- to fill @limit), each with the instance's shards (the same /*shards*/ arguments,
-- returned as an array); /*filters*/ filter the submissions (on s.id), as there. Then, for
-- each of them in that order until @limit chunks came back, the next statement: its chunks
-- on those shards in chunk order; past the page's last submission, the next page
-- (CandidatesStream runs the steps: Queries.candidatesCustomPriorityCitus). The same rows
-- in the same order as the one statement; a statement per submission read, so
-- custom_priority costs more there than the other orders do.
-- Citus: multi-shard read (U), ORDER BY and LIMIT pushed down; then per submission a multi-shard read (S, pruned to the shards of @shards), ORDER BY and LIMIT pushed down.
SELECT s.id, -s.priority AS neg_priority, ARRAY[/*shards*/]::int[] AS shards
FROM opsq.submissions s
WHERE (-s.priority, s.id) >= (@after_priority::bigint, @after_submission::bigint)/*filters*/
ORDER BY -s.priority, s.id
LIMIT @limit
-- next statement
SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, @neg_priority::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.submission_id = @id::bigint
  AND c.shard = ANY(@shards::int[])
  AND c.chunk_index > @after_chunk::int
ORDER BY c.chunk_index
LIMIT @limit
