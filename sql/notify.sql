-- Send payload on channel, at the commit of the transaction it runs in.
SELECT pg_notify(@channel, @payload)
