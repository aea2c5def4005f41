-- No row back means the instance was forgotten: its node id may belong to another now.
-- Citus: the coordinator's own tables.
UPDATE opsq.instances
SET heartbeat_at = now()
WHERE id = @id AND node_id = @node_id
RETURNING draining
