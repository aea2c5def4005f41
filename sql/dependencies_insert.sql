-- Record a new child's parents, in its submit's transaction: its policy, whether its chunks
-- wait for its parents (@waiting: they went into opsq.chunks_waiting at 'infinity'), and one
-- row per parent with its place in "after" (a parent named twice is recorded once, at its
-- first place). Local tables on Citus (migrations/00022).
-- Citus: the coordinator's own tables.
WITH after AS (
    INSERT INTO opsq.submission_after (id, policy, waiting) VALUES (@child, @policy, @waiting)
)
INSERT INTO opsq.submission_parents (child, parent, position)
SELECT @child, p.id, min(p.position) - 1
FROM unnest(@parents::bigint[]) WITH ORDINALITY AS p(id, position)
GROUP BY p.id
