-- In the transaction of a retry of submission @parent: the children it cancelled are to be
-- re-armed (waiting again, still cancelled, until dependents_rearm.sql's caller retries
-- them), so that a retry committed is never lost for them, even when the instance that
-- made it stops before it re-arms them. Returns whether there was any.
-- Citus: the coordinator's own tables.
WITH marked AS (
    UPDATE opsq.submission_after SET waiting = true
    WHERE cancelled_by = @parent AND NOT waiting
    RETURNING id
)
SELECT count(*) > 0 FROM marked
