-- The database's clock, the one time every instance agrees on (a schedule's runs are
-- counted from it, as the claims' expiries are).
SELECT now()
