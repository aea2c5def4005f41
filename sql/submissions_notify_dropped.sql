-- Tell every instance that submissions @ids finished with chunks it may hold reservations
-- of (they failed or were cancelled: queuer.notifyDropped, for one or many).
-- Citus: no table: NOTIFYs from the coordinator's session, where the instances LISTEN.
SELECT pg_notify(@released, '*' || id), pg_notify(@finished, id::text)
FROM unnest(@ids::bigint[]) AS id
