-- A large object-storage submission went in (in the transaction that inserts its row), or
-- its slices were removed. The number of rows deleted: 0 when the resume job took the
-- ingest for dead and removed its slices (the submission must not go in then).
-- Citus: the coordinator's own tables.
DELETE FROM opsq.ingests WHERE submission_id = @submission_id
