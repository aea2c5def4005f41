-- The ended submissions whose pending chunks are not all moved yet: a cancel or a fail of
-- a large submission moves its row first and its chunks after, by committed slices
-- (queuer/submissions/slices.go); a stop or a crash between two slices leaves the rest in
-- opsq.chunks / opsq.chunks_waiting, and the row's counts short of its total. Every
-- instance's resume job (every minute) finishes such moves; these partial indexes hold
-- only those rows, so that it finds them without reading the finished tables: empty
-- nearly always, an entry per large cancel or fail while its slices run.

-- +goose Up
CREATE INDEX submissions_cancelled_unmoved ON opsq.submissions_cancelled (finished_at)
    WHERE chunks_done + chunks_failed + chunks_skipped < chunks_total;
CREATE INDEX submissions_failed_unmoved ON opsq.submissions_failed (finished_at)
    WHERE chunks_done + chunks_failed + chunks_skipped < chunks_total;

-- +goose Down
DROP INDEX opsq.submissions_cancelled_unmoved, opsq.submissions_failed_unmoved;
