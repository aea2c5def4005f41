-- Who set each throttle and when (issue 33), and what its bounds count (issue 31).
--
-- - set_by: the name of the API key whose throttle is in force ('' without keys,
--   OPSQ_AUTH=off); set_at: when that key set it. A throttle set again with a later end
--   takes the later setter; one set again with an earlier end changes nothing. The
--   dashboard lists both beside each throttle.
-- - The indexes serve the bounds a new throttle is checked against (sql/throttles_bound.sql):
--   the throttles in force of a tenant, and those of an API key.
-- The defaults make the columns free to add; rows set before have no setter ('').

-- +goose Up
ALTER TABLE opsq.throttles ADD COLUMN set_by text NOT NULL DEFAULT '';
ALTER TABLE opsq.throttles ADD COLUMN set_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX throttles_tenant ON opsq.throttles (tenant, until);
CREATE INDEX throttles_set_by ON opsq.throttles (set_by, until);

-- +goose Down
DROP INDEX opsq.throttles_set_by;
DROP INDEX opsq.throttles_tenant;
ALTER TABLE opsq.throttles DROP COLUMN set_at;
ALTER TABLE opsq.throttles DROP COLUMN set_by;
