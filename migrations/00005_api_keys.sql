-- API keys (DESIGN.md §8): who may call the REST API, and in which role. A request carries
-- "Authorization: Bearer <key>"; the table holds the SHA-256 of each key, never the key.
-- Instances cache the rows and reload them on a NOTIFY on opsq_api_keys (sent by the
-- trigger below, so that keys made or revoked with psql take effect at once too) and every
-- 30 s. Make, list and revoke keys with "opsq keys" or sql/admin/*_api_key*.sql.

-- +goose Up
CREATE TABLE opsq.api_keys (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9._-]{1,64}$'),
    role         text NOT NULL CHECK (role IN ('producer', 'consumer', 'admin', 'metrics')),
    sha256       bytea NOT NULL UNIQUE CHECK (octet_length(sha256) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    -- Written by the instances at most once a minute per key and instance: it changes no
    -- answer, so it does not notify.
    last_used_at timestamptz
);

-- +goose StatementBegin
CREATE FUNCTION opsq.api_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('opsq_api_keys', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER api_keys_notify
AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF name, role, sha256, expires_at, revoked_at
ON opsq.api_keys
FOR EACH STATEMENT EXECUTE FUNCTION opsq.api_keys_notify();

-- The key that created a submission (null without keys, OPSQ_AUTH=off): a producer key
-- cancels only the submissions it created. Only in-progress submissions can be cancelled,
-- so the finished tables do not keep it.
ALTER TABLE opsq.submissions ADD COLUMN created_by_key bigint;

-- +goose Down
ALTER TABLE opsq.submissions DROP COLUMN created_by_key;
DROP TABLE opsq.api_keys;
DROP FUNCTION opsq.api_keys_notify();
