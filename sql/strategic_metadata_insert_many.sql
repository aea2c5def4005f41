-- The strategic metadata of many submissions at once (queuer.SubmitMany): for each, what
-- strategic_metadata_insert.sql writes for one.
-- Citus: an insert into the reference table: written on every node.
INSERT INTO opsq.strategic_metadata (key, value, submission_id)
SELECT kv.key, kv.value, s.id
FROM unnest(@ids::bigint[], @strategic_metadata::jsonb[]) AS s(id, strategic_metadata),
     jsonb_each(s.strategic_metadata) AS kv
UNION ALL
SELECT '@tenant', to_jsonb(s.tenant), s.id
FROM unnest(@ids::bigint[], @tenants::text[]) AS s(id, tenant)
