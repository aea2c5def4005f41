-- The database's clock, the one time every instance agrees on (a schedule's runs are
-- counted from it, as the claims' expiries are).
-- Citus: no table: the coordinator's clock.
SELECT now()
