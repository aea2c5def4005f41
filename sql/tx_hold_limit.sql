-- Bounds how long the current transaction may hold its locks: PostgreSQL ends the session
-- of one left idle in it longer than @ms milliseconds (its client stopped: SIGSTOP, a
-- pause), so that another session waiting on its locks goes on, and cancels a statement
-- of it that runs longer than twice that (the transaction aborts and its locks go). Twice:
-- a statement of it that waits on another such transaction's locks outlasts the other's
-- idle limit, so the stopped holder's end frees it rather than its own cancel (with the
-- same bound, the two fired together). Both
-- settings are the transaction's own (set_config local), gone at its end. Not bounded: a
-- COPY FROM STDIN whose client stops mid-stream (PostgreSQL does not act on a cancel while
-- it waits for the client's COPY data).
-- Citus: coordinator-local (sets the coordinator session's settings only; Citus does not
-- propagate them to the workers, whose statements the coordinator's timeout bounds).
SELECT set_config('statement_timeout', (2 * @ms::bigint)::text, true),
       set_config('idle_in_transaction_session_timeout', @ms::bigint::text, true)
