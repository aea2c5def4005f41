package sql

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed retention_expired.sql
var retentionExpired string

// RetentionExpiredParams are retention_expired.sql's.
type RetentionExpiredParams struct {
	Cutoff time.Time // finished before it
	Limit  int
}

// RetentionExpired returns the ids of up to p.Limit submissions that finished before
// p.Cutoff.
func (q Queries) RetentionExpired(ctx context.Context, p RetentionExpiredParams) ([]int64, error) {
	rows, err := q.db.Query(ctx, retentionExpired, pgx.NamedArgs{"cutoff": p.Cutoff, "limit": p.Limit})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

//go:embed retention_delete_chunks.sql
var retentionDeleteChunks string

// RetentionDeleteChunksParams are retention_delete_chunks.sql's.
type RetentionDeleteChunksParams struct {
	SubmissionID int64
	Batch        int // rows deleted at most, of each table
}

// RetentionDeleteChunks deletes a batch of a finished submission's chunk rows and returns
// how many it deleted.
func (q Queries) RetentionDeleteChunks(ctx context.Context, p RetentionDeleteChunksParams) (int64, error) {
	var n int64
	err := q.db.QueryRow(ctx, retentionDeleteChunks, pgx.NamedArgs{"submission_id": p.SubmissionID, "batch": p.Batch}).Scan(&n)
	return n, err
}

//go:embed retention_delete_submission.sql
var retentionDeleteSubmission string

// RetentionDeleteSubmissionParams are retention_delete_submission.sql's.
type RetentionDeleteSubmissionParams struct {
	SubmissionID int64
}

// RetentionDeleteSubmission deletes a finished submission (its chunk rows gone already),
// its strategic metadata and its idempotency key.
func (q Queries) RetentionDeleteSubmission(ctx context.Context, p RetentionDeleteSubmissionParams) error {
	_, err := q.db.Exec(ctx, retentionDeleteSubmission, pgx.NamedArgs{"submission_id": p.SubmissionID})
	return err
}
