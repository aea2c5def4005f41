-- The cluster secret that signs reservation tokens (DESIGN.md §8), and that instances may use
-- to sign what they send each other. A key is a row. The newest (highest id) signs once it
-- is a minute old (every instance has loaded it by then), and an older one keeps verifying
-- until 24 h 2 min (the longest lease, plus margins) after the next newer key was created:
-- see queuer/keyring.go and migrations/README.md. Rotate with
-- sql/admin/rotate_cluster_key.sql. Nothing but opsq reads this table: its secrets must
-- never be logged or shown.

-- +goose Up
CREATE TABLE opsq.cluster_keys (
    id         int PRIMARY KEY,
    secret     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The first key: 32 bytes from two version-4 UUIDs (gen_random_uuid, core PostgreSQL since
-- 13, drawn from the server's strong random source): 244 random bits, no extension needed.
-- Made by the server, so no secret travels in the statement (nor reaches a statement log).
-- A database copied from this one (CREATE DATABASE … TEMPLATE, a restored dump) shares the
-- secret: rotate it there.
INSERT INTO opsq.cluster_keys (id, secret)
VALUES (1, decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- +goose Down
DROP TABLE opsq.cluster_keys;
