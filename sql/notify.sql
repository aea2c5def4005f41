-- Send payload on channel, at the commit of the transaction it runs in.
-- Citus: no table: a NOTIFY from the coordinator's session, where the instances LISTEN.
SELECT pg_notify(@channel, @payload)
