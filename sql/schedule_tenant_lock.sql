-- Takes the transaction's advisory lock on @tenant's schedules: the creates of one tenant
-- count its schedules and insert one in turn, so that two creates at PerTenantMax - 1 do
-- not both pass the bound (schedule_insert.sql's count sees the snapshot of its statement,
-- taken after this lock).
-- Citus: no table: an advisory lock of the coordinator.
SELECT pg_advisory_xact_lock(hashtextextended('opsq.schedules/' || @tenant::text, 0))
