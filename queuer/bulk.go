package queuer

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/submissions"
)

// Bulk fills for the benchmark and the tests, which need backlogs of hundreds of
// thousands of submissions faster than the API makes them. They write the tables
// directly, with no instance involved; nothing in serving uses them.

// SubmitMany inserts n single-chunk submissions, the i-th as at(i) describes it, in one
// transaction, reporting the rows written to progress (nil for none).
func SubmitMany(ctx context.Context, pool *pgxpool.Pool, n int64, at func(i int64) SmallSubmission, progress func(rows int64)) error {
	return submissions.SubmitMany(ctx, pool, n, at, progress)
}

// CancelMany cancels the submissions ids in batches, reporting how many are done to
// progress (nil for none), and returns how many it cancelled.
func CancelMany(ctx context.Context, pool *pgxpool.Pool, ids []int64, progress func(done int)) (int64, error) {
	return submissions.CancelMany(ctx, pool, ids, progress)
}
