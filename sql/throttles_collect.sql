-- Deletes the throttles that ended.
DELETE FROM opsq.throttles WHERE until < now()
