-- The reservations are over (completed, failed, expired): their slots are free.
-- Citus: the coordinator's own tables.
DELETE FROM opsq.simultaneous_holds WHERE token = ANY(@tokens::text[])
