-- Citus: the coordinator's own tables.
DELETE FROM opsq.instances WHERE id = @id
