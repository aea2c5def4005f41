-- Bounds how long the current transaction may hold its locks: PostgreSQL cancels a
-- statement of it that runs longer than @ms milliseconds (the transaction aborts and its
-- locks go), and ends the session of one left idle in it longer than that (its client
-- stopped: SIGSTOP, a pause), so that another session waiting on its locks goes on. Both
-- settings are the transaction's own (set_config local), gone at its end. Not bounded: a
-- COPY FROM STDIN whose client stops mid-stream (PostgreSQL does not act on a cancel while
-- it waits for the client's COPY data).
-- Citus: coordinator-local (sets the coordinator session's settings only; Citus does not
-- propagate them to the workers, whose statements the coordinator's timeout bounds).
SELECT set_config('statement_timeout', @ms::text, true),
       set_config('idle_in_transaction_session_timeout', @ms::text, true)
