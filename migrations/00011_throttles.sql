-- Throttles and rate limits (DESIGN.md §3 POST /v1/throttle, §5 rate_limit).
--
-- - opsq.throttles: back-pressure from consumers. While until is in the future no chunk
--   of a submission whose strategic metadata has key = value (or, under the key "@tenant",
--   whose tenant is value) is handed out by any instance. tenant is '' for a throttle of
--   every tenant, or the one tenant a confined consumer throttled within (one row per
--   tenant of the consumer). A throttle set again keeps the later end. Each instance caches
--   the live rows (reloaded on the NOTIFY opsq_throttles and every few seconds); expired
--   rows are deleted by the next throttle and by the instances' collection job.
-- - opsq.rate_buckets: one token bucket per rate_limit key, value and rate (see
--   docs/rates.md): tokens as they were at updated_at; instances lease tokens from it in
--   slices.

-- +goose Up
CREATE TABLE opsq.throttles (
    key    text NOT NULL,
    value  jsonb NOT NULL,
    tenant text NOT NULL DEFAULT '',
    until  timestamptz NOT NULL,
    PRIMARY KEY (key, value, tenant)
);

-- +goose Down
DROP TABLE opsq.throttles;
