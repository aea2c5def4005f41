-- On Citus, the first step of chunks_complete.sql for the chunks of one opsq shard: the
-- reservable and the waiting chunks among them are deleted, those deleted come back (the
-- first completion of each). The key as two arrays zipped in the select list: Citus
-- cannot send a multi-array unnest with a column list to a worker.
-- Citus: router (S, by @shard): both tables are on the node of @shard.
WITH keys AS (
    SELECT unnest(@submission_ids::bigint[]) AS submission_id, unnest(@chunk_indexes::int[]) AS chunk_index
), ready AS (
    DELETE FROM opsq.chunks c
    USING keys k
    WHERE c.shard = @shard::int AND c.submission_id = k.submission_id AND c.chunk_index = k.chunk_index
    RETURNING c.submission_id, c.chunk_index
), waiting AS (
    DELETE FROM opsq.chunks_waiting w
    USING keys k
    WHERE w.shard = @shard::int AND w.submission_id = k.submission_id AND w.chunk_index = k.chunk_index
    RETURNING w.submission_id, w.chunk_index
)
SELECT submission_id, chunk_index FROM ready
UNION ALL
SELECT submission_id, chunk_index FROM waiting
