-- Throttles and rate limits (DESIGN.md §3 POST /v1/throttle, §5 rate_limit).
--
-- - opsq.throttles: back-pressure from consumers. While until is in the future no chunk
--   of a submission whose strategic metadata has key = value (or, under the key "@tenant",
--   whose tenant is value) is handed out by any instance. tenant is '' for a throttle of
--   every tenant, or the one tenant a confined consumer throttled within (one row per
--   tenant of the consumer). A throttle set again keeps the later end. Each instance caches
--   the live rows (reloaded on the NOTIFY opsq_throttles and every few seconds); ended
--   rows are deleted by the instances' collection job.
-- - opsq.rate_buckets: one token bucket per rate_limit key, value, rate and burst (see
--   docs/rates.md): tokens as they were at updated_at, out of capacity. Instances lease
--   tokens from it in slices (opsq.take_rate_tokens), a row per value in use; a row that
--   would be full again is deleted by the collection job (recreated full when asked).

-- +goose Up
CREATE TABLE opsq.throttles (
    key    text NOT NULL,
    value  jsonb NOT NULL,
    tenant text NOT NULL DEFAULT '',
    until  timestamptz NOT NULL,
    PRIMARY KEY (key, value, tenant)
);

CREATE TABLE opsq.rate_buckets (
    key        text NOT NULL,
    value      jsonb NOT NULL,
    per_second float8 NOT NULL CHECK (per_second > 0),
    capacity   int NOT NULL CHECK (capacity >= 1),
    tokens     float8 NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (key, value, per_second, capacity)
);

-- Takes up to p_want whole tokens of a bucket (created full), after giving back
-- p_returned tokens leased earlier and not used; returns how many it took. The bucket's
-- row lock orders the takes of every instance; clock_timestamp(), read under the lock,
-- keeps updated_at from going back when transactions that began in one order take the
-- lock in the other.
-- +goose StatementBegin
CREATE FUNCTION opsq.take_rate_tokens(p_key text, p_value jsonb, p_per_second float8,
    p_capacity int, p_want int, p_returned int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    have float8;
    last timestamptz;
    t    timestamptz;
    got  int;
BEGIN
    INSERT INTO opsq.rate_buckets (key, value, per_second, capacity, tokens, updated_at)
    VALUES (p_key, p_value, p_per_second, p_capacity, p_capacity, clock_timestamp())
    ON CONFLICT DO NOTHING;
    SELECT tokens, updated_at INTO have, last
    FROM opsq.rate_buckets
    WHERE key = p_key AND value = p_value AND per_second = p_per_second AND capacity = p_capacity
    FOR UPDATE;
    t := greatest(last, clock_timestamp());
    have := least(p_capacity, have + p_returned + p_per_second * extract(epoch FROM t - last)::float8);
    got := greatest(0, least(p_want, floor(have)))::int;
    UPDATE opsq.rate_buckets SET tokens = have - got, updated_at = t
    WHERE key = p_key AND value = p_value AND per_second = p_per_second AND capacity = p_capacity;
    RETURN got;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION opsq.take_rate_tokens(text, jsonb, float8, int, int, int);
DROP TABLE opsq.rate_buckets;
DROP TABLE opsq.throttles;
