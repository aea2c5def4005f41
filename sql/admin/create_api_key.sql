-- Create an API key from a key you generate; the table keeps only its SHA-256, so the key
-- itself never reaches the server, its logs or your shell's command line. Generate the key
-- ("opsq_" and 32 random bytes in base64url, like "opsq keys create" makes), then pass its
-- hash, the key's name (unique, 1-64 of A-Z a-z 0-9 . _ -), its role (producer, consumer,
-- admin or metrics) and its expiry (a PostgreSQL interval such as '90 days', or never):
--
--   KEY="opsq_$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=')"
--   psql "$OPSQ_DATABASE_URL" -v name=ci-producer -v role=producer -v expires='90 days' \
--        -v sha256="$(printf %s "$KEY" | sha256sum | cut -c1-64)" -f sql/admin/create_api_key.sql
--   echo "$KEY"   # give it to its user; it cannot be shown again
--
-- Every instance accepts it within a second (the table's trigger notifies them).
\set ON_ERROR_STOP on
INSERT INTO opsq.api_keys (name, role, sha256, expires_at)
VALUES (:'name', :'role', decode(:'sha256', 'hex'),
        now() + nullif(:'expires', 'never')::interval)
RETURNING id, name, role, created_at, expires_at;
