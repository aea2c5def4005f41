-- On Citus, holds_collect.sql in two steps (its probe of submissions, distributed, from a
-- DELETE of the coordinator's holds is not pushed down): the submissions of the holds
-- still in progress are read first, then the holds deleted whose claim is gone or whose
-- submission is not among them. A submission that ends between the two keeps its holds
-- to the next collection.
-- Citus: a multi-shard read (U), then the coordinator's own table.
SELECT s.id FROM opsq.submissions s
WHERE s.id = ANY(ARRAY(SELECT DISTINCT h.submission_id FROM opsq.simultaneous_holds h))
-- next statement
DELETE FROM opsq.simultaneous_holds h
WHERE NOT EXISTS (SELECT 1 FROM opsq.shard_claims c
                  WHERE c.shard = h.shard AND c.generation = h.generation AND c.claimant IS NOT NULL)
   OR NOT h.submission_id = ANY(@in_progress::bigint[])
