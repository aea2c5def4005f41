package queuer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// Retention batch sizes: small, so that no statement holds locks or builds WAL for long.
const (
	retentionSubmissionBatch = 100
	retentionChunkBatch      = 5000
)

// DeleteExpired deletes the submissions that finished before now minus the retention
// setting, with their chunk rows, strategic metadata and idempotency keys, in small
// batches. It returns how many submissions it deleted. Several instances may run it at
// once; they only share the work.
func (s *submissions) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	settings, err := claims.LoadSettings(ctx, s.pool)
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-settings.Retention)
	deleted := 0
	for {
		rows, err := s.pool.Query(ctx, opsqsql.RetentionExpired, pgx.NamedArgs{"cutoff": cutoff, "limit": retentionSubmissionBatch})
		if err != nil {
			return deleted, fmt.Errorf("finding expired submissions: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return deleted, fmt.Errorf("finding expired submissions: %w", err)
		}
		for _, id := range ids {
			if err := s.deleteSubmission(ctx, id); err != nil {
				return deleted, err
			}
			deleted++
		}
		if len(ids) < retentionSubmissionBatch {
			return deleted, nil
		}
	}
}

// deleteSubmission deletes one finished submission: its chunk rows batch by batch, then
// the submission itself.
func (s *submissions) deleteSubmission(ctx context.Context, id int64) error {
	for {
		var n int64
		err := s.pool.QueryRow(ctx, opsqsql.RetentionDeleteChunks, pgx.NamedArgs{"submission_id": id, "batch": retentionChunkBatch}).Scan(&n)
		if err != nil {
			return fmt.Errorf("deleting chunks of expired submission %d: %w", id, err)
		}
		if n == 0 {
			break
		}
	}
	if _, err := s.pool.Exec(ctx, opsqsql.RetentionDeleteSubmission, pgx.NamedArgs{"submission_id": id}); err != nil {
		return fmt.Errorf("deleting expired submission %d: %w", id, err)
	}
	return nil
}

func (s *submissions) runRetention(ctx context.Context) {
	n, err := s.DeleteExpired(ctx, time.Now())
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("retention", slog.Any("error", err))
	case n > 0:
		s.log.Info("retention deleted expired submissions", slog.Int("submissions", n))
	}
}
