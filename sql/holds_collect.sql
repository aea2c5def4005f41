-- Holds that no longer count: their shard changed owner (or was released) since they were
-- taken, or their submission is no longer in progress.
-- Citus: has a Citus form, holds_collect_citus.sql (layout.go): as it is, its probe of the
-- submissions from the coordinator's table is refused.
DELETE FROM opsq.simultaneous_holds h
WHERE NOT EXISTS (SELECT 1 FROM opsq.shard_claims c
                  WHERE c.shard = h.shard AND c.generation = h.generation AND c.claimant IS NOT NULL)
   OR NOT EXISTS (SELECT 1 FROM opsq.submissions s WHERE s.id = h.submission_id)
