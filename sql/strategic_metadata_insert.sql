-- A submission's strategic metadata, one row per key, and its tenant under the reserved
-- key "@tenant" (migrations/00009_tenants.sql says why).
-- Citus: an insert into the reference table: written on every node.
INSERT INTO opsq.strategic_metadata (key, value, submission_id)
SELECT kv.key, kv.value, @submission_id::bigint
FROM jsonb_each(@strategic_metadata::jsonb) AS kv
UNION ALL
SELECT '@tenant', to_jsonb(@tenant::text), @submission_id::bigint
