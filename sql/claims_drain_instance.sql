-- Mark @instance as draining (graceful shutdown), so that the other instances stop counting
-- it as live and take the shards it releases.
-- Citus: the coordinator's own tables.
UPDATE opsq.instances SET draining = true WHERE id = @instance
