-- Tell every instance that submissions @ids finished with chunks it may hold reservations
-- of (queuer.CancelMany): the notifications queuer's notifyDropped sends for one.
SELECT pg_notify(@released, '*' || id), pg_notify(@finished, id::text)
FROM unnest(@ids::bigint[]) AS id
