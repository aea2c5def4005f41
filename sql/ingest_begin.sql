-- A large object-storage submission begins to go in by slices (migration 00015).
-- Citus: the coordinator's own tables.
INSERT INTO opsq.ingests (submission_id, instance, chunk_count) VALUES (@submission_id, @instance, @chunk_count)
