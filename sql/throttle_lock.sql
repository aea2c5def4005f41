-- Takes the transaction's advisory locks @locks, in the order given (the caller sorts
-- them, so that two setters never wait for each other in a cycle): a tenant's and an API
-- key's, which order the setters of throttles counted against the same bound.
-- Citus: no table: advisory locks of the coordinator.
SELECT count(pg_advisory_xact_lock(l)) FROM unnest(@locks::bigint[]) AS l
