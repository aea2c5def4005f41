-- The key that created an in-progress submission (null: none, or made without keys). No row:
-- the submission is finished or unknown.
SELECT created_by_key FROM opsq.submissions WHERE id = @id
