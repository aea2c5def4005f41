-- Undo drain_instance.sql: the instance counts as live again and claims its share of the
-- shards at its next renewal (the others drain their surplus to make room).
--
--   psql "$OPSQ_DATABASE_URL" -v instance=opsq-7f3a -f sql/admin/undrain_instance.sql
UPDATE opsq.instances
SET draining = false
WHERE id = :'instance'
RETURNING id, advertise_url, draining;
