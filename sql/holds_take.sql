-- One max_simultaneous slot per key of the reservation, all or nothing (the statement runs
-- in one transaction: a refused slot rolls back the others through the caller).
-- Citus: a function of the coordinator over its own tables (its advisory lock is the
-- coordinator's).
SELECT opsq.take_simultaneous_slot(@token, @key, @value::jsonb, @submission_id, @chunk_index, @shard, @generation, @max)
