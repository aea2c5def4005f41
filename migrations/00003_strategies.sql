-- What the strategies of DESIGN.md §5 need beyond the chunk indexes of 00001.

-- +goose Up

-- custom_priority: in-progress submissions by priority high -> low, then oldest, as one
-- ascending index on (-priority, id). One entry per submission: negligible at insert. The
-- API refuses the one priority that cannot be negated (-2^63).
CREATE INDEX submissions_priority ON opsq.submissions ((-priority), id);

-- max_simultaneous: the global in-flight chunks per (key, value). A hold belongs to one
-- reservation (its token) and to the claim of the chunk's shard it was taken under: when the
-- shard changes owner (a crash, a force-release), its generation moves on and the holds of
-- the old owner stop counting at once; a periodic job deletes them.
CREATE TABLE opsq.simultaneous_holds (
    token         text PRIMARY KEY,
    key           text NOT NULL,
    value         jsonb NOT NULL,
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    shard         int NOT NULL,
    generation    bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX simultaneous_holds_value ON opsq.simultaneous_holds (key, value);
CREATE INDEX simultaneous_holds_submission ON opsq.simultaneous_holds (submission_id);

-- Take one slot of (key, value) for a reservation if fewer than max_inflight valid holds
-- exist. The advisory lock serializes takers of the same value across instances, so two
-- cannot both take the last slot.
-- +goose StatementBegin
CREATE FUNCTION opsq.take_simultaneous_slot(p_token text, p_key text, p_value jsonb,
    p_submission_id bigint, p_chunk_index int, p_shard int, p_generation bigint,
    p_max int) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    held int;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('opsq.simultaneous/' || p_key || '/' || p_value::text, 0));
    SELECT count(*) INTO held
    FROM opsq.simultaneous_holds h
    JOIN opsq.shard_claims c ON c.shard = h.shard AND c.generation = h.generation AND c.claimant IS NOT NULL
    WHERE h.key = p_key AND h.value = p_value;
    IF held >= p_max THEN
        RETURN false;
    END IF;
    INSERT INTO opsq.simultaneous_holds (token, key, value, submission_id, chunk_index, shard, generation)
    VALUES (p_token, p_key, p_value, p_submission_id, p_chunk_index, p_shard, p_generation);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION opsq.take_simultaneous_slot(text, text, jsonb, bigint, int, int, bigint, int);
DROP TABLE opsq.simultaneous_holds;
DROP INDEX opsq.submissions_priority;
