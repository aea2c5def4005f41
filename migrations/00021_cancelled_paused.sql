-- A submission cancelled while paused keeps its pause (issue 31, finding 13): a retry of its
-- unfinished chunks brings it back in progress still paused, its chunks waiting for a
-- resume, as a retry of a paused submission in progress leaves it. Without the column the
-- pause was lost with the move to submissions_cancelled, and a retry that won the race
-- with the cancel's slices un-paused the submission.
-- The default makes the column free to add; rows cancelled before were not paused for
-- this purpose (false).

-- +goose Up
ALTER TABLE opsq.submissions_cancelled ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE opsq.submissions_cancelled DROP COLUMN paused;
