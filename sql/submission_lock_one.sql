-- On Citus, submissions_lock.sql one submission at a time: Citus locks rows only in a
-- statement on one shard (a multi-shard FOR UPDATE is refused), and this one is routed to
-- the node of @id. Sent for the batch's ids in id order, in one round trip.
-- Citus: router (U, by @id).
SELECT id FROM opsq.submissions WHERE id = @id FOR NO KEY UPDATE
