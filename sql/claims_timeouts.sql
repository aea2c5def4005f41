-- The short timeouts of a claims transaction (claims.retrySerializable), for the rest of
-- the transaction only, as SET LOCAL sets them: a claims statement does not queue long
-- behind a lock, and an instance paused mid-transaction does not hold its locks long.
-- Citus: no table: settings of the coordinator's transaction.
SELECT set_config('lock_timeout', @lock_timeout, true),
       set_config('idle_in_transaction_session_timeout', @idle_in_transaction_session_timeout, true)
