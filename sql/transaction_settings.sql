-- The settings of the current transaction that the claims protocol relies on (its
-- isolation and the short timeouts claims_timeouts.sql sets): what a claims transaction
-- runs under, for its test and for an operator checking a session.
-- Citus: no table: settings of the coordinator's transaction.
SELECT current_setting('transaction_isolation') AS isolation,
       current_setting('lock_timeout') AS lock_timeout,
       current_setting('idle_in_transaction_session_timeout') AS idle_in_transaction_session_timeout
