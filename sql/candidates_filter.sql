-- One strategic metadata filter of a candidate query: a semi-join probe of the strategic
-- metadata primary key per row (or per submission), on the submission id column /*id*/.
-- /*n*/ numbers the filter, /*key*/ is the argument of its key, /*value*/ "= @arg::jsonb"
-- for one value or "= ANY(@arg::text[]::jsonb[])" for several. OFFSET 0 keeps the planner from
-- turning the probe into a join, which for a selective value would gather the matching
-- chunks and sort them.
-- Citus: a skeleton, not a statement: filled into the candidate queries (multi-shard reads of the reference table on each node).
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m/*n*/ WHERE m/*n*/.key = /*key*/ AND m/*n*/.value /*value*/ AND m/*n*/.submission_id = /*id*/ OFFSET 0)
