-- On one PostgreSQL (opsq.chunks one table, migration 00026), a leaf's candidates over
-- several shards: its skeleton once per shard, /*branches*/, each with c.shard = that
-- shard's argument and its own ORDER BY and LIMIT (an ordered scan of an index that leads
-- with the shard), joined by UNION ALL and merged by a Merge Append in the leaf's order,
-- /*order*/ (the skeleton's own ORDER BY and LIMIT, whose c.* names are the branches'
-- columns here). The skeleton's IN list over one table would read every row of the range
-- on all the shards and sort them; over 64 partitions it pruned to the instance's, but
-- rescanning the partitions' Append cost the complete statement half its CPU.
-- Citus: not used there: the candidate queries keep their IN list (sql/candidates.go).
SELECT * FROM (
/*branches*/
) c
/*order*/
