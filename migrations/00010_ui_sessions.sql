-- The dashboard's sessions (DESIGN.md §8): an admin key given once on the login page is
-- exchanged for a session, whose id alone the browser keeps in its cookie. The id is 32
-- random bytes; the table holds its SHA-256, never the id, so a read of the table (a
-- backup, a replica) logs nobody in. A session ends after 12 h, at logout (its row is
-- deleted), or when its key is revoked or expires (each request checks the key in the
-- instance's cache). Expired rows are deleted by the next login. Stored in PostgreSQL so
-- that every instance behind a load balancer knows every session.
-- (00009 is left to the tenants migration, built beside this one.)

-- +goose Up
CREATE TABLE opsq.ui_sessions (
    id_sha256  bytea PRIMARY KEY CHECK (length(id_sha256) = 32),
    key_id     bigint NOT NULL REFERENCES opsq.api_keys (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX ui_sessions_expires_at ON opsq.ui_sessions (expires_at);

-- +goose Down
DROP TABLE opsq.ui_sessions;
