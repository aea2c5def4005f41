-- On Citus, the outputs of one submission's chunks that a batch completed
-- (chunks_complete.sql's "stored", one row per submission as there).
-- Citus: router (U, by @submission_id).
INSERT INTO opsq.completed_batches (submission_id, first_index, chunk_indexes, outputs)
VALUES (@submission_id::bigint, @first_index::int, @chunk_indexes::int[], @outputs::bytea[])
