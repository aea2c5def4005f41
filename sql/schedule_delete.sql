-- Deletes a schedule and its runs. No row: no such schedule.
DELETE FROM opsq.schedules WHERE tenant = @tenant AND name = @name RETURNING id
