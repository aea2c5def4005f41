-- The children of submission @parent (the submissions sent after it), for its dashboard
-- page: the first @limit by id, each with its state, and how many it has, counted up to
-- @count_max (one row per child; the count on each). A range of submission_parents'
-- index on parent, then each child's status by id.
-- Citus: submission_parents is the coordinator's own table, read first; its ids then read
-- the distributed submission tables (U) by id, by Citus's local-distributed join.
WITH kids AS (
    SELECT child FROM opsq.submission_parents WHERE parent = @parent ORDER BY child LIMIT @limit
)
SELECT s.id, s.state,
       (SELECT count(*) FROM (SELECT 1 FROM opsq.submission_parents WHERE parent = @parent LIMIT @count_max) n) AS total
FROM opsq.submission_status s
WHERE s.id = ANY(ARRAY(SELECT child FROM kids))
ORDER BY s.id
