-- Remove the chunks @from to @to (excluded) of a submission that was never inserted whole:
-- an object-storage submission cut while its slices went in (queuer/internal/submissions/submit.go),
-- whose submission row does not exist. One primary-key range per shard, in each table.
-- Citus: multi-shard deletes (S, every shard: by submission, not by shard), the CTE's
-- first.
WITH ready AS (
    DELETE FROM opsq.chunks
    WHERE submission_id = @submission_id AND chunk_index >= @from::int AND chunk_index < @to::int
)
DELETE FROM opsq.chunks_waiting
WHERE submission_id = @submission_id AND chunk_index >= @from::int AND chunk_index < @to::int
