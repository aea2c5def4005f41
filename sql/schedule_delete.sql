-- Deletes a schedule and its runs. No row: no such schedule.
-- Citus: the coordinator's own tables.
DELETE FROM opsq.schedules WHERE tenant = @tenant AND name = @name RETURNING id
