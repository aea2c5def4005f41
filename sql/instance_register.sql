-- Register an instance under the lowest node id no other instance holds.
-- Citus: the coordinator's own tables.
INSERT INTO opsq.instances (id, node_id, advertise_url, version)
SELECT @id, n, @advertise_url, @version
FROM generate_series(0, 1023) AS n
WHERE NOT EXISTS (SELECT 1 FROM opsq.instances i WHERE i.node_id = n)
ORDER BY n
LIMIT 1
RETURNING node_id
