-- The reservations are over (completed, failed, expired): their slots are free.
DELETE FROM opsq.simultaneous_holds WHERE token = ANY(@tokens::text[])
